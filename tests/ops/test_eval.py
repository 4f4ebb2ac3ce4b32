"""`briefd eval`: the judging functions (pure tables), the eval file's checks, and the stage attribution
end to end on briefs built to miss at each stage (lab/eval_lab.py), through the real command."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from briefd.daemon.core.settings import Settings
from briefd.daemon.ops.evaluate import (
    QUOTE_CUT,
    STAGES,
    Case,
    EvalFileError,
    Truth,
    contains,
    invented_citations,
    judge_case,
    matches,
    parse_eval_set,
    percent,
    totals,
    url_matches,
    width_ratio,
)
from briefd.daemon.ops.eval_run import WORK_MARKER, EvalWorkError, place, table
from briefd.store import Store
from briefd.store.evaluation import KeptQuote, QuoteRow, Refusal, ResultRow, RunTrace
from briefd.daemon.rules.judge import target_met
from lab import eval_lab
from lab.workspace import Workspace

CLOSED_PORT = "http://127.0.0.1:9"  # nothing listens: under egress = none SearXNG is never asked


# ---- matching, ranges, citations --------------------------------------------------------------

@pytest.mark.parametrize(("patterns", "text", "found"), [
    ([r"default(?:s)? (?:is|to) 100\b"], "The default is\n   100 connections.", True),   # folded whitespace
    ([r"default(?:s)? (?:is|to) 100\b"], "The DEFAULT is 100.", True),                     # case-blind
    ([r"default(?:s)? (?:is|to) 100\b"], "The default is 1000 connections.", False),       # \b holds
    ([r"first lit in 1871"], "first lit in\t\t1871", True),
    ([r"nope", r"28 places"], "(defaulting to 28 places)", True),                           # any pattern
    ([r"28 places"], "", False),
])
def test_a_pattern_finds_the_answer_whatever_the_whitespace(patterns: list[str], text: str, found: bool) -> None:
    assert matches(patterns, text) is found


@pytest.mark.parametrize(("where", "url", "found"), [
    (["postgresql/runtime-config"], "file:///usr/share/doc/postgresql/runtime-config.html", True),
    (["user guide.pdf"], "file:///docs/user%20guide.pdf", True),   # a library path with a space
    (["runtime-config"], "https://example.org/install.html", False),
])
def test_where_names_a_document_by_a_piece_of_its_url_or_path(where: list[str], url: str, found: bool) -> None:
    assert url_matches(where, url) is found


@pytest.mark.parametrize(("final", "truth", "inside"), [
    ((90.0, 110.0), 100.0, True), ((100.0, 100.0), 100.0, True), ((5.0, 6.0), 100.0, False),
    ((100.0, 120.0), 99.99, False),
])
def test_the_truth_is_inside_a_range_ends_included(final: tuple[float, float], truth: float, inside: bool) -> None:
    assert contains(final, truth) is inside


@pytest.mark.parametrize(("final", "prior", "ratio"), [
    ((10.0, 5000.0), (10.0, 5000.0), 1.0), ((5.0, 6.0), (10.0, 5010.0), 0.0002), ((1.0, 1.0), (3.0, 3.0), None),
])
def test_a_range_width_is_a_share_of_the_prior(final: tuple[float, float], prior: tuple[float, float],
                                               ratio: float | None) -> None:
    assert width_ratio(final, prior) == ratio


@pytest.mark.parametrize(("ratio", "shown"), [(1.0, "100%"), (0.25, "25%"), (0.0002, "0.02%"), (0.0, "0%")])
def test_a_width_share_keeps_a_collapse_visible(ratio: float, shown: str) -> None:
    assert percent(ratio) == shown


def test_an_invented_citation_is_one_no_source_resolves() -> None:
    sources = [{"n": 1}, {"n": 2}]
    assert invented_citations("A [1]. B [2]. C [7]. D [1, 3].", sources) == [7, 3]
    assert invented_citations("Nothing cited.", sources) == []


# ---- verdicts and stages from a recorded run (no lab) ------------------------------------------

ANSWER = "The default is 100 connections."
URL = "file:///docs/runtime-config.html"


def trace(**given: Any) -> RunTrace:
    """A run's record with nothing in it but what a test gives."""
    empty: dict[str, Any] = dict(
        run_id=1, brief_id="b", state="done", fetch_pages=True, queries=("max connections default",), results=(),
        read=frozenset(), fetch_errors={}, unread_early=frozenset(), texts={}, shown=(), prompts_recorded=True,
        chosen=(), refused=(), distrusted={}, kept=(),
        report={"status": "done", "summary": "Nothing found.", "sources": [], "usage": {}}, answer_line="")
    empty.update(given)
    return RunTrace(**empty)


