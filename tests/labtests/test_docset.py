"""briefd's own real-document set (lab/docset.py, lab/docset/*.json): the set is well formed, true
to the documents it names, and runs through the lab, web and library, as `briefd eval` runs it.

The documents come from Debian's packages at run time (`apt-get download`, cached under ~/.cache/briefd-docset):
a test that needs them skips, saying why, where apt-get cannot download (CI reaches Debian's registry, so there
they run). The CI slice is three questions over one small package (m4-doc: 120 KB, HTML only).
"""

from __future__ import annotations

import json
import os
import re
import stat
from pathlib import Path
from typing import Any

import httpx
import pytest

from briefd.daemon.core.brief import validate_brief
from briefd.daemon.ops import evaluate
from lab import web
from lab.docset import (
    PACKAGES_BY_NAME,
    PART2_DEV,
    PART2_TEST,
    PART_PACKAGES,
    QUESTIONS,
    SLICE,
    SLICE_PACKAGES,
    Docset,
    DocsetUnavailable,
    download,
    fold,
    start_docset_lab,
)
from lab.demo import DEMO_MODEL_ENV
from tests.conftest import docset_or_skip
from lab.docset_bench import CLOSED_PORT, LIBRARY_TIER, derived_set, eval_env, pick, run_driver
from lab.workspace import Workspace

CASE_KEYS = {"brief", "expect", "where", "kind", "verified"}  # the eval set format, version 1 (and briefd eval below)
EXPECT_KEYS = {"patterns", "number", "verdict"}
CONTRACT_FIELDS = {"claim", "metric", "comparator", "target", "unit"}
NUMBER_WORDS = {1: "one", 2: "two", 3: "three", 4: "four", 5: "five", 6: "six", 7: "seven", 8: "eight", 9: "nine",
                10: "ten"}


