"""briefd end to end: real SearXNG, real HTTP pages, a real SQLite file, the official ollama client
against the lab's Ollama-compatible server (scripted driver), `briefd run --once` in a subprocess.

Four briefs of different kinds and a folder of malformed ones go in; every output file is checked
the way a user (or an outside check relying on docs/contract.md) would.
"""

from __future__ import annotations

import json
import re
import sqlite3

import pytest

from briefd.daemon.rules import decide
from briefd.daemon.rules.citations import cited_numbers
from briefd.daemon.report.report import REPORT_KEYS
from tests.conftest import OllamaLab, Workspace
from lab.corpus import TOPICS

GOOD_BRIEFS = {
    "kestrel": {"question": TOPICS["kestrel"].question, "depth": "quick", "formats": ["md", "json", "html"]},
    "northgate": {
        "question": TOPICS["northgate"].question, "depth": "quick",
        "estimate": {"unit": "USD million", "low": 100, "high": 2000, "target_width": 100},
    },
    "lakeside": {
        "question": TOPICS["lakeside"].question, "depth": "quick",
        "hypothesis": {"claim": "The Lakeside water plant upgrade cut lead levels below 5 ppb"},
        "search": {"exclude_domains": ["localhost"]},
    },
    "orbital": {"question": TOPICS["orbital"].question, "depth": "quick", "fetch_pages": False},
}

BAD_BRIEFS: dict[str, bytes] = {
    "typo.json": b'{"qestion": "Why?"}',
    "not-json.json": b"question: why is the sky blue",
    "binary.json": bytes(range(256)),
    "inverted.json": json.dumps({"question": "How much?", "estimate": {"unit": "USD", "low": 9, "high": 1}}).encode(),
    "escape.json": json.dumps({"question": "Why?", "id": "../../etc"}).encode(),
    "empty.json": b"",
    "nan.json": b'{"question": "Why?", "max_rounds": NaN}',
    "list.json": b'["question"]',
}

CONTRACT_KEYS = {"id", "source_file", "status", "question", "started_at", "finished_at", "stop_reason",
                 "summary", "sources", "evidence", "estimate", "verdict", "gaps", "queries", "usage"}
USAGE_KEYS = {"llm_calls", "prompt_tokens", "completion_tokens", "searches", "pages_fetched",
              "page_cache_hits", "llm_cache_hits", "wall_seconds", "llm_seconds",
              "repaired_answers", "retried_answers", "fallback_answers"}
EVENT_TYPES_SEEN = {"accepted", "round_started", "search_query", "search_result", "evidence_found", "complete"}


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory, search_lab, scripted_ollama: OllamaLab) -> Workspace:
    """Drop everything, run `briefd run --once` once, and let every test read the results."""
    root = tmp_path_factory.mktemp("briefd-integration")
    ws = Workspace(root=root, searxng_url=search_lab.searxng_url, ollama_url=scripted_ollama.url,
                   model="lab-scripted")
    for brief_id, brief in GOOD_BRIEFS.items():
        ws.drop(f"{brief_id}.json", brief)
    for name, data in BAD_BRIEFS.items():
        ws.drop(name, data)
    ws.drop(".hidden.json", {"question": "ignored: dotfile"})
    ws.drop("draft.json.part", {"question": "ignored: partial"})
    scripted_ollama.reset()
    result = ws.briefd("run", "--once", timeout=300)
    ws.run_result = result  # type: ignore[attr-defined]
    ws.ollama_stats = scripted_ollama.stats()  # type: ignore[attr-defined]
    assert result.returncode == 0, result.stderr[-4000:]
    return ws


def store(ws: Workspace) -> sqlite3.Connection:
    conn = sqlite3.connect(ws.db)
    conn.row_factory = sqlite3.Row
    return conn


def run_id(ws: Workspace, brief_id: str) -> int:
    with store(ws) as conn:
        return conn.execute("SELECT max(run_id) FROM briefs WHERE brief_id = ?", [brief_id]).fetchone()[0]


