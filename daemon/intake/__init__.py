"""How briefs come in: the inbox and schedules (series)."""
