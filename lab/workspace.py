"""One briefd installation for the lab: an inbox, an outbox and a store in a folder of its own,
with the environment that points the real `briefd` console script at the lab's servers.

Shared by the tests (conftest's `workspace` fixture), `make bench` and `make soak`.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

BRIEFD = str(Path(sys.executable).with_name("briefd"))


def keep_or_remove(root: Path, keep: bool, label: str = "kept") -> None:
    """A script's work folder at its end (bench, soak: --keep): named for a look afterwards, or removed."""
    if keep:
        print(f"{label}: {root}")
    else:
        shutil.rmtree(root, ignore_errors=True)


@dataclass
class Workspace:
    """A temporary inbox/outbox/db for one briefd installation."""

    root: Path
    searxng_url: str
    ollama_url: str
    model: str

    @property
    def inbox(self) -> Path:
        return self.root / "inbox"

    @property
    def outbox(self) -> Path:
        return self.root / "outbox"

    @property
    def db(self) -> Path:
        return self.root / "briefd.db"

    def env(self, **extra: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("BRIEFD_") and k != "OLLAMA_HOST"}
        env.update({
            "BRIEFD_INBOX": str(self.inbox), "BRIEFD_OUTBOX": str(self.outbox), "BRIEFD_DB": str(self.db),
            "OLLAMA_HOST": self.ollama_url, "BRIEFD_MODEL": self.model,
            "BRIEFD_SEARXNG_URL": self.searxng_url,
            # the lab's slow pages trickle for a minute: keep the test's patience short
            "BRIEFD_FETCH_TIMEOUT_S": "4", "BRIEFD_SETTLE_SECONDS": "0.2",
            "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost",
        })
        env.update(extra)
        return env

    def drop(self, name: str, content: bytes | str | dict) -> Path:
        self.inbox.mkdir(parents=True, exist_ok=True)
        if isinstance(content, dict):
            content = json.dumps(content)
        if isinstance(content, str):
            content = content.encode("utf-8")
        path = self.inbox / name
        tmp = self.inbox / f".{name}.tmp"
        tmp.write_bytes(content)
        tmp.rename(path)
        return path

    def briefd(self, *args: str, timeout: float = 600, **env: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([BRIEFD, *args], env=self.env(**env), cwd=self.root, text=True,
                              capture_output=True, timeout=timeout)

    def report(self, brief_id: str) -> dict:
        return json.loads((self.outbox / brief_id / "report.json").read_text(encoding="utf-8"))

    def events(self, brief_id: str) -> list[dict]:
        lines = (self.outbox / brief_id / "events.ndjson").read_text(encoding="utf-8").splitlines()
        return [json.loads(line) for line in lines]
