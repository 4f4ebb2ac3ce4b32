"""Which names in the inbox are briefs: the rule `briefd status` and the daemon's notices share.

A module of its own, apart from the inbox's intake, so `briefd status` can list the strays without loading
what taking a brief needs (follow-ups, report writing, the model client: about 0.3 s at every start).
"""

from __future__ import annotations

import os
from pathlib import Path

from ..core.briefjson import utf8_safe


# Partly written files (docs/contract.md): never taken, and not worth a word while a writer is busy with them.
PARTIAL_SUFFIXES = (".tmp", ".part", "~")


def not_a_brief(name: str, is_dir: bool) -> str | None:
    """How an inbox entry that will never be taken is named in a notice ("notes.txt", "old/"), or None:
    a candidate (*.json, even a folder: accept says why it is left), a dotfile or a partial file."""
    lowered = name.lower()
    if name.startswith(".") or lowered.endswith(PARTIAL_SUFFIXES) or lowered.endswith(".json"):
        return None
    return f"{utf8_safe(name)}/" if is_dir else utf8_safe(name)


def is_brief_name(name: str) -> bool:
    """A name the inbox takes as a brief: not hidden, ends in .json (case-insensitive)."""
    return not name.startswith(".") and name.lower().endswith(".json")


def briefs_waiting(folder: Path) -> bool:
    """Does the inbox hold a file the daemon would take (`is_brief_name`)? A glance, not a check: `briefd run`
    starts its page readers early only when it does (launch.run_daemon); an inbox it cannot read: no."""
    try:
        with os.scandir(folder) as entries:
            return any(is_brief_name(entry.name) for entry in entries)
    except OSError:
        return False


def not_briefs(folder: Path) -> list[str]:
    """The inbox's entries that are not briefs and never will be (`briefd status` lists them)."""
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return []
    return sorted(shown for entry in entries
                  if (shown := not_a_brief(entry.name, is_dir(entry))) is not None)


def is_dir(entry: os.DirEntry[str]) -> bool:
    """Whether an entry is a folder itself (a link to one is not): an entry that vanished or cannot be
    examined is named as a file, never an error, since a notice must not stop the scan."""
    try:
        return entry.is_dir(follow_symlinks=False)
    except OSError:
        return False