PLAIN = Case(id="b", brief={}, kind="plain", patterns=(r"default is 100\b",), where=("runtime-config",))
RESULT = ResultRow(1, "max connections default", 7, URL, "Connections", "Settings for connections.")
READ = dict(results=(RESULT,), read=frozenset({URL}), texts={URL: f"Intro.\n{ANSWER}\nMore."})
SHOWN = dict(READ, shown=(QuoteRow(URL, ANSWER),))
CHOSEN = dict(SHOWN, chosen=(QuoteRow(URL, ANSWER),))
KEPT = dict(CHOSEN, kept=(KeptQuote(URL, ANSWER, True),))
REPORTED = dict(KEPT, report={"status": "done", "summary": f"{ANSWER} [1]", "sources": [{"n": 1}],
                              "usage": {"prompt_tokens": 900, "completion_tokens": 100, "wall_seconds": 3.5}})


@pytest.mark.parametrize(("given", "stage", "rule"), [
    ({}, "search", None),
    (dict(results=(replace(RESULT, url="https://other.example/x"),)), "search", None),
    (dict(results=(RESULT,)), "read", None),
    (dict(results=(RESULT,), fetch_errors={URL: "HTTP 404"}), "read", None),
    (dict(results=(RESULT,), read=frozenset({URL}), texts={URL: "Intro only."}), "extract", None),
    (READ, "shown", None),
    (SHOWN, "chosen", None),
    (dict(SHOWN, refused=(Refusal(URL, ANSWER, "a question, not a statement"),)), "refused",
     "a question, not a statement"),
    (dict(CHOSEN, distrusted={URL: "an instruction to the model"}), "refused",
     "page distrusted: an instruction to the model"),
    (KEPT, "reported", None),
    (REPORTED, None, None),
])
def test_the_first_stage_that_lost_the_answer_is_named(given: dict[str, Any], stage: str | None,
                                                        rule: str | None) -> None:
    result = judge_case(PLAIN, trace(**given))
    assert (result.stage, result.rule) == (stage, rule), result.detail
    lost = STAGES.index(stage) if stage else len(STAGES)
    assert [result.reached[s] for s in STAGES] == [i < lost for i in range(len(STAGES))]


def test_a_refused_quote_cut_in_its_event_is_completed_from_the_passage_it_was_shown_in() -> None:
    long = ("The setting controls how many client sessions the server accepts at once, counting those reserved "
            "for superusers and replication and for the background workers of extensions loaded at start-up, "
            "and it can only be set when the server starts; the default is 100 "
            "connections. Later text.")
    cut = long[:QUOTE_CUT]
    assert "default is 100" not in cut, "the answer lies beyond the cut"
    given = dict(READ, texts={URL: long}, shown=(QuoteRow(URL, long),), refused=(Refusal(URL, cut, "a rule"),))
    result = judge_case(PLAIN, trace(**given))
    assert (result.stage, result.rule) == ("refused", "a rule")
    elsewhere = dict(given, shown=(QuoteRow("https://other.example/", long), QuoteRow(URL, long)))
    assert judge_case(PLAIN, trace(**elsewhere)).stage == "refused"


def test_a_read_miss_says_the_rank_and_why_it_was_not_read() -> None:
    failed = judge_case(PLAIN, trace(results=(RESULT,), fetch_errors={URL: "HTTP 404"}))
    assert "rank 7" in failed.detail and "HTTP 404" in failed.detail
    unread = judge_case(PLAIN, trace(results=(RESULT,)))
    assert "pages budget" in unread.detail


def test_an_answer_quoted_from_a_page_where_did_not_name_was_still_searched_read_and_shown() -> None:
    other = "https://mirror.example/connections"
    result = judge_case(PLAIN, trace(**dict(REPORTED, results=(replace(RESULT, url=other, snippet=""),),
                                            read=frozenset({other}), texts={other: ANSWER})))
    assert result.stage is None and all(result.reached.values())


ESTIMATE = Case(id="e", brief={}, kind="estimate", patterns=(r"default is 100\b",), truth=Truth(100, "connections"))


def estimate_report(low: float, high: float, width: float | None = 20) -> dict[str, Any]:
    return {"status": "done", "summary": "", "sources": [], "usage": {},
            "estimate": {"unit": "connections", "initial": {"low": 10, "high": 5000},
                         "target": {"low": None, "high": None, "width": width},
                         "final": {"low": low, "high": high}}}


@pytest.mark.parametrize(("low", "high", "right", "stage"), [
    (90, 110, True, None),
    (5, 6, False, "reported"),            # the 5-6 collapse: narrow, and the truth outside
    (10, 5000, False, "reported"),        # the prior unchanged contains the truth and answers nothing
    (50, 1050, False, "reported"),        # a fifth of the prior, fifty times the target, the truth inside (issue 28)
])
def test_an_estimate_is_right_when_its_range_reached_the_target_with_the_truth_inside(
        low: float, high: float, right: bool, stage: str | None) -> None:
    read = (KeptQuote(URL, ANSWER, True, 100.0, 100.0),)
    result = judge_case(ESTIMATE, trace(**dict(KEPT, kept=read, report=estimate_report(low, high))))
    assert (result.right, result.stage) == (right, stage)
    if stage:
        assert "the figure read from it: 100)" in result.detail, result.detail
    unread = judge_case(ESTIMATE, trace(**dict(KEPT, report=estimate_report(low, high))))
    assert unread.stage == stage and (not stage or "no figure was read from it" in unread.detail)
    assert result.truth_in_range is (low <= 100 <= high)
    assert result.width_ratio == pytest.approx((high - low) / 4990)


