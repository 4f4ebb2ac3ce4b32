"""What a person reads: report files, charts, what changed since the last run."""
