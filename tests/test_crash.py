"""kill -9 in the middle of a brief, restart: it resumes from its checkpoint and finishes exactly once,
replaying the model answers it already had instead of paying for them again."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import time

from tests.conftest import BRIEFD, OllamaLab, Workspace
from tests.lab.corpus import TOPICS
from tests.lab.servers import start_ollama


def test_kill_9_mid_brief_then_restart_finishes_once_without_paying_twice(tmp_path, search_lab) -> None:
    proc, url = start_ollama(tmp_path / "logs", "scripted", name="ollama-slow", extra=("--tokens-per-s", "60"))
    try:
        lab = OllamaLab(url=url, proc=proc)
        ws = Workspace(root=tmp_path, searxng_url=search_lab.searxng_url, ollama_url=url, model="lab-scripted")
        ws.drop("bridge.json", {"question": TOPICS["kestrel"].question, "depth": "quick"})
        daemon = subprocess.Popen([BRIEFD, "run"], env=ws.env(), cwd=ws.root,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        events = ws.outbox / "bridge" / "events.ndjson"
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            if events.exists() and '"evidence_found"' in events.read_text():
                break
            time.sleep(0.05)
        os.kill(daemon.pid, signal.SIGKILL)
        daemon.wait(timeout=10)
        assert not (ws.outbox / "bridge" / "report.json").exists(), "killed before it finished"
        paid_before = lab.stats()["total_chat_calls"]

        again = ws.briefd("run", "--once", timeout=300)
        assert again.returncode == 0, again.stderr[-3000:]
    finally:
        stats = lab.stats() if proc.alive else {}
        proc.stop()
    report = ws.report("bridge")
    assert report["status"] == "done" and report["evidence"]
    lines = [json.loads(line) for line in events.read_text().splitlines()]
    assert [e["type"] for e in lines].count("complete") == 1
    assert [e["seq"] for e in lines] == list(range(1, len(lines) + 1)), "the log was resynced from the store"
    assert any(e["type"] == "signal" and "resumed" in e.get("message", "") for e in lines)
    assert report["usage"]["llm_cache_hits"] >= 1, "answers received before the kill were replayed"
    assert stats["duplicate_prompts"] <= 1, "at most the call in flight at the kill is paid for again"
    assert stats["total_chat_calls"] > paid_before
    assert not [p for p in ws.outbox.rglob("*.tmp")], "no temp file left visible"
    conn = sqlite3.connect(ws.db)
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert conn.execute("SELECT count(*) FROM briefs WHERE brief_id = 'bridge'").fetchone()[0] == 1
