"""The root of every exception briefd raises, in the package both briefd.daemon and briefd.store sit in.

store/ imports nothing of the daemon, and its own errors (a store only the user can repair, a schema
from a newer briefd, a filter that can't be used) belong to the same tree as the daemon's, so the root
lives where both can reach it. Not in store/: importing briefd.store.errors runs store/__init__.py, which
loads sqlite-utils (and numpy through it, about 0.15 s), and every command would pay that at start for one
class. The tree itself is drawn, and explained, in daemon/core/errors.py.
"""

from __future__ import annotations


class BriefdError(Exception):
    """Anything briefd raises on purpose: its message names the problem and, where one exists, the fix.

    `except BriefdError` separates what briefd said from a bug (which is any other exception)."""
