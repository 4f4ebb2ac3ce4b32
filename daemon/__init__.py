"""briefd: an offline-first research daemon (see README.md)."""

__version__ = "0.1.0"
