"""Every source the conclusions rest on has a number, and an injected page is distrusted whole.

End to end on the lab (real SearXNG, real pages, the scripted model, `briefd run --once` in a
subprocess). The corpus has a keyword-stuffed page per topic that carries a prompt injection
(kind "injection"): for the estimate it is fetched and read, for the snippet brief its search
snippet is the text. Issue 9, findings 5 and 6.
"""

from __future__ import annotations

import re

import pytest

from briefd.daemon.rules import decide
from briefd.daemon.rules.judge import EVIDENCE_LEVEL_MEANING, EVIDENCE_LEVEL_WORDS
from briefd.daemon.report.chart_png import PNG_FILE
from briefd.daemon.report.charts import CHART_FILE, CHART_NAMES
from briefd.daemon.rules.citations import cited_numbers
from briefd.daemon.report.markdown import ALSO_USED, NOT_READ_NOTE
from briefd.daemon.report.report import range_text
from tests.conftest import Workspace, researched
from lab.corpus import PAGES, TOPICS, Page
from tests.report.test_report_answer import VIEWER, first_lines, visible, words

BRIEFS = {
    "northgate": {
        "question": TOPICS["northgate"].question, "depth": "standard", "formats": ["md", "json", "html"],
        "estimate": {"unit": "USD million", "low": 100, "high": 2000, "target_width": 100},
    },
    "orbital": {"question": TOPICS["orbital"].question, "depth": "quick", "fetch_pages": False,
                "formats": ["md", "json", "html"]},
    "lakeside": {"question": TOPICS["lakeside"].question, "depth": "standard", "formats": ["md", "json", "html"],
                 "hypothesis": {"claim": TOPICS["lakeside"].claim}},
    "kestrel": {"question": TOPICS["kestrel"].question, "depth": "standard", "formats": ["md", "json", "html"]},
}


def injection_page(topic: str) -> Page:
    return next(p for p in PAGES if p.topic == topic and p.kind == "injection")


def from_page(url: str, page: Page) -> bool:
    return url.endswith((page.path, page.final_path))


@pytest.fixture(scope="module")
def lab_run(tmp_path_factory: pytest.TempPathFactory, search_lab, scripted_ollama) -> Workspace:
    return researched(tmp_path_factory.mktemp("sources"), search_lab, scripted_ollama, BRIEFS, timeout=400)


@pytest.mark.parametrize("brief_id", list(BRIEFS))
def test_every_kept_evidence_item_has_a_numbered_source_that_resolves(lab_run: Workspace, brief_id: str) -> None:
    report = lab_run.report(brief_id)
    assert report["status"] == "done", report.get("error")
    assert report["evidence"], "the lab answers the question"
    sources = report["sources"]
    assert [s["n"] for s in sources] == list(range(1, len(sources) + 1)), "numbered 1..N without holes"
    by_n = {s["n"]: s for s in sources}
    for item in report["evidence"]:
        assert item["source"] is not None, f"evidence without a numbered source: {item['url']}"
        assert by_n[item["source"]]["url"] == item["url"], "the number leads to the evidence's own page"
    cited = cited_numbers(report["summary"])
    assert cited == list(range(1, len(cited) + 1)), "the summary's citations come first, by first appearance"
    assert [s["n"] for s in sources if s["cited"]] == cited
    assert all(not s["cited"] for s in sources[len(cited):])
    assert {s["url"] for s in sources} == {e["url"] for e in report["evidence"]}, \
        "a source listed is one whose evidence the report keeps"


def test_uncited_sources_are_shown_in_the_reports_under_their_own_label(lab_run: Workspace) -> None:
    reports = {b: lab_run.report(b) for b in BRIEFS}
    uncited = [(b, s) for b, r in reports.items() for s in r["sources"] if not s["cited"]]
    assert uncited, "the lab's estimate keeps evidence from more sources than the summary cites"
    for brief_id, source in uncited:
        md = (lab_run.outbox / brief_id / "report.md").read_text(encoding="utf-8")
        html = (lab_run.outbox / brief_id / "report.html").read_text(encoding="utf-8")
        also = md.index(ALSO_USED)
        assert md.index(f"- [{source['n']}] ") > also, "listed after the label, with its number"
        assert f'id="source-{source["n"]}"' in html and ALSO_USED in html


