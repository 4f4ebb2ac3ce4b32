"""Claiming and the inbox with a long queue: is the cost per brief constant at 10, 100, 1,000 queued?

Issue 11 asks that claiming and scanning stay constant per brief with 1,000 queued briefs. For each N
this builds a real store (store.briefs.Store, a file in a temporary folder) holding N queued briefs
and as many finished ones (a store that has run for a while), then times, per brief:

- claim: `Store.claim_next()`, the worker's one statement that takes the oldest claimable brief;
- accept: one new brief file dropped in a real inbox folder, noticed by `Inbox.scan()` and taken by
  `Inbox.take_ready()` (parse, the already-recorded check, the insert, the unlink);
- drain: N files dropped in an empty inbox at once, taken the way the worker loop does (scan, then
  take_ready, which takes at most daemon.inbox.TAKE_PER_CALL a call), per brief.

Claim and accept: median of REPEATS, in milliseconds. A figure that grows with N is a scan hiding in a query: `plans()`
gives SQLite's EXPLAIN QUERY PLAN of the statements these paths run (traced as they run, so it is
store/briefs.py's own SQL) and the table names those that read a whole table. `--index` tries a
CREATE INDEX on the scratch stores, to measure a proposed fix before and after.
Run by `make bench` (lab/bench.py), and alone: `python -m lab.queue_bench`.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from briefd.daemon.intake.inbox import Inbox
from briefd.store.briefs import Store

SIZES = (10, 100, 1_000)
REPEATS = 50  # each claim and take commits (an fsync): the median of many steadies a busy disk
QUESTION = "How large was the overrun of the Kestrel bridge, and who paid for it?"


def fill(store: Store, queued: int, finished: int) -> None:
    """`queued` queued briefs and `finished` done ones, each with its own id and (removed) inbox file."""
    brief = {"question": QUESTION}
    for n in range(queued + finished):
        received = json.dumps({**brief, "id": f"b{n}"}).encode()
        run_id = store.add_brief(brief_id=f"b{n}", question=QUESTION, source_file=f"b{n}.json", received=received,
                                 brief_json=received.decode(), inbox_path=f"/inbox/b{n}.json")
        store.mark_inbox_removed(run_id)
        if n < finished:
            store.db.execute("UPDATE briefs SET state = 'done' WHERE run_id = ?", [run_id])


def _ms(seconds: list[float]) -> float:
    return statistics.median(seconds) * 1000


def time_claim(store: Store) -> float:
    """Median ms of claim_next; each claimed brief is put back so that the queue keeps its length."""
    took = []
    for _ in range(REPEATS):
        started = time.perf_counter()
        row = store.claim_next()
        took.append(time.perf_counter() - started)
        assert row is not None
        store.requeue(row.run_id)
    return _ms(took)


def time_accept(store: Store, root: Path) -> float:
    """Median ms to notice and take one new brief file from a real inbox folder."""
    inbox_dir, outbox = root / "inbox", root / "outbox"
    inbox_dir.mkdir(exist_ok=True)
    outbox.mkdir(exist_ok=True)
    inbox = Inbox(folder=inbox_dir, outbox=outbox, store=store, settle_seconds=0.0)
    took = []
    for n in range(REPEATS):
        (inbox_dir / f"new{n}.json").write_text(json.dumps({"question": QUESTION}))
        started = time.perf_counter()
        inbox.scan()
        taken = inbox.take_ready()
        took.append(time.perf_counter() - started)
        assert len(taken) == 1 and not taken[0].rejected, taken
    return _ms(took)


def time_drain(size: int, root: Path) -> float:
    """Ms per brief to take `size` brief files dropped in the inbox at once (scan + take_ready until empty)."""
    inbox_dir, outbox = root / "drain-inbox", root / "drain-outbox"
    inbox_dir.mkdir()
    outbox.mkdir()
    store = Store(root / "drain.db")
    inbox = Inbox(folder=inbox_dir, outbox=outbox, store=store, settle_seconds=0.0)
    for n in range(size):
        (inbox_dir / f"d{n}.json").write_text(json.dumps({"question": QUESTION}))
    started, taken = time.perf_counter(), 0
    while taken < size:
        inbox.scan()
        got = inbox.take_ready()
        assert got, "the inbox stopped taking files"
        taken += len(got)
    took = time.perf_counter() - started
    store.close()
    return took / size * 1000


def traced(store: Store, work: Callable[[], object]) -> list[str]:
    """The SQL statements `work` runs on the store, parameters bound (sqlite3's trace callback)."""
    seen: list[str] = []
    store.db.conn.set_trace_callback(seen.append)
    try:
        work()
    finally:
        store.db.conn.set_trace_callback(None)
    return [sql for sql in seen if sql.split(None, 1)[0].upper() in ("SELECT", "UPDATE", "INSERT", "DELETE")
            and "sqlite_master" not in sql]  # sqlite-utils looking up the schema: not briefd's queries


def plans(store: Store, root: Path) -> dict[str, list[str]]:
    """For one claim and one inbox accept: each statement that reads a whole table (EXPLAIN QUERY PLAN
    says SCAN), with its plan. The statements are traced as run, so this reads store/briefs.py's own SQL."""
    fill(store, queued=2, finished=0)
    inbox_dir = root / "plan-inbox"
    inbox_dir.mkdir()
    inbox = Inbox(folder=inbox_dir, outbox=root / "plan-outbox", store=store, settle_seconds=0.0)
    (inbox_dir / "plan.json").write_text(json.dumps({"question": QUESTION}))
    statements = {"claim_next": traced(store, store.claim_next),
                  "inbox scan+take": traced(store, lambda: (inbox.scan(), inbox.take_ready()))}
    out: dict[str, list[str]] = {}
    for path, sqls in statements.items():
        for sql in sqls:
            steps = [row[3] for row in store.db.execute("EXPLAIN QUERY PLAN " + sql).fetchall()]
            if any(step.startswith("SCAN") for step in steps):
                out[f"{path}: {' '.join(sql.split())[:160]}"] = steps
    return out


def measure(sizes: tuple[int, ...] = SIZES, indexes: tuple[str, ...] = ()) -> list[dict[str, float]]:
    """One row per N: claim, accept and drain ms; `indexes` are CREATE INDEX statements tried on a scratch store."""
    rows = []
    for size in sizes:
        root = Path(tempfile.mkdtemp(prefix="briefd-queue-bench-"))
        try:
            store = Store(root / "briefd.db")
            fill(store, queued=size, finished=size)
            for sql in indexes:
                store.db.execute(sql)
            store.db.execute("ANALYZE")
            rows.append({"queued": size, "finished": size, "claim_ms": time_claim(store),
                         "accept_ms": time_accept(store, root)})
            store.close()
            rows[-1]["drain_ms"] = time_drain(size, root)
        finally:
            shutil.rmtree(root, ignore_errors=True)
    return rows


def print_queue(sizes: tuple[int, ...] = SIZES, indexes: tuple[str, ...] = ()) -> None:
    print("briefd bench: claiming and taking a brief with N queued (real store, real inbox folder; "
          f"median of {REPEATS}, ms)" + (f"; with {'; '.join(indexes)}" if indexes else ""))
    print("queued | finished | claim_next ms | inbox scan+take ms | N dropped at once: ms per brief to take all")
    for row in measure(sizes, indexes):
        print(f"{row['queued']:,} | {row['finished']:,} | {row['claim_ms']:.3f} | {row['accept_ms']:.3f} | "
              f"{row['drain_ms']:.3f}")
    root = Path(tempfile.mkdtemp(prefix="briefd-queue-plan-"))
    try:
        store = Store(root / "briefd.db")
        for sql in indexes:
            store.db.execute(sql)
        scans = plans(store, root)
        store.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print("statements that read a whole table (EXPLAIN QUERY PLAN): " + ("none" if not scans else ""))
    for statement, steps in scans.items():
        print(f"  {statement}\n    plan: {'; '.join(steps)}")
    print()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=list(SIZES), help="queue lengths to measure")
    parser.add_argument("--index", action="append", default=[],
                        help="a CREATE INDEX statement to try on the scratch stores (a proposal, not briefd's schema)")
    args = parser.parse_args(argv)
    print_queue(tuple(args.sizes), tuple(args.index))
    return 0


if __name__ == "__main__":
    sys.exit(main())
