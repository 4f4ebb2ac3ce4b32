"""`make bench-real` and the queue figures of `make bench` read what they say they read (no timings here:
figures are measured by the benches, never asserted by a test)."""

from __future__ import annotations

import json
from pathlib import Path

from briefd.daemon.core.brief import DEPTH_PRESETS, parse_brief
from briefd.daemon.model.llm import CallRecord
from briefd.store import Store
from lab import bench_real, queue_bench
from lab.bench import BRIEFS as LAB_BRIEFS


def fake_report(status: str = "done", *, calls: int, prompt: int, completion: int, llm: float, wall: float,
                evidence: int) -> dict:
    return {"status": status, "evidence": [{"quote": "q"}] * evidence,
            "usage": {"llm_calls": calls, "prompt_tokens": prompt, "completion_tokens": completion,
                      "llm_seconds": llm, "wall_seconds": wall, "searches": 2, "pages_fetched": 0}}


def test_bench_real_runs_the_lab_briefs_at_depth_quick_in_both_modes() -> None:
    for mode, fetch in (("snippet", False), ("full", True)):
        chosen = bench_real.briefs(mode)
        assert set(chosen) == set(LAB_BRIEFS)
        for name, raw in chosen.items():
            brief = parse_brief(json.dumps(raw).encode(), f"{name}.json")
            assert brief.fetch_pages is fetch
            assert brief.max_rounds == DEPTH_PRESETS["quick"][0] == 2  # the issue compares 2 rounds
            assert brief.question == LAB_BRIEFS[name]["question"]
    assert list(bench_real.briefs("snippet", ["orbital"])) == ["orbital"]


def test_bench_real_table_comes_from_the_report_usage() -> None:
    a = bench_real.row_from_report("snippet", "kestrel", fake_report(calls=6, prompt=2000, completion=700,
                                                                     llm=30.0, wall=40.0, evidence=2))
    assert (a["llm_calls"], a["tokens"], a["busy"], a["evidence"]) == (6, 2700, 0.75, 2)
    b = bench_real.row_from_report("snippet", "orbital", fake_report("failed", calls=4, prompt=1000, completion=300,
                                                                     llm=0.0, wall=0.0, evidence=0))
    assert b["busy"] == 0.0  # a brief that never started counts as idle, not as a division by zero
    mean = bench_real.mean_row("snippet", [a, b])
    assert (mean["tokens"], mean["status"]) == (2000, "1/2 done")
    assert mean["tokens_x_peer"] == 2000 / bench_real.PEER_TOKENS_PER_BRIEF
    text = bench_real.table([a, b, mean])
    lines = text.splitlines()
    assert lines[0].split(" | ") == bench_real.COLUMNS
    assert lines[1].split(" | ") == ["ollama", "schema", "snippet", "kestrel", "done", "6", "2,000", "700", "2,700", "40.0", "30.0",
                                     "75%", "2"]
    assert "(mean of 2) | 1/2 done" in lines[3]
    assert lines[4].startswith("ollama schema snippet: 2,000 tokens and 20 s a brief") and "goal: tokens <= 1x and wall <= 1x" in lines[4]


def test_bench_real_reads_each_call_kind_from_the_store_with_the_servers_clock(tmp_path: Path) -> None:
    store = Store(tmp_path / "briefd.db")
    run = 1  # model_calls keys no run row: one run id is enough here

    def call(purpose: str, outcome: str, generated: int, eval_s: float | None, attempt: int = 1,
             seconds: float = 9.0) -> None:
        store.record_model_call(run, CallRecord(purpose=purpose, model="m", prompt_hash="h", started_at="t",
                                                seconds=seconds, prompt_tokens=100, completion_tokens=generated,
                                                outcome=outcome, answer="", attempt=attempt, prompt_seconds=0.5,
                                                eval_seconds=eval_s))
    call("plan", "ok", 40, 2.0)
    call("plan", "error", 10, 1.0)  # the re-plan's first answer did not parse...
    call("plan", "retried", 10, 1.0, attempt=2)  # ...and its retry did: both are the re-plan's
    call("evidence", "fallback", 100, None, seconds=6.0)  # a server with no clock: its wall is what there is
    call("evidence", "cached", 0, None)  # no model time: not a call here
    call("synthesis", "repaired", 50, 2.5)
    store.close()
    kinds = bench_real.kind_table(bench_real.call_rows(tmp_path / "briefd.db"))
    by = {k["kind"]: k for k in kinds}
    assert [k["kind"] for k in kinds] == ["plan", "re-plan", "evidence", "synthesis", "all"]
    assert (by["re-plan"]["calls"], by["re-plan"]["parsed"], by["re-plan"]["generated"]) == (2, 0.5, 20)
    assert by["evidence"]["ms_per_token"] == 60.0 and by["evidence"]["parsed"] == 0.0
    assert by["all"]["calls"] == 5 and by["all"]["generated"] == 210
    assert by["all"]["ms_per_token"] == 1000 * (2.0 + 1.0 + 1.0 + 6.0 + 2.5) / 210
    assert by["all"]["prompt_s"] == 5 * 0.5 and by["all"]["parsed"] == 3 / 5


def test_bench_real_compares_each_choice_with_unconstrained_generation_on_the_same_server() -> None:
    def mean(structured: str) -> dict:
        return {"api": "ollama", "mode": "snippet", "structured": structured, "wall_seconds": 30.0, "quotes": 3,
                "fallbacks": 1}
    text = bench_real.choices_text([(mean("schema"), {"ms_per_token": 45.0, "parsed": 1.0}),
                                    (mean("none"), {"ms_per_token": 30.0, "parsed": 0.5})])
    lines = text.splitlines()
    assert lines[1].split(" | ") == ["ollama", "snippet", "schema", "30.0", "0.045", "1.50x", "100%", "3", "1"]
    assert lines[2].split(" | ")[5] == "1.00x"
    alone = bench_real.choices_text([(mean("schema"), {"ms_per_token": 45.0, "parsed": 1.0})])
    assert "(none not run)" in alone  # no ratio without the unconstrained run to divide by


def test_queue_bench_claims_and_takes_every_brief_from_a_real_store_and_inbox() -> None:
    rows = queue_bench.measure((3,))
    assert [row["queued"] for row in rows] == [3]
    assert all(row[key] > 0 for row in rows for key in ("claim_ms", "accept_ms", "drain_ms"))