def test_an_estimate_whose_figure_a_rule_refused_names_the_rule() -> None:
    refusal = Refusal(URL, ANSWER, "number not stated as the quantity")
    result = judge_case(ESTIMATE, trace(**dict(KEPT, refused=(refusal,), report=estimate_report(10, 5000))))
    assert (result.stage, result.rule) == ("refused", "number not stated as the quantity")
    assert result.kept_quote and [s for s in STAGES if not result.reached[s]] == ["refused", "reported"]


CONTRACT = Case(id="c", brief={}, kind="contract", patterns=(r"28 places",), verdict="supported")


@pytest.mark.parametrize(("got", "right", "stage"), [
    ("supported", True, None), ("inconclusive", False, "reported"), ("refuted", False, "reported"),
    (None, False, "reported"),
])
def test_a_contract_is_right_when_the_verdict_is_the_expected_one(got: str | None, right: bool,
                                                                  stage: str | None) -> None:
    quote = "The precision defaults to 28 places."
    report = {"status": "done", "summary": "", "sources": [], "usage": {},
              "verdict": {"value": got, "rule": "one source at 0.6 cannot reach 1.2"} if got else None}
    given = dict(results=(RESULT,), read=frozenset({URL}), texts={URL: quote}, shown=(QuoteRow(URL, quote),),
                 chosen=(QuoteRow(URL, quote),), kept=(KeptQuote(URL, quote, True),), report=report)
    result = judge_case(CONTRACT, trace(**given))
    assert (result.verdict_right, result.stage) == (right, stage)
    if got == "inconclusive":
        assert "one source at 0.6" in result.detail


def test_totals_count_the_collapses_without_the_truth_and_the_kept_verdicts() -> None:
    def estimate(low: float, high: float, kept: bool = True) -> Any:
        given = KEPT if kept else {}
        return judge_case(ESTIMATE, trace(**dict(given, report=estimate_report(low, high))))

    def contract(value: str, kept: bool = True) -> Any:
        report = {"status": "done", "summary": "", "sources": [], "usage": {}, "verdict": {"value": value}}
        quote = "The precision defaults to 28 places."
        return judge_case(CONTRACT, trace(kept=(KeptQuote(URL, quote, True),) if kept else (), report=report))

    t = totals([estimate(5, 6), estimate(99, 101), estimate(200, 1200), estimate(5, 6, kept=False),
                contract("supported"), contract("inconclusive"), contract("refuted", kept=False)])
    assert t["narrow_wrong"] == 2, "5-6 twice; 99-101 holds the truth; 200-1200 is not that narrow"
    assert (t["contracts_kept"], t["verdicts_kept_right"], t["verdicts_right"]) == (2, 1, 1)


def test_totals_count_each_column_and_each_stage() -> None:
    results = [judge_case(PLAIN, trace(**REPORTED)), judge_case(PLAIN, trace()),
               judge_case(PLAIN, trace(**dict(KEPT, kept=(KeptQuote(URL, ANSWER, False),))))]
    t = totals(results)
    assert (t["cases"], t["right"], t["kept_quote"], t["shown"]) == (3, 1, 2, 2)
    assert (t["quotes"], t["quotes_verbatim"], t["tokens"]) == (2, 1, 1000)
    assert t["lost_at"] == {**{s: 0 for s in STAGES}, "search": 1, "reported": 1}


def test_the_table_escapes_page_text_in_its_details() -> None:
    hostile = "Is it 4.5 metres?\x1b[31m forged\nline"
    result = judge_case(PLAIN, trace(**dict(SHOWN, shown=(QuoteRow(URL, hostile + ANSWER),),
                                            refused=(Refusal(URL, hostile + ANSWER, "a question"),))))
    out = table({"name": "t", "model": "m", "store": "s", "work": None, "exit": 0,
                 "cases": [result.as_dict()], "totals": totals([result])})
    assert "\x1b" not in out and "forged\nline" not in out
    assert "refused (a question)" in out


# a pattern that backtracks on any text without an x or a q: past a second on 40 characters, with re or regex
SLOW = r"(.*){1,32000}[xq]"


def test_a_backtracking_pattern_is_stopped_at_its_bound_and_its_case_not_judged() -> None:
    """Issue 29 #8: a pattern with nested quantifiers hung `briefd eval` for good. It is stopped at its time bound
    (here a twentieth of a second), its case is "not judged" with the pattern named, and the others are judged."""
    slow = judge_case(replace(PLAIN, id="slow", patterns=(SLOW,), timeout_s=0.05), trace(**REPORTED))
    assert (slow.status, slow.right, slow.run_id, slow.stage) == ("not judged", False, 1, None)
    assert repr(SLOW) in slow.detail and "0.05 s" in slow.detail and "nested repeat" in slow.detail, slow.detail
    judged = judge_case(PLAIN, trace(**REPORTED))
    t = totals([slow, judged])
    assert (t["cases"], t["ran"], t["right"], t["not_judged"], t["not_run"]) == (2, 2, 1, 1, 0)
    out = table({"name": "t", "model": "m", "store": "s", "work": None, "exit": 0,
                 "cases": [slow.as_dict(), judged.as_dict()], "totals": t})
    assert f"not judged: the pattern {SLOW!r}" in out and "2 briefs, model m, 1 not judged" in out, out


