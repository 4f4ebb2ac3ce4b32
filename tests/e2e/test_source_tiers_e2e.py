"""Issue 21, end to end: a library under a tiered folder, and a contract brief its manual decides alone.

The library holds the PIPE_BUF section of the Linux manual page pipe(7), as Debian ships it (manpages,
copied verbatim: "(On Linux, PIPE_BUF is 4096 bytes.)"), and the brief's claim is "PIPE_BUF on Linux is
larger than 8192 bytes" (PIPE_BUF > 8192 bytes). With the operator's `source_tiers` rule naming the
manuals' folder, code reads 4096 bytes in the manual and the claim is refuted on that one source, and the
rule says so; without the rule the manual is unrated, weighs 0.6, and the same run ends inconclusive, as
every contract of the issue's real-document runs did.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from briefd.daemon.rules.judge import DETERMINISTIC, ONE_SOURCE_TIERS, TIER_CAPS
from lab.workspace import Workspace

pytestmark = pytest.mark.lab

CLOSED_PORT = "http://127.0.0.1:9"  # nothing listens: under egress = none SearXNG must never be tried
PIPE_7 = "\n".join([
    '   PIPE_BUF',
    '       POSIX.1 says that writes of less than PIPE_BUF bytes must be atomic: the output data is '
     'written to the pipe as a contiguous sequence.  Writes of more than PIPE_BUF bytes may be '
     'nonatomic: the kernel may interleave the data with data written by other processes.  POSIX.1 '
     'requires PIPE_BUF to be at least 512 bytes.  (On Linux, PIPE_BUF is 4096 bytes.)  The precise '
     'semantics depend on whether the file descriptor is nonblocking (O_NONBLOCK), whether there are '
     'multiple writers to the pipe, and on n, the number of bytes to be written:',
    '',
    '       O_NONBLOCK disabled, n <= PIPE_BUF',
    '              All n bytes are written atomically; write(2) may block if there is not room for '
     'n bytes to be written immediately',
    '',
    '       O_NONBLOCK enabled, n <= PIPE_BUF',
    '              If there is room to write n bytes to the pipe, then write(2) succeeds '
     'immediately, writing all n bytes; otherwise write(2) fails, with errno set to EAGAIN.',
    '',
    '       O_NONBLOCK disabled, n > PIPE_BUF',
    '              The write is nonatomic: the data given to write(2) may be interleaved with '
     'write(2)s by other process; the write(2) blocks until n bytes have been written.',
    '',
    '       O_NONBLOCK enabled, n > PIPE_BUF',
    '              If the pipe is full, then write(2) fails, with errno set to EAGAIN.  Otherwise, '
     'from 1 to n bytes may be written (i.e., a "partial write" may occur; the caller should check '
     'the return value from write(2) to see how many bytes were actually written), and these bytes '
     'may be interleaved with writes by other processes.',
    '',
])
BRIEF = {"question": "How many bytes is PIPE_BUF on Linux?", "depth": "quick", "sources": ["library"],
         "hypothesis": {"claim": "PIPE_BUF on Linux is larger than 8192 bytes", "metric": "PIPE_BUF",
                        "comparator": ">", "target": 8192, "unit": "bytes"}}


def run_on_library(root: Path, ollama_url: str, tiered: bool) -> tuple[Workspace, Path]:
    """One `briefd run --once` of BRIEF on a library whose manuals folder holds pipe(7)'s section."""
    manuals = root / "library" / "manuals"
    manuals.mkdir(parents=True)
    (manuals / "pipe.7.txt").write_text(PIPE_7 + "\n", encoding="utf-8")
    ws = Workspace(root=root, searxng_url=CLOSED_PORT, ollama_url=ollama_url, model="lab-scripted")
    ws.drop("pipe-buf.json", BRIEF)
    tiers = {"BRIEFD_SOURCE_TIERS": f"{manuals}={ONE_SOURCE_TIERS[0]}"} if tiered else {}
    done = ws.briefd("run", "--once", BRIEFD_LIBRARY=str(root / "library"), BRIEFD_EGRESS="none", timeout=600,
                     **tiers)
    assert done.returncode == 0, done.stderr[-4000:]
    return ws, manuals


@pytest.fixture(scope="module")
def tiered(tmp_path_factory: pytest.TempPathFactory, scripted_ollama) -> tuple[Workspace, Path]:
    return run_on_library(tmp_path_factory.mktemp("tiered"), scripted_ollama.url, tiered=True)


@pytest.fixture(scope="module")
def unrated(tmp_path_factory: pytest.TempPathFactory, scripted_ollama) -> tuple[Workspace, Path]:
    return run_on_library(tmp_path_factory.mktemp("unrated"), scripted_ollama.url, tiered=False)


def test_a_manual_under_a_tiered_folder_decides_a_contract_alone(tiered) -> None:
    ws, manuals = tiered
    report = ws.report("pipe-buf")
    verdict = report["verdict"]
    manual = (manuals / "pipe.7.txt").as_uri()
    deciding = [e for e in report["evidence"] if e["url"] == manual and "PIPE_BUF is 4096 bytes" in e["quote"]]
    assert deciding and all(e["tier"] == ONE_SOURCE_TIERS[0] for e in deciding), report["evidence"]
    assert {e["url"] for e in report["evidence"]} == {manual}, "one source: the manual"
    assert (verdict["value"], verdict["evidence_level"]) == ("refuted", DETERMINISTIC), verdict["rule"]
    assert "one source suffices" in verdict["rule"] and manual in verdict["rule"], verdict["rule"]
    md = (ws.outbox / "pipe-buf" / "report.md").read_text(encoding="utf-8").replace("\\", "")
    assert "one source suffices" in md


def test_the_same_manual_unrated_weighs_too_little_to_decide(unrated) -> None:
    ws, manuals = unrated
    report = ws.report("pipe-buf")
    manual = (manuals / "pipe.7.txt").as_uri()
    assert any(e["url"] == manual and "PIPE_BUF is 4096 bytes" in e["quote"] for e in report["evidence"]), \
        "the deciding sentence is kept in both runs: only the tier differs"
    assert report["verdict"]["value"] == "inconclusive", report["verdict"]["rule"]
    assert report["verdict"]["contradiction"] <= TIER_CAPS["news"]


def test_each_report_says_the_tier_of_its_source_and_whether_a_rule_set_it(tiered, unrated) -> None:
    for (ws, manuals), rated in ((tiered, True), (unrated, False)):
        report = ws.report("pipe-buf")
        source = report["sources"][0]
        weighed = {e["tier"] for e in report["evidence"]}  # one document: one tier, the rule's or the model's label
        assert source["url"] == (manuals / "pipe.7.txt").as_uri() and weighed == {source["tier"]}
        assert source["tier_rule"] == (str(manuals) if rated else None)
        assert (source["tier"] == ONE_SOURCE_TIERS[0]) is rated
        md = (ws.outbox / "pipe-buf" / "report.md").read_text(encoding="utf-8").replace("\\", "")
        why = (f"set by source_tiers: {manuals}" if rated else
               "unrated: no source_tiers rule covers it, so the tier is the model's label")
        assert f"· tier {source['tier']} ({why})" in md