def load(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


def built(packages: tuple[str, ...] | None = None, folder: Path | None = None) -> Docset:
    """The corpus, or a skip that says why it cannot be had here and where it runs (conftest.docset_or_skip)."""
    return docset_or_skip(packages, folder)


# --------------------------------------------------------------------------- the set itself


SETS = (QUESTIONS, PART2_DEV, PART2_TEST)


def test_the_set_has_the_issues_mix() -> None:
    kinds = [case["kind"] for case in load(QUESTIONS)["briefs"]]
    assert len(kinds) >= 60
    assert kinds.count("plain") >= 25 and kinds.count("estimate") >= 15 and kinds.count("contract") >= 10


def test_the_second_part_is_other_projects_split_dev_and_test_by_project() -> None:
    """Issue 27: new projects (none of the first part's), each half with every kind, no project in both halves."""
    halves = [load(PART2_DEV)["briefs"], load(PART2_TEST)["briefs"]]
    projects = [{w.split("/")[0] for case in half for w in case["where"]} for half in halves]
    assert not projects[0] & projects[1]
    assert projects[0] | projects[1] == set(PART_PACKAGES[2]) and not set(PART_PACKAGES[1]) & set(PART_PACKAGES[2])
    assert len(halves[0]) + len(halves[1]) >= 40
    assert all({case["kind"] for case in half} == {"plain", "estimate", "contract"} for half in halves)


@pytest.mark.parametrize("path", SETS, ids=lambda p: p.name)
def test_the_set_has_the_agreed_format(path: Path) -> None:
    data = load(path)
    cases = data["briefs"]
    assert set(data) == {"name", "briefs"}
    assert {case["expect"].get("verdict") for case in cases if case["kind"] == "contract"} == {"supported", "refuted"}
    ids = [case["brief"]["id"] for case in cases]
    assert len(ids) == len(set(ids))
    for case in cases:
        name = case["brief"]["id"]
        assert set(case) <= CASE_KEYS and set(case["expect"]) <= EXPECT_KEYS, name
        validate_brief(case["brief"], name)  # the product's own brief rules
        assert case["expect"]["patterns"] and all(re.compile(p, re.I) for p in case["expect"]["patterns"]), name
        assert case["where"] and all(w.split("/")[0] in PACKAGES_BY_NAME for w in case["where"]), name
        assert any(w in case["verified"] for w in case["where"]), f"{name}: `verified` names its document"
        estimate, number = case["brief"].get("estimate"), case["expect"].get("number")
        assert (case["kind"] == "estimate") == (estimate is not None) == (number is not None), name
        if estimate is not None:
            assert number["unit"] == estimate["unit"], name
            assert estimate["low"] < number["value"] < estimate["high"], f"{name}: the truth lies inside the prior"
            assert estimate["high"] - estimate["low"] >= 10 * estimate["target_width"], f"{name}: a wide prior"
        if case["kind"] == "contract":
            assert set(case["brief"]["hypothesis"]) == CONTRACT_FIELDS, name
            assert case["expect"]["verdict"] in ("supported", "refuted"), name


def test_the_ci_slice_is_the_set_s_own_cases_over_one_small_package() -> None:
    by_id = {case["brief"]["id"]: case for case in load(QUESTIONS)["briefs"]}
    slice_cases = load(SLICE)["briefs"]
    assert {case["kind"] for case in slice_cases} == {"plain", "estimate", "contract"}
    for case in slice_cases:
        assert case == by_id[case["brief"]["id"]]
        assert all(w.split("/")[0] in SLICE_PACKAGES for w in case["where"])


def test_a_bench_slice_keeps_every_kind_and_says_where_to_look(tmp_path: Path) -> None:
    cases = load(QUESTIONS)["briefs"]
    six = pick(cases, 6)
    assert [case["kind"] for case in six].count("contract") == 2 and len({c["kind"] for c in six}) == 3
    assert pick(cases, None) == cases and pick(cases, 0) == cases
    derived = load(derived_set(QUESTIONS, tmp_path / "library.json", "library", 4))
    assert len(derived["briefs"]) == 4 and all(c["brief"]["sources"] == ["library"] for c in derived["briefs"])


def test_each_source_and_model_gets_the_settings_a_user_would_have(tmp_path: Path) -> None:
    docset = Docset(tmp_path / "docs", (), ("m4-doc",), 0)
    ws = Workspace(root=tmp_path, searxng_url=CLOSED_PORT, ollama_url="http://127.0.0.1:1", model="m")
    docs = "http://127.0.0.1:8/docs/"
    web_env, library = eval_env(ws, "web", docset, docs_url=docs), eval_env(ws, "library", docset, "llama")
    assert "BRIEFD_LIBRARY" not in web_env and "BRIEFD_EGRESS" not in web_env
    assert library["BRIEFD_LIBRARY"] == str(docset.folder) and library["BRIEFD_EGRESS"] == "none"
    assert library["BRIEFD_SOURCE_TIERS"] == f"{docset.folder}={LIBRARY_TIER}"
    assert web_env["BRIEFD_SOURCE_TIERS"] == f"{docs}={LIBRARY_TIER}", "the web's docs mirror is tiered the same"
    assert all(library[key] == value for key, value in DEMO_MODEL_ENV.items())  # Gemma: the demo's settings
    assert not set(DEMO_MODEL_ENV) & set(web_env) and "BRIEFD_FETCH_TIMEOUT_S" not in web_env


def test_the_set_parses_with_briefd_eval_s_own_reader() -> None:
    for path in (*SETS, SLICE):
        parsed = evaluate.parse_eval_set(path.read_bytes(), str(path))
        assert len(parsed.cases) == len(load(path)["briefs"])


# --------------------------------------------------------------------------- downloads and the lab web


def fake_apt_get(folder: Path, script: str) -> dict[str, str]:
    """PATH with an `apt-get` of the test's own in front (what a machine without the registry answers)."""
    folder.mkdir(parents=True, exist_ok=True)
    tool = folder / "apt-get"
    tool.write_text("#!/bin/sh\n" + script + "\n", encoding="utf-8")
    tool.chmod(tool.stat().st_mode | stat.S_IXUSR)
    return {"PATH": f"{folder}{os.pathsep}{os.environ.get('PATH', '')}"}


def test_a_registry_out_of_reach_is_a_reason_not_a_crash(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    env = fake_apt_get(tmp_path / "bin", 'echo "E: Unable to locate package $2" >&2; exit 100')
    monkeypatch.setenv("PATH", env["PATH"])
    with pytest.raises(DocsetUnavailable, match=r"apt-get download m4-doc failed: E: Unable to locate package"):
        download(("m4-doc",), tmp_path / "cache")


def test_a_cached_download_is_used_without_asking_the_registry(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    env = fake_apt_get(tmp_path / "bin", "echo asked >> \"$(dirname \"$0\")/asked\"; exit 100")
    monkeypatch.setenv("PATH", env["PATH"])
    deb = tmp_path / "cache" / "debs" / "m4-doc_1.4.19-3_all.deb"
    deb.parent.mkdir(parents=True)
    deb.write_bytes(b"!<arch>\n")
    assert download(("m4-doc",), tmp_path / "cache") == {"m4-doc": deb}
    assert not (tmp_path / "bin" / "asked").exists()


def test_the_lab_web_serves_a_corpus_folder_and_nothing_beside_it(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    (docs / "pkg").mkdir(parents=True)
    (docs / "pkg" / "page.html").write_text("<html><title>t</title><p>The default is 3.</p></html>")
    (docs / "pkg" / "manual.pdf").write_bytes(b"%PDF-1.4\n")
    (docs / "pkg" / "ssh.1.txt").write_text("The default is 22.")
    (docs / "pkg" / "tool.exe").write_bytes(b"MZ")
    (tmp_path / "secret.txt").write_text("not for the web")
    server, thread = web.serve_in_thread(docs=docs)
    base = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        with httpx.Client(trust_env=False, timeout=10) as client:
            types = {name: client.get(f"{base}/docs/pkg/{name}").headers["content-type"]
                     for name in ("page.html", "manual.pdf", "ssh.1.txt")}
            assert types == {"page.html": "text/html; charset=utf-8", "manual.pdf": "application/pdf",
                             "ssh.1.txt": "text/plain; charset=utf-8"}
            for path in ("/docs/pkg/tool.exe", "/docs/%2e%2e/secret.txt", "/docs/pkg/%2e%2e/%2e%2e/secret.txt",
                         "/docs/pkg/missing.html"):
                assert client.get(f"{base}{path}").status_code == 404, path
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


# --------------------------------------------------------------------------- against the documents


def figure_forms(value: float) -> list[str]:
    """How a document may write the true figure: 65536, 65,536, five."""
    whole = int(value)
    forms = [str(whole), f"{whole:,}"]
    if whole in NUMBER_WORDS:
        forms.append(NUMBER_WORDS[whole])
    return forms


@pytest.mark.lab
@pytest.mark.slow
@pytest.mark.parametrize("part, paths", [(1, (QUESTIONS,)), (2, (PART2_DEV, PART2_TEST))])
def test_every_case_states_what_its_documents_say(part: int, paths: tuple[Path, ...]) -> None:
    """Each `where` names a document whose text (as the package ships it, whitespace folded) matches the case's
    patterns, and an estimate's matching sentence carries its true figure (or its `verified` says how the figure
    it carries converts to the estimate's unit): the set stays true to the documents."""
    docset = built(PART_PACKAGES[part])
    misses = []
    for case in [case for path in paths for case in load(path)["briefs"]]:
        patterns = [re.compile(p, re.IGNORECASE) for p in case["expect"]["patterns"]]
        for where in case["where"]:
            spans = [m.group(0) for doc in docset.where(where) for p in patterns for m in [p.search(fold(doc.text))]
                     if m is not None]
            number = case["expect"].get("number")
            if not spans:
                misses.append(f"{case['brief']['id']}: no document under {where!r} matches its patterns")
            elif number is not None and "converted" not in case["verified"] and \
                    not any(re.search(rf"\b{re.escape(form)}\b", span)
                            for span in spans for form in figure_forms(number["value"])):
                misses.append(f"{case['brief']['id']}: {where!r} matches, but without the figure {number['value']}")
    assert not misses, "\n".join(misses)


@pytest.mark.lab
@pytest.mark.slow
def test_the_slice_runs_through_the_lab_web_and_library(tmp_path: Path) -> None:
    """The CI slice (one package): SearXNG finds each answer document, the lab web serves it, and `briefd eval`
    runs the three briefs on the web and on the library (egress = none) with the scripted model."""
    docset = built(SLICE_PACKAGES, tmp_path / "docs")
    assert {doc.package for doc in docset.documents} == set(SLICE_PACKAGES)
    cases = load(SLICE)["briefs"]
    with start_docset_lab(tmp_path / "lab", docset) as lab:
        with httpx.Client(trust_env=False, timeout=30) as client:
            for case in cases:
                found = client.get(f"{lab.searxng_url}/search",
                                   params={"q": case["brief"]["question"], "format": "json"}).json()["results"]
                urls = [result["url"] for result in found]
                assert any(w in url for url in urls for w in case["where"]), (case["brief"]["id"], urls[:5])
                page = client.get(docset.url(lab.web_port, docset.where(case["where"][0])[0].path))
                assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
        runs = run_driver(tmp_path / "bench", "scripted", ("web", "library"), docset, lab, SLICE, None)
    for run in runs:
        assert run.result is not None, f"{run.source}: {run.error}"
        totals = run.result["totals"]
        assert totals["cases"] == totals["ran"] == len(cases), (run.source, totals)
        assert totals["invented_citations"] == 0 and totals["quotes_verbatim"] == totals["quotes"], totals
        assert all(case["reached"].get("search") for case in run.result["cases"]), run.result["cases"]
