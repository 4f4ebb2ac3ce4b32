"""`briefd list` and `briefd search` on a store that has run for a long time: p50/p95 in milliseconds.

Issue 12 asks that search over 10,000 briefs' evidence answers in p95 < 100 ms on 2 cores. This
fills a real store (store.briefs.Store, a file in a temporary folder) the way the daemon does:
each brief accepted (`add_brief`), claimed, its evidence added (`add_evidence`, ten quotes) and
finished with its report row (`Store.finish(report=history_row(...))`). The text is the lab
corpus's (lab/corpus.py): its sentences, with each brief's own place name and figures put
in, so common words ("bridge", "cost") match tens of thousands of quotes and a place name a few.
Runs are spread over a year (their dates set afterwards: the only write not through the store's
API), one brief in ten is re-run (a series), and some end failed or cancelled.

Then, through store.history (what the CLI and the HTTP API call), it times ~50 searches (one
word, several, place names, words found nowhere) and the list with each filter. The statements
are traced as they run and their EXPLAIN QUERY PLAN printed where one reads a whole table.

Run by `make bench` (`print_history()`), and alone: `python -m lab.history_bench [--briefs N]`.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from briefd.daemon.core.brief import validate_brief
from briefd.daemon.report.report import history_row
from briefd.daemon.ops.ending import kind_of
from briefd.store import CANCELLED, DONE, FAILED
from briefd.store.briefs import Store
from briefd.store.db import iso_utc, utc_now
from briefd.store.history import History, list_query
from lab.corpus import TOPICS, pages_for
from lab.queue_bench import traced

BRIEFS = 10_000
QUOTES_PER_BRIEF = 10
QUERIES = 50
LIST_REPEATS = 10
TARGET_P95_MS = 100.0
_SENTENCE = re.compile(r"(?<=[.!?])\s+")
_SYLLABLES = ("ka", "lor", "ven", "mar", "tis", "bel", "dro", "quin", "sa", "hol", "ric", "ne", "wen", "ost",
              "cal", "fen", "gra", "mol", "pet", "ru", "zan", "dal", "ith", "or")
_TOPIC_NAMES = re.compile(r"\b(" + "|".join(t.key.capitalize() for t in TOPICS.values()) + r")\b")
_NUMBER = re.compile(r"\b\d+(?:\.\d+)?\b")


def record_run(store: Store, brief_id: str, question: str, quotes: list[tuple[str, str, str]], *,
               summary: str = "", state: str = DONE, stop_reason: str = "plateau",
               brief: dict[str, Any] | None = None, report: dict[str, Any] | None = None) -> int:
    """One run as the daemon makes it: accepted, claimed, its evidence (url, title, quote) added,
    finished with its report row in the same transaction as its final event. Returns its run_id."""
    body = {"question": question, "id": brief_id, **(brief or {})}
    received = json.dumps(body).encode()
    run_id = store.add_brief(brief_id=brief_id, question=question, source_file=f"{brief_id}.json",
                             received=received, brief_json=received.decode(), inbox_path=f"/inbox/{brief_id}.json")
    store.mark_inbox_removed(run_id)
    claimed = store.claim_next()
    assert claimed is not None and claimed.run_id == run_id, "record_run needs an otherwise empty queue"
    store.add_evidence(run_id, [{"round": 1, "url": url, "title": title, "quote": quote, "origin": "page",
                                 "stance": "supports", "confidence": 0.8} for url, title, quote in quotes])
    row = store.get_brief(run_id)
    assert row is not None
    full = {"id": brief_id, "status": state, "question": question, "summary": summary, "stop_reason": stop_reason,
            "started_at": row.started_at, "finished_at": utc_now(), **(report or {})}
    store.finish(run_id, state=state, stop_reason=stop_reason,
                 event=("complete" if state == DONE else state, {"report": "report.json"}), report=history_row(full, kind_of(validate_brief(body, f"{brief_id}.json"))))
    return run_id


def corpus_sentences() -> list[tuple[str, str]]:
    """(page title, sentence) for every sentence of the lab's articles."""
    out = []
    for topic in TOPICS:
        for page in pages_for(topic):
            for paragraph in page.paragraphs:
                out += [(page.title, s) for s in _SENTENCE.split(paragraph.removeprefix("## ")) if len(s) > 30]
    return out


def place_name(rng: random.Random) -> str:
    return "".join(rng.choices(_SYLLABLES, k=rng.randint(2, 3))).capitalize()


