"""`briefd cancel` keeps the research, and every report that did not finish has the full shape.

Issue 9, findings 7 and 8: a brief cancelled after a finished round used to end with a report
of 0 model calls and no evidence, and a last event `failed`; a failed brief's report.json
lacked keys a done one has; report.html's side-by-side cells showed raw Markdown.
"""

from __future__ import annotations

import html
import json
import re
import signal
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from briefd.daemon.report.html import render_html
from briefd.daemon.report.markdown import render_markdown
from briefd.daemon.report.report import REPORT_KEYS, USAGE_KEYS, blank_report
from briefd.store import CANCELLED, FAILED, Store
from tests.conftest import BRIEFD, OllamaLab, Workspace, wait_for
from lab.corpus import TOPICS
from lab.servers import SearchLab, free_port, start_ollama

ESTIMATE_BRIEF = {
    "question": TOPICS["northgate"].question, "depth": "standard", "formats": ["json", "md", "html"],
    "estimate": {"unit": "USD million", "low": 100, "high": 2000, "target_width": 1},
}


def read_events(path: Path) -> list[dict]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def assert_full_shape(report: dict) -> None:
    """Every key a done report has (report.REPORT_KEYS), usage complete."""
    missing = [key for key in REPORT_KEYS if key not in report]
    assert not missing, f"report.json lacks {missing}"
    assert set(USAGE_KEYS) <= set(report["usage"]), set(USAGE_KEYS) - set(report["usage"])


def offline_workspace(root: Path) -> Workspace:
    """A workspace whose model and search hosts are closed ports (nothing listens there)."""
    (root / "inbox").mkdir(parents=True, exist_ok=True)
    return Workspace(root=root, searxng_url=f"http://127.0.0.1:{free_port()}",
                     ollama_url=f"http://127.0.0.1:{free_port()}", model="lab-scripted")


# --------------------------------------------------------------------------- a running brief


@contextmanager
def running_daemon(ws: Workspace, log: Path, **env: str) -> Iterator[subprocess.Popen[bytes]]:
    """`briefd run` in the workspace, its output in `log`; at the end it gets SIGTERM, which it must obey
    with exit 0 (a cancelled brief leaves no daemon that cannot stop)."""
    with open(log, "w") as sink:
        daemon = subprocess.Popen([BRIEFD, "run"], env=ws.env(**env), cwd=ws.root, stdout=sink, stderr=sink)
    try:
        yield daemon
    finally:
        daemon.send_signal(signal.SIGTERM)
        assert daemon.wait(timeout=60) == 0, log.read_text()[-3000:]


@pytest.mark.slow
def test_a_brief_cancelled_after_its_first_round_keeps_its_research(tmp_path: Path, search_lab: SearchLab) -> None:
    # a model that answers like a real one (60 tokens/s): the cancel lands while round 2 is at work
    proc, url = start_ollama(tmp_path / "logs", "scripted", name="ollama-slow", extra=("--tokens-per-s", "60"))
    lab = OllamaLab(url=url, proc=proc)
    ws = Workspace(root=tmp_path, searxng_url=search_lab.searxng_url, ollama_url=url, model="lab-scripted")
    ws.drop("overrun.json", ESTIMATE_BRIEF)
    events_file = ws.outbox / "overrun" / "events.ndjson"
    log = tmp_path / "daemon.log"
    try:
        with running_daemon(ws, log):
            wait_for(lambda: any(e["type"] == "round_started" and e.get("round") == 2
                                 for e in read_events(events_file)), 240, "round 2 to start")
            said = ws.briefd("cancel", "overrun", timeout=60)
            assert said.returncode == 0, said.stderr
            wait_for(lambda: (ws.outbox / "overrun" / "report.json").exists(), 120, "the cancelled brief's report")
            paid = lab.stats()["total_chat_calls"]
    finally:
        proc.stop()

    report = ws.report("overrun")
    assert report["status"] == CANCELLED and report["stop_reason"] == CANCELLED
    assert_full_shape(report)
    assert report["error"] is None
    assert "cancel" in report["disclaimer"].lower() and "round" in report["disclaimer"]
    # everything found so far: round 1's evidence, its sources, the model calls really paid
    assert report["evidence"], "round 1 found evidence; the cancel must keep it"
    assert {e["round"] for e in report["evidence"]} >= {1}
    by_n = {s["n"]: s["url"] for s in report["sources"]}
    assert all(by_n.get(e["source"]) == e["url"] for e in report["evidence"]), "every evidence item is sourced"
    assert report["usage"]["llm_calls"] >= 2 and report["usage"]["llm_calls"] <= paid
    assert report["usage"]["searches"] >= 1 and report["queries"]
    assert report["model"] == "lab-scripted" and report["searxng_url"] == search_lab.searxng_url
    # the estimate as the rules compute it from what was found
    estimate = report["estimate"]
    assert estimate["history"] and estimate["history"][0]["round"] == 1
    assert (estimate["final"]["low"], estimate["final"]["high"]) == (
        estimate["history"][-1]["low"], estimate["history"][-1]["high"])
    assert estimate["final"]["high"] - estimate["final"]["low"] < 2000 - 100, "the figures found moved the range"
    # the last event says cancelled, with the reason, and nothing runs after it
    events = ws.events("overrun")
    last = events[-1]
    assert last["type"] == "cancelled" and last["stop_reason"] == CANCELLED
    assert "briefd cancel" in last["reason"] and last["evidence"] == len(report["evidence"])
    assert not [e for e in events if e["type"] in ("complete", "failed")]
    markdown = (ws.outbox / "overrun" / "report.md").read_text(encoding="utf-8")
    assert "**Status:** cancelled" in markdown and "briefd cancel" in markdown
    assert "No evidence was found" not in markdown
    store = Store(ws.db)
    try:
        assert store.counts_by_state()[CANCELLED] == 1
    finally:
        store.close()