@pytest.mark.parametrize("brief_id", list(GOOD_BRIEFS))
def test_every_good_brief_has_a_complete_report(finished: Workspace, brief_id: str) -> None:
    report = finished.report(brief_id)
    assert CONTRACT_KEYS <= set(report)
    assert report["status"] == "done", report.get("error")
    assert report["id"] == brief_id and report["source_file"] == f"{brief_id}.json"
    assert report["question"] == GOOD_BRIEFS[brief_id]["question"]
    assert report["stop_reason"] in {"max_rounds", "budget", "stalled", "gaps_closed", "exhausted",
                                     "target_reached", "converged"}
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", report["started_at"])
    assert report["started_at"] <= report["finished_at"]
    assert report["summary"].strip()
    assert set(report["usage"]) >= USAGE_KEYS
    assert report["queries"] and all(q["round"] >= 1 and q["text"] for q in report["queries"])
    assert report["evidence"], "the lab corpus answers every question: evidence must be found"
    formats = GOOD_BRIEFS[brief_id].get("formats", ["md", "json"])
    outdir = finished.outbox / brief_id
    assert (outdir / "report.md").exists() == ("md" in formats)
    assert (outdir / "report.html").exists() == ("html" in formats)
    assert json.loads((outdir / "brief.json").read_bytes()) == GOOD_BRIEFS[brief_id]


@pytest.mark.parametrize("brief_id", list(GOOD_BRIEFS))
def test_citations_resolve_and_are_numbered_by_first_appearance(finished: Workspace, brief_id: str) -> None:
    report = finished.report(brief_id)
    numbers = cited_numbers(report["summary"])
    assert numbers, "the summary cites its sources"
    assert numbers == list(range(1, len(numbers) + 1)), "renumbered by first appearance"
    sources = report["sources"]
    assert [s["n"] for s in sources[:len(numbers)]] == numbers and all(s["cited"] for s in sources[:len(numbers)]), \
        "every cited source listed first, by first appearance"
    assert [s["n"] for s in sources] == list(range(1, len(sources) + 1)), "then the others, continuing the numbers"
    assert not any(s["cited"] for s in sources[len(numbers):])
    every_bracket = {int(n) for n in re.findall(r"\[(\d+)\]", report["summary"])}
    assert every_bracket <= set(numbers), "no [n] that does not resolve"
    by_n = {s["n"]: s["url"] for s in sources}
    for item in report["evidence"]:
        assert by_n[item["source"]] == item["url"], "every evidence item's number resolves to its page"


@pytest.mark.parametrize("brief_id", list(GOOD_BRIEFS))
def test_a_done_report_has_exactly_the_keys_failed_and_cancelled_ones_share(finished: Workspace,
                                                                              brief_id: str) -> None:
    """report.REPORT_KEYS is the shape of a done report; tests/ops/test_cancel.py holds failed and
    cancelled reports to it, so every key a done report has, they have too."""
    assert sorted(finished.report(brief_id)) == sorted(REPORT_KEYS)


@pytest.mark.parametrize("brief_id", ["kestrel", "northgate", "lakeside"])
def test_every_quote_is_verbatim_text_of_the_fetched_page(finished: Workspace, brief_id: str) -> None:
    report = finished.report(brief_id)
    with store(finished) as conn:
        for item in report["evidence"]:
            row = conn.execute("SELECT text FROM pages WHERE url = ?", [item["url"]]).fetchone()
            assert row is not None, f"evidence from a page briefd never fetched: {item['url']}"
            assert item["quote"] and item["quote"] in row["text"]


def test_snippet_brief_quotes_search_snippets_and_fetches_nothing(finished: Workspace) -> None:
    report = finished.report("orbital")
    assert report["usage"]["pages_fetched"] == 0
    with store(finished) as conn:
        snippets = [r[0] for r in conn.execute(
            "SELECT snippet FROM search_results WHERE run_id = ?", [run_id(finished, "orbital")])]
    for item in report["evidence"]:
        assert any(item["quote"] in s for s in snippets)
    assert "OCaml" in report["summary"], "the snippets alone answer the question"