# ---- the eval file ------------------------------------------------------------------------------

def case(**expect: Any) -> dict[str, Any]:
    return {"brief": {"id": "x", "question": "What is dnsmasq's default --tftp-max?"},
            "expect": {"patterns": ["100"], **expect}}


@pytest.mark.parametrize(("data", "says"), [
    ({"name": "n", "briefs": [case()], "extra": 1}, "unknown key 'extra'"),
    ({"briefs": [{**case(), "whre": ["x"]}]}, "unknown key 'whre'"),
    ({"briefs": [case(numbr=1)]}, "unknown key 'numbr'"),
    ({"briefs": [case(patterns=[])]}, "expect.patterns\" is required"),
    ({"briefs": [case(patterns=["(unclosed"])]}, "not a valid regex"),
    ({"briefs": [case(), case()]}, "two cases have the id 'x'"),
    ({"briefs": [case(verdict="supported")]}, "\"expect.verdict\" is for contracts"),
    ({"briefs": [{**case(), "kind": "estimate"}]}, "\"kind\" is 'estimate' but the brief is 'plain'"),
    ({"briefs": [{"brief": {"id": "x", "question": "Q?", "qestion": "typo"}, "expect": {"patterns": ["a"]}}]},
     "the brief is not valid"),
    ({"briefs": [{"brief": {"id": "e", "question": "How many?",
                            "estimate": {"unit": "connections", "low": 10, "high": 5000}},
                  "expect": {"patterns": ["100"], "number": {"value": 100, "unit": "sessions"}}}]},
     "state the true value in the estimate's unit"),
    ({"briefs": [{"brief": {"id": "e", "question": "How many?",
                            "estimate": {"unit": "connections", "low": 10, "high": 5000}},
                  "expect": {"patterns": ["100"]}}]}, "an estimate needs \"expect.number\""),
    ({"briefs": []}, "non-empty list"),
])
def test_an_eval_file_that_cannot_be_used_says_what_and_the_fix(data: dict[str, Any], says: str) -> None:
    with pytest.raises(EvalFileError) as caught:
        parse_eval_set(json.dumps(data))
    assert says in str(caught.value)


def test_the_lab_eval_set_is_valid_and_kinds_are_derived() -> None:
    parsed = parse_eval_set(json.dumps(eval_lab.eval_set()))
    assert [c.id for c in parsed.cases] == [f"stage-{k}" for k in eval_lab.QUESTIONS]
    assert {c.id: c.kind for c in parsed.cases if c.kind != "plain"} == {"stage-estimate": "estimate",
                                                                         "stage-contract": "contract"}
    contract = {"brief": {"id": "c", "question": "Is it over 20?", "hypothesis": {
        "claim": "It is over 20 places", "metric": "precision", "comparator": ">", "target": 20, "unit": "places"}},
        "expect": {"patterns": ["28 places"], "verdict": "supported"}}
    assert parse_eval_set(json.dumps({"briefs": [contract]})).cases[0].kind == "contract"


# ---- end to end: briefs built to miss at each stage, through `briefd eval` ----------------------

@pytest.fixture(scope="module")
def lab_eval(tmp_path_factory: pytest.TempPathFactory, scripted_ollama: Any) -> tuple[Workspace, dict[str, Any], Path]:
    """`briefd eval --json` once over the stage cases, on a library under egress = none; the work folder kept."""
    root = tmp_path_factory.mktemp("eval-lab")
    library = eval_lab.build_library(root / "library")
    eval_file = eval_lab.write_eval_set(root / "stages.json")
    ws = Workspace(root=root, searxng_url=CLOSED_PORT, ollama_url=scripted_ollama.url, model="lab-scripted")
    result = ws.briefd("eval", str(eval_file), "--json", "--work", str(root / "work"), timeout=600,
                       BRIEFD_LIBRARY=str(library), BRIEFD_EGRESS="none")
    assert result.returncode == 0, result.stderr[-4000:]
    return ws, json.loads(result.stdout), eval_file


@pytest.mark.parametrize("case_id", list(eval_lab.EXPECTED_STAGE))
def test_a_brief_built_to_miss_at_a_stage_is_found_lost_there(lab_eval: tuple[Workspace, dict[str, Any], Path],
                                                              case_id: str) -> None:
    _, out, _ = lab_eval
    result = next(c for c in out["cases"] if c["id"] == f"stage-{case_id}")
    assert result["status"] == "done", result
    assert result["stage"] == eval_lab.EXPECTED_STAGE[case_id], result
    assert result["quotes_verbatim"] == result["quotes"] and result["invented_citations"] == [], result
    if case_id == "found":
        assert result["right"] and result["kept_quote"] and result["answer_line"]
    if case_id == "refused":
        assert "question" in (result["rule"] or ""), result
    if case_id == "reported":
        assert result["kept_quote"] and not result["answer_line"]