@pytest.mark.slow
def test_a_brief_waiting_for_the_model_after_a_round_is_cancelled_with_its_research(
        tmp_path: Path, search_lab: SearchLab) -> None:
    """Round 1 done, then the model server goes away: the brief waits (queued, retry later).
    A cancel then ends it at once, with round 1's research, not when the retry comes."""
    proc, url = start_ollama(tmp_path / "logs", "scripted", name="ollama-gone", extra=("--tokens-per-s", "60"))
    ws = Workspace(root=tmp_path, searxng_url=search_lab.searxng_url, ollama_url=url, model="lab-scripted")
    ws.drop("stranded.json", ESTIMATE_BRIEF)
    events_file = ws.outbox / "stranded" / "events.ndjson"
    log = tmp_path / "daemon.log"
    with running_daemon(ws, log, BRIEFD_PATIENCE_S="3600"):
        try:
            wait_for(lambda: any(e["type"] == "signal" and e.get("message") == "round 1 done"
                                 for e in read_events(events_file)), 240, "round 1 to finish")
        finally:
            proc.stop()
        waiting = wait_for(lambda: [e for e in read_events(events_file) if e["type"] == "waiting"], 120,
                           "the brief to wait for the model")
        assert waiting[-1]["service"] == "ollama"
        said = ws.briefd("cancel", "stranded", timeout=60)
        assert said.returncode == 0, said.stderr
        wait_for(lambda: (ws.outbox / "stranded" / "report.json").exists(), 60, "the cancelled brief's report")

    report = ws.report("stranded")
    assert report["status"] == CANCELLED and report["stop_reason"] == CANCELLED
    assert_full_shape(report)
    assert report["evidence"] and {e["round"] for e in report["evidence"]} >= {1}
    assert report["usage"]["llm_calls"] >= 2, "round 1's model calls are counted"
    assert ws.events("stranded")[-1]["type"] == "cancelled"


# --------------------------------------------------------------------------- a queued brief


def test_a_queued_brief_cancelled_before_it_started_gets_a_full_report(tmp_path: Path) -> None:
    from briefd.daemon.intake.inbox import Inbox

    ws = offline_workspace(tmp_path)
    ws.drop("later.json", {"question": "Why was the Kestrel River bridge closed in 2025?",
                           "formats": ["json", "md", "html"]})
    store = Store(ws.db)
    try:
        inbox = Inbox(ws.inbox, ws.outbox, store, settle_seconds=0)
        inbox.scan()
        assert [a.brief_id for a in inbox.take_ready()] == ["later"]
    finally:
        store.close()
    said = ws.briefd("cancel", "later")
    assert said.returncode == 0 and "cancelled" in said.stdout, said.stderr

    report = ws.report("later")
    assert report["status"] == CANCELLED and report["stop_reason"] == CANCELLED
    assert_full_shape(report)
    assert report["evidence"] == [] and report["usage"]["llm_calls"] == 0
    assert report["source_file"] == "later.json" and report["model"] == "lab-scripted"
    assert "before it started" in report["disclaimer"]
    last = ws.events("later")[-1]
    assert last["type"] == "cancelled" and "briefd cancel" in last["reason"]
    assert json.loads((ws.outbox / "later" / "brief.json").read_text())["question"].startswith("Why was")
    assert "cancelled" in (ws.outbox / "later" / "report.md").read_text(encoding="utf-8")
    assert (ws.outbox / "later" / "report.html").exists()


# --------------------------------------------------------------------------- a failed brief


@pytest.mark.slow
def test_a_failed_brief_has_the_full_report_shape(tmp_path: Path) -> None:
    ws = offline_workspace(tmp_path)
    ws.drop("impatient.json", {"question": TOPICS["kestrel"].question, "depth": "quick"})
    result = ws.briefd("run", "--once", timeout=180, BRIEFD_PATIENCE_S="1")
    assert result.returncode == 0, result.stderr[-3000:]
    report = ws.report("impatient")
    assert report["status"] == FAILED and "stayed unavailable" in report["error"]
    assert_full_shape(report)
    assert report["model"] == "lab-scripted" and report["searxng_url"] == ws.searxng_url
    assert report["open_questions"] == [] and report["sides"] is None and report["plan_relevance"] is None
    assert ws.events("impatient")[-1]["type"] == "failed"


