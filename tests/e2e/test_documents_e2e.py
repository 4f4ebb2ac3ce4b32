"""Issue 10 end to end: briefd researching what an air-gapped network holds, on the lab.

Real parts throughout: the daemon as a subprocess, real PDFs and DOCX made by fpdf2 and
python-docx (lab/library.py), a real ZIM archive with a Xapian index built by libzim
from the lab's corpus (lab/zim.py), real SearXNG and the lab web for the web PDF.

The air-gapped brief runs under `egress = none` with a socket guard (an audit hook,
tests/socket_guard) that fails any connect to a non-loopback address and records every
connect: the test asserts the daemon, and its page-reading children, connected to the
model server and nothing else.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from briefd.daemon.sources.library import RESCAN_S
from tests.conftest import researched
from lab.corpus import PAGES_BY_SLUG, TOPICS
from lab.library import (
    INSPECTION_PAGES,
    MINUTES_BLOCKS,
    LabLibrary,
    build_library,
)
from lab.workspace import Workspace
from lab.zim import CORPUS_TITLE, build_corpus_zim

GUARD = Path(__file__).resolve().parents[1] / "socket_guard"
KESTREL = TOPICS["kestrel"].question
CLOSED_PORT = "http://127.0.0.1:9"  # nothing listens: under egress = none SearXNG must never be tried


def evidence_from(report: dict[str, Any], suffix: str) -> list[dict[str, Any]]:
    return [e for e in report["evidence"] if e["url"].endswith(suffix)]


def flat(text: str) -> str:
    """Whitespace folded: a quote may span paragraphs, which the document's text separates by lines."""
    return " ".join(text.split())


def page_text(pages: list[str], number: int) -> str:
    return flat(pages[number - 1])


@pytest.fixture(scope="module")
def air_gapped(tmp_path_factory: pytest.TempPathFactory, scripted_ollama) -> tuple[Workspace, LabLibrary, Path]:
    """One run of the daemon on a library and an archive, with no network but the model server."""
    root = tmp_path_factory.mktemp("air-gapped")
    library = build_library(root / "library")
    archive = build_corpus_zim(root / "lab-encyclopedia.zim")
    guard_log = root / "connects.ndjson"
    ws = Workspace(root=root, searxng_url=CLOSED_PORT, ollama_url=scripted_ollama.url, model="lab-scripted")
    ws.drop("gapped.json", {"question": KESTREL, "depth": "standard", "sources": ["library", "archives"],
                            "formats": ["md", "json", "html"]})
    result = ws.briefd(
        "run", "--once", BRIEFD_LIBRARY=str(library.folder), BRIEFD_ARCHIVES=str(archive), BRIEFD_EGRESS="none",
        PYTHONPATH=os.pathsep.join(p for p in (str(GUARD), os.environ.get("PYTHONPATH")) if p),
        BRIEFD_SOCKET_GUARD_LOG=str(guard_log))
    assert result.returncode == 0, result.stderr[-4000:]
    return ws, library, guard_log


def test_an_air_gapped_brief_quotes_a_pdf_with_its_page_a_docx_and_an_archive_article(air_gapped) -> None:
    ws, library, _ = air_gapped
    report = ws.report("gapped")
    assert report["status"] == "done"
    assert report["searched"] == ["library", "archives"]
    pdf = evidence_from(report, library.inspection.name)
    docx = evidence_from(report, library.minutes.name)
    zim = [e for e in report["evidence"] if e["url"].startswith("zim://")]
    assert pdf and docx and zim, [e["url"] for e in report["evidence"]]
    for item in pdf:  # verbatim, and on the page it says
        assert item["page"] in range(1, len(INSPECTION_PAGES) + 1)
        assert flat(item["quote"]) in page_text(INSPECTION_PAGES, item["page"])
        assert not flat(item["quote"]).startswith(("Kestrel River Bridge: Principal", "Findings", "Recommendation"))
    assert any(e["page"] > 1 for e in pdf), "a quote past the first page shows the page is the quote's own"
    minutes_text = " ".join(str(v) for kind, v in MINUTES_BLOCKS if kind != "table")
    assert all(flat(e["quote"]) in minutes_text and e["page"] is None for e in docx)
    sources = {s["n"]: s for s in report["sources"]}
    for item in zim:
        cited = sources[item["source"]]
        assert cited["kind"] == "archives" and f"({CORPUS_TITLE})" in cited["title"]  # archive and article
    md = (ws.outbox / "gapped" / "report.md").read_text(encoding="utf-8")
    assert f"p. {pdf[0]['page']}" in md and library.inspection.name in md


def test_an_air_gapped_brief_contacts_only_the_model_server(air_gapped, scripted_ollama) -> None:
    ws, _, guard_log = air_gapped
    report = ws.report("gapped")
    model_port = int(scripted_ollama.url.rsplit(":", 1)[1])
    assert report["egress"]["policy"] == "none"
    assert [(h["host"], h.get("role")) for h in report["egress"]["hosts"]] == [
        (f"127.0.0.1:{model_port}", "model server")]
    assert report["egress"]["hosts"][0]["requests"] >= report["usage"]["llm_calls"] > 0
    connects = [json.loads(line) for line in guard_log.read_text().splitlines()]
    connects = [c for c in connects if c["event"] == "connect"]
    assert connects, "the guard saw no connect at all: it was not loaded"
    assert {(c["host"], c["port"], c["allowed"]) for c in connects} == {("127.0.0.1", model_port, True)}
    md = (ws.outbox / "gapped" / "report.md").read_text(encoding="utf-8")
    assert "Network (egress = none)" in md and "No other host was contacted." in md


