"""What changed since the previous run of the same id (issue 12 part 5): report.json's `changes`
(daemon/report/changes.py), the "What changed since <date>" section report.md and report.html open
with (daemon/report/changes_md.py), and the real daemon submitting one id twice on the lab."""

from __future__ import annotations

import copy
import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Callable

import pytest
from markdown_it import MarkdownIt

from briefd.daemon.core.untrusted import md_escape
from briefd.daemon.report.changes import what_changed
from briefd.daemon.report.changes_md import CHANGES_SHOWN, NOTHING_CHANGED, changes_when
from briefd.daemon.report.html import render_html
from briefd.daemon.report.markdown import render_markdown
from briefd.daemon.report.outbox import archive_previous, archived_run, write_report
from briefd.store import sha256_hex
from tests.conftest import OllamaLab, Workspace, researched
from lab import web
from lab.corpus import PAGES_BY_SLUG, TOPICS
from lab.servers import start_search_lab
from tests.report.test_report import SCRIPT, hostile_report, parse

TUNNEL = "https://news.example/tunnel"
AUDIT = "https://audit.example/report"
BLOG = "https://blog.example/post"
OLD_TEXT, NEW_TEXT = sha256_hex("The tunnel overran by USD 450 million."), sha256_hex("Now USD 440 million.")


def previous_report() -> dict[str, Any]:
    """A done estimate run as assemble.run_report builds it (sources carry their page text hash)."""
    return {
        "id": "tunnel", "status": "done", "question": "How much did the tunnel overrun?",
        "started_at": "2026-11-20T09:00:00Z", "finished_at": "2026-11-20T09:04:10Z",
        "stop_reason": "converged",
        "sources": [{"n": 1, "url": TUNNEL, "title": "Tunnel news", "cited": True, "text_sha256": OLD_TEXT},
                    {"n": 2, "url": AUDIT, "title": "Audit report", "cited": True, "text_sha256": "a" * 64}],
        "evidence": [
            {"source": 1, "url": TUNNEL, "title": "Tunnel news", "quote": "The tunnel overran by USD 450 million.",
             "impact": "narrows_high", "low": 450, "high": 450, "confidence": 0.8, "round": 1},
            {"source": 2, "url": AUDIT, "title": "Audit report", "quote": "The audit found an overrun of\n400 million.",
             "impact": "narrows_low", "low": 400, "high": 400, "confidence": 0.9, "round": 1},
        ],
        "estimate": {"unit": "USD million", "initial": {"low": 100, "high": 2000},
                     "target": {"low": 400, "high": 460}, "final": {"low": 400, "high": 460}},
        "verdict": None,
    }


def edited_page(report: dict[str, Any]) -> None:
    """The tunnel page was edited: its figure is now 440, so the range's top moves down."""
    report["sources"][0]["text_sha256"] = NEW_TEXT
    report["evidence"][0].update(quote="Now USD 440 million.", low=440, high=440)
    report["estimate"]["final"] = {"low": 400, "high": 440}


def new_source(report: dict[str, Any]) -> None:
    report["sources"].append({"n": 3, "url": BLOG, "title": "A blog", "cited": False, "text_sha256": "b" * 64})
    report["evidence"].append({"source": 3, "url": BLOG, "title": "A blog", "quote": "Nobody knows the cost.",
                               "impact": "neutral", "low": None, "high": None, "round": 2})


def source_gone(report: dict[str, Any]) -> None:
    del report["sources"][1], report["evidence"][1]


def rewrapped(report: dict[str, Any]) -> None:
    """The same quote with other line breaks, the same page re-read: not a change."""
    report["evidence"][1]["quote"] = "The audit found an overrun of 400 million."
    report["started_at"], report["finished_at"] = "2026-11-27T09:00:00Z", "2026-11-27T09:03:00Z"


def from_an_older_briefd(report: dict[str, Any]) -> None:
    """Written before schema 7: no hashes on sources, no impact on evidence, no verdict key."""
    for source in report["sources"]:
        del source["text_sha256"]
    for item in report["evidence"]:
        del item["impact"]
    del report["verdict"]