@pytest.mark.parametrize("case_id", eval_lab.MECHANICS)
def test_an_estimate_and_a_contract_are_judged_on_the_report_own_range_and_verdict(
        lab_eval: tuple[Workspace, dict[str, Any], Path], case_id: str) -> None:
    ws, out, _ = lab_eval
    result = next(c for c in out["cases"] if c["id"] == f"stage-{case_id}")
    report = json.loads((ws.root / "work" / "outbox" / result["id"] / "report.json").read_text(encoding="utf-8"))
    assert result["status"] == "done" and result["kept_quote"], result
    if case_id == "estimate":
        final, prior = report["estimate"]["final"], report["estimate"]["initial"]
        assert result["range"] == [final["low"], final["high"]] and result["truth"] == 4200
        assert result["truth_in_range"] is (final["low"] <= 4200 <= final["high"])
        assert result["width_ratio"] == pytest.approx((final["high"] - final["low"]) / (prior["high"] - prior["low"]))
        target = report["estimate"]["target"]  # right: the brief's target reached, with the truth inside (issue 28)
        reached = target_met((final["low"], final["high"]), target["low"], target["high"], target["width"])
        assert result["right"] is (result["truth_in_range"] and reached)
    else:
        assert result["verdict"] == report["verdict"]["value"] and result["expected_verdict"] == "supported"
        assert result["right"] is result["verdict_right"] is (report["verdict"]["value"] == "supported")
    assert (result["stage"] is None) is result["right"], result
    if not result["right"]:  # the quote was kept: lost at the report, or a figure refused by a named rule
        assert result["stage"] in ("reported", "refused") and result["detail"], result


def test_the_totals_add_up_and_the_user_history_is_untouched(lab_eval: tuple[Workspace, dict[str, Any], Path]) -> None:
    ws, out, _ = lab_eval
    t = out["totals"]
    assert t["cases"] == t["ran"] == len(eval_lab.QUESTIONS)
    mechanics = {f"stage-{m}" for m in eval_lab.MECHANICS}
    assert t["right"] == 1 + sum(c["right"] for c in out["cases"] if c["id"] in mechanics)
    staged = [c for c in out["cases"] if c["id"].removeprefix("stage-") not in eval_lab.MECHANICS]
    assert {stage: sum(c["stage"] == stage for c in staged) for stage in STAGES} == {
        stage: sum(s == stage for s in eval_lab.EXPECTED_STAGE.values()) for stage in STAGES}
    assert t["lost_at"] == {stage: sum(c["stage"] == stage for c in out["cases"]) for stage in STAGES}
    assert (t["estimates"], t["contracts"]) == (1, 1)
    assert t["tokens"] > 0 and t["wall_seconds"] > 0
    assert out["store"] == str(ws.root / "work" / "briefd.db")
    assert not ws.db.exists() and not ws.outbox.exists(), "eval never writes the daemon's store or outbox"


def test_a_kept_store_is_judged_again_without_running_anything(lab_eval: tuple[Workspace, dict[str, Any], Path],
                                                               scripted_ollama: Any) -> None:
    ws, out, eval_file = lab_eval
    calls = scripted_ollama.stats()
    again = ws.briefd("eval", str(eval_file), "--from-store", out["store"], "--json", "--model", "another:1b")
    assert again.returncode == 0, again.stderr[-2000:]
    assert out["model"] == json.loads(again.stdout)["model"] == "lab-scripted", "the model the runs used"
    assert [(c["id"], c["stage"]) for c in json.loads(again.stdout)["cases"]] == [(c["id"], c["stage"])
                                                                                for c in out["cases"]]
    assert scripted_ollama.stats() == calls, "judging a store asks the model nothing"
    shown = ws.briefd("eval", str(eval_file), "--from-store", out["store"])
    assert shown.returncode == 0 and "lost at: search 1, read 1, extract 1, shown 1, chosen 1" in shown.stdout, \
        shown.stdout
    assert "stage-refused: refused:" in shown.stdout


def test_a_missing_store_and_a_bad_file_exit_2_with_the_fix(tmp_path: Path) -> None:
    ws = Workspace(root=tmp_path, searxng_url=CLOSED_PORT, ollama_url=CLOSED_PORT, model="lab-scripted")
    good = eval_lab.write_eval_set(tmp_path / "set.json")
    missing = ws.briefd("eval", str(good), "--from-store", str(tmp_path / "nope.db"))
    assert missing.returncode == 2 and "--keep" in missing.stderr
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"briefs": [{"brief": {"id": "x", "question": "Q?"}, "expect": {"patern": []}}]}))
    result = ws.briefd("eval", str(bad))
    assert result.returncode == 2 and "unknown key 'patern'" in result.stderr


