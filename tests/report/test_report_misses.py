"""Reports that never dress up a miss (issue 21, part 5): the walkthrough's cases, each as a user meets it.

An estimate that read nothing opened with its own prior as `**Answer:**` and was listed green as "done";
a plain brief whose model wrote no summary was listed with the fallback's boilerplate, naming the model's
rewrite of the question; a small model's plan left `},` and `][` as angles; a plain brief's quotes showed
the model's 1.00 where every rule weighs a library page 0.6, and quotes at 0.00 were listed among "the
strongest"; "What changed" showed a figure changed at the end of a long quote as the same text added and
withdrawn. Each report here is built by the product's own assembly (report/assemble.py's done_report), then
read the way a user reads it: report.md, `briefd list`, the on_finish environment, `briefd eval`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from briefd.daemon.ops.cli import main
from briefd.daemon.ops.evaluate import Case, Truth, judge_case
from briefd.daemon.ops.onfinish import Ended, answer_found
from briefd.daemon.report.report import SYNTHESIS
from briefd.daemon.report.assemble import (
    answer_of,
    done_report,
    evidence_items,
    plan_text,
    weighed_confidence,
)
from briefd.daemon.report.changes import EDITED_SIMILARITY, quote_changes, similarity, what_changed
from briefd.daemon.report.markdown import UNWEIGHED_NOTE, render_markdown
from briefd.daemon.research.planner import EvidenceLine, template_summary
from briefd.daemon.rules.citations import Source
from briefd.daemon.rules.judge import TIER_CAPS
from briefd.store.briefs import Store
from briefd.store.evaluation import RunTrace
from lab.history_bench import record_run

# Real sentences of the docset's manuals (~/.cache/briefd-docset: openssh-client's ssh_config(5), GNU m4's
# manual), the kind of text these reports quote. The held-out manuals are quoted nowhere.
SSH = ("If, for example, ServerAliveInterval (see below) is set to 15 and ServerAliveCountMax is left at the "
       "default, if the server becomes unresponsive, ssh will disconnect after approximately 45 seconds.")
SSH_URL = "file:///usr/share/doc/openssh-client/ssh_config.5.txt"
SSH_DEBIAN = "In addition, the ServerAliveInterval option will be set to 300 seconds by default (Debian-specific)."
SSH_TIMEOUT = ("Specifies the timeout (in seconds) used when connecting to the SSH server, instead of using the "
               "default system TCP timeout.")
M4_HASH = "The default is 65537 entries."
M4_URL = "file:///usr/share/doc/m4/Limits-control.html"
M4 = ("When not specified, nesting defaults to unlimited on platforms that can detect stack overflow, and to 1024 "
      "levels otherwise.")

QUESTION = "Why was the Kestrel River bridge closed?"
REWRITE = "What was the Kestrel River bridge closed for in 2024 according to the county?"


def row(url: str, quote: str, **given: Any) -> dict[str, Any]:
    """An evidence row as the store gives it to Research.report."""
    base = {"url": url, "title": "ssh_config(5)", "quote": quote, "stance": None, "impact": None,
            "confidence": 0.9, "round": 1, "summary": "", "low": None, "high": None, "tier": None, "unit": None,
            "scope": None, "reading_date": None, "page": None, "read_at": None, "reused_from": None}
    return {**base, **given}


def estimate(initial: tuple[float, float], final: tuple[float, float], unit: str = "connections") -> dict[str, Any]:
    return {"unit": unit, "initial": {"low": initial[0], "high": initial[1]},
            "target": {"low": None, "high": None, "width": 20}, "final": {"low": final[0], "high": final[1]},
            "progress_score": 0.0, "history": [], "numbers_discarded": 0, "discarded_reasons": {}, "note": None}


def done(question: str = QUESTION, **found: Any) -> dict[str, Any]:
    """A done run's report, assembled as Research.report assembles it."""
    return done_report("b", question, "2026-11-27T10:00:00Z", **found)


# ---- the answer a report states, or that it found none ------------------------------------------------

LINES = [EvidenceLine(1, SSH, "ssh_config(5)")]
SSH_ITEM = {"url": SSH_URL, "quote": SSH, "low": None}