def hypothesis(value: str, level: str) -> Callable[[dict[str, Any]], None]:
    def apply(report: dict[str, Any]) -> None:
        report["estimate"] = None
        report["verdict"] = {"value": value, "rule": "weighed", "evidence_level": level}
    return apply


def contradicting(report: dict[str, Any]) -> None:
    hypothesis("refuted", "deterministic")(report)
    report["evidence"].append({"source": 2, "url": AUDIT, "quote": "Lead was 7.6 ppb.", "stance": "contradicts",
                               "round": 2})


def both(*changes: Callable[[dict[str, Any]], None]) -> Callable[[dict[str, Any]], None]:
    def apply(report: dict[str, Any]) -> None:
        for change in changes:
            change(report)
    return apply


def unchanged(report: dict[str, Any]) -> None:
    return None


def brief(changes: dict[str, Any]) -> dict[str, Any]:
    """What a reader takes from `changes`: each part reduced to its URLs, quotes and ranges."""
    def quotes(refs: list[dict[str, Any]]) -> list[tuple[Any, str, str]]:
        return [(r["source"], r["url"], r["quote"]) for r in refs]

    rng, verdict = changes["range"], changes["verdict"]
    return {
        "nothing": changes["nothing_changed"],
        "range": rng and (rng["old"], rng["new"], rng["unit"], quotes(rng["because"]), quotes(rng["withdrawn"])),
        "verdict": verdict and (verdict["old"], verdict["new"], verdict["new_level"], quotes(verdict["because"])),
        "new": [s["url"] for s in changes["sources"]["new"]],
        "gone": [s["url"] for s in changes["sources"]["gone"]],
        "changed": [(s["url"], s["old_text_sha256"], s["new_text_sha256"]) for s in changes["sources"]["changed"]],
        "added": quotes(changes["quotes"]["added"]),
        "withdrawn": quotes(changes["quotes"]["withdrawn"]),
        "question": changes["question"],
    }


NONE: dict[str, Any] = {"nothing": True, "range": None, "verdict": None, "new": [], "gone": [], "changed": [],
                        "added": [], "withdrawn": [], "question": None}
R400_460, R400_440 = {"low": 400, "high": 460}, {"low": 400, "high": 440}

# name, change to the previous report, change to the current one (a copy of it), what `changes` says
TABLE: list[tuple[str, Callable[[dict[str, Any]], None], Callable[[dict[str, Any]], None], dict[str, Any]]] = [
    ("nothing changed", unchanged, unchanged, NONE),
    ("a quote re-wrapped by a new extraction is the same quote", unchanged, rewrapped, NONE),
    ("the same range stored as floats has not moved", unchanged,
     lambda r: r["estimate"].update(final={"low": 400.0, "high": 460.0}), NONE),
    ("an edited page moves the range, and says which quote did", unchanged, edited_page, {
        **NONE, "nothing": False,
        "range": (R400_460, R400_440, "USD million", [(1, TUNNEL, "Now USD 440 million.")],
                  [(None, TUNNEL, "The tunnel overran by USD 450 million.")]),
        "changed": [(TUNNEL, OLD_TEXT, NEW_TEXT)],
        "added": [(1, TUNNEL, "Now USD 440 million.")],
        "withdrawn": [(None, TUNNEL, "The tunnel overran by USD 450 million.")]}),
    ("a new source, its quote added; a neutral quote does not explain a range", unchanged, new_source, {
        **NONE, "nothing": False, "new": [BLOG], "added": [(3, BLOG, "Nobody knows the cost.")]}),
    ("a source gone withdraws its quotes", unchanged, source_gone, {
        **NONE, "nothing": False, "gone": [AUDIT],
        "withdrawn": [(None, AUDIT, "The audit found an overrun of\n400 million.")]}),
    ("the verdict flips with the quote that takes the other side", hypothesis("supported", "advisory"),
     contradicting, {**NONE, "nothing": False,
                     "verdict": ("supported", "refuted", "deterministic", [(2, AUDIT, "Lead was 7.6 ppb.")]),
                     "added": [(2, AUDIT, "Lead was 7.6 ppb.")]}),
    ("the evidence level alone changing is a verdict change", hypothesis("supported", "advisory"),
     hypothesis("supported", "deterministic"),
     {**NONE, "nothing": False, "verdict": ("supported", "supported", "deterministic", [])}),
    ("an older briefd's report: no hashes to compare is no change", from_an_older_briefd, unchanged, NONE),
    ("an older briefd's report: an edited page still moves the range (any figure bears on it)",
     from_an_older_briefd, edited_page, {
         **NONE, "nothing": False,
         "range": (R400_460, R400_440, "USD million", [(1, TUNNEL, "Now USD 440 million.")],
                   [(None, TUNNEL, "The tunnel overran by USD 450 million.")]),
         "added": [(1, TUNNEL, "Now USD 440 million.")],
         "withdrawn": [(None, TUNNEL, "The tunnel overran by USD 450 million.")]}),
    ("a range where there was none", lambda r: r.update(estimate=None),
     lambda r: r.update(estimate=previous_report()["estimate"]), {
        **NONE, "nothing": False, "range": (None, R400_460, "USD million", [], [])}),
    ("the id asked again with another question", unchanged, lambda r: r.update(question="And the bridge?"), {
        **NONE, "nothing": False, "question": {"old": "How much did the tunnel overrun?", "new": "And the bridge?"}}),
]