def test_a_pattern_that_backtracks_on_page_text_is_named_and_the_other_cases_are_judged(
        lab_eval: tuple[Workspace, dict[str, Any], Path]) -> None:
    """Issue 29 #8, through the command: the probe's pattern over the stored page texts is judged (the regex
    module does not backtrack on it without end); one slower still is stopped at its bound, its case and pattern
    named; every other case is judged as it was. Before, `briefd eval` never ended."""
    ws, out, eval_file = lab_eval
    data = json.loads(eval_file.read_text(encoding="utf-8"))
    data["briefs"][0]["expect"]["patterns"] = [r"(\w+\s?)+$"]
    data["briefs"][1]["expect"]["patterns"] = [SLOW]
    changed = ws.root / "backtracking.json"
    changed.write_text(json.dumps(data), encoding="utf-8")
    result = ws.briefd("eval", str(changed), "--from-store", out["store"], "--json", timeout=60)
    assert result.returncode == 0, result.stderr[-2000:]
    probe, slow, *others = json.loads(result.stdout)["cases"]
    assert probe["status"] == "done", probe
    assert slow["status"] == "not judged" and repr(SLOW) in slow["detail"], slow
    assert [(c["id"], c["status"], c["stage"]) for c in others] == [(c["id"], c["status"], c["stage"])
                                                                    for c in out["cases"][2:]]
    shown = ws.briefd("eval", str(changed), "--from-store", out["store"], timeout=60)
    assert f"{slow['id']}  " in shown.stdout and f"not judged: the pattern {SLOW!r}" in shown.stdout, shown.stdout


def _nested(text: str, depth: int) -> str:
    return text.replace('"@DEEP@"', "[" * depth + "]" * depth)


DEEP_CONTEXT = {"briefs": [case(), {"brief": {"id": "deep", "question": "Why?", "context": "@DEEP@"},
                                    "expect": {"patterns": ["a"]}}]}


@pytest.mark.parametrize(("flag", "text", "says"), [
    ("FILE", _nested(json.dumps(DEEP_CONTEXT), 5000),
     ", case 2: nested more than 32 levels deep at briefs[1].brief.context[0]"),
    ("FILE", _nested('"@DEEP@"', 200_000), ": nested more than 32 levels deep at [0][0]"),
    ("FILE", json.dumps({"briefs": [case(patterns=["a{4294967296}"])]}),
     ", case 1 (x): the pattern 'a{4294967296}' repeats too much to compile"),
    ("FILE", json.dumps({"briefs": [case(patterns=["(" * 3000 + "a" + ")" * 3000])]}),
     ", case 1 (x): the pattern '((((("),
    ("--vectors", _nested('{"format": "briefd-rule-vectors/1", "cases": [{"id": "v", "expect": "@DEEP@"}]}', 200_000),
     ", case 1: nested more than 32 levels deep at cases[0].expect[0]"),
], ids=["context 5,000 deep", "file 200,000 deep", "a{4294967296}", "3,000 nested groups", "vectors 200,000 deep"])
def test_a_file_nested_or_repeated_past_reason_exits_2_naming_the_case_and_the_fix(
        tmp_path: Path, flag: str, text: str, says: str) -> None:
    """Issue 29 #13: each was a traceback (RecursionError, OverflowError). The eval and vector files are read with
    the bound briefs have (core/jsontext.py), and a pattern's repeats and nesting are checked before it compiles."""
    ws = Workspace(root=tmp_path, searxng_url=CLOSED_PORT, ollama_url=CLOSED_PORT, model="lab-scripted")
    path = tmp_path / "deep.json"
    path.write_text(text, encoding="utf-8")
    result = ws.briefd("eval", *(["--vectors"] if flag == "--vectors" else []), str(path))
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr[-2000:]
    assert f"briefd: {path}{says}" in result.stderr, result.stderr
    assert any(fix in result.stderr for fix in ("remove the extra brackets", "write a smaller count",
                                                  "a few levels of parentheses")), result.stderr


def test_a_work_folder_holding_the_user_briefd_data_is_refused_and_left_as_it_was(tmp_path: Path) -> None:
    """Issue 29 #9: `--work` pointed at a user's briefd folder took the pending brief from its inbox and moved
    the report into runs/. A folder that is not empty and not eval's own is refused, naming it and the fix."""
    mine = tmp_path / "mine"
    (mine / "inbox").mkdir(parents=True)
    (mine / "inbox" / "pending.json").write_text('{"question": "What port does dnsmasq use?"}', encoding="utf-8")
    (mine / "outbox" / "earlier").mkdir(parents=True)
    (mine / "outbox" / "earlier" / "report.json").write_text("{}", encoding="utf-8")
    before = {p.relative_to(mine): p.read_bytes() for p in mine.rglob("*") if p.is_file()}
    ws = Workspace(root=tmp_path, searxng_url=CLOSED_PORT, ollama_url=CLOSED_PORT, model="lab-scripted")
    good = eval_lab.write_eval_set(tmp_path / "set.json")
    result = ws.briefd("eval", str(good), "--work", str(mine), BRIEFD_EGRESS="none", BRIEFD_ONCE_PATIENCE_S="2")
    assert result.returncode == 2, result.stderr[-2000:]
    assert f"--work {mine} is not empty" in result.stderr and "new or empty folder" in result.stderr
    assert {p.relative_to(mine): p.read_bytes() for p in mine.rglob("*") if p.is_file()} == before
    assert not (mine / "briefd.db").exists() and not (mine / WORK_MARKER).exists()


