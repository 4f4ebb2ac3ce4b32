"""`make lab`: the lab's servers and its model server, until SIGTERM, naming what briefd needs.

It failed with "unrecognized arguments: --driver llama" (issue 13's list of small things). Here
with the scripted driver (instant); the llama driver is what the Makefile starts.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from lab.servers import REPO_ROOT

pytestmark = pytest.mark.lab


def test_the_lab_runs_with_its_model_server_and_names_what_briefd_needs(tmp_path: Path) -> None:
    makefile = (REPO_ROOT / "Makefile").read_text(encoding="utf-8")
    assert re.search(r"^lab:.*\n\t\$\(PY\) -m lab\.servers .*--driver llama", makefile, re.M)
    proc = subprocess.Popen([sys.executable, "-m", "lab.servers", "--workdir", str(tmp_path / "lab"),
                             "--driver", "scripted"], cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        assert proc.stdout is not None
        shown = json.loads(proc.stdout.readline())
        env = shown["env"]
        assert env["BRIEFD_MODEL"] == "lab-scripted" and env["OLLAMA_HOST"] == shown["ollama_url"]
        tags = httpx.get(f"{env['OLLAMA_HOST']}/api/tags", timeout=10, trust_env=False).json()
        assert any(m["name"].startswith("lab-scripted") for m in tags["models"])
        found = httpx.get(f"{env['BRIEFD_SEARXNG_URL']}/search", params={"q": "Kestrel bridge", "format": "json"},
                          timeout=30, trust_env=False).json()
        assert found["results"], "the lab's SearXNG answers"
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