@pytest.mark.parametrize(("name", "before", "after", "expected"), TABLE, ids=[row[0] for row in TABLE])
def test_what_changed(name: str, before: Callable[[dict[str, Any]], None], after: Callable[[dict[str, Any]], None],
                      expected: dict[str, Any]) -> None:
    previous = previous_report()
    before(previous)
    current = copy.deepcopy(previous)
    current["started_at"], current["finished_at"] = "2026-11-27T09:00:00Z", "2026-11-27T09:05:00Z"
    after(current)
    changes = what_changed(previous, current, previous_run_id=7, files="runs/2026-11-20T09-00-00Z/")
    assert brief(changes) == expected
    assert changes["since"] == previous["finished_at"]
    assert changes["previous"] == {"run_id": 7, "started_at": previous["started_at"],
                                   "finished_at": previous["finished_at"], "files": "runs/2026-11-20T09-00-00Z/"}
    assert json.loads(json.dumps(changes)) == changes, "report.json carries it as it is"


def test_a_report_missing_every_part_compares_without_failing() -> None:
    """A stored report reduced to its id (a hand-edited or damaged row) against a full one."""
    changes = what_changed({"id": "tunnel"}, previous_report(), previous_run_id=1, files=None)
    assert changes["since"] is None and not changes["nothing_changed"]
    assert [s["url"] for s in changes["sources"]["new"]] == [TUNNEL, AUDIT]
    assert changes["range"]["old"] is None and changes["range"]["new"] == R400_460
    assert changes_when(changes["since"]) == "the previous run"


# ---------------------------------------------------------------------------
# report.md and report.html

_MD = MarkdownIt("commonmark")  # raw HTML on, as most viewers have it


def changed_report(change: Callable[[dict[str, Any]], None] = edited_page) -> dict[str, Any]:
    """The current report as the worker writes it: `changes` against the previous run."""
    previous = previous_report()
    current = copy.deepcopy(previous)
    current.update(started_at="2026-11-27T09:00:00Z", finished_at="2026-11-27T09:05:00Z")
    change(current)
    current["changes"] = what_changed(previous, current, previous_run_id=7, files="runs/2026-11-20T09-00-00Z/")
    return current


def section(text: str) -> str:
    return text.split("## What changed since ")[1].split("\n## ")[0]


def test_a_rerun_opens_with_what_changed_right_after_the_question_and_status() -> None:
    text = render_markdown(changed_report())
    h2 = [line for line in text.splitlines() if line.startswith("## ")]
    assert h2[:2] == ["## What changed since 2026-11-20 09:04 UTC", "## Estimate"]
    before = text.split("## What changed")[0]
    assert before.startswith("# How much did the tunnel overrun?") and "**Status:** done" in before
    assert ("- **Range:** 400–460 → 400–440 USD million (because: [[1]](#source-1) “Now USD 440 million.”; "
            "no longer: [Tunnel news](https://news.example/tunnel) “The tunnel overran by USD 450 million.”)"
            ) in section(text)
    assert "- **Sources changed (the page's text differs from the previous read):** [[1]](#source-1) " \
           "[Tunnel news](https://news.example/tunnel)" in section(text)
    assert "- **Quotes added:** [[1]](#source-1) “Now USD 440 million.”" in section(text)
    assert "_The previous run's files: ` runs/2026-11-20T09-00-00Z/ `_" in section(text)