@pytest.mark.parametrize("brief_id, topic", [("northgate", "northgate"), ("orbital", "orbital")])
def test_an_injected_page_is_distrusted_whole_and_listed(lab_run: Workspace, brief_id: str, topic: str) -> None:
    report = lab_run.report(brief_id)
    page = injection_page(topic)
    distrusted = [d for d in report["distrusted"] if from_page(d["url"], page)]
    assert distrusted, f"the injected page {page.slug} is listed under distrusted sources"
    assert decide.DISTRUSTED_FOR_INJECTION in distrusted[0]["reason"]
    assert not [e for e in report["evidence"] if from_page(e["url"], page)], "none of its sentences is evidence"
    assert not [s for s in report["sources"] if from_page(s["url"], page)], "it is not a source"
    md = (lab_run.outbox / brief_id / "report.md").read_text(encoding="utf-8")
    html = (lab_run.outbox / brief_id / "report.html").read_text(encoding="utf-8")
    assert "## Distrusted sources" in md and page.slug in md.split("## Distrusted sources", 1)[1]
    assert "<h2>Distrusted sources</h2>" in html
    assert f'href="{distrusted[0]["url"]}"' not in html, "a distrusted page is not offered as a link"


def test_no_query_is_made_from_an_injected_pages_text(lab_run: Workspace) -> None:
    for brief_id, topic in (("northgate", "northgate"), ("orbital", "orbital")):
        page = injection_page(topic)
        own = set(decide.content_words(" ".join([page.title, page.snippet, *page.paragraphs])))
        topic_words = set(decide.content_words(TOPICS[topic].question + " " + " ".join(
            p.title for p in PAGES if p.topic == topic and p.kind != "injection")))
        tells = own - topic_words  # words only the injected page has: "exactly", "cobol", "ignore" ...
        assert tells
        for query in lab_run.report(brief_id)["queries"]:
            words = set(decide.content_words(query["text"]))
            assert not words & tells, f"query {query['text']!r} carries the injected page's words"


@pytest.mark.parametrize("brief_id", list(BRIEFS))
def test_headlines_and_bare_questions_are_not_evidence(lab_run: Workspace, brief_id: str) -> None:
    for item in lab_run.report(brief_id)["evidence"]:
        quote = item["quote"]
        assert not re.fullmatch(r"[^.!]*\?\W*", quote), f"a bare question kept as evidence: {quote!r}"
        title = item.get("title") or ""
        assert " ".join(quote.split()) not in title, f"a headline kept as evidence: {quote!r}"


# --------------------------------------------------------------------------- issue 9, part C: the answer first


def test_estimate_report_html_shows_the_chart(lab_run: Workspace) -> None:
    """The lab's estimate brief: report.html carries its charts inline (the band, evidence by source
    and tier, evidence relevance), report.md links the same SVG files beside it."""
    outdir = lab_run.outbox / "northgate"
    assert lab_run.report("northgate")["chart"] == {"file": CHART_FILE, "missing": None, "png": PNG_FILE,
                                                    "png_missing": None}
    html = (outdir / "report.html").read_text(encoding="utf-8")
    markdown = (outdir / "report.md").read_text(encoding="utf-8")
    for name in CHART_NAMES:
        assert (outdir / name).read_text(encoding="utf-8") in html, name
        assert f"]({name})" in markdown, name
    assert "<img" not in html and "<script" not in html


@pytest.mark.parametrize("brief_id", list(BRIEFS))
def test_the_answer_is_on_the_reports_first_screen(lab_run: Workspace, brief_id: str) -> None:
    """The first 25 lines of report.md, as a viewer shows them, hold the question and the answer."""
    report = lab_run.report(brief_id)
    screen = first_lines((lab_run.outbox / brief_id / "report.md").read_text(encoding="utf-8"))
    assert words(report["question"]) in screen
    if report["estimate"]:
        estimate = report["estimate"]
        assert f"{range_text(estimate['final'])} {estimate['unit']}" in screen, screen
        assert f"target of {range_text(estimate['target'])}" in screen, screen
        assert words(report["stop_explanation"]) in screen
    elif report["verdict"]:
        value, level = report["verdict"]["value"], report["verdict"]["evidence_level"]
        # a decided verdict is the answer, with what its evidence level means in a few words; an
        # undecided one is a miss that says so, and the level's meaning stands under the verdict (issue 21)
        if report["answer"]["found"]:
            assert f"the claim is {value}" in screen, screen
            assert words(EVIDENCE_LEVEL_WORDS[level]) in screen
        else:
            assert f"did not decide the claim; the verdict is {value}" in screen, screen
            assert words(EVIDENCE_LEVEL_MEANING[level]) in screen
    else:
        assert words(shown_text(report["summary"]))[:80] in screen, screen
    not_read = words(NOT_READ_NOTE) in screen
    assert not_read == (not BRIEFS[brief_id].get("fetch_pages", True)), "only the snippets brief read no page"


def shown_text(markdown: str) -> str:
    """What a viewer shows of some Markdown."""
    return "".join(visible(VIEWER.render(markdown)).parts)
