"""What a reader sees first (issue 28): the answer line and the order of the evidence.

A plain brief whose model wrote no usable summary used to lead with "**Answer:** none found" above a kept quote
that states the answer; and "strongest first" was the model's confidence, so with every unrated source at its
label's cap a quote sharing common words came above the sentence that answers. The answer line now shows the
kept quote that best answers the question, verbatim and cited, saying the model wrote no summary (report.json's
`answer.from` is "quote"); the evidence is ordered by how well each quote answers the question
(decide.answers: it bears on it, states a figure where one is asked, says the question's distinctive terms),
then by weight, in the report and in what the synthesis is shown. The sentences are GNU m4's manual (the
real-document set's first part: m4-doc/Limits-control.html, Diversions.html).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from briefd.daemon.report.assemble import done_report
from briefd.daemon.report.markdown import FIGURE_QUOTE_NOTE, ONE_QUOTE_NOTE, QUOTE_ANSWER_NOTE, render_markdown
from briefd.daemon.report.report import SYNTHESIS, summary_first_sentence
from briefd.daemon.research.planner import EvidenceLine, template_summary
from briefd.daemon.rules import decide, steps
from briefd.store import Store
from tests.sources.test_sources import _research

URL = "file:///usr/share/doc/m4/Limits-control.html"
QUESTION = "What is the default size of GNU m4's internal symbol hash table?"
ANSWER = "The default is 65537 entries."
TERM = "-H num, --hashsize=num: Make the internal hash table for symbol lookup be num entries big."
# sentences of the same manual that share common words with the question and answer something else
NESTING = ("When not specified, nesting defaults to unlimited on platforms that can detect stack overflow, and to "
           "1024 levels otherwise.")
GNU = ("In this release of M4, this option is always on by default; it is currently only useful when overriding a "
       "prior use of --traditional.")


def item(quote: str, confidence: float, lead: str = "") -> dict[str, Any]:
    """A kept quote as report.json has it: `lead` is the entry it lies in, before it (its term line)."""
    return {"source": 1, "url": URL, "title": "Limits control (GNU M4 1.4.19 macro processor)", "quote": quote,
            "confidence": confidence, "round": 1, "low": None, "high": None, "stance": None, "lead": lead}


def plain_report(evidence: list[dict[str, Any]], *, wrote: bool = False) -> dict[str, Any]:
    lines = [EvidenceLine(1, e["quote"], e["title"]) for e in evidence]
    summary = "m4's hash table holds 65537 entries by default [1]." if wrote else template_summary(QUESTION, lines)
    return done_report("m4-hash", QUESTION, "2026-12-06T10:00:00Z", summary=summary, evidence=evidence,
                       fallbacks={} if wrote else {SYNTHESIS: 1},
                       sources=[{"n": 1, "url": URL, "title": "Limits control", "cited": True}])


def answer_line(md: str) -> str:
    return next(line for line in md.splitlines() if line.startswith("**Answer:**"))


def test_no_summary_and_a_kept_quote_that_answers_the_answer_line_is_that_quote() -> None:
    report = plain_report([item(NESTING, 0.6), item(ANSWER, 0.6, TERM), item(GNU, 0.6)])
    assert report["answer"] == {"found": True, "text": f"\u201c{ANSWER}\u201d [1]", "from": "quote"}
    line = answer_line(render_markdown(report))
    assert "none found" not in line and ANSWER in line and QUOTE_ANSWER_NOTE in line


def test_a_summary_the_model_wrote_is_the_answer_and_says_so() -> None:
    report = plain_report([item(ANSWER, 0.6, TERM)], wrote=True)
    assert report["answer"]["from"] == "summary" and report["answer"]["found"] is True


@pytest.mark.parametrize("summary, leads_with", [
    # what a model wrote from the quotes, the figure left out: the answer line is the quote that states it
    ("According to Limits control, -H num, --hashsize=num [1]. It makes the hash table num entries big [1].", "quote"),
    ("The symbol hash table is sized with the -H option, described in the manual [1].", "quote"),
    # a figure of the summary's own words is not the quote's: "source 1", a manual's release
    ("According to source 1, -H num, --hashsize=num [1].", "quote"),
    ("According to the GNU M4 1.4.19 manual, the hash table's size is set with -H [1].", "quote"),
    # a summary that states the quote's figure, however written, is the answer line
    ("m4's hash table holds 65537 entries by default [1].", "summary"),
    ("By default the symbol table has 65,537 entries [1].", "summary"),
])
def test_a_summary_that_drops_the_figure_the_best_quote_states_does_not_lead(summary: str, leads_with: str) -> None:
    """A small model's summary names what the quote is about and leaves out what it says ("According to tcp,
    tcp_syn_retries (integer [1]." above "tcp_syn_retries (integer; default: 6; ...)"): the first screen then said
    nothing of the answer. Its citation marks are no figure, nor is a number in a name it repeats."""
    evidence = [item(NESTING, 0.6), item(ANSWER, 0.6, TERM)]
    report = done_report("m4-hash", QUESTION, "2026-12-06T10:00:00Z", summary=summary, evidence=evidence,
                         fallbacks={}, sources=[{"n": 1, "url": URL, "title": "Limits control", "cited": True}])
    assert report["answer"]["from"] == leads_with and report["answer"]["found"] is True
    md = render_markdown(report)
    if leads_with == "quote":
        assert report["answer"]["text"] == f"\u201c{ANSWER}\u201d [1]" and FIGURE_QUOTE_NOTE in answer_line(md)
        assert summary.split(" [1]")[0] in md, "the model's summary is still in the report, below the answer"
    else:
        assert report["answer"]["text"] == summary_first_sentence(summary) and FIGURE_QUOTE_NOTE not in md


def test_a_miss_says_it_is_a_miss_and_comes_from_nothing() -> None:
    report = plain_report([])
    assert report["answer"]["found"] is False and report["answer"]["from"] is None


def test_the_quote_that_answers_comes_first_whatever_the_models_confidence() -> None:
    """Equal weights (every unrated source at its cap), or the model's 0.9 on a line about another option: the
    sentence that answers the question heads the evidence, in the report and in what the synthesis is shown."""
    for weights in ((0.6, 0.6, 0.6), (0.9, 0.3, 0.9)):
        evidence = [item(NESTING, weights[0]), item(ANSWER, weights[1], TERM), item(GNU, weights[2])]
        md = render_markdown(plain_report(evidence, wrote=True))
        shown = md.split("## Evidence", 1)[1]
        assert shown.index("65537") < shown.index("1024 levels") and shown.index("65537") < shown.index("--traditional")
        rows = [{**e, "id": i} for i, e in enumerate(evidence)]
        assert decide.strongest_first(rows, [QUESTION])[0]["quote"] == ANSWER


def test_a_quote_with_the_questions_names_outranks_one_with_its_common_words() -> None:
    assert decide.answers(TERM, "", [QUESTION]) > decide.answers(NESTING, "", [QUESTION])
    assert decide.answers(ANSWER, f"Limits control\n{TERM}", [QUESTION])[:2] == (1, 1)  # read with its term line


# ---- a quote another kept quote of the same page contains -------------------------------------------------


def test_a_quote_inside_a_kept_quote_of_the_same_page_is_not_kept_again() -> None:
    """`make demo` showed two quotes, the second a copy of the first one's second sentence."""
    longer = f"{TERM} {ANSWER}"
    known = {(URL, longer)}
    skipped = steps.skipped_quote(ANSWER, URL, "Limits control", True, {}, [QUESTION], known,
                                  context=longer)
    assert skipped is not None and skipped["reason"] == steps.CONTAINED
    # another page's copy of the same words is another source: kept
    assert steps.skipped_quote(ANSWER, "file:///mirror/m4/Limits-control.html", "Limits control", True, {},
                               [QUESTION], known, context=longer) is None


def test_a_longer_quote_of_the_same_page_stands_for_the_quotes_it_contains(tmp_path: Path) -> None:
    longer = f"{TERM} {ANSWER}"
    known = {(URL, ANSWER), (URL, NESTING), ("file:///other", ANSWER)}
    assert steps.contained_quotes(URL, longer, known) == [ANSWER]
    store = Store(tmp_path / "briefd.db")
    try:
        run_id = store.add_brief(brief_id="m4", question=QUESTION, source_file="m4.json", received=b"{}",
                                 brief_json="{}", inbox_path=str(tmp_path / "m4.json"))
        store.add_evidence(run_id, [{"round": 1, "url": URL, "quote": ANSWER},
                                    {"round": 1, "url": URL, "quote": NESTING},
                                    {"round": 1, "url": "file:///other", "quote": ANSWER}])
        assert store.drop_quotes(run_id, URL, [ANSWER]) == 1
        assert sorted((e["url"], e["quote"]) for e in store.evidence(run_id)) == \
            [("file:///other", ANSWER), (URL, NESTING)]
    finally:
        store.close()


# ---- no synthesis call for a report of zero quotes or one (issue 28's decision) ----------------------------


def test_no_summary_is_asked_from_no_quote_or_one(tmp_path: Path) -> None:
    """From no quote the model could only answer alone, and one quote is its own best statement: neither run asks
    for a summary (the model server here is a closed port: a call would fail loudly), and each says why."""
    research = _research(tmp_path, ["web"])
    try:
        summary, sources = asyncio.run(research.synthesize())
        assert research.state.calls_skipped == {"synthesis": 1} and sources == []
        assert summary.startswith("No source was kept for this question.")
        research.store.add_evidence(research.run_id, [
            {"round": 1, "url": "http://a.example/k", "title": "Kestrel", "quote": "The Kestrel River is 14 metres "
             "deep at the bridge.", "confidence": 0.6, "origin": "page", "passage_id": 1, "quote_start": 0,
             "quote_end": 49}])
        summary, sources = asyncio.run(research.synthesize())
        assert research.state.calls_skipped == {"synthesis": 2}
        assert "rests on one source" in summary and "14 metres deep" in summary and "[1]" in summary
        assert [s.n for s in sources if s.cited] == [1]
        assert research.store.model_usage(research.run_id)["llm_calls"] == 0
    finally:
        research.store.close()


def test_one_kept_quote_is_the_answer_line_and_says_it_rests_on_one_source() -> None:
    report = plain_report([item(ANSWER, 0.6, TERM)])
    report["usage"]["calls_skipped"] = {SYNTHESIS: 1}
    stated = done_report("m4-hash", QUESTION, "2026-12-06T10:00:00Z", summary=report["summary"],
                         evidence=report["evidence"], usage=report["usage"],
                         sources=[{"n": 1, "url": URL, "title": "Limits control", "cited": True}])["answer"]
    assert stated == {"found": True, "text": f"\u201c{ANSWER}\u201d [1]", "from": "quote"}
    line = answer_line(render_markdown({**report, "answer": stated}))
    assert ONE_QUOTE_NOTE in line


def test_no_quote_kept_says_what_was_searched() -> None:
    queries = [{"round": 1, "text": "m4 hashsize default", "results": 3}]
    stated = done_report("m4-hash", QUESTION, "2026-12-06T10:00:00Z", summary="", evidence=[], queries=queries,
                         usage={"calls_skipped": {SYNTHESIS: 1}})["answer"]
    assert stated == {"found": False, "text": "No source was found; searched: m4 hashsize default", "from": None}
