"""`briefd list` and `briefd search` (issue 12 #1): what was researched, found again by its words.

Real store files; every finished run goes through the daemon's own path (accepted, claimed, its
evidence added, `Store.finish(report=history_row(...))`: lab/history_bench.record_run). The
command line is exercised through `daemon.cli.main`, and once on the lab, after a brief was
really researched, through the `briefd` console script.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from briefd.daemon.ops.cli import EXIT_OK, EXIT_USAGE, main
from briefd.daemon.report.report import answer_text
from briefd.store import CANCELLED, DONE, FAILED, REJECTED
from briefd.store.briefs import Store
from briefd.store.db import iso_utc
from briefd.store.history import KINDS, PARTIAL_WORDS, QUOTE, STATES, History, HistoryError, list_query
from tests.conftest import Workspace, researched
from lab.corpus import TOPICS
from lab.history_bench import record_run

BRIDGE = "Why was the Kestrel River bridge closed in 2025?"
TUNNEL = "How much did the Northgate rail tunnel overrun its budget?"
LEAD = "Did the Lakeside water plant upgrade cut lead levels below 5 ppb?"
ANCHOR_QUOTE = "Seven anchorages showed corrosion of the strand wires."
COUNTY = "http://county.example/kestrel-notice"
ESTIMATE = {"estimate": {"final": {"low": 420, "high": 510}, "unit": "million USD"}}
VERDICT = {"verdict": {"value": "contradicted", "evidence_level": "advisory"}}


def _day(offset: int) -> str:
    return iso_utc(datetime.now(timezone.utc) + timedelta(days=offset))[:10]


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    opened = Store(tmp_path / "briefd.db")
    yield opened
    opened.close()


@pytest.fixture
def history(store: Store) -> Store:
    """Five briefs: one run twice, one failed, one still queued, one rejected file."""
    record_run(store, "kestrel", BRIDGE, [(COUNTY, "County notice", ANCHOR_QUOTE)],
               summary="The bridge closed after the inspection found corrosion in 7 of 32 anchorages [1].")
    record_run(store, "northgate", TUNNEL, [("http://audit.example/tunnel", "Audit", "The tunnel cost rose to "
                                             "510 million dollars.")], summary="It overran.", report=ESTIMATE,
               brief={"estimate": {"unit": "million USD", "low": 100, "high": 1000}})
    record_run(store, "kestrel", BRIDGE, [(COUNTY, "County notice", ANCHOR_QUOTE)],
               summary="Corroded cable anchorages closed the bridge [1].")
    record_run(store, "lakeside", LEAD, [("http://lab.example/lead", "Lab results", "Lead fell to 4.6 ppb.")],
               summary="Lead fell.", report=VERDICT, state=FAILED, stop_reason="model unavailable",
               brief={"hypothesis": {"claim": "Lead fell below 5 ppb"}})
    store.add_rejection(brief_id="broken", source_file="broken.json", received=b"{", error="not JSON",
                        details={}, inbox_path="/inbox/broken.json")
    store.add_brief(brief_id="queued-one", question="Is the ferry running?", source_file="q.json",
                    received=b"{}", brief_json=json.dumps({"question": "Is the ferry running?"}),
                    inbox_path="/inbox/q.json")
    return store


def cli(tmp_path: Path, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """`briefd ARGS` in this process, on tmp_path's store, with no setting from the environment."""
    code = main([*args, "--db", str(tmp_path / "briefd.db"), "--config", str(tmp_path / "none.toml")])
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture(autouse=True)
def _no_briefd_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in [n for n in os.environ if n.startswith("BRIEFD_")]:
        monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "none.toml").write_text("")


# ---- list ------------------------------------------------------------------------------------


def test_list_shows_each_brief_once_newest_first_with_its_answer_kind_and_runs(history: Store) -> None:
    entries = History(history).briefs(list_query())
    assert [e.id for e in entries] == ["queued-one", "lakeside", "kestrel", "northgate"], \
        "newest first, one row an id, the rejected file left out"
    by_id = {e.id: e for e in entries}
    assert by_id["kestrel"].runs == 2 and by_id["kestrel"].run == 3, "its latest run, with how many it had"
    assert by_id["kestrel"].answer == "Corroded cable anchorages closed the bridge [1]."
    assert by_id["northgate"].answer == answer_text(ESTIMATE) and by_id["northgate"].kind == "estimate"
    assert (by_id["lakeside"].kind, by_id["lakeside"].state, by_id["lakeside"].stop_reason) == \
        ("hypothesis", FAILED, "model unavailable")
    queued = by_id["queued-one"]
    assert (queued.state, queued.kind, queued.answer, queued.finished_at) == ("queued", "plain", None, None)


