"""The words for a directory entry that is not a regular file (`file_kind`): the inbox's notice and the
library's refusal both say what the entry is, from the entry itself (one rule, two callers)."""

from __future__ import annotations

import os
import socket
from pathlib import Path

from briefd.daemon.core.files import file_kind


def test_each_kind_of_entry_is_named_from_the_entry_itself(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe.json")
    (tmp_path / "folder.json").mkdir()
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(tmp_path / "chat.md"))
        kinds = {name: file_kind(os.lstat(tmp_path / name).st_mode) for name in ("pipe.json", "folder.json", "chat.md")}
    assert kinds == {"pipe.json": "a named pipe (FIFO)", "folder.json": "a directory", "chat.md": "a socket"}
    assert file_kind(os.stat("/dev/null").st_mode) == "a character device"