def test_the_hostile_files_of_the_library_are_refused_by_name_and_nothing_else_suffers(air_gapped) -> None:
    ws, library, _ = air_gapped
    result = ws.briefd("library", "status", BRIEFD_LIBRARY=str(library.folder))
    assert result.returncode == 0, result.stderr
    out = result.stdout
    for path in library.hostile:
        assert path.name in out
    assert "no text layer" in out and "password" in out.lower() and "zip" in out.lower()
    assert ws.report("gapped")["status"] == "done"


def test_check_tells_what_egress_none_allows_and_the_health_of_library_and_archives(air_gapped) -> None:
    ws, library, _ = air_gapped
    archive = ws.root / "lab-encyclopedia.zim"
    result = ws.briefd("check", BRIEFD_LIBRARY=str(library.folder), BRIEFD_ARCHIVES=str(archive),
                       BRIEFD_EGRESS="none")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "egress = none: briefd contacts only the model server" in result.stdout
    assert "is not used (egress = none)" in result.stdout
    assert "full-text index" in result.stdout and CORPUS_TITLE in result.stdout


def test_a_brief_for_the_web_under_egress_none_is_refused_with_the_fix(air_gapped) -> None:
    ws, library, _ = air_gapped
    ws.drop("webbed.json", {"question": KESTREL, "sources": ["web"]})
    result = ws.briefd("run", "--once", BRIEFD_LIBRARY=str(library.folder), BRIEFD_EGRESS="none")
    assert result.returncode == 0, result.stderr[-2000:]
    error = json.loads((ws.outbox / "webbed" / "error.json").read_text(encoding="utf-8"))
    assert error["details"]["field"] == "sources[0]" and "egress = none" in error["error"]


def test_a_pdf_found_on_the_web_is_read_quoted_and_cited_with_its_page(tmp_path: Path, search_lab,
                                                                       scripted_ollama) -> None:
    ws = researched(tmp_path, search_lab, scripted_ollama,
                    {"webpdf": {"question": KESTREL, "depth": "standard", "formats": ["md", "json"]}})
    report = ws.report("webpdf")
    pdf = evidence_from(report, "kestrel-anchorage-survey.pdf")
    assert pdf, [e["url"] for e in report["evidence"]]
    assert all(isinstance(e["page"], int) for e in pdf)
    for item in pdf:
        assert flat(item["quote"]) in flat(PAGES_BY_SLUG["kestrel-anchorage-survey"].paragraphs[item["page"] - 1])
    assert any(s["url"].endswith(".pdf") for s in report["sources"])
    md = (ws.outbox / "webpdf" / "report.md").read_text(encoding="utf-8")
    assert f"p. {pdf[0]['page']}" in md


def test_the_method_names_no_search_service_a_brief_did_not_use(air_gapped) -> None:
    ws, _, _ = air_gapped
    assert ws.report("gapped")["searxng_url"] is None
    md = (ws.outbox / "gapped" / "report.md").read_text(encoding="utf-8")
    assert CLOSED_PORT not in md and "**Sources searched:** library, archives" in md


def test_the_running_daemon_indexes_a_document_saved_into_the_library(tmp_path: Path, search_lab,
                                                                      scripted_ollama) -> None:
    """Watched like the inbox: a PDF saved into a library folder while the daemon runs becomes findable."""
    import subprocess
    import time

    from lab.documents import write_pdf
    from lab.workspace import BRIEFD

    library = tmp_path / "library"
    library.mkdir()
    ws = Workspace(root=tmp_path, searxng_url=search_lab.searxng_url, ollama_url=scripted_ollama.url,
                   model="lab-scripted")
    env = ws.env(BRIEFD_LIBRARY=str(library))
    with open(tmp_path / "daemon.log", "w") as sink:
        daemon = subprocess.Popen([BRIEFD, "run"], env=env, cwd=ws.root, stdout=sink, stderr=sink)
        try:
            time.sleep(1.0)  # started, with its first (empty) scan behind it
            tmp = library / ".saving.pdf"  # an editor's temp file, then a rename: what watchdog sees as "moved"
            write_pdf(tmp, ["Nothing here.", "The Wexford weir gates were replaced in 2024 at a cost of 3.1 million."])
            tmp.rename(library / "weir.pdf")
            found = ""
            deadline = time.monotonic() + RESCAN_S / 2  # sooner than the periodic rescan: the watch found it
            while time.monotonic() < deadline and "weir.pdf" not in found:
                time.sleep(0.5)
                found = ws.briefd("library", "search", "Wexford weir gates", BRIEFD_LIBRARY=str(library)).stdout
        finally:
            daemon.terminate()
            daemon.wait(timeout=60)
    assert "weir.pdf" in found, (tmp_path / "daemon.log").read_text()[-3000:]
    assert "3.1 million" in found and "p. 2" in found  # the passage, on its page