def test_nothing_changed_is_one_line() -> None:
    text = render_markdown(changed_report(rewrapped))
    assert section(text).strip().splitlines() == [
        "2026-11-20 09:04 UTC", "", f"{NOTHING_CHANGED} (previous run's files: ` runs/2026-11-20T09-00-00Z/ `)."]


def test_a_first_run_has_no_section() -> None:
    report = previous_report()
    report["changes"] = None
    assert "What changed" not in render_markdown(report) and "What changed" not in render_html(report)


def test_long_lists_are_cut_and_say_how_many_more() -> None:
    def many(report: dict[str, Any]) -> None:
        report["evidence"] += [{"source": 2, "url": AUDIT, "quote": f"Figure {i}.", "round": 2} for i in range(9)]

    added = section(render_markdown(changed_report(many))).split("**Quotes added:** ")[1].splitlines()[0]
    assert added.count("“Figure") == CHANGES_SHOWN and added.endswith(f"and {9 - CHANGES_SHOWN} more in report.json")


def hostile_changes() -> dict[str, Any]:
    """Page and model text in every field the section shows: titles, URLs, quotes, the question."""
    report = hostile_report()
    previous = copy.deepcopy(report)
    previous["finished_at"] = f"{SCRIPT}\n## Injected"
    previous["question"] = f"Old {SCRIPT}"
    previous["sources"].append({"n": 5, "url": "javascript:alert(2)", "title": "Gone [x](javascript:alert(3))"})
    previous["evidence"].append({"url": "javascript:alert(2)", "quote": f"# Withdrawn {SCRIPT}\n- item", "low": 1,
                                 "high": 2, "impact": "narrows_low"})
    previous["estimate"]["final"] = {"low": 1, "high": 2}
    report["changes"] = what_changed(previous, report, previous_run_id=1, files=f"runs/{SCRIPT}`/")
    return report


def test_the_section_escapes_every_piece_of_page_text_in_markdown() -> None:
    text = render_markdown(hostile_changes())
    tokens = [t for token in _MD.parse(text) for t in [token, *(token.children or [])]]
    assert not [t for t in tokens if t.type in ("html_block", "html_inline")]
    hrefs = [t.attrs["href"] for t in tokens if t.type == "link_open"]
    assert hrefs and all(str(h).startswith(("https://", "#source-")) for h in hrefs)
    h2 = [line for line in text.splitlines() if line.startswith("## ")]
    assert h2[0] == f"## What changed since {md_escape(f'{SCRIPT} ## Injected')}"
    assert not [line for line in text.splitlines() if line.startswith(("# Withdrawn", "- item", "## Injected"))]


def test_the_section_is_escaped_and_first_in_html() -> None:
    text = render_html(hostile_changes())
    page = parse(text)
    assert page.by_tag["h2"][:2] == [f"What changed since {SCRIPT} ## Injected", "Estimate"]
    assert "<script" not in text.lower()
    assert all(h.startswith(("#source-", "https://")) for h in page.hrefs())
    shown = "".join(page.text)
    assert f"# Withdrawn {SCRIPT} - item" in shown and f"Old {SCRIPT}" in shown
    assert f"runs/{SCRIPT}`/" in shown, "the files' folder is shown, as code"


# ---------------------------------------------------------------------------
# Where the previous run's files are now


def test_archived_run_finds_the_folder_archive_previous_moved_the_run_to(tmp_path: Path) -> None:
    outdir = tmp_path / "tunnel"
    first = previous_report()
    write_report(outdir, first, ["md"])
    archive_previous(outdir)
    failed = {**first, "status": "failed", "started_at": "2026-11-20T09:00:00Z"}  # same second, another run
    failed["id"] = "tunnel-failed"
    write_report(outdir, failed, [])
    archive_previous(outdir)
    (outdir / "runs" / "2026-11-20T09-00-00Z").rename(outdir / "runs" / "2026-11-20T09-00-00Z-3")
    assert sorted(p.name for p in (outdir / "runs").iterdir()) == ["2026-11-20T09-00-00Z-2", "2026-11-20T09-00-00Z-3"]
    assert archived_run(outdir, first["started_at"]) == "runs/2026-11-20T09-00-00Z-2/", \
        "the first folder with a report.json of that start (both runs started in that second)"
    assert archived_run(outdir, "2026-11-21T00:00:00Z") is None
    assert archived_run(tmp_path / "never-ran", first["started_at"]) is None
    assert archived_run(outdir, None) is None