def test_eval_makes_a_work_folder_its_own_and_reuses_only_its_own(tmp_path: Path) -> None:
    """A new or empty folder is marked eval's own (WORK_MARKER) and may be given again; the temporary one too, so
    a folder --keep kept can be named with --work; any other folder is refused before anything is written."""
    runs = tmp_path / "runs"
    assert place(Settings(), runs, keep=False).db == runs / "briefd.db" and (runs / WORK_MARKER).is_file()
    (runs / "inbox").mkdir()  # what a run leaves behind
    assert place(Settings(), runs, keep=False).work == runs
    kept = place(Settings(), None, keep=True)
    try:
        assert kept.work is not None and (kept.work / WORK_MARKER).is_file() and not kept.remove
    finally:
        shutil.rmtree(kept.work or tmp_path / "none", ignore_errors=True)
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("mine", encoding="utf-8")
    with pytest.raises(EvalWorkError, match="not empty"):
        place(Settings(), other, keep=False)
    (tmp_path / "a-file").write_text("mine", encoding="utf-8")
    with pytest.raises(EvalWorkError, match="is a file"):
        place(Settings(), tmp_path / "a-file", keep=False)
    assert sorted(p.name for p in other.iterdir()) == ["notes.txt"]


def test_a_case_with_every_is_refused_and_no_schedule_is_left_in_the_store(tmp_path: Path) -> None:
    """Issue 29 #10: `eval --db USER.db` with a brief carrying `every` left a live schedule in the user's store,
    asked hourly for good. Eval runs each brief once: a case with `every` is refused, naming it, before any run."""
    user_db = tmp_path / "user.db"
    Store(user_db).close()
    every = tmp_path / "every.json"
    every.write_text(json.dumps({"briefs": [{"brief": {"id": "hourly", "question": "What is the default port?",
                                                       "every": "1h"}, "expect": {"patterns": ["53"]}}]}))
    ws = Workspace(root=tmp_path, searxng_url=CLOSED_PORT, ollama_url=CLOSED_PORT, model="lab-scripted")
    result = ws.briefd("eval", str(every), "--db", str(user_db), BRIEFD_ONCE_PATIENCE_S="2")
    assert result.returncode == 2, result.stderr[-2000:]
    assert "case 1 (hourly): the brief has \"every\"" in result.stderr and 'remove "every"' in result.stderr
    store = Store(user_db)
    try:
        assert store.db.execute("SELECT count(*) FROM schedules").fetchone()[0] == 0
        assert store.db.execute("SELECT count(*) FROM briefs").fetchone()[0] == 0
    finally:
        store.close()


def test_from_store_names_the_file_given(tmp_path: Path) -> None:
    """Issue 29 #15: `--from-store notes.txt` said ./briefd.db was damaged. A file that is not a store is refused by
    its own name (exit 2), untouched; a damaged store is named as given (exit 3), never the daemon's."""
    ws = Workspace(root=tmp_path, searxng_url=CLOSED_PORT, ollama_url=CLOSED_PORT, model="lab-scripted")
    good = eval_lab.write_eval_set(tmp_path / "set.json")
    notes = tmp_path / "notes.txt"
    notes.write_text("my notes\n", encoding="utf-8")
    result = ws.briefd("eval", str(good), "--from-store", str(notes))
    assert result.returncode == 2 and f"--from-store {notes} is not a briefd store" in result.stderr, result.stderr
    assert notes.read_text(encoding="utf-8") == "my notes\n" and str(ws.db) not in result.stderr
    damaged = tmp_path / "damaged.db"
    damaged.write_bytes(b"SQLite format 3\x00" + b"\x01 not a page " * 200)
    result = ws.briefd("eval", str(good), "--from-store", str(damaged))
    assert result.returncode == 3 and f"the store {damaged}: it is damaged" in result.stderr, result.stderr
    assert str(ws.db) not in result.stderr and not ws.db.exists()


def _one_brief_lab(tmp_path: Path, scripted_ollama: Any) -> tuple[Workspace, Path, dict[str, str]]:
    """The stage set's first brief as an eval file, on a library under egress = none, with the scripted model."""
    library = eval_lab.build_library(tmp_path / "library")
    one = {**eval_lab.eval_set(), "briefs": eval_lab.eval_set()["briefs"][:1]}
    eval_file = tmp_path / "one.json"
    eval_file.write_text(json.dumps(one), encoding="utf-8")
    ws = Workspace(root=tmp_path, searxng_url=CLOSED_PORT, ollama_url=scripted_ollama.url, model="lab-scripted")
    return ws, eval_file, {"BRIEFD_LIBRARY": str(library), "BRIEFD_EGRESS": "none"}


