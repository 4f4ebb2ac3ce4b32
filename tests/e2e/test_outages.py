"""A service outage makes briefs wait, never fail (docs/contract.md, Promises): real servers, really down."""

from __future__ import annotations

import contextlib
import json
import sqlite3
import subprocess
import time
from pathlib import Path
from typing import Any, Callable

import pytest

from briefd.daemon.model.llm import refusal_fix
from tests.conftest import BRIEFD, Workspace, serve_ollama
from lab.corpus import TOPICS
from lab.searxng import SearxngOptions, start_searxng
from lab.servers import free_port, start_ollama


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


def run_once_until_back(ws: Workspace, brief: str, service: str, bring_back: Callable[[dict], Any]) -> None:
    """`briefd run --once`, one attempt a brief (an outage that spent an attempt would fail the brief at once):
    the brief says it waits for `service`; `bring_back(waiting event)` starts the service again, and the run
    then ends 0 on its own. The service started late is stopped after the run."""
    daemon = subprocess.Popen([BRIEFD, "run", "--once"], env=ws.env(BRIEFD_MAX_ATTEMPTS="1"), cwd=ws.root,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        waiting = wait_for_event(ws.outbox / brief / "events.ndjson", "waiting")
        assert waiting is not None and waiting["service"] == service, "the brief says what it waits for"
        late = bring_back(waiting)
        try:
            assert daemon.wait(timeout=180) == 0
        finally:
            late.stop()
    finally:
        if daemon.poll() is None:
            daemon.kill()


def test_ollama_down_then_up_the_brief_waits_and_finishes(tmp_path, search_lab) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    ws = Workspace(root=tmp_path, searxng_url=search_lab.searxng_url, ollama_url=url, model="lab-scripted")
    ws.drop("patient.json", {"question": TOPICS["orbital"].question, "depth": "quick", "fetch_pages": False})

    def ollama_back(waiting: dict) -> Any:
        assert waiting["retry_at"]
        return start_ollama(tmp_path / "logs", "scripted", name="ollama-late", port=port)[0]

    run_once_until_back(ws, "patient", "ollama", ollama_back)
    report = ws.report("patient")
    assert report["status"] == "done", report.get("error")
    assert report["evidence"]
    types = [e["type"] for e in ws.events("patient")]
    assert "waiting" in types and types[-1] == "complete" and "failed" not in types


@pytest.mark.slow
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

    def searxng_back(waiting: dict) -> Any:
        status = json.loads(ws.briefd("status", "--json").stdout)
        assert status["counts"]["failed"] == 0
        return start_searxng(tmp_path / "late-searxng", search_lab.datasette_url, port=port)

    run_once_until_back(ws, "search-later", "searxng", searxng_back)
    report = ws.report("search-later")
    assert report["status"] == "done" and report["evidence"]
    assert report["disclaimer"] is None, "it waited for search instead of answering from the model alone"



def test_json_format_off_is_reported_once_with_the_fix_and_briefs_resume_once_fixed(
        tmp_path, search_lab, scripted_ollama) -> None:
    """A misconfiguration only the user can fix: briefs wait (never fail), the log says the fix
    once however many briefs and retries hit it, `briefd check` says the same, and fixing it
    (restarting SearXNG with json on, same port) lets every brief finish."""
    port = free_port()
    off = start_searxng(tmp_path / "off", search_lab.datasette_url, port=port,
                        options=SearxngOptions(json_format=False), name="searxng-json-off")
    ws = Workspace(root=tmp_path, searxng_url=f"http://127.0.0.1:{port}", ollama_url=scripted_ollama.url,
                   model="lab-scripted")
    for name in ("first", "second"):
        ws.drop(f"{name}.json", {"question": TOPICS["orbital"].question, "depth": "quick",
                                 "fetch_pages": False, "context": name})
    daemon = subprocess.Popen([BRIEFD, "run", "--once"], env=ws.env(BRIEFD_MAX_ATTEMPTS="1"), cwd=ws.root,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        waits = [wait_for_event(ws.outbox / name / "events.ndjson", "waiting") for name in ("first", "second")]
        assert all(w is not None and w["service"] == "searxng" for w in waits)
        assert all("formats: [html, json]" in w["fix"] for w in waits), "each brief says what fixes it"
        check = ws.briefd("check")
        assert check.returncode != 0 and "formats: [html, json]" in check.stdout + check.stderr
        status = ws.briefd("status").stdout
        assert "formats: [html, json]" in status, "briefd status says what the briefs wait for"
        off.stop()
        fixed = start_searxng(tmp_path / "on", search_lab.datasette_url, port=port, name="searxng-json-on")
        try:
            out, err = daemon.communicate(timeout=240)
        finally:
            fixed.stop()
        assert daemon.returncode == 0, err[-3000:]
    finally:
        off.stop()
        if daemon.poll() is None:
            daemon.kill()
    for name in ("first", "second"):
        report = ws.report(name)
        assert report["status"] == "done" and report["evidence"], report.get("error")
        assert report["disclaimer"] is None, "it waited for search instead of answering from the model alone"
    warnings = [line for line in err.splitlines() if " WARNING " in line or " ERROR " in line]
    assert len([line for line in warnings if "formats: [html, json]" in line]) == 1, \
        "the fix is reported once, not per brief or per retry (each waiting event is only echoed at DEBUG)"


def test_a_model_server_that_refuses_briefd_for_a_while_is_waited_out_and_said_once_with_the_fix(
        tmp_path, search_lab) -> None:
    """Issue 29 #3: an auth proxy in front of Ollama whose token was rotated answers 403 to everything.
    Each 403 was taken as a refusal of that prompt: the briefs ended `done` on fallbacks, nothing was
    logged, and after the fix the same questions replayed those failures for a day. Now the health
    probe (refused too) tells briefd is refused, not the prompt: the briefs wait, the log says the
    status and the fix once, nothing is kept, and once the proxy lets briefd in they end on real answers."""
    briefs = ("first", "second")
    with contextlib.contextmanager(serve_ollama)(tmp_path / "logs", "scripted", name="ollama-403") as lab:
        # each brief's first request and its health probe are refused; then the proxy is fixed
        lab.fault(kind="status", status=403, message="Forbidden", count=2 * len(briefs))
        ws = Workspace(root=tmp_path, searxng_url=search_lab.searxng_url, ollama_url=lab.url, model="lab-scripted")
        for name in briefs:
            ws.drop(f"{name}.json", {"question": TOPICS["orbital"].question, "depth": "quick",
                                     "fetch_pages": False, "context": name})
        result = ws.briefd("run", "--once", timeout=180, BRIEFD_MAX_ATTEMPTS="1")
        stats = lab.stats()
    assert result.returncode == 0, result.stderr[-4000:]
    for name in briefs:
        report, events = ws.report(name), ws.events(name)
        assert report["status"] == "done", report.get("error")
        waited = [e for e in events if e["type"] == "waiting"]
        assert waited and all(w["service"] == "ollama" for w in waited), "it waited for the model server"
        assert waited[0]["fix"] == refusal_fix(403) and "HTTP 403: Forbidden" in waited[0]["reason"]
        usage = report["usage"]
        assert (usage["fallback_answers"], usage["replayed_failures"]) == (0, 0), report["fallbacks"]
        assert report["research_question"] and report["summary"].strip(), "the model's plan and answer"
    with contextlib.closing(sqlite3.connect(ws.db)) as db:
        kept = db.execute("SELECT count(*) FROM model_answers WHERE failed IS NOT NULL").fetchone()[0]
    assert kept == 0, "a refusal of briefd was kept as a prompt's failure: replayed for a day after the fix"
    warnings = [line for line in result.stderr.splitlines() if " WARNING " in line or " ERROR " in line]
    told = [line for line in warnings if "HTTP 403" in line]
    assert len(told) == 1, warnings
    assert "refuses briefd" in told[0] and refusal_fix(403) in told[0], "the status and the fix, once"
    assert sum(1 for c in stats["calls"] if c["outcome"] == "fault-403") == 2 * len(briefs), \
        "each brief asked once and probed once while refused: nothing was asked in a loop"


@pytest.mark.slow
def test_a_model_that_is_not_pulled_is_reported_once_and_briefs_wait(tmp_path, search_lab,
                                                                     scripted_ollama) -> None:
    ws = Workspace(root=tmp_path, searxng_url=search_lab.searxng_url, ollama_url=scripted_ollama.url,
                   model="not-pulled-yet:1b")
    for name in ("one", "two"):
        ws.drop(f"{name}.json", {"question": TOPICS["kestrel"].question, "context": name, "depth": "quick"})
    result = ws.briefd("run", "--once", timeout=180, BRIEFD_PATIENCE_S="6")
    assert result.returncode == 0
    warnings = [line for line in result.stderr.splitlines() if " WARNING " in line or " ERROR " in line]
    assert len([line for line in warnings if "run: ollama pull not-pulled-yet:1b" in line]) == 1, warnings
    for name in ("one", "two"):
        report = ws.report(name)
        assert report["status"] == "failed" and "ollama pull not-pulled-yet:1b" in report["error"]
        events = ws.events(name)
        waited = [e for e in events if e["type"] == "waiting"]
        assert waited and waited[0]["fix"] == "run: ollama pull not-pulled-yet:1b", \
            "it waited for the fix before its patience ran out"


def test_ollama_dies_mid_brief_and_comes_back_the_brief_finishes_once(tmp_path, search_lab) -> None:
    """The model server is killed while a brief is in flight, then started again on its port."""
    port = free_port()
    proc, url = start_ollama(tmp_path / "logs", "scripted", name="ollama-first", port=port,
                             extra=("--tokens-per-s", "150"))
    ws = Workspace(root=tmp_path, searxng_url=search_lab.searxng_url, ollama_url=url, model="lab-scripted")
    ws.drop("interrupted.json", {"question": TOPICS["kestrel"].question, "depth": "quick"})
    daemon = subprocess.Popen([BRIEFD, "run", "--once"], env=ws.env(BRIEFD_MAX_ATTEMPTS="1"), cwd=ws.root,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    second = None
    try:
        assert wait_for_event(ws.outbox / "interrupted" / "events.ndjson", "round_started") is not None
        proc.popen.kill()  # dies as a crashed server does, mid-answer
        proc.popen.wait(10)
        waiting = wait_for_event(ws.outbox / "interrupted" / "events.ndjson", "waiting")
        assert waiting is not None and waiting["service"] == "ollama"
        second, _ = start_ollama(tmp_path / "logs", "scripted", name="ollama-again", port=port)
        out, err = daemon.communicate(timeout=240)
        assert daemon.returncode == 0, err[-3000:]
    finally:
        proc.stop()
        if second is not None:
            second.stop()
        if daemon.poll() is None:
            daemon.kill()
    report = ws.report("interrupted")
    assert report["status"] == "done" and report["evidence"], report.get("error")
    types = [e["type"] for e in ws.events("interrupted")]
    assert types.count("complete") == 1 and "failed" not in types
