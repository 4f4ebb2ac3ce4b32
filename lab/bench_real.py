"""`make bench-real`: what a brief costs with REAL inference (Gemma 3 270M, llama-cpp-python), not a test.

Issue 11 compares briefd with a peer (local-deep-research's quick mode) on the same small model and
machine; this prints briefd's side of that comparison on the lab. The four lab briefs (the ones
`make bench` runs) at depth quick (2 rounds) go through `briefd run --once` twice, each mode in a
fresh store so that no answer or page cached by one mode is free for the other:

- snippet mode (`fetch_pages: false`): the goal is tokens and wall at most the peer's, about
  2,700 tokens and 20 s a brief with Gemma 3 270M on 2 cores (the issue's figures: PEER_*);
- full mode (pages read): the goal is tokens at most 3x the same peer, which reads no pages.

Settings: the demo's for the 270M model on 2 CPU cores (num_ctx 2048, num_predict 384: DEMO_MODEL_ENV,
so each call stays near 30 s); every other setting is briefd's default, the fetch timeout included
(20 s; the lab workspace's 4 s is removed), since a shorter one would hide the wait for slow pages
that the busy share is meant to show. Per brief it prints model calls, prompt and completion tokens,
wall time and the model-busy share (usage.llm_seconds / usage.wall_seconds), then each mode's mean
per brief against the peer, and the model busy from its first generation to the end of the run with the start-up
before it (issue 28's decision; lab/model_busy.py). It takes minutes (real inference); --modes and --briefs bound it.

Both model APIs (issue 31; --apis picks): `ollama`, the lab's Ollama-compatible server with the llama driver, and
`openai`, llama-cpp-python's own OpenAI-compatible server (lab.openai_llama) with the same weights. That server
keeps no request log and no clock: its model-busy line is the usage's (llm_seconds / wall), and its seconds per
generated token are each call's wall (the prompt's seconds in them).

How JSON is asked (issue 32; `structured`: --structured for the ollama runs, --openai-structured for the
others): each choice runs in a fresh store of its own, and after the table comes, per choice and mode, each call kind (plan, re-plan, evidence, synthesis) with
its prompt and generated tokens, the server's seconds reading the prompt and generating (Ollama's
prompt_eval_duration and eval_duration, kept per call in model_calls), milliseconds per generated token, and the
share of answers that parsed; then per choice the wall per brief, seconds per generated token against `none`'s
(unconstrained generation on the same model and server), the parse rate, the quotes kept and the fallbacks.
"""

from __future__ import annotations

import argparse
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from briefd.daemon.core.settings import STRUCTURED
from briefd.store.db import NOT_MODEL_CALLS
from lab.bench import BRIEFS as LAB_BRIEFS
from lab.demo import DEMO_MODEL_ENV, MODEL
from lab.model_busy import Busy, requests_log, run_busy
from lab.servers import LabServerDied, lab_with_model, start_openai_llama
from lab.workspace import BRIEFD, Workspace, keep_or_remove

# the peer, local-deep-research quick mode (2 iterations x 3 questions), same model and machine (issue 11)
PEER_TOKENS_PER_BRIEF = 2_700
PEER_WALL_S_PER_BRIEF = 20.0
LAB_MODEL_NAME = "ollama-llama"  # the lab model server's name: its request log's
# the goals against that peer
GOALS = {"snippet": "tokens <= 1x and wall <= 1x", "full": "tokens <= 3x"}

MODES: dict[str, dict[str, Any]] = {"snippet": {"fetch_pages": False}, "full": {"fetch_pages": True}}
APIS = ("ollama", "openai")
COLUMNS = ["api", "structured", "mode", "brief", "status", "llm_calls", "prompt_tokens", "completion_tokens", "tokens",
           "wall_seconds", "llm_seconds", "busy", "evidence"]


def briefs(mode: str, names: Iterable[str] | None = None) -> dict[str, dict[str, Any]]:
    """The lab briefs (make bench's), at depth quick, in one mode; `names` picks some."""
    chosen = list(names) if names else list(LAB_BRIEFS)
    return {name: {"question": LAB_BRIEFS[name]["question"], "depth": "quick", **MODES[mode]}
            for name in chosen}