@pytest.mark.parametrize(("report", "found", "text"), [
    # an estimate that kept nothing: its prior, said to be the prior
    (dict(estimate=estimate((10, 5000), (10, 5000)), evidence=[]), False,
     "No source was kept; the range is your prior, unchanged (10\u20135,000 connections)"),
    # a kept quote states it in words, but no figure was read from it (docset m4-nesting, library run):
    # "no source stated it" would be false
    (dict(estimate=estimate((10, 100000), (10, 100000), unit="levels"), evidence=[{**SSH_ITEM, "quote": M4}]),
     False, "No figure in levels was read from the 1 quote kept; the range is your prior, unchanged "
            "(10\u2013100,000 levels)"),
    # figures read that did not move it
    (dict(estimate=estimate((10, 5000), (10, 5000)), evidence=[{**SSH_ITEM, "low": 45, "high": 45}]), False,
     "The 1 figure read did not move the range; the range is your prior, unchanged (10\u20135,000 connections)"),
    # the sources moved it: the range is the answer
    (dict(estimate=estimate((10, 5000), (90, 110)), evidence=[{**SSH_ITEM, "low": 100, "high": 100}]), True,
     "90\u2013110 connections"),
    (dict(estimate={**estimate((10, 5000), (10, 5000)), "final": {}}), False, "No range was computed"),
    # a verdict answers when it decides
    (dict(verdict={"value": "supported", "evidence_level": "deterministic"}, evidence=[SSH_ITEM]), True,
     "supported (deterministic)"),
    (dict(verdict={"value": "inconclusive", "evidence_level": "deterministic"}, evidence=[SSH_ITEM]), False,
     "The sources kept did not decide the claim; the verdict is inconclusive (deterministic)"),
    (dict(verdict={"value": "inconclusive", "evidence_level": "advisory"}, evidence=[]), False,
     "No source was kept; the verdict is inconclusive (advisory)"),
    # a plain brief: the summary the model wrote from kept quotes
    (dict(summary="Unresponsive servers are dropped after about 45 seconds [1]. More.", evidence=[SSH_ITEM]), True,
     "Unresponsive servers are dropped after about 45 seconds [1]."),
    # ... with the sentences after the first that name nothing of their own: the answer is often there
    (dict(summary="According to ssh_config.5.txt, Port Specifies the port number to connect on the remote host. "
                  "The default is 22 [1]. According to ssh.1.txt, ports may be forwarded [2].",
          evidence=[SSH_ITEM]), True,
     "According to ssh_config.5.txt, Port Specifies the port number to connect on the remote host. "
     "The default is 22 [1]."),
    # the model wrote none: the fallback's boilerplate is not an answer, nor a kept quote about something else
    (dict(question=QUESTION, summary=template_summary(REWRITE, LINES), fallbacks={SYNTHESIS: 1},
          evidence=[SSH_ITEM]), False,
     "The model wrote no summary; 1 quote from 1 source kept, none of them bearing on the question itself"),
    # ... but a kept quote that answers the question is the answer, verbatim and cited (issue 28)
    (dict(question="What is the default ServerAliveInterval on Debian?", summary=template_summary(REWRITE, LINES),
          fallbacks={SYNTHESIS: 1}, evidence=[{**SSH_ITEM, "source": 1},
                                              {"url": SSH_URL, "quote": SSH_DEBIAN, "low": None, "source": 1}]),
     True, f"\u201c{SSH_DEBIAN}\u201d [1]"),
    (dict(summary=template_summary(REWRITE, []), fallbacks={SYNTHESIS: 1}, evidence=[]), False,
     "No source was found"),
    (dict(summary="The bridge closed for repairs.", evidence=[]), False,
     "No source was found; the summary rests on the model alone"),
])
def test_the_answer_says_what_was_found_or_that_nothing_was(report: dict[str, Any], found: bool, text: str) -> None:
    answer = answer_of(report)
    assert (answer.found, answer.text) == (found, text)