def test_every_run_is_listed_when_asked(history: Store) -> None:
    runs = History(history).briefs(list_query(runs=True))
    assert [(e.id, e.run) for e in runs if e.id == "kestrel"] == [("kestrel", 3), ("kestrel", 1)]
    assert len(runs) == 5


def test_rejected_files_are_listed_only_when_asked_for(history: Store) -> None:
    rejected = History(history).briefs(list_query(state=REJECTED))
    assert [(e.id, e.state, e.error, e.kind) for e in rejected] == [("broken", REJECTED, "not JSON", None)]


@pytest.mark.parametrize("filters, ids", [
    ({"state": DONE}, ["kestrel", "northgate"]),
    ({"state": FAILED}, ["lakeside"]),
    ({"state": CANCELLED}, []),
    ({"kind": "estimate"}, ["northgate"]),
    ({"kind": "hypothesis"}, ["lakeside"]),
    ({"kind": "plain"}, ["queued-one", "kestrel"]),
    ({"since": 0}, ["queued-one", "lakeside", "kestrel", "northgate"]),
    ({"since": 1}, ["queued-one"]),      # only what has not finished yet
    ({"until": -1}, []),
    ({"until": 0}, ["queued-one", "lakeside", "kestrel", "northgate"]),  # a date covers its whole day
    ({"limit": 2}, ["queued-one", "lakeside"]),
])
def test_filters(history: Store, filters: dict, ids: list[str]) -> None:
    """Dates are given as days from today (UTC), read when the test runs."""
    filters = {k: _day(v) if k in ("since", "until") else v for k, v in filters.items()}
    assert [e.id for e in History(history).briefs(list_query(**filters))] == ids


def test_a_state_filter_is_about_each_briefs_latest_run(store: Store) -> None:
    """A brief that failed once and then finished is done, not failed."""
    record_run(store, "retried", BRIDGE, [], state=FAILED, stop_reason="error")
    record_run(store, "retried", BRIDGE, [])
    history = History(store)
    assert history.briefs(list_query(state=FAILED)) == []
    assert [e.state for e in history.briefs(list_query(state=FAILED, runs=True))] == [FAILED]


def test_the_next_run_of_a_series_is_shown_until_it_is_cancelled(history: Store) -> None:
    history.db.table("schedules").insert({"brief_id": "kestrel", "every": "7d", "next_run_at": "2030-01-07T06:00:00Z",
                                          "created_at": "2030-01-01T06:00:00Z"})
    listed = {e.id: e for e in History(history).briefs(list_query())}
    assert listed["kestrel"].next_run_at == "2030-01-07T06:00:00Z" and listed["northgate"].next_run_at is None
    history.db.execute("UPDATE schedules SET cancelled_at = '2030-01-02T00:00:00Z'")
    assert {e.id: e for e in History(history).briefs(list_query())}["kestrel"].next_run_at is None


@pytest.mark.parametrize("filters, named", [
    ({"state": "finished"}, ", ".join(STATES)),
    ({"kind": "guess"}, ", ".join(KINDS)),
    ({"since": "last week"}, "2026-11-24"),
    ({"until": "2026-02-30"}, "2026-11-24"),
    ({"since": "2026-11-24", "until": "2026-11-01"}, "swap them"),
    ({"limit": "0"}, "from 1 to"),
    ({"limit": "ten"}, "from 1 to"),
])
def test_bad_filters_are_refused_naming_what_is_expected(filters: dict, named: str) -> None:
    with pytest.raises(HistoryError, match=re.escape(named)):
        list_query(**filters)


# ---- search ----------------------------------------------------------------------------------


def test_search_names_the_brief_the_run_what_matched_and_a_quotes_source(history: Store) -> None:
    hits = History(history).search("anchorages corrosion")
    quotes = [h for h in hits if h.matched == QUOTE]
    assert [(h.id, h.run, h.url, h.title) for h in quotes] == [("kestrel", 3, COUNTY, "County notice")], \
        "the same quote in both runs of kestrel is shown once, at its latest run"
    assert quotes[0].snippet == ANCHOR_QUOTE
    summaries = [(h.id, h.run, h.all_words) for h in hits if h.matched == "summary"]
    assert summaries == [("kestrel", 1, True), ("kestrel", 3, False)], \
        "the first run's summary says both words; the second's only 'anchorages' (corroded is another stem)"


def test_search_finds_questions_and_answers(history: Store) -> None:
    asked = History(history).search("overrun budget")
    assert (asked[0].id, asked[0].matched, asked[0].snippet) == ("northgate", "question", TUNNEL)
    answered = History(history).search("contradicted")
    assert [(h.id, h.matched) for h in answered] == [("lakeside", "answer")]