def test_domain_exclusion_is_obeyed(finished: Workspace) -> None:
    report = finished.report("lakeside")
    urls = [s["url"] for s in report["sources"]] + [e["url"] for e in report["evidence"]]
    assert urls and not any("//localhost:" in u for u in urls)
    events = finished.events("lakeside")
    fetched = [e["url"] for e in events if e["type"] == "page_fetched"]
    assert fetched and not any("//localhost:" in u for u in fetched)


def test_hostile_pages_neither_hang_nor_crash_and_are_remembered_as_bad(finished: Workspace) -> None:
    with store(finished) as conn:
        bad = {r["url"]: r["reason"] for r in conn.execute("SELECT url, reason FROM bad_urls")}
    reasons = " | ".join(bad.values())
    assert "redirect" in reasons or "too many" in reasons, reasons
    assert any("too large" in r for r in bad.values()), reasons
    assert any("no readable text" in r for r in bad.values()), reasons  # binary and wrong type
    assert any("HTTP 404" in r for r in bad.values()) or "lakeside" not in str(bad), reasons
    events = [e for b in GOOD_BRIEFS for e in finished.events(b) if e["type"] == "page_fetched"]
    slow = [e for e in events if "live-updates" in e["url"] or "live-feed" in e["url"]]
    assert slow and all(e.get("ok") is False for e in slow), "slow and endless pages are cut off"


def test_prompt_injection_changes_nothing(finished: Workspace) -> None:
    for brief_id in ("northgate", "orbital"):
        report = finished.report(brief_id)
        assert "exactly $1" not in report["summary"] and "COBOL" not in report["summary"]
    for brief_id in GOOD_BRIEFS:
        quotes = [item["quote"] for item in finished.report(brief_id)["evidence"]]
        assert not [q for q in quotes if decide.addresses_a_model(q)], "an injection quoted as evidence"


def test_events_are_valid_ndjson_in_order_with_one_complete(finished: Workspace) -> None:
    for brief_id in GOOD_BRIEFS:
        raw = (finished.outbox / brief_id / "events.ndjson").read_text(encoding="utf-8")
        events = [json.loads(line) for line in raw.splitlines()]
        assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
        assert all({"seq", "at", "type"} <= set(e) for e in events)
        assert EVENT_TYPES_SEEN - {"evidence_found"} <= {e["type"] for e in events}
        assert [e["type"] for e in events].count("complete") == 1 and events[-1]["type"] == "complete"
        assert events[0]["type"] == "accepted"


def test_usage_matches_what_the_store_recorded(finished: Workspace) -> None:
    for brief_id in GOOD_BRIEFS:
        usage = finished.report(brief_id)["usage"]
        rid = run_id(finished, brief_id)
        with store(finished) as conn:
            calls = conn.execute(
                "SELECT count(*), sum(prompt_tokens), sum(completion_tokens) FROM model_calls "
                "WHERE run_id = ? AND outcome != 'cached'", [rid]).fetchone()
            searches = conn.execute("SELECT count(*) FROM queries WHERE run_id = ? AND from_cache = 0 "
                                    "AND error IS NULL", [rid]).fetchone()[0]
        assert usage["llm_calls"] == calls[0] > 0
        assert usage["prompt_tokens"] == calls[1] and usage["completion_tokens"] == calls[2]
        assert usage["searches"] == searches
        assert len(finished.report(brief_id)["queries"]) >= searches


def test_the_model_server_saw_every_call_once(finished: Workspace) -> None:
    stats = finished.ollama_stats  # type: ignore[attr-defined]
    with store(finished) as conn:
        recorded = conn.execute("SELECT count(*) FROM model_calls WHERE outcome != 'cached'").fetchone()[0]
    assert stats["duplicate_prompts"] == 0, "never pay twice for a model call"
    assert stats["total_chat_calls"] == recorded