def row_from_report(mode: str, brief_id: str, report: Mapping[str, Any], api: str = "ollama",
                    structured: str = "schema") -> dict[str, Any]:
    """One table row from a report.json: its usage figures and the model-busy share."""
    usage = report["usage"]
    wall = float(usage["wall_seconds"] or 0.0)
    llm = float(usage["llm_seconds"] or 0.0)
    return {"api": api, "structured": structured, "mode": mode, "brief": brief_id,
            "fallbacks": int(usage.get("fallback_answers") or 0), "status": report["status"], "llm_calls": usage["llm_calls"],
            "prompt_tokens": usage["prompt_tokens"], "completion_tokens": usage["completion_tokens"],
            "tokens": usage["prompt_tokens"] + usage["completion_tokens"], "wall_seconds": wall,
            "llm_seconds": llm, "busy": llm / wall if wall else 0.0, "evidence": len(report["evidence"])}


def mean_row(mode: str, rows: list[dict[str, Any]], api: str = "ollama", structured: str = "schema") -> dict[str, Any]:
    """A mode's mean per brief, and its tokens and wall as multiples of the peer's."""
    n = len(rows) or 1
    tokens = sum(r["tokens"] for r in rows) / n
    wall = sum(r["wall_seconds"] for r in rows) / n
    llm = sum(r["llm_seconds"] for r in rows) / n
    return {"api": api, "structured": structured, "mode": mode, "brief": f"(mean of {len(rows)})",
            "fallbacks": sum(r.get("fallbacks", 0) for r in rows), "quotes": sum(r["evidence"] for r in rows),
            "status": f"{sum(r['status'] == 'done' for r in rows)}/{len(rows)} done",
            "llm_calls": sum(r["llm_calls"] for r in rows) / n,
            "prompt_tokens": sum(r["prompt_tokens"] for r in rows) / n,
            "completion_tokens": sum(r["completion_tokens"] for r in rows) / n, "tokens": tokens,
            "wall_seconds": wall, "llm_seconds": llm, "busy": llm / wall if wall else 0.0,
            "evidence": sum(r["evidence"] for r in rows) / n,
            "tokens_x_peer": tokens / PEER_TOKENS_PER_BRIEF, "wall_x_peer": wall / PEER_WALL_S_PER_BRIEF}


def _cell(col: str, value: Any) -> str:
    if col == "busy":
        return f"{value:.0%}"
    if isinstance(value, float):
        return f"{value:,.1f}" if col.endswith("seconds") or col in ("llm_calls", "evidence") else f"{value:,.0f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def table(rows: list[dict[str, Any]]) -> str:
    """The rows (row_from_report's, then each mode's mean_row) as a '|' table, then the peer lines."""
    lines = [" | ".join(COLUMNS)]
    lines += [" | ".join(_cell(col, row[col]) for col in COLUMNS) for row in rows]
    for row in rows:
        if "tokens_x_peer" in row:
            goal = GOALS.get(row["mode"])
            lines.append(f"{row['api']} {row['structured']} {row['mode']}: {row['tokens']:,.0f} tokens and {row['wall_seconds']:.0f} s a brief = "
                         f"{row['tokens_x_peer']:.2f}x the peer's tokens ({PEER_TOKENS_PER_BRIEF:,}), "
                         f"{row['wall_x_peer']:.2f}x its wall ({PEER_WALL_S_PER_BRIEF:.0f} s)"
                         + (f"; goal: {goal}" if goal else ""))
    return "\n".join(lines)


USED = ("ok", "repaired", "retried")  # an answer that parsed and was used (model_calls.outcome)
KIND_COLUMNS = ["kind", "calls", "prompt_tokens", "generated", "prompt_s", "generate_s", "ms_per_token", "parsed"]