# --------------------------------------------------------------------------- report.html's side by side


def _section_text(page: str, heading: str) -> str:
    """The visible text of one <h2> section of report.html, as a browser shows it."""
    start = page.index(f"<h2>{heading}</h2>")
    end = page.find("<h2>", start + 1)
    body = page[start:end if end != -1 else len(page)]
    return html.unescape(re.sub(r"<[^>]+>", " ", body))


def test_side_by_side_cells_in_html_show_text_not_markdown() -> None:
    report = blank_report("b1", "b1.json", "How much did it overrun?", "2026-11-22T10:00:00Z")
    report["status"] = "done"
    quotes = ["The [final] cost was *410* million_usd, per `audit` <b>#1</b> | table",
              "A \\ backslash, 2 * 3 and __init__ and [link](http://x.example) ~~gone~~"]
    report["sources"] = [{"n": 1, "url": "http://a.example/", "title": "A"}]
    report["sides"] = {
        "left_title": "Within the final range (410\u2013450) *bold?*", "right_title": "Outside it [x]",
        "left": [{"source": 1, "url": "http://a.example/", "title": "A", "quote": quotes[0],
                  "confidence": 0.9, "tier": "regulator", "low": 410.0, "high": 410.0}],
        "right": [{"source": None, "url": "http://b.example/", "title": "B", "quote": quotes[1],
                   "confidence": 0.5, "tier": None, "low": 380.0, "high": 520.0}],
    }
    page = render_html(report)
    text = _section_text(page, "Side by side")
    for quote in quotes:
        assert " ".join(quote.split()) in " ".join(text.split()), f"{quote!r} shown as written"
    assert "**" not in text and "\\[" not in text and "\\*" not in text and "\\_" not in text
    assert "<strong>410</strong>" in page and "<strong>380\u2013520</strong>" in page
    assert '<a href="#source-1" class="cite">[1]</a>' in page
    assert "<b>" not in page, "page text is never markup"
    # report.md keeps its Markdown, escaped: the same cell reads the same once rendered
    markdown = render_markdown(report)
    assert "**410**" in markdown and "\\[final\\]" in markdown


# --------------------------------------------------------------------------- a cancel during the synthesis


def synthesis_phase(ws: Workspace, brief_id: str) -> bool:
    """The brief's rounds are over and its synthesis asked (the checkpoint before it says so)."""
    store = Store(ws.db)
    try:
        run = store.latest_run(brief_id)
        saved = store.load_checkpoint(run.run_id) if run is not None else None
        return bool(saved and saved.get("phase") == "synthesis")
    finally:
        store.close()


@pytest.mark.slow
def test_a_cancel_while_the_synthesis_is_written_ends_the_brief_cancelled(tmp_path: Path,
                                                                          search_lab: SearchLab) -> None:
    """Issue 22, item 3: the cancel came after the last step's own check (the synthesis, a model call
    seconds long), so the brief ended `done` while `briefd cancel` had said it would stop. It ends
    cancelled now, or the command says the brief had already finished: never both silent and done."""
    # each answer takes seconds, as a real model's synthesis does: the cancel lands while it is written
    proc, url = start_ollama(tmp_path / "logs", "scripted", name="ollama-paced", extra=("--seconds-per-answer", "6"))
    ws = Workspace(root=tmp_path, searxng_url=search_lab.searxng_url, ollama_url=url, model="lab-scripted")
    ws.drop("late.json", {"question": TOPICS["kestrel"].question, "depth": "quick", "max_rounds": 1,
                          "fetch_pages": False})
    log = tmp_path / "daemon.log"
    try:
        with running_daemon(ws, log):
            wait_for(lambda: synthesis_phase(ws, "late"), 240, "the synthesis to be asked")
            said = ws.briefd("cancel", "late", timeout=60)
            wait_for(lambda: (ws.outbox / "late" / "report.json").exists() and ws.events("late")[-1]["type"]
                     in ("complete", "cancelled"), 120, "the brief to end")
    finally:
        proc.stop()
    report = ws.report("late")
    if "will stop" in said.stdout:  # the command said the brief would stop: it did
        assert said.returncode == 0, said.stderr
        assert report["status"] == CANCELLED and report["stop_reason"] == CANCELLED, report["status"]
        assert ws.events("late")[-1]["type"] == "cancelled"
        assert_full_shape(report)
        assert report["usage"]["llm_calls"] >= 2, "the calls paid, the synthesis among them, are counted"
    else:  # the synthesis was quicker than the command: it says so, and the brief is done
        assert said.returncode != 0 and "is done" in said.stdout + said.stderr, (said.stdout, said.stderr)
        assert report["status"] == "done"