def test_runs_with_every_word_come_before_runs_with_some(store: Store) -> None:
    """A quote that says one of the words, however often, comes after one that says them all."""
    record_run(store, "both", TUNNEL, [("http://a.example", "A", "The tunnel flooded twice in March.")])
    record_run(store, "one", BRIDGE, [("http://b.example", "B", "Tunnel, tunnel, tunnel: the tunnel.")])
    record_run(store, "other", LEAD, [("http://c.example", "C", "Lead fell."), ("http://d.example", "D", "It rose.")])
    hits = [h for h in History(store).search("tunnel flooded") if h.matched == QUOTE]
    assert [(h.id, h.all_words) for h in hits] == [("both", True), ("one", False)]


def test_the_same_quote_in_two_briefs_lists_the_latest_run_first(store: Store) -> None:
    quote = [("http://same.example", "Same", "Ferry service resumed on 3 June.")]
    record_run(store, "older", "When did the ferry resume?", quote)
    record_run(store, "newer", "Is the ferry back?", quote)
    hits = [h for h in History(store).search("ferry resumed") if h.matched == QUOTE]
    assert [h.id for h in hits] == ["newer", "older"] and hits[0].rank == hits[1].rank


def test_a_word_in_most_rows_ranks_nothing_newest_first_and_is_left_out_when_other_words_are_missing(
        store: Store) -> None:
    """bm25 gives "the" no weight once it is in more than half the rows: those rows come newest
    first, and "ferry the" finds nothing when nothing says "ferry" (not every row with "the")."""
    for n in range(3):
        record_run(store, f"b{n}", f"Question {n}?", [(f"http://{n}.example", "T", f"The quote number {n}.")])
    assert [h.id for h in History(store).search("the") if h.matched == QUOTE] == ["b2", "b1", "b0"]
    assert History(store).search("ferry the") == []
    assert [h.id for h in History(store).search("the number")][:1] == ["b2"]


def test_a_pasted_sentence_with_a_word_of_its_own_finds_the_quote_it_resembles(history: Store) -> None:
    """Not every word is there (no AND hit), and there are more than PARTIAL_WORDS of them: the
    rarest few rank, and the quote that has them comes first."""
    text = "Seven of the anchorages showed severe corrosion of their strand wires, the county engineer wrote"
    assert len(text.split()) > PARTIAL_WORDS
    quotes = [h for h in History(history).search(text) if h.matched == QUOTE]
    assert (quotes[0].snippet, quotes[0].all_words) == (ANCHOR_QUOTE, False)


@pytest.mark.parametrize("text, first", [('lead" NEAR(', "lakeside"), ("strand* AND", "kestrel"),
                                         ("{question}: tunnel", "northgate"), ("'; DROP TABLE reports; --", None)])
def test_search_text_is_words_never_fts_syntax(history: Store, text: str, first: str | None) -> None:
    hits = History(history).search(text)
    assert (hits[0].id if hits else None) == first
    assert len(History(history).briefs()) == 4


@pytest.mark.parametrize("text", ["", " ?! ", "*", "a"])
def test_empty_search_text_is_refused(store: Store, text: str) -> None:
    with pytest.raises(HistoryError, match="at least one word"):
        History(store).search(text)


# ---- the command line --------------------------------------------------------------------------


def test_list_prints_an_aligned_table_and_json_with_the_same_objects(history: Store, tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = cli(tmp_path, capsys, "list")
    assert code == EXIT_OK
    lines = out.splitlines()
    column = lines[0].index("ANSWER")
    kestrel = next(line for line in lines if line.startswith("kestrel "))
    assert kestrel[column:] == "Corroded cable anchorages closed the bridge [1]."
    assert "failed: model unavailable" in next(line for line in lines if line.startswith("lakeside "))
    code, out, _ = cli(tmp_path, capsys, "list", "--json")
    assert json.loads(out) == [e.to_json() for e in History(history).briefs(list_query())]


def test_search_prints_each_hit_with_its_brief_and_source(history: Store, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = cli(tmp_path, capsys, "search", "strand", "wires")  # words need no quotes
    assert code == EXIT_OK
    assert out.splitlines()[:2] == [f"1. kestrel (run 3, {_minute_of(history, 3)}) quote: {ANCHOR_QUOTE}",
                                    f"   County notice <{COUNTY}>"]
    code, out, _ = cli(tmp_path, capsys, "search", "strand wires", "--json", "--limit", "1")
    assert [hit["url"] for hit in json.loads(out)] == [COUNTY]
    code, out, _ = cli(tmp_path, capsys, "search", "zyzzyva")
    assert (code, out.strip()) == (EXIT_OK, "nothing researched matches 'zyzzyva'")


def _minute_of(store: Store, run_id: int) -> str:
    row = store.get_brief(run_id)
    assert row is not None and row.finished_at is not None
    return row.finished_at[:16].replace("T", " ")


def test_text_from_pages_is_escaped_on_the_terminal(store: Store, tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    record_run(store, "evil", "Is \x1b[2Jthe screen safe?", [("http://evil.example", "T\x1b]0;owned\x07",
                                                             "pipes \x1b[31mred\x1b[0m lead")], summary="\x1b[2J")
    _, listed, _ = cli(tmp_path, capsys, "list")
    _, found, _ = cli(tmp_path, capsys, "search", "pipes")
    assert "\x1b" not in listed + found and "\x07" not in found
    assert "pipes \\u001b[31mred" in found and "T\\u001b]0;owned\\u0007" in found


@pytest.mark.parametrize("args, fix", [
    (["list", "--state", "finished"], "use one of queued"),
    (["list", "--kind", "essay"], "use one of plain"),
    (["list", "--since", "yesterday"], "expected a date such as"),
    (["list", "--limit", "-3"], "whole number"),
    (["search", ""], "give at least one word"),
    (["search", "lead", "--limit", "x"], "whole number"),
])
def test_bad_input_exits_2_naming_the_fix(tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str],
                                          fix: str) -> None:
    code, out, err = cli(tmp_path, capsys, *args)
    assert (code, out) == (EXIT_USAGE, "") and fix in err
    assert not (tmp_path / "briefd.db").exists(), "refused before the store is opened (or created)"


@pytest.mark.parametrize("command", [["list"], ["search", "lead"]])
def test_a_missing_store_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str], command: list[str]) -> None:
    code, out, _ = cli(tmp_path, capsys, *command)
    assert code == EXIT_OK and out.strip() == f"no database yet at {tmp_path / 'briefd.db'}: nothing has been accepted"
    code, out, err = cli(tmp_path, capsys, *command, "--json")
    assert (code, json.loads(out)) == (EXIT_OK, []) and "no database yet" in err
    assert not (tmp_path / "briefd.db").exists()


