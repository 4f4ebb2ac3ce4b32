"""`briefd eval --vectors` (issue 27): the rules scored on cases of real text, and the case set itself.

What a site that checks the rules on its own sentences meets: a file that cannot be used is refused with
the case, the key and the fix (exit 2); one that can is scored case by case with the rule that decided and in
totals (exit 0, right or wrong). And what the planners rely on: the set is large and varied enough (at least
400 cases from 40 documents of 5 genres), its two halves share no project, and the test half is frozen.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from briefd.daemon.ops import vectors
from briefd.daemon.ops.vectors import FORMAT, TOTAL_KEYS, VectorFileError, parse_vectors
from lab.vectors_bench import VECTORS
from lab.workspace import BRIEFD

DEV, TEST = VECTORS / "dev.json", VECTORS / "test.json"
# The test half is frozen (issue 27): a change is judged on it, never tuned on it. Changing a byte of it
# changes this digest, so a change to the test half shows in review as a change to this line.
TEST_HALF_SHA256 = "cdff9ccea2d772e888885cff4671c31f290c09005410945c7c22aeb8cdfa1a63"
# Issue 28's relevance cases: a quote of another program's document that shares only a question's common words
# ("default", "size", "time") and answers nothing it asks, 40 a half, drawn from the same halves' documents by the
# rules before the relevance gate changed, each labelled by reading it; the test half frozen the same way.
COMMON_DEV, COMMON_TEST = VECTORS / "common-words-dev.json", VECTORS / "common-words-test.json"
COMMON_TEST_SHA256 = "16ea14f14b6cf49a51c871c9823e7b03eabdb49bf1ea8e47ff541a17cf9d1003"


def _load(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


def _case(**over: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"id": "c1", "kind": "estimate", "question": "How long is the default timeout?",
                            "unit": "seconds", "proposed": 30, "quote": "The default timeout is 30 seconds.",
                            "expect": {"kept": True, "value": 30}}
    base.update(over)
    return base


def _file(*cases: dict[str, Any]) -> dict[str, Any]:
    return {"format": FORMAT, "name": "t", "cases": list(cases)}


@pytest.mark.parametrize("data, names", [
    ({"cases": [_case()]}, ["format", FORMAT]),
    (_file(), ["cases"]),
    (_file(_case(kind="guess")), ["c1", "kind", "estimate, contract, relevance"]),
    (_file(_case(proposed="30")), ["c1", "proposed", "finite number"]),
    (_file(_case(expect={"kept": "yes"})), ["c1", "expect.kept"]),
    (_file(_case(expect={"kept": True})), ["c1", "expect.value"]),
    (_file(_case(quote="")), ["c1", "quote"]),
    (_file(_case(), _case()), ["c1", "twice"]),
    (_file(_case(kind="contract", claim="x", contract={"metric": "m", "comparator": "about", "target": 3,
                                                         "unit": "s"}, url="file:///x",
                 expect={"stance": "supports"})), ["c1", "comparator"]),
    (_file(_case(kind="contract", claim="x", contract={"metric": "m", "comparator": "<", "target": 3, "unit": "s"},
                 expect={"stance": "supports"})), ["c1", "url"]),
    (_file(_case(kind="contract", claim="x", contract={"metric": "m", "comparator": "<", "target": 3, "unit": "s"},
                 url="file:///x", expect={"stance": "agrees"})), ["c1", "expect.stance"]),
    (_file(_case(kind="relevance", expect={"bears_on": 1})), ["c1", "expect.bears_on"]),
    (_file(_case(reading={"kind": 3})), ["c1", "reading"]),
])
def test_a_file_that_cannot_be_used_names_the_case_and_the_key(data: dict[str, Any], names: list[str]) -> None:
    with pytest.raises(VectorFileError) as caught:
        parse_vectors(data)
    for name in names:
        assert name in str(caught.value)


def test_extra_keys_are_allowed_and_a_case_without_a_reading_is_a_model_that_said_nothing_more() -> None:
    name, cases = parse_vectors(_file(_case(source={"package": "p", "genre": "man"}, why="because", trap="x")))
    assert name == "t" and cases[0].reading == {} and cases[0].genre == "man"


def test_the_totals_count_traps_kept_and_contracts_decided_the_wrong_way() -> None:
    """totals() on decided cases: what `--json` promises (docs/contract.md: a trap is an estimate case whose
    expect.kept is false; the wrong way is supports against contradicts)."""
    _, cases = parse_vectors(_file(
        _case(id="keep"), _case(id="trap", expect={"kept": False}),
        _case(id="con", kind="contract", claim="x", url="file:///x", expect={"stance": "contradicts"},
              contract={"metric": "timeout", "comparator": "<", "target": 3, "unit": "seconds"}),
        _case(id="rel", kind="relevance", expect={"bears_on": True})))
    outcomes = [vectors.Outcome("keep", "estimate", True, {"kept": True, "value": 30}, "kept"),
                vectors.Outcome("trap", "estimate", False, {"kept": True, "value": 30}, "kept"),
                vectors.Outcome("con", "contract", False, {"stance": "supports"}, "a figure meets the contract"),
                vectors.Outcome("rel", "relevance", True, {"bears_on": True}, "bears on the question")]
    assert vectors.totals(cases, outcomes) == {
        "cases": 4, "right": 2, "should_keep": 1, "kept_right": 1, "traps": 1, "traps_kept": 1, "contracts": 1,
        "contracts_right": 0, "contracts_wrong_way": 1, "relevance": 1, "relevance_right": 1}


def test_briefd_eval_vectors_scores_the_dev_half_as_a_site_runs_it(tmp_path: Path) -> None:
    done = subprocess.run([BRIEFD, "eval", "--vectors", str(DEV), "--json"], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["format"] == 1 and set(result["totals"]) == set(TOTAL_KEYS)
    assert result["totals"]["cases"] == len(_load(DEV)["cases"]) == len(result["cases"])
    assert all(set(case) >= {"id", "kind", "right", "got", "rule"} for case in result["cases"])
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(_file(_case(kind="contract"))), encoding="utf-8")
    refused = subprocess.run([BRIEFD, "eval", "--vectors", str(bad)], capture_output=True, text=True, timeout=60)
    assert refused.returncode == 2 and "c1" in refused.stderr and "'url'" in refused.stderr


def test_the_set_is_large_and_varied_and_its_halves_share_no_project() -> None:
    halves = [_load(DEV)["cases"], _load(TEST)["cases"]]
    everything = halves[0] + halves[1]
    assert len(everything) >= 400
    assert len({c["source"]["document"] for c in everything}) >= 40
    assert len({c["source"]["genre"] for c in everything}) >= 5
    projects = [{c["source"]["package"] for c in half} for half in halves]
    assert not projects[0] & projects[1]
    for half in halves:
        parse_vectors(_file(*half))  # each half is a usable file on its own
        kinds = {c["kind"] for c in half}
        assert kinds == {"estimate", "contract", "relevance"}
        assert any(c["kind"] == "estimate" and not c["expect"]["kept"] for c in half)  # traps in both halves


def test_the_test_half_is_frozen() -> None:
    assert hashlib.sha256(TEST.read_bytes()).hexdigest() == TEST_HALF_SHA256
    assert hashlib.sha256(COMMON_TEST.read_bytes()).hexdigest() == COMMON_TEST_SHA256


def test_the_common_word_cases_keep_to_their_halves_projects() -> None:
    """A common-word case's document is of its half's projects, so no rule written from the dev half has read a
    sentence of the test half's; each file is a usable vector file (the other way, quotes that answer, is the halves'
    estimate cases: each must be kept)."""
    for common, half in ((COMMON_DEV, DEV), (COMMON_TEST, TEST)):
        cases = _load(common)["cases"]
        parse_vectors(_file(*cases))
        assert len(cases) >= 40 and {c["kind"] for c in cases} == {"relevance"}
        assert {c["source"]["package"] for c in cases} <= {c["source"]["package"] for c in _load(half)["cases"]}


def test_every_quote_is_a_span_of_the_text_briefd_reads_from_its_document() -> None:
    """The cases quote real documents as briefd reads them (lab/vectorset.py renders each package's files
    through briefd's own readers): every quote is verbatim there, and a unit of it, as a model would cite."""
    from lab.docset import DocsetUnavailable
    from lab.vectorset import check_file

    try:
        problems = check_file(DEV) + check_file(TEST) + check_file(COMMON_DEV) + check_file(COMMON_TEST)
    except DocsetUnavailable as exc:
        pytest.skip(f"the vectors' documents cannot be had here ({exc}); this runs where `apt-get download` "
                    f"reaches the distribution's packages or ~/.cache/briefd-docset holds them")
    assert not problems
