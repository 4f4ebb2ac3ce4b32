"""`briefd eval FILE [--json]`: run an eval set's briefs the way `briefd run --once` does, then judge them.

The briefs run through the daemon itself (worker.serve with once=True, in this process): the same
research loop, services and settings as `briefd run` (Ollama, SearXNG, library, archives, egress), in
a work folder of its own (an inbox, an outbox and, unless `--db` is given as a flag, a fresh store), so
the user's inbox, outbox and history are untouched. A folder is eval's own when eval made it, or found it
empty, and marked it (WORK_MARKER): a `--work` folder holding anything else is refused (EvalWorkError),
because the daemon run inside takes every brief in its inbox and moves every report in its outbox.
`--from-store DB` judges the latest run of each case's id in an existing store without running anything.
The judging is daemon/ops/evaluate.py's.

For scripts and `make bench`: `evaluate_file(settings, path, ...)` returns the result below, and
`table(result)` is what `briefd eval` prints.

`briefd eval --json` prints one object, stable (FORMAT_VERSION):

    {"format": 1, "name": str, "model": str, "store": str, "work": str | null, "exit": int,
     "cases": [{"id", "kind" (plain | estimate | contract),
                "status" (done | failed | cancelled | "not run" | "not judged": a pattern ran past its time bound),
                "run_id", "right", "kept_quote", "answer_line",
                "truth", "range" ([low, high] | null), "truth_in_range", "width_ratio" (final / prior width),
                "verdict", "expected_verdict", "verdict_right",
                "quotes", "quotes_verbatim", "invented_citations" ([n, ...]), "tokens", "wall_seconds",
                "replayed" (model calls answered from the store's cache, not asked),
                "reached" ({stage: bool}), "stage" (the first stage that lost the answer, or null),
                "rule" (the rule that refused it, stage "refused"), "detail" (why, in words)}],
     "totals": {"cases", "ran", "not_run", "not_judged", "right", "kept_quote", "answer_line", "shown", "estimates",
                "truth_in_range", "narrow_wrong" (estimates narrower than a tenth of the prior without the
                truth), "contracts", "verdicts_right", "contracts_kept" (the answer in a kept quote),
                "verdicts_kept_right", "quotes", "quotes_verbatim",
                "invented_citations", "tokens", "wall_seconds", "replayed", "lost_at" ({stage: count})}}

"right" for an estimate: the brief's target reached (inside its band, or no wider than its width) with the
truth inside. A store that holds the briefs' earlier runs (`--db`) replays their model answers: "replayed"
says how many, and `--fresh` asks every call anew (answers stored before the eval began are not replayed).

Stages, in order: search, read, extract, shown, chosen, refused, reported (daemon/ops/evaluate.py says what each
means). Booleans that do not apply to a case's kind are null (`truth_in_range` of a plain brief).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..rules.numbers import number_text, span_text
from ...store import QUEUED, RUNNING, Store, StoreUnavailable, diagnose, utc_now
from ...store.evaluation import last_run_id, rejection, run_trace, runs_by_brief
from .evaluate import (FORMAT_VERSION, NOT_JUDGED, NOT_RUN, STAGES, CaseResult, EvalSet, judge_case, not_run,
                       parse_eval_set, percent, totals)
from ..core.errors import BriefdError
from ..core.files import atomic_write_bytes
from ..core.settings import Settings
from ..core.untrusted import fold
from .worker import serve

STORE_NAME = "briefd.db"
WORK_MARKER = ".briefd-eval"  # in a work folder eval made or found empty: the folder is eval's own, to reuse
SQLITE_HEADER = b"SQLite format 3\x00"  # the first 16 bytes of every SQLite database file


class EvalWorkError(BriefdError, ValueError):
    """A `--work` folder eval must not use (not empty, and not its own): the message names it and the fix."""


@dataclass(frozen=True)
class Where:
    """Where an eval runs: its work folder (inbox, outbox), its store, and whether the folder is removed after."""

    work: Path | None
    db: Path
    remove: bool


def db_from_flag(settings: Settings) -> bool:
    """`--db` given on the command line: eval then records its runs there (a store of the user's choosing);
    a store named by the environment or briefd.toml is the daemon's, and eval leaves its history alone."""
    origin = settings.origins.get("db")
    return origin is not None and origin.kind == "flag"


def place(settings: Settings, work: Path | None, keep: bool) -> Where:
    """The work folder (given, or a new temporary one removed afterwards unless `keep`) and its store."""
    if work is None:
        work = Path(tempfile.mkdtemp(prefix="briefd-eval-"))
        remove = not keep
    else:
        remove = False
    own_work_folder(work)
    return Where(work=work, db=settings.db if db_from_flag(settings) else work / STORE_NAME, remove=remove)


def own_work_folder(work: Path) -> None:
    """Make `work` eval's own, or refuse it (EvalWorkError). The daemon eval runs inside takes every brief in
    work/inbox and archives every report in work/outbox: pointed at a user's briefd folder, it researched the
    user's pending brief as its own and moved the user's report into runs/ (issue 29). So eval uses a folder it
    made, or found empty, and marks it (WORK_MARKER); a marked folder is its own from an earlier eval, reused."""
    if (work / WORK_MARKER).is_file():
        return
    if work.exists() and not work.is_dir():
        raise EvalWorkError(f"--work {work} is a file, not a folder: name a new or empty folder for eval's runs, "
                            f"or leave --work out for a temporary one")
    work.mkdir(parents=True, exist_ok=True)
    if any(work.iterdir()):
        raise EvalWorkError(f"--work {work} is not empty and is not a folder eval made (it has no {WORK_MARKER}): "
                            f"eval would take the briefs in its inbox and move the reports in its outbox as its "
                            f"own; name a new or empty folder, e.g. --work {work / 'eval-runs'}, or leave --work "
                            f"out for a temporary one")
    (work / WORK_MARKER).write_text("This folder is briefd eval's work folder (inbox, outbox, briefd.db): "
                                    "briefd eval --work may run in it again.\n", encoding="utf-8")


def not_a_store(path: Path) -> str | None:
    """Why `path` cannot be a store to judge (`--from-store`), or None. Opening a file as the store creates
    briefd's tables in it: a file that is not an SQLite database (a text file, an empty one) is refused first."""
    try:
        with path.open("rb") as file:
            head = file.read(len(SQLITE_HEADER))
    except IsADirectoryError:
        return "is a folder"
    except FileNotFoundError:
        return "does not exist"
    return None if head == SQLITE_HEADER else "is not a briefd store (not an SQLite database)"


@contextlib.contextmanager
def failures_named(db: Path) -> Iterator[None]:
    """A failure of the store eval reads, as StoreUnavailable naming that store: the command's handler names
    the daemon's store (settings.db) otherwise, and `--from-store notes.txt` was said to be ./briefd.db."""
    try:
        yield
    except StoreUnavailable:
        raise
    except Exception as exc:
        problem = diagnose(exc, db)
        if problem is None:
            raise
        raise StoreUnavailable(db, problem) from exc


def evaluate_file(settings: Settings, path: Path, *, work: Path | None = None, keep: bool = False,
                  from_store: Path | None = None, fresh: bool = False) -> dict[str, Any]:
    """Run (or, with `from_store`, only judge) the eval set at `path`; the `--json` object above.
    Raises evaluate.EvalFileError for a file that cannot be used, and whatever `briefd run` raises
    (Locked, StoreUnavailable) when the store or inbox cannot be had."""
    eval_set = parse_eval_set(Path(path).read_bytes(), str(path))
    if from_store is not None:
        return judged(eval_set, from_store, None, settings.model, exit_code=0, after=0)
    where = place(settings, work, keep)
    if fresh:  # answers the store kept before now are not replayed: every call of these runs is asked
        settings = dataclasses.replace(settings, replay_answers_since=utc_now())
    try:
        with failures_named(where.db):
            code, after = run_briefs(settings, eval_set, where)
        return judged(eval_set, where.db, None if where.remove else where.work, settings.model, code, after)
    finally:
        if where.remove and where.work is not None:
            shutil.rmtree(where.work, ignore_errors=True)


def run_briefs(settings: Settings, eval_set: EvalSet, where: Where) -> tuple[int, int]:
    """Drop every case's brief into the work inbox and run `briefd run --once` over it, in this process.
    Returns the daemon's exit code and the last run id before these runs (later runs are this eval's)."""
    assert where.work is not None
    inbox, outbox = where.work / "inbox", where.work / "outbox"
    inbox.mkdir(parents=True, exist_ok=True)
    store = Store(where.db)
    try:
        after = last_run_id(store)
    finally:
        store.close()
    for case in eval_set.cases:
        atomic_write_bytes(inbox / f"{case.id}.json", json.dumps(case.brief, ensure_ascii=False).encode())
    # the daemon's own settings, but its folders, no on_finish hook (an eval is not a brief the operator
    # waits for), and no HTTP API
    ran = dataclasses.replace(settings, inbox=inbox, outbox=outbox, db=where.db, on_finish=(), serve=False)
    return serve(ran, once=True), after


def judged(eval_set: EvalSet, db: Path, work: Path | None, model: str, exit_code: int, after: int) -> dict[str, Any]:
    """Each case judged from its latest run in `db` after run id `after`; the `--json` object."""
    if not db.exists():
        raise FileNotFoundError(f"no store at {db}")
    with failures_named(db):
        return _judged(eval_set, db, work, model, exit_code, after)


def _judged(eval_set: EvalSet, db: Path, work: Path | None, model: str, exit_code: int, after: int) -> dict[str, Any]:
    store = Store(db)
    try:
        runs = runs_by_brief(store, [c.id for c in eval_set.cases], after)
        results: list[CaseResult] = []
        models: list[str] = []  # the model each run's report names (a store judged later: not the setting's)
        for case in eval_set.cases:
            run_id = runs.get(case.id)
            if run_id is None:
                why = rejection(store, case.id, after)
                results.append(not_run(case, f"rejected: {why}" if why else
                                       "no run in the store (still queued: a service stayed down)"))
            else:
                trace = run_trace(store, run_id)
                models.append(str(trace.report.get("model") or ""))
                unfinished = trace.state in (QUEUED, RUNNING)
                results.append(not_run(case, "still queued: a service stayed down (the log above says which)")
                               if unfinished else judge_case(case, trace))
    finally:
        store.close()
    named = ", ".join(m for m in dict.fromkeys(models) if m)
    return {"format": FORMAT_VERSION, "name": eval_set.name, "model": named or model, "store": str(db),
            "work": str(work) if work else None, "exit": exit_code,
            "cases": [r.as_dict() for r in results], "totals": totals(results)}


# ---- the table --------------------------------------------------------------------------------

def _yes(value: bool | None) -> str:
    return "-" if value is None else ("yes" if value else "no")


def _range_cell(case: dict[str, Any]) -> str:
    if case["kind"] != "estimate":
        return "-"
    if case["range"] is None:
        return f"none (truth {number_text(case['truth'])})"
    low, high = case["range"]
    width = f" {percent(case['width_ratio'])}" if case["width_ratio"] is not None else ""
    mark = "in" if case["truth_in_range"] else "OUT"
    return f"{span_text(low, high)}{width} {mark}"


def _verdict_cell(case: dict[str, Any]) -> str:
    if case["kind"] != "contract":
        return "-"
    wanted = "" if case["verdict_right"] else f" (want {case['expected_verdict']})"
    return f"{case['verdict'] or 'none'}{wanted}"


def _lost_cell(case: dict[str, Any]) -> str:
    if case["status"] in (NOT_RUN, NOT_JUDGED):
        return f"{case['status']}: {case['detail']}"
    if case["stage"] is None:
        return "found"
    return str(case["stage"]) + (f" ({case['rule']})" if case["rule"] else "")


def table(result: dict[str, Any]) -> str:
    """The per-brief table and the totals, as `briefd eval` prints them."""
    headers = ["BRIEF", "KIND", "RIGHT", "KEPT", "LINE", "RANGE (width, truth)", "VERDICT", "VERBATIM",
               "INVENTED", "TOKENS", "REPLAYED", "WALL", "LOST AT"]
    rows = [[fold(c["id"]), c["kind"], _yes(c["right"]), _yes(c["kept_quote"]), _yes(c["answer_line"]), _range_cell(c),
             _verdict_cell(c), f"{c['quotes_verbatim']}/{c['quotes']}", str(len(c["invented_citations"])),
             str(c["tokens"]), str(c.get("replayed", 0)), f"{c['wall_seconds']:.1f}", fold(_lost_cell(c))]
            for c in result["cases"]]
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(line, widths)).rstrip() for line in [headers, *rows]]
    t = result["totals"]
    n = t["cases"]
    lines += ["", f"{result['name']}: {n} briefs, model {result['model']}"
                  + (f", {t['not_run']} not run" if t["not_run"] else "")
                  + (f", {t['not_judged']} not judged" if t.get("not_judged") else ""),
              f"  right {t['right']}/{n}; answer in a kept quote {t['kept_quote']}/{n}; in the answer line or "
              f"summary {t['answer_line']}/{n}; shown to the model {t['shown']}/{n}",
              f"  estimates: truth in the final range {t['truth_in_range']}/{t['estimates']}, narrower than a "
              f"tenth of the prior without it {t['narrow_wrong']}; contracts: verdict right {t['verdicts_right']}/"
              f"{t['contracts']}, right where the answer was kept {t['verdicts_kept_right']}/{t['contracts_kept']}",
              f"  quotes verbatim {t['quotes_verbatim']}/{t['quotes']}; invented citations {t['invented_citations']}; "
              f"tokens {t['tokens']}; wall {t['wall_seconds']:.1f} s",
              *([f"  {t['replayed']} model call(s) replayed from the store's cache, not asked: tokens and wall "
                 f"time are not the model's (briefd eval --fresh asks every call anew)"] if t.get("replayed") else []),
              "  lost at: " + ", ".join(f"{stage} {t['lost_at'][stage]}" for stage in STAGES)]
    # the details quote page text: folded and cleaned, so a page cannot send escape sequences to a terminal
    details = ["  " + fold(f"{c['id']}: {c['stage']}: {c['detail']}") for c in result["cases"] if c["stage"]]
    if details:
        lines += ["", "where each miss happened:", *details]
    if result.get("work"):
        lines += ["", f"work folder kept: {result['work']} (judge it again: briefd eval FILE --from-store "
                      f"{result['store']})"]
    return "\n".join(lines)