def _varied(text: str, place: str, rng: random.Random) -> str:
    """Corpus text about another place, with other figures."""
    text = _TOPIC_NAMES.sub(place, text)
    return _NUMBER.sub(lambda m: str(round(float(m.group(0)) * rng.uniform(0.5, 1.5), 1)).removesuffix(".0"), text)


def fill(store: Store, briefs: int, rng: random.Random) -> list[str]:
    """`briefs` briefs with their reports and evidence; returns the place names used."""
    sentences, topics = corpus_sentences(), list(TOPICS.values())
    places: list[str] = []
    store.db.execute("PRAGMA synchronous = OFF")  # a throw-away store: its build need not survive a crash
    for n in range(briefs):
        topic, place = rng.choice(topics), place_name(rng)
        places.append(place)
        picked = rng.sample(sentences, QUOTES_PER_BRIEF)
        quotes = [(f"http://{place.lower()}.example/{topic.key}/{k}.html", _varied(title, place, rng),
                   _varied(sentence, place, rng)) for k, (title, sentence) in enumerate(picked)]
        question = _varied(topic.question, place, rng)
        summary = " ".join(f"{q[2]} [{k + 1}]" for k, q in enumerate(quotes[:4]))
        kind = {"estimate": {"estimate": {"final": {"low": rng.randint(1, 50), "high": rng.randint(51, 99)},
                                          "unit": "million USD"}},
                "hypothesis": {"verdict": {"value": rng.choice(["supported", "contradicted"]),
                                           "evidence_level": "advisory"}}}.get(topic.brief_kind, {})
        state = FAILED if n % 50 == 7 else CANCELLED if n % 50 == 13 else DONE
        for _ in range(2 if n % 10 == 3 else 1):  # a brief asked again: a second run of the same id
            record_run(store, f"{topic.key}-{n}", question, quotes, summary=summary, state=state, report=kind)
    # a year of history: run n accepted about n/briefs of a year ago (the store's API stamps "now")
    start = datetime.now(timezone.utc) - timedelta(days=365)
    total = store.db.execute("SELECT max(run_id) FROM briefs").fetchone()[0]
    for run_id in range(1, total + 1):
        at = start + timedelta(days=365 * run_id / total)
        store.db.execute("UPDATE briefs SET accepted_at = ?, started_at = ?, finished_at = ? WHERE run_id = ?",
                         [iso_utc(at), iso_utc(at), iso_utc(at + timedelta(minutes=20)), run_id])
    store.db.execute("ANALYZE")
    return places


def queries(places: list[str], rng: random.Random, count: int = QUERIES) -> list[str]:
    """What people would type: common words, a few words together, place names, words found nowhere."""
    words = sorted({w.lower() for _, s in corpus_sentences() for w in re.findall(r"[A-Za-z]{4,}", s)})
    out = []
    for n in range(count):
        pick = n % 5
        if pick == 0:
            out.append(rng.choice(words))
        elif pick in (1, 2):
            out.append(" ".join(rng.sample(words, rng.randint(2, 4))))
        elif pick == 3:
            out.append(f"{rng.choice(places)} {rng.choice(words)}")
        else:
            out.append(rng.choice(["bridge corrosion", "lead levels", "budget overrun tunnel", "written in",
                                   "zyzzyva quokka", "cost", "the", "the bridge", "river", "of the"]))
    return out


def _timed(work: Callable[[], object]) -> tuple[float, float]:
    """Wall and CPU milliseconds of `work`. The CPU time is what the call costs on an idle machine
    (one thread: SQLite's work); the wall time also holds the waits of a busy one."""
    wall, cpu = time.perf_counter(), time.process_time()
    work()
    return (time.perf_counter() - wall) * 1000, (time.process_time() - cpu) * 1000


def _p95(values: list[float]) -> float:
    """The nearest-rank 95th percentile: the smallest value at least 95% of the values do not exceed."""
    return sorted(values)[max(0, math.ceil(len(values) * 0.95) - 1)]


def _figures(times: list[tuple[float, float]]) -> dict[str, float]:
    wall, cpu = [t[0] for t in times], [t[1] for t in times]
    return {"p50_ms": statistics.median(wall), "p95_ms": _p95(wall), "max_ms": max(wall),
            "cpu_p50_ms": statistics.median(cpu), "cpu_p95_ms": _p95(cpu), "n": float(len(times))}