# ---- on the lab ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def kestrel(tmp_path_factory, search_lab, scripted_ollama) -> Workspace:
    return researched(tmp_path_factory.mktemp("history"), search_lab, scripted_ollama,
                      {"kestrel": {"question": TOPICS["kestrel"].question, "depth": "quick"}})


def test_a_brief_researched_on_the_lab_is_listed_and_its_quotes_are_found(kestrel: Workspace) -> None:
    report = kestrel.report("kestrel")
    listed = kestrel.briefd("list")
    assert listed.returncode == 0, listed.stderr
    row = next(line for line in listed.stdout.splitlines() if line.startswith("kestrel "))
    assert row.split()[1] == "done:" and row.endswith(answer_text(report)), listed.stdout
    evidence = report["evidence"][0]
    url = report["sources"][evidence["source"] - 1]["url"]
    word = max(re.findall(r"[A-Za-z]{5,}", evidence["quote"]), key=len)
    found = kestrel.briefd("search", word, "--json", "--limit", "50")
    assert found.returncode == 0, found.stderr
    hits = [h for h in json.loads(found.stdout) if h["matched"] == QUOTE and h["url"] == url]
    assert hits and hits[0]["id"] == "kestrel", (word, url, found.stdout)
    assert word.lower() in hits[0]["snippet"].lower()
    shown = kestrel.briefd("search", word, "--limit", "50")
    assert f"<{url}>" in shown.stdout


def test_a_failed_estimate_brief_is_listed_as_an_estimate(store: Store) -> None:
    """Its report has no estimate (it failed before one was computed): the kind is the brief's."""
    record_run(store, "tunnel", TUNNEL, [], state=FAILED, stop_reason="error",
               brief={"estimate": {"unit": "million USD", "low": 100, "high": 1000}})
    assert [e.id for e in History(store).briefs(list_query(kind="estimate"))] == ["tunnel"]


def test_a_queued_brief_cancelled_is_listed_and_its_question_found(tmp_path: Path) -> None:
    """`briefd cancel` of a queued brief saves its reports row with its end (one transaction)."""
    from briefd.daemon.core.settings import Settings
    from briefd.daemon.ops.ending import cancel_brief

    store = Store(tmp_path / "briefd.db")
    run_id = store.add_brief(brief_id="ferry", question="When does the Kestrel ferry resume?", source_file="f.json",
                             received=b'{"question": "When does the Kestrel ferry resume?"}',
                             brief_json='{"question": "When does the Kestrel ferry resume?", "id": "ferry"}',
                             inbox_path=str(tmp_path / "f.json"))
    run = cancel_brief(Settings(outbox=tmp_path / "outbox", db=tmp_path / "briefd.db"), store, "ferry")
    assert run is not None and run.state == CANCELLED
    report = store.report_of(run_id)
    assert report is not None and report["status"] == CANCELLED
    assert [(e.id, e.state, e.kind) for e in History(store).briefs()] == [("ferry", CANCELLED, "plain")]
    assert [h.id for h in History(store).search("ferry resume")] == ["ferry"]
    store.close()
