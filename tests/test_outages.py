"""A service outage makes briefs wait, never fail (CONTRACT.md, Promises): real servers, really down."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

from tests.conftest import BRIEFD, Workspace
from tests.lab.corpus import TOPICS
from tests.lab.searxng import start_searxng
from tests.lab.servers import free_port, start_ollama


def wait_for_event(events_path: Path, type_: str, timeout: float = 60.0) -> dict | None:
    """The first event of this type in a brief's live log, waiting for it to appear."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if events_path.exists():
            for line in events_path.read_text().splitlines():
                event = json.loads(line)
                if event["type"] == type_:
                    return event
        time.sleep(0.5)
    return None


def test_ollama_down_then_up_the_brief_waits_and_finishes(tmp_path, search_lab) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    ws = Workspace(root=tmp_path, searxng_url=search_lab.searxng_url, ollama_url=url, model="lab-scripted")
    ws.drop("patient.json", {"question": TOPICS["orbital"].question, "depth": "quick", "fetch_pages": False})
    # max_attempts 1: if an outage spent an attempt, the brief would fail at once
    daemon = subprocess.Popen([BRIEFD, "run", "--once"], env=ws.env(BRIEFD_MAX_ATTEMPTS="1"), cwd=ws.root,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        waiting = wait_for_event(ws.outbox / "patient" / "events.ndjson", "waiting")
        assert waiting is not None and waiting["service"] == "ollama", "the brief says what it waits for"
        assert waiting["retry_at"]
        proc, _ = start_ollama(tmp_path / "logs", "scripted", name="ollama-late", port=port)
        try:
            assert daemon.wait(timeout=180) == 0
        finally:
            proc.stop()
    finally:
        if daemon.poll() is None:
            daemon.kill()
    report = ws.report("patient")
    assert report["status"] == "done", report.get("error")
    assert report["evidence"]
    types = [e["type"] for e in ws.events("patient")]
    assert "waiting" in types and types[-1] == "complete" and "failed" not in types


def test_a_brief_fails_only_after_its_patience_runs_out(tmp_path, search_lab) -> None:
    ws = Workspace(root=tmp_path, searxng_url=search_lab.searxng_url, ollama_url=f"http://127.0.0.1:{free_port()}",
                   model="lab-scripted")
    ws.drop("impatient.json", {"question": TOPICS["kestrel"].question, "depth": "quick"})
    result = ws.briefd("run", "--once", timeout=180, BRIEFD_PATIENCE_S="5")
    assert result.returncode == 0
    report = ws.report("impatient")
    assert report["status"] == "failed"
    assert "stayed unavailable" in report["error"] and "patience_s" in report["error"]
    assert [e["type"] for e in ws.events("impatient")].count("waiting") >= 1


def test_searxng_down_then_up_the_brief_waits_and_finishes(tmp_path, search_lab, scripted_ollama) -> None:
    port = free_port()
    ws = Workspace(root=tmp_path, searxng_url=f"http://127.0.0.1:{port}", ollama_url=scripted_ollama.url,
                   model="lab-scripted")
    ws.drop("search-later.json", {"question": TOPICS["orbital"].question, "depth": "quick", "fetch_pages": False})
    daemon = subprocess.Popen([BRIEFD, "run", "--once"], env=ws.env(BRIEFD_MAX_ATTEMPTS="1"), cwd=ws.root,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        waiting = wait_for_event(ws.outbox / "search-later" / "events.ndjson", "waiting")
        assert waiting is not None and waiting["service"] == "searxng"
        status = json.loads(ws.briefd("status", "--json").stdout)
        assert status["counts"]["failed"] == 0
        late = start_searxng(tmp_path / "late-searxng", search_lab.datasette_url, port=port)
        try:
            assert daemon.wait(timeout=180) == 0
        finally:
            late.stop()
    finally:
        if daemon.poll() is None:
            daemon.kill()
    report = ws.report("search-later")
    assert report["status"] == "done" and report["evidence"]
    assert report["disclaimer"] is None, "it waited for search instead of answering from the model alone"