# ---------------------------------------------------------------------------
# The real daemon on the lab: the same ids submitted twice

NORTHGATE = {"question": TOPICS["northgate"].question, "depth": "quick",
             "estimate": {"unit": "USD million", "low": 100, "high": 2000, "target_low": 400, "target_high": 460}}
ORBITAL = {"question": TOPICS["orbital"].question, "depth": "quick", "fetch_pages": False}  # the same snippets again
BRIEFS = {"northgate": NORTHGATE, "orbital": ORBITAL}
Runs = tuple[Workspace, dict[str, dict[str, Any]], dict[str, dict[str, Any]]]


@pytest.fixture(scope="module")
def twice(tmp_path_factory, search_lab, scripted_ollama) -> Runs:
    """Each brief run, then submitted again under the same id: (workspace, first reports, second reports)."""
    ws = researched(tmp_path_factory.mktemp("changes"), search_lab, scripted_ollama, BRIEFS)
    first = {brief_id: ws.report(brief_id) for brief_id in BRIEFS}
    for brief_id, brief in BRIEFS.items():
        ws.drop(f"{brief_id}.json", brief)
    result = ws.briefd("run", "--once")
    assert result.returncode == 0, result.stderr[-4000:]
    return ws, first, {brief_id: ws.report(brief_id) for brief_id in BRIEFS}


def folded(refs: list[dict[str, Any]]) -> set[tuple[str, str]]:
    return {(r["url"], " ".join(r["quote"].split())) for r in refs}


@pytest.mark.parametrize("brief_id", list(BRIEFS))
def test_the_second_run_names_the_first_and_where_its_files_are(twice: Runs, brief_id: str) -> None:
    ws, first, second = twice
    assert first[brief_id]["changes"] is None, "a first run has nothing to compare with"
    changes = second[brief_id]["changes"]
    assert changes["since"] == first[brief_id]["finished_at"]
    assert changes["previous"]["started_at"] == first[brief_id]["started_at"]
    folder = ws.outbox / brief_id / changes["previous"]["files"]
    assert json.loads((folder / "report.json").read_text(encoding="utf-8")) == first[brief_id]
    assert (folder / "report.md").is_file() and (folder / "events.ndjson").is_file()
    assert "What changed" not in (folder / "report.md").read_text(encoding="utf-8")


def test_a_rerun_of_unchanged_sources_changes_nothing_and_pays_for_nothing(twice: Runs) -> None:
    """The estimate brief asked again: its pages are checked (304: none changed), its rounds are
    the first run's (the same pages, in the same batches), every answer is replayed, and its
    report says nothing changed, naming each source by the hash of the text it was read as."""
    ws, first, second = twice
    old, new, changes = first["northgate"], second["northgate"], second["northgate"]["changes"]
    with sqlite3.connect(ws.db) as db:
        texts = dict(db.execute("SELECT url, text FROM pages").fetchall())
    assert new["sources"] and [s["text_sha256"] for s in new["sources"]] == [
        sha256_hex(texts[s["url"]]) for s in new["sources"]], "each source names the hash of the text it was read as"
    assert changes["nothing_changed"] is True, changes
    assert folded(new["evidence"]) == folded(old["evidence"]) and new["estimate"]["final"] == old["estimate"]["final"]
    usage = new["usage"]
    assert usage["llm_calls"] == 0 and usage["page_bytes"] == 0 and usage["pages_not_modified"] > 0, usage
    shown = section((ws.outbox / "northgate" / "report.md").read_text(encoding="utf-8"))
    assert f"{usage['pages_not_modified']} pages checked with their servers, unchanged" in shown, shown