def call_rows(db: Path) -> list[dict[str, Any]]:
    """Every answered model call in a store (no cache hit, replay, refusal or probe), oldest first, labelled by
    kind: a run's first plan call is its plan and a later one its re-plan (both are purpose "plan"); a
    retry (attempt 2) is its call's kind."""
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        found = con.execute(
            f"""SELECT run_id, purpose, attempt, outcome, prompt_tokens, completion_tokens, prompt_seconds,
                       eval_seconds, seconds FROM model_calls
                WHERE outcome NOT IN {NOT_MODEL_CALLS} AND outcome != 'probe' AND purpose != 'health_probe'
                ORDER BY id""").fetchall()
    finally:
        con.close()
    last_plan: dict[Any, str] = {}  # run → the kind of its latest plan call (plan calls are made one at a time)
    rows = []
    for run_id, purpose, attempt, outcome, prompt, generated, prompt_s, eval_s, seconds in found:
        kind = purpose
        if purpose == "plan":
            if attempt == 1:
                last_plan[run_id] = "re-plan" if run_id in last_plan else "plan"
            kind = last_plan.get(run_id, "plan")
        rows.append({"kind": kind, "outcome": outcome, "prompt_tokens": prompt or 0, "generated": generated or 0,
                     # a server that keeps no clock (llama-cpp-python's): the call's wall is all there is
                     "prompt_s": prompt_s or 0.0, "generate_s": eval_s if eval_s is not None else float(seconds or 0.0)})
    return rows


