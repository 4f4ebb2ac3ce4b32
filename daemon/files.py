"""Atomic file writes: every file briefd puts in the outbox appears whole or not at all.

The Maildir recipe: write under a temp name readers ignore (a dotfile ending in
.tmp), fsync it, os.replace it into place, fsync the directory so the rename
itself survives a power cut.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any


def fsync_dir(path: Path) -> None:
    """Make a rename or create inside `path` durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write `data` to `path` so that readers see the old file or the new one, never a part."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    fsync_dir(path.parent)


def atomic_write_text(path: Path, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path: Path, value: Any) -> None:
    atomic_write_text(path, json.dumps(value, indent=2, ensure_ascii=False) + "\n")


def sweep_temp_files(folder: Path) -> int:
    """Remove temp files a crash left behind (`.<name>.<random>.tmp`); returns how many."""
    removed = 0
    if not folder.is_dir():
        return 0
    for tmp in folder.rglob(".*.tmp"):
        try:
            tmp.unlink()
            removed += 1
        except OSError:
            pass
    return removed