def test_a_rerun_where_nothing_changed_says_so_in_one_line(twice: Runs) -> None:
    ws, first, second = twice
    assert second["orbital"]["changes"]["nothing_changed"] is True, second["orbital"]["changes"]
    assert second["orbital"]["usage"]["llm_calls"] == 0, "every answer replayed"
    md = (ws.outbox / "orbital" / "report.md").read_text(encoding="utf-8")
    h2 = [line for line in md.splitlines() if line.startswith("## ")]
    assert h2[0] == f"## What changed since {md_escape(changes_when(first['orbital']['finished_at']))}"
    files = second["orbital"]["changes"]["previous"]["files"]
    assert section(md).strip().splitlines()[1:] == ["", f"{NOTHING_CHANGED} (previous run's files: ` {files} `)."]


# ---------------------------------------------------------------------------
# The real daemon on a lab of its own: a page changes between two runs of the same id

# what the changed page says instead of its figures: a revised overrun, within the band the lab's
# other sources allow (a figure far outside it would be read as an outlier and move nothing)
REVISED = "A revised 2026 edition of this paper found the Northgate rail tunnel overran its budget by USD 700 million."


@pytest.fixture(scope="module")
def page_changed(tmp_path_factory: pytest.TempPathFactory,
                 paced_ollama: OllamaLab) -> Iterator[tuple[Workspace, dict, dict, str]]:
    """The estimate brief run once; a page whose figures made its range changed on the lab web
    (its figures replaced by REVISED); the same id run again (a re-run checks its stored pages:
    the changed one answers 200, the others 304). Returns (workspace, first report, second
    report, the changed URL).

    The model takes a second an answer, as a real one does (conftest.paced_ollama): the pages arrive
    while it reads, so the first run reads them all (with the lab's instant model, which pages are late, and so what
    the first range rests on, would be a matter of timing)."""
    root = tmp_path_factory.mktemp("page-changed")
    overrides = root / "overrides"
    lab = start_search_lab(root / "lab", overrides=overrides)
    try:
        ws = researched(root / "ws", lab, paced_ollama, {"tunnel": NORTHGATE}, timeout=300)
        first = ws.report("tunnel")
        final = first["estimate"]["final"]
        url = next(e["url"] for e in first["evidence"] if e["url"].endswith(".html") and e.get("low") is not None
                   and final["low"] <= e["low"] <= final["high"])  # a reading the range rests on
        slug = url.rsplit("/", 1)[1].removesuffix(".html")
        kept = [p for p in PAGES_BY_SLUG[slug].paragraphs if not any(ch.isdigit() for ch in p)]
        # its new copy comes 2 s late: the re-run's other pages answer 304 at once and their
        # answers are replayed, and the round still waits for it (Research.fetch_and_read)
        web.write_override(overrides, slug, [REVISED, *kept], delay_s=2.0)
        ws.drop("tunnel.json", NORTHGATE)
        result = ws.briefd("run", "--once", timeout=300)
        assert result.returncode == 0, result.stderr[-4000:]
        yield ws, first, ws.report("tunnel"), url
    finally:
        lab.stop()


@pytest.mark.slow
def test_a_page_changed_between_runs_shows_in_what_changed_with_the_quote_that_moved_the_range(
        page_changed: tuple[Workspace, dict, dict, str]) -> None:
    ws, first, second, url = page_changed
    changes = second["changes"]
    assert changes is not None and changes["nothing_changed"] is False
    assert [s["url"] for s in changes["sources"]["changed"]] == [url], changes["sources"]
    revised = [q for q in changes["quotes"]["added"] if "700 million" in q["quote"]]
    assert revised and revised[0]["url"] == url, changes["quotes"]["added"]
    assert second["usage"]["pages_not_modified"] > 0 and second["usage"]["pages_fetched"] == 1  # only it downloaded
    # the range moved, and what changed names the revised quote as why
    assert first["estimate"]["final"] != second["estimate"]["final"]
    assert changes["range"]["old"] == first["estimate"]["final"] and changes["range"]["new"] == second["estimate"]["final"]
    assert any("700 million" in q["quote"] for q in changes["range"]["because"]), changes["range"]
    shown = section((ws.outbox / "tunnel" / "report.md").read_text(encoding="utf-8"))
    assert "700 million" in shown and url in shown