@pytest.mark.parametrize("name", list(BAD_BRIEFS))
def test_malformed_briefs_end_as_error_json_with_their_bytes_kept(finished: Workspace, name: str) -> None:
    data = BAD_BRIEFS[name]
    candidates = [p.parent for p in finished.outbox.glob("*/error.json")
                  if json.loads(p.read_text())["source_file"] == name]
    assert len(candidates) == 1, f"{name}: one error folder"
    folder = candidates[0]
    assert folder.parent == finished.outbox, "an id can never escape the outbox"
    error = json.loads((folder / "error.json").read_text())
    assert error["error"] and isinstance(error["details"], dict)
    kept = folder / "brief.json" if (folder / "brief.json").exists() else folder / "brief.bin"
    assert kept.read_bytes() == data


def test_error_messages_name_the_problem(finished: Workspace) -> None:
    errors = {json.loads(p.read_text())["source_file"]: json.loads(p.read_text())["error"]
              for p in finished.outbox.glob("*/error.json")}
    assert "did you mean 'question'" in errors["typo.json"]
    assert "low" in errors["inverted.json"] and "high" in errors["inverted.json"]
    assert "id" in errors["escape.json"]
    assert "UTF-8" in errors["binary.json"]
    assert "NaN" in errors["nan.json"]


def test_inbox_is_empty_but_for_ignored_files_and_no_temp_files_are_visible(finished: Workspace) -> None:
    left = sorted(p.name for p in finished.inbox.iterdir() if p.name != ".briefd.lock")
    assert left == [".hidden.json", "draft.json.part"]
    assert not [p for p in finished.outbox.rglob("*") if p.name.endswith(".tmp")]


def test_status_and_show(finished: Workspace) -> None:
    status = finished.briefd("status", "--json")
    assert status.returncode == 0
    counts = json.loads(status.stdout)["counts"]
    assert counts["done"] == len(GOOD_BRIEFS) and counts["rejected"] == len(BAD_BRIEFS)
    assert counts["queued"] == counts["running"] == 0
    show = finished.briefd("show", "kestrel")
    assert show.returncode == 0 and show.stdout.startswith("# ")
    events = finished.briefd("show", "kestrel", "--events")
    assert events.returncode == 0 and '"type": "complete"' in events.stdout
    assert finished.briefd("show", "../etc").returncode == 2


def test_html_report_escapes_page_text(finished: Workspace) -> None:
    html = (finished.outbox / "kestrel" / "report.html").read_text(encoding="utf-8")
    assert "<script" not in html.lower()
    assert html.count("<blockquote") >= len(finished.report("kestrel")["evidence"])


def test_a_second_run_keeps_the_first_and_pays_for_nothing_twice(
        finished: Workspace, scripted_ollama: OllamaLab) -> None:
    first = finished.report("kestrel")
    before = scripted_ollama.stats()["duplicate_prompts"]
    finished.drop("kestrel.json", GOOD_BRIEFS["kestrel"])
    result = finished.briefd("run", "--once", timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    second = finished.report("kestrel")
    assert second["started_at"] >= first["started_at"] and second["status"] == "done"
    archived = list((finished.outbox / "kestrel" / "runs").glob("*/report.json"))
    assert len(archived) == 1 and json.loads(archived[0].read_text())["finished_at"] == first["finished_at"]
    usage = second["usage"]
    assert usage["calls_skipped"].get("plan") == 1, "the same brief: its first run's plan taken, the model not asked"
    assert scripted_ollama.stats()["duplicate_prompts"] == before, "no prompt was sent to the model twice"
    assert usage["llm_calls"] == 0 and usage["llm_cache_hits"] > 0, "every answer replayed, none paid again"
    # a run of an id asked before checks the pages it takes from the store (conditional requests):
    # none changed, so none was downloaded
    assert usage["pages_not_modified"] > 0 and usage["pages_fetched"] == 0 and usage["page_bytes"] == 0
    fetched = [e["url"] for e in finished.events("kestrel") if e["type"] == "page_fetched"]
    with store(finished) as conn:
        known_bad = {r[0] for r in conn.execute("SELECT url FROM bad_urls")}
    first_bad = {e["url"] for e in json.loads("[" + ",".join(
        (archived[0].parent / "events.ndjson").read_text().splitlines()) + "]")
        if e["type"] == "page_fetched" and e.get("ok") is False} & known_bad
    assert first_bad and not first_bad & set(fetched), "pages found bad for good are not fetched again"