def list_variants(store: Store) -> dict[str, Callable[[], object]]:
    """`briefd list` as people would call it: plain, every run, and each filter."""
    history = History(store)
    month_ago = utc_now(-30 * 86400)[:10]
    return {
        "list": lambda: history.briefs(list_query()),
        "list --runs": lambda: history.briefs(list_query(runs=True)),
        "list --state failed": lambda: history.briefs(list_query(state=FAILED)),
        "list --state running (none running)": lambda: history.briefs(list_query(state="running")),
        "list --kind estimate": lambda: history.briefs(list_query(kind="estimate")),
        f"list --since {month_ago}": lambda: history.briefs(list_query(since=month_ago)),
        "list --limit 1000": lambda: history.briefs(list_query(limit=1000)),
    }


def measure(briefs: int = BRIEFS, seed: int = 12) -> dict[str, Any]:
    rng = random.Random(seed)
    with tempfile.TemporaryDirectory(prefix="briefd-history-bench-") as tmp:
        store = Store(Path(tmp) / "briefd.db")
        started = time.perf_counter()
        places = fill(store, briefs, rng)
        built = time.perf_counter() - started
        history = History(store)
        asked = queries(places, rng)
        search_times, found, slowest = [], [], (0.0, "")
        for text in asked:
            search_times.append(_timed(lambda: found.append(len(history.search(text)))))
            slowest = max(slowest, (search_times[-1][1], text))
        variants = list_variants(store)
        list_times = {name: [_timed(work) for _ in range(LIST_REPEATS)] for name, work in variants.items()}
        plans = scans(store, asked[:5], variants)
        counts = store.db.execute("SELECT (SELECT count(*) FROM briefs), (SELECT count(*) FROM evidence)").fetchone()
        store.close()
    return {"briefs": briefs, "runs": counts[0], "quotes": counts[1], "build_s": built,
            "search": _figures(search_times), "found_median": statistics.median(found), "slowest": slowest,
            "list": _figures([t for times in list_times.values() for t in times]),
            "lists": {name: _figures(times) for name, times in list_times.items()}, "plans": plans}


def scans(store: Store, texts: list[str], variants: dict[str, Callable[[], object]]) -> dict[str, list[str]]:
    """Statements of search and list that read a whole (real) table, with their plan."""
    history = History(store)
    statements = {f"search {t!r}": traced(store, lambda t=t: history.search(t)) for t in texts}
    statements.update({name: traced(store, work) for name, work in variants.items()})
    out: dict[str, list[str]] = {}
    for path, sqls in statements.items():
        for sql in sqls:
            steps = [row[3] for row in store.db.execute("EXPLAIN QUERY PLAN " + sql).fetchall()]
            if any(step.startswith("SCAN") and "VIRTUAL TABLE" not in step for step in steps):
                out.setdefault(" ".join(sql.split())[:140], steps)
    return out


def print_history(briefs: int = BRIEFS) -> None:
    print(f"briefd bench: history at {briefs:,} briefs (real store; store.history, as `briefd list`/`search` "
          "call it; ms)")
    got = measure(briefs)
    s = got["search"]
    print(f"store | {got['runs']:,} runs, {got['quotes']:,} evidence quotes, built in {got['build_s']:.0f} s")
    print(f"search, {s['n']:.0f} queries | {_line(s)}, wall max {s['max_ms']:.1f} ms (target p95 < "
          f"{TARGET_P95_MS:.0f} ms; median {got['found_median']:.0f} results of 20; most CPU: "
          f"{got['slowest'][1]!r}, {got['slowest'][0]:.1f} ms)")
    every = got["list"]
    print(f"list, all {every['n']:.0f} calls below | {_line(every)}")
    for name, f in got["lists"].items():
        print(f"{name}, {f['n']:.0f} calls | {_line(f)}")
    print("statements that read a whole table (EXPLAIN QUERY PLAN; `list` reads briefs backwards by run_id and "
          "stops at its limit; a count(*) of an FTS index's docsize is bm25's row count, 1 ms at 110,000): "
          + ("none" if not got["plans"] else ""))
    for statement, steps in got["plans"].items():
        print(f"  {statement}\n    plan: {'; '.join(steps)}")
    print()


def _line(f: dict[str, float]) -> str:
    return (f"wall p50 {f['p50_ms']:.1f} ms, p95 {f['p95_ms']:.1f} ms; CPU p50 {f['cpu_p50_ms']:.1f} ms, "
            f"p95 {f['cpu_p95_ms']:.1f} ms")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--briefs", type=int, default=BRIEFS)
    args = parser.parse_args(argv)
    print_history(args.briefs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