@pytest.mark.slow
def test_db_given_as_a_flag_keeps_the_runs_and_a_temporary_work_folder_goes(tmp_path: Path,
                                                                            scripted_ollama: Any) -> None:
    ws, eval_file, env = _one_brief_lab(tmp_path, scripted_ollama)
    chosen = tmp_path / "chosen.db"
    result = ws.briefd("eval", str(eval_file), "--json", "--db", str(chosen), **env)
    assert result.returncode == 0, result.stderr[-3000:]
    out = json.loads(result.stdout)
    assert out["store"] == str(chosen) and out["work"] is None and out["cases"][0]["stage"] is None
    again = ws.briefd("eval", str(eval_file), "--json", "--from-store", str(chosen))
    assert json.loads(again.stdout)["cases"][0]["run_id"] == out["cases"][0]["run_id"]
    temporary = ws.briefd("eval", str(eval_file), "--json", **env)
    assert temporary.returncode == 0, temporary.stderr[-3000:]
    store = Path(json.loads(temporary.stdout)["store"])
    assert store.name == "briefd.db" and not store.parent.exists(), "the temporary work folder is removed"
    kept = ws.briefd("eval", str(eval_file), "--keep", **env)
    folder = kept.stdout.rsplit("work folder kept: ", 1)[1].split(" ", 1)[0]
    try:
        assert (Path(folder) / "briefd.db").is_file()
        assert (Path(folder) / "outbox" / "stage-found" / "report.json").is_file()
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def test_web_briefs_are_attributed_from_searxng_results_and_fetched_pages(tmp_path: Path, search_lab: Any,
                                                                         scripted_ollama: Any) -> None:
    eval_file = tmp_path / "web.json"
    eval_file.write_text(json.dumps(eval_lab.web_eval_set()), encoding="utf-8")
    ws = Workspace(root=tmp_path, searxng_url=search_lab.searxng_url, ollama_url=scripted_ollama.url,
                   model="lab-scripted")
    result = ws.briefd("eval", str(eval_file), "--json")
    assert result.returncode == 0, result.stderr[-3000:]
    cases = {c["id"]: c for c in json.loads(result.stdout)["cases"]}
    found = cases["web-kestrel"]
    # the corpus states it on pages search returns and the lab web serves: it reached the model's prompt
    assert all(found["reached"][s] for s in ("search", "read", "extract", "shown")), found
    assert found["stage"] in (None, "chosen", "refused", "reported"), found
    assert found["quotes_verbatim"] == found["quotes"] > 0 and found["invented_citations"] == []
    missing = cases["web-missing"]
    assert missing["stage"] == "read" and "lakeside-lead-results-pdf" in missing["detail"], missing
    assert "its fetch failed: HTTP 404" in missing["detail"], missing


@pytest.mark.lab
@pytest.mark.slow
def test_briefs_a_service_down_kept_from_running_are_listed_not_run_and_exit_3(tmp_path: Path) -> None:
    library = eval_lab.build_library(tmp_path / "library")
    eval_file = tmp_path / "two.json"
    eval_file.write_text(json.dumps({**eval_lab.eval_set(), "briefs": eval_lab.eval_set()["briefs"][:2]}))
    ws = Workspace(root=tmp_path, searxng_url=CLOSED_PORT, ollama_url=CLOSED_PORT, model="lab-scripted")
    result = ws.briefd("eval", str(eval_file), "--json", BRIEFD_LIBRARY=str(library), BRIEFD_EGRESS="none",
                       BRIEFD_ONCE_PATIENCE_S="2")
    assert result.returncode == 3, result.stderr[-3000:]
    out = json.loads(result.stdout)
    assert [c["status"] for c in out["cases"]] == ["not run", "not run"] and out["totals"]["not_run"] == 2
    assert all("a service stayed down" in c["detail"] for c in out["cases"])
    assert "ollama" in result.stderr.lower(), "the log says which service"


@pytest.mark.slow
def test_a_run_replayed_from_the_store_says_so_and_fresh_asks_the_model_again(tmp_path: Path,
                                                                            scripted_ollama: Any) -> None:
    """Issue 28: run again on a store that holds the briefs' earlier runs, every model call was replayed
    (TOKENS 0) and nothing said the model was never asked."""
    ws, eval_file, env = _one_brief_lab(tmp_path, scripted_ollama)
    store = tmp_path / "runs.db"
    runs = []
    for extra in ((), (), ("--fresh",)):
        result = ws.briefd("eval", str(eval_file), "--json", "--db", str(store), *extra, **env)
        assert result.returncode == 0, result.stderr[-3000:]
        runs.append(json.loads(result.stdout))
    first, replay, fresh = (run["cases"][0] for run in runs)
    assert first["replayed"] == 0 and first["tokens"] > 0
    assert replay["replayed"] > 0 and replay["tokens"] == 0 and runs[1]["totals"]["replayed"] == replay["replayed"]
    assert fresh["replayed"] == 0 and fresh["tokens"] > 0
    printed = ws.briefd("eval", str(eval_file), "--db", str(store), **env)
    assert "replayed from the store's cache, not asked" in printed.stdout and "--fresh" in printed.stdout
