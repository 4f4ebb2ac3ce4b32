"""The vocabulary every layer shares: briefs, settings, files, events, untrusted text, retries, the supervision
of long-lived tasks, and the exception tree (errors.py)."""