def kind_table(calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per call kind (in the order met) and in all: calls, tokens, seconds, ms per generated token, parsed share."""
    kinds = list(dict.fromkeys(c["kind"] for c in calls)) + ["all"]
    out = []
    for kind in kinds:
        chosen = [c for c in calls if kind in ("all", c["kind"])]
        generated = sum(c["generated"] for c in chosen)
        generate_s = sum(c["generate_s"] for c in chosen)
        out.append({"kind": kind, "calls": len(chosen), "prompt_tokens": sum(c["prompt_tokens"] for c in chosen),
                    "generated": generated, "prompt_s": sum(c["prompt_s"] for c in chosen), "generate_s": generate_s,
                    "ms_per_token": 1000 * generate_s / generated if generated else 0.0,
                    "parsed": sum(c["outcome"] in USED for c in chosen) / len(chosen) if chosen else 0.0})
    return out


def kinds_text(title: str, table_rows: list[dict[str, Any]]) -> str:
    lines = [title, " | ".join(KIND_COLUMNS)]
    for row in table_rows:
        lines.append(" | ".join(f"{row[col]:.0%}" if col == "parsed" else f"{row[col]:,.1f}" if col.endswith("_s")
                                or col == "ms_per_token" else f"{row[col]:,}" if isinstance(row[col], int)
                                else str(row[col]) for col in KIND_COLUMNS))
    return "\n".join(lines)


def choices_text(results: list[tuple[dict[str, Any], dict[str, Any]]]) -> str:
    """Per api, mode and way of asking for JSON: wall per brief, seconds per generated token and its multiple of
    `none`'s on the same server (unconstrained generation), parse rate, quotes kept, fallbacks."""
    lines = ["api | mode | structured | wall_s_per_brief | s_per_generated_token | x_unconstrained | parsed | "
             "quotes_kept | fallbacks"]
    free = {(m["api"], m["mode"]): k["ms_per_token"] for m, k in results if m["structured"] == "none"}
    for mean, total in results:
        base = free.get((mean["api"], mean["mode"]))
        times = f"{total['ms_per_token'] / base:.2f}x" if base else "(none not run)"
        lines.append(f"{mean['api']} | {mean['mode']} | {mean['structured']} | {mean['wall_seconds']:.1f} | "
                     f"{total['ms_per_token'] / 1000:.3f} | {times} | {total['parsed']:.0%} | {mean['quotes']} | "
                     f"{mean['fallbacks']}")
    return "\n".join(lines)


def run_mode(ws: Workspace, mode: str, names: Iterable[str] | None, log: Path | None,
             api_env: Mapping[str, str] | None = None, api: str = "ollama",
             structured: str = "schema") -> tuple[list[dict[str, Any]], Busy | None]:
    """Drop one mode's briefs in the workspace's inbox, run `briefd run --once`, read the reports; and how busy the
    model was (model_busy: from its first generation, the lab server's request `log`; None without one)."""
    chosen = briefs(mode, names)
    for brief_id, brief in chosen.items():
        ws.drop(f"{brief_id}.json", brief)
    env = ws.env(**DEMO_MODEL_ENV, **(api_env or {}))
    env.pop("BRIEFD_FETCH_TIMEOUT_S", None)  # briefd's default (20 s), as a user gets it
    with open(ws.root / f"{mode}.log", "w") as err:
        spawned = time.time()
        subprocess.run([BRIEFD, "run", "--once"], env=env, cwd=ws.root, check=True, stderr=err)
        exited = time.time()
    rows = [row_from_report(mode, brief_id, ws.report(brief_id), api, structured) for brief_id in chosen]
    return rows, run_busy(log, spawned, exited) if log is not None else None


def busy_line(mode: str, busy: Busy) -> str:
    """Issue 28's decision: model busy from the first generation to the end of the run, the start-up beside it."""
    return (f"{mode}: model busy {busy.share:.0%} of the run --once from its first generation to its exit "
            f"({busy.after_first_s:.1f} s), start-up before it {busy.startup_s:.1f} s; {busy.whole_share:.0%} of the "
            f"whole {busy.whole_s:.1f} s")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--modes", nargs="+", choices=list(MODES), default=list(MODES))
    parser.add_argument("--briefs", nargs="+", choices=list(LAB_BRIEFS), default=None)
    parser.add_argument("--keep", action="store_true", help="keep the work folder (stores, logs, reports)")
    parser.add_argument("--apis", nargs="+", choices=APIS, default=list(APIS))
    parser.add_argument("--structured", nargs="+", choices=STRUCTURED, default=list(STRUCTURED),
                        help="how the ollama runs ask for JSON: each choice in a store of its own (default: all)")
    parser.add_argument("--openai-structured", nargs="+", choices=STRUCTURED, default=["schema", "none"],
                        help="how the openai runs ask for JSON, each in a store of its own (default: schema, none)")
    args = parser.parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="briefd-bench-real-"))
    print(f"briefd bench-real: {MODEL} (llama-cpp-python) on this machine, num_ctx "
          f"{DEMO_MODEL_ENV['BRIEFD_NUM_CTX']}, num_predict {DEMO_MODEL_ENV['BRIEFD_NUM_PREDICT']} "
          f"(the demo's settings for 2 cores), other settings default; work folder {root}", flush=True)
    rows: list[dict[str, Any]] = []
    busy_lines: list[str] = []
    kinds: list[str] = []
    results: list[tuple[dict[str, Any], dict[str, Any]]] = []
    try:
        with lab_with_model(root, "llama", name=LAB_MODEL_NAME) as (lab, url):
            for api in args.apis:
                server, base = None, ""
                if api == "openai":
                    server, base = start_openai_llama(root)
                try:
                    for structured in (args.structured if api == "ollama" else args.openai_structured):
                        api_env = {"BRIEFD_STRUCTURED": structured}
                        if server is not None:
                            api_env.update(BRIEFD_MODEL_API="openai", BRIEFD_OPENAI_BASE_URL=base)
                        for mode in args.modes:
                            started = time.monotonic()
                            ws = Workspace(root=root / api / structured / mode, searxng_url=lab.searxng_url,
                                           ollama_url=url, model=MODEL)
                            log = requests_log(root, LAB_MODEL_NAME) if api == "ollama" else None
                            mode_rows, busy = run_mode(ws, mode, args.briefs, log, api_env, api, structured)
                            mean = mean_row(mode, mode_rows, api, structured)
                            rows += mode_rows + [mean]
                            by_kind = kind_table(call_rows(ws.db))
                            results.append((mean, by_kind[-1]))
                            kinds.append(kinds_text(f"{api}, structured = {structured}, {mode} mode: per call kind",
                                                    by_kind))
                            busy_lines.append(f"{api} {structured} " + (
                                busy_line(mode, busy) if busy is not None else
                                f"{mode}: model busy {mean['busy']:.0%} of the briefs' wall (usage)"))
                            print(f"briefd bench-real: {api} structured={structured} {mode} mode done in "
                                  f"{time.monotonic() - started:.0f} s", flush=True)
                            print(table(rows) + "\n" + "\n".join(busy_lines) + "\n\n" + "\n\n".join(kinds)
                                  + "\n\n" + choices_text(results) + "\n", flush=True)
                finally:
                    if server is not None:
                        server.stop()
    except LabServerDied:  # reported on stderr by the lab's watch: which server, its signal, its log's end
        print(f"briefd bench-real: stopped, briefd with it: a lab server died (above); work folder {root} kept",
              file=sys.stderr, flush=True)
        return 1
    keep_or_remove(root, args.keep)
    return 0


if __name__ == "__main__":
    sys.exit(main())
