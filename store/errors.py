"""The root of every exception briefd raises, here because store/ is the bottom of the import graph.

store/ imports nothing of the daemon, and its own errors (a store only the user can repair, a schema
from a newer briefd, a filter that can't be used) belong to the same tree as the daemon's, so the root
lives where both can reach it. The tree itself is drawn, and explained, in daemon/core/errors.py.
"""

from __future__ import annotations


class BriefdError(Exception):
    """Anything briefd raises on purpose: its message names the problem and, where one exists, the fix.

    `except BriefdError` separates what briefd said from a bug (which is any other exception)."""
