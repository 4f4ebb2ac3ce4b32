"""The vocabulary every layer shares: briefs, settings, files, events, untrusted text, retries."""