def test_an_estimate_that_found_nothing_does_not_open_with_its_prior_as_the_answer() -> None:
    report = done(question="What will the Northgate tunnel cost?",
                  estimate=estimate((100, 2000), (100, 2000), unit="USD million"), evidence=[])
    assert report["answer"] == {"found": False, "text": "No source was kept; the range is your prior, unchanged "
                                                        "(100\u20132,000 USD million)", "from": None}
    md = render_markdown(report)
    answer = next(line for line in md.splitlines() if line.startswith("**Answer:**"))
    assert answer.startswith("**Answer:** none found. No source was kept; the range is your prior"), answer
    assert not answer.startswith("**Answer:** 100"), "its own prior shown as the answer"


def test_an_estimate_the_sources_moved_keeps_its_range_as_the_answer() -> None:
    report = done(estimate=estimate((10, 5000), (90, 110)), evidence=[])
    assert report["answer"]["found"] is True
    line = "**Answer:** 90\u2013110 connections, against a target of width \u2264 20 connections."
    assert line in render_markdown(report)


# ---- list, the page's data, on_finish ------------------------------------------------------------------


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    opened = Store(tmp_path / "briefd.db")
    yield opened
    opened.close()


def test_list_tells_a_run_that_found_nothing_from_one_that_answered(
        store: Store, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    miss = done(question="How many concurrent TFTP connections does dnsmasq allow by default?",
                estimate=estimate((10, 5000), (10, 5000)), evidence=[])
    hit = done(question="What is the default ServerAliveInterval on Debian?",
               estimate=estimate((0, 3600), (300, 300), unit="seconds"), evidence=[{**SSH_ITEM, "low": 300}])
    plain = done(question=QUESTION, summary=template_summary(REWRITE, LINES), fallbacks={SYNTHESIS: 1},
                 evidence=[SSH_ITEM], research_question=REWRITE)
    for brief_id, report, body in (
            ("pg", miss, {"estimate": {"unit": "connections", "low": 10, "high": 5000}}),
            ("ssh", hit, {"estimate": {"unit": "seconds", "low": 0, "high": 3600}}),
            ("kestrel", plain, {})):
        record_run(store, brief_id, report["question"], [], report=report, brief=body)
    for name in [n for n in os.environ if n.startswith("BRIEFD_")]:
        monkeypatch.delenv(name)
    (tmp_path / "none.toml").write_text("")
    code = main(["list", "--json", "--db", str(tmp_path / "briefd.db"), "--config", str(tmp_path / "none.toml")])
    assert code == 0

    entries = {e["id"]: e for e in json.loads(capsys.readouterr().out)}
    assert entries["pg"]["answer_found"] is False and entries["ssh"]["answer_found"] is True  # GET /briefs: the page
    assert entries["pg"]["answer"].startswith("No source was kept; the range is your prior, unchanged")
    # a plain brief's Answer column is neither the fallback's boilerplate nor the model's rewrite
    assert entries["kestrel"]["answer"] == ("The model wrote no summary; 1 quote from 1 source kept, none of them "
                                            "bearing on the question itself")
    assert REWRITE not in entries["kestrel"]["answer"]

    main(["list", "--db", str(tmp_path / "briefd.db"), "--config", str(tmp_path / "none.toml")])
    table = {line.split()[0]: line for line in capsys.readouterr().out.splitlines()[1:]}
    assert "done: plateau, no answer found" in table["pg"]
    assert "no answer found" not in table["ssh"]


def test_on_finish_is_told_whether_the_report_found_an_answer(tmp_path: Path) -> None:
    miss = done(estimate=estimate((10, 5000), (10, 5000)), evidence=[])
    hit = done(estimate=estimate((10, 5000), (90, 110)), evidence=[])
    told = {name: Ended("b", "done", tmp_path, answer_found(report)).environ({})["BRIEFD_ANSWER_FOUND"]
            for name, report in (("miss", miss), ("hit", hit))}
    assert told == {"miss": "no", "hit": "yes"}


def test_the_web_page_marks_a_done_run_without_an_answer_apart_from_done() -> None:
    """The page's list row (daemon/ops/web/index.html) reads GET /briefs' `answer_found`; the page itself
    runs in a browser in tests/ops/test_web_page.py."""
    page = (Path(__file__).parents[2] / "daemon" / "ops" / "web" / "index.html").read_text(encoding="utf-8")
    assert 'entry.answer_found === false' in page and ".state.miss" in page


# ---- the user's question, the plan as text -------------------------------------------------------------


def test_the_users_question_heads_the_report_and_the_rewrite_stays_in_the_method() -> None:
    report = done(question=QUESTION, research_question=REWRITE, summary=template_summary(REWRITE, LINES),
                  fallbacks={SYNTHESIS: 1}, evidence=[SSH_ITEM])
    lines = render_markdown(report).splitlines()
    assert lines[0] == f"# {QUESTION}"
    answer = next(line for line in lines if line.startswith("**Answer:**"))
    assert REWRITE not in answer and "strongest quotes" not in answer
    assert REWRITE not in report["answer"]["text"]


@pytest.mark.parametrize(("fragment", "text"), [
    ("- },", False), ("][", False), ("},", False), ("1", False), ("1-4", False), ("d", False), ("", False),
    ("historical price curve", True), ("analyst forecasts", True), ("ServerAliveInterval default", True),
    ("tftp_max", True), ("Lärmschutz", True),
])
def test_a_plan_fragment_is_text_when_it_has_a_word(fragment: str, text: bool) -> None:
    assert (plan_text([fragment]) == [fragment.strip()]) is text


def test_plan_fragments_that_are_not_text_never_reach_the_report() -> None:
    report = done(research_question=REWRITE, angles=["- },", "][", "server keepalive settings"],
                  gaps=["},", "the Debian default"], open_questions=["]["])
    assert report["angles"] == ["server keepalive settings"]
    assert report["gaps"] == ["the Debian default"] and report["open_questions"] == []
    md = render_markdown(report)
    assert "- server keepalive settings" in md
    for junk in ("- },", "- \\]\\[", "- ][", "- \\},"):
        assert junk not in md.splitlines(), junk


# ---- the confidence the rules used -----------------------------------------------------------------------


@pytest.mark.parametrize(("tier", "model", "contract", "weighed"), [
    (None, 1.0, False, TIER_CAPS["news"]),          # a library page, no tier rule: news, capped at 0.6
    ("regulator", 0.5, False, 0.5),                  # under its cap: the model's
    ("social", 0.9, False, TIER_CAPS["social"]),
    ("news", 0.0, False, 0.0),
    ("news", 0.2, True, TIER_CAPS["news"]),          # a contract weighs the tier, not the model
])
def test_the_confidence_shown_is_the_one_the_rules_weigh(tier: str | None, model: float, contract: bool,
                                                         weighed: float) -> None:
    assert weighed_confidence(tier, model, contract=contract) == weighed


def test_a_plain_briefs_quote_shows_the_weighed_confidence_not_the_models() -> None:
    rows = [row(M4_URL, M4_HASH, confidence=1.0, tier=None)]
    evidence = evidence_items(rows, [Source(n=1, url=M4_URL, title="Limits control", cited=True)])
    assert evidence[0]["confidence"] == TIER_CAPS["news"] and evidence[0]["model_confidence"] == 1.0
    md = render_markdown(done(summary="The default hash table size is 65537 entries [1].", evidence=evidence,
                              sources=[{"n": 1, "url": M4_URL, "title": "Limits control", "cited": True}]))
    assert "confidence 0.60" in md and "confidence 1.00" not in md


def test_quotes_given_no_weight_are_not_listed_among_the_strongest() -> None:
    evidence = [{"source": 1, "url": SSH_URL, "title": "ssh_config(5)", "quote": SSH_TIMEOUT, "confidence": 0.0,
                 "round": 1},
                {"source": 1, "url": SSH_URL, "title": "ssh_config(5)", "quote": SSH_DEBIAN, "confidence": 0.6,
                 "round": 1}]
    md = render_markdown(done(summary="On Debian the interval is 300 seconds [1].", evidence=evidence,
                              sources=[{"n": 1, "url": SSH_URL, "title": "ssh_config(5)", "cited": True}]))
    evidence_md = md.split("## Evidence", 1)[1].split("\n## ", 1)[0]
    strongest, _, unweighed = evidence_md.partition(UNWEIGHED_NOTE)
    assert "Strongest first" in strongest and "300 seconds" in strongest
    assert "timeout (in seconds)" not in strongest, "a quote at 0.00 listed among the strongest"
    assert "timeout (in seconds)" in unweighed and "confidence 0.00" in unweighed


# ---- What changed: a figure changed inside a quote ------------------------------------------------------


def _run(quotes: list[str]) -> dict[str, Any]:
    return {"question": "How long does ssh wait for an unresponsive server?", "finished_at": "2026-11-20T09:00:00Z",
            "sources": [{"n": 1, "url": SSH_URL, "title": "ssh_config(5)"}],
            "evidence": [{"source": 1, "url": SSH_URL, "title": "ssh_config(5)", "quote": q} for q in quotes]}


def test_what_changed_shows_a_figure_changed_at_the_end_of_a_long_quote() -> None:
    edited = SSH.replace("set to 15", "set to 20").replace("45 seconds", "60 seconds")
    previous, current = _run([SSH, SSH_DEBIAN]), _run([edited, SSH_DEBIAN])
    quotes = quote_changes(previous, current)
    assert quotes["added"] == [] and quotes["withdrawn"] == [], "the same quote edited, not added and withdrawn"
    assert [(d["op"], d["text"]) for d in quotes["edited"][0]["diff"] if d["op"] != "="] == [
        ("-", "15"), ("+", "20"), ("-", "45"), ("+", "60")]
    report = {**current, "id": "b", "status": "done",
              "changes": what_changed(previous, current, previous_run_id=1, files=None)}
    section = render_markdown(report).split("## What changed", 1)[1].split("\n## ", 1)[0]
    assert "**Quotes edited:**" in section
    assert "**45 → 60** seconds." in section and "**15 → 20**" in section
    assert "Quotes added" not in section and "Quotes withdrawn" not in section


@pytest.mark.parametrize(("old", "new", "same_quote"), [
    (SSH, SSH.replace("45 seconds", "60 seconds"), True),
    (SSH_DEBIAN, SSH_DEBIAN.replace("300", "600"), True),
    (SSH_DEBIAN, SSH_TIMEOUT, False),    # two sentences of one page about the same option's timing
    (SSH, SSH_DEBIAN, False),
])
def test_an_edited_quote_is_one_that_keeps_most_of_its_words(old: str, new: str, same_quote: bool) -> None:
    assert (similarity(old, new) >= EDITED_SIMILARITY) is same_quote
    changes = quote_changes(_run([old]), _run([new]))
    assert bool(changes["edited"]) is same_quote and bool(changes["added"]) is not same_quote


# ---- eval: a miss stated as a miss is no answer line ------------------------------------------------------


def test_eval_does_not_count_a_stated_miss_as_the_answer_line() -> None:
    case = Case(id="pg", brief={}, kind="estimate", patterns=(r"\b100 connections",),
                truth=Truth(100.0, "connections"))
    report = done(estimate=estimate((10, 100), (10, 100)), evidence=[], usage={})
    assert "100 connections" in report["answer"]["text"]  # the prior's upper end, named in the miss
    trace = RunTrace(run_id=1, brief_id="pg", state="done", fetch_pages=True, queries=(), results=(),
                     read=frozenset(), fetch_errors={}, unread_early=frozenset(), texts={}, shown=(),
                     prompts_recorded=True, chosen=(), refused=(), distrusted={}, kept=(), report=report,
                     answer_line=report["answer"]["text"])
    assert judge_case(case, trace).answer_line is False


def test_a_range_moved_by_an_edited_figure_names_the_edit_not_the_quote_twice() -> None:
    def run(quote: str, value: float) -> dict[str, Any]:
        report = _run([quote])
        report["evidence"][0].update(low=value, high=value, impact="narrows_both")
        report["estimate"] = estimate((0, 120), (value, value), unit="seconds")
        return report

    previous, current = run(SSH, 45), run(SSH.replace("45 seconds", "60 seconds"), 60)
    changes = what_changed(previous, current, previous_run_id=1, files=None)
    assert changes["range"]["withdrawn"] == [] and len(changes["range"]["because"]) == 1
    section = render_markdown({**current, "id": "b", "status": "done", "changes": changes}).split(
        "## What changed", 1)[1].split("\n## ", 1)[0]
    bullet = next(line for line in section.splitlines() if line.startswith("- **Range:**"))
    assert "**45 → 60** seconds." in bullet and "no longer" not in bullet, bullet
