"""The store on a real SQLite file: claims, crash recovery, caches, ranking, migrations."""

from __future__ import annotations

import importlib.util
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from briefd.store import SCHEMA_VERSION, Store


def add(store: Store, brief_id: str, name: str | None = None) -> int:
    name = name or f"{brief_id}.json"
    return store.add_brief(brief_id=brief_id, question="q?", source_file=name, received=b"{}",
                           brief_json="{}", inbox_path=f"/inbox/{name}")


def test_pragmas_and_schema_version(tmp_path: Path) -> None:
    store = Store(tmp_path / "b.db")
    conn = store.db.conn
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    assert store.integrity_check() == "ok"
    store.close()
    Store(tmp_path / "b.db").close()  # reopening migrates nothing and keeps data


def test_newer_schema_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "b.db"
    Store(path).close()
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.close()
    with pytest.raises(RuntimeError, match="newer briefd"):
        Store(path)


def test_claim_takes_oldest_and_never_two_runs_of_one_id(tmp_path: Path) -> None:
    store = Store(tmp_path / "b.db")
    a1 = add(store, "a")
    a2 = add(store, "a", "a-again.json")
    b = add(store, "b")
    first = store.claim_next()
    assert first.run_id == a1 and first.attempts == 1 and first.state == "running"
    second = store.claim_next()
    assert second.run_id == b, "a second run of id 'a' waits while the first runs"
    assert store.claim_next() is None
    store.finish(a1, state="done", stop_reason="max_rounds")
    assert store.claim_next().run_id == a2


def test_requeue_running_after_a_crash(tmp_path: Path) -> None:
    store = Store(tmp_path / "b.db")
    run = add(store, "a")
    store.claim_next()
    store.close()
    again = Store(tmp_path / "b.db")
    assert again.requeue_running() == 1
    claimed = again.claim_next()
    assert claimed.run_id == run and claimed.attempts == 2


def test_claims_from_many_processes_never_collide(tmp_path: Path) -> None:
    path = tmp_path / "b.db"
    store = Store(path)
    for i in range(60):
        add(store, f"brief-{i}")
    store.close()
    script = (
        "import sys; from briefd.store import Store\n"
        "s = Store(sys.argv[1]); got = []\n"
        "while (r := s.claim_next()) is not None: got.append(r.run_id)\n"
        "print(' '.join(map(str, got)))\n"
    )
    procs = [subprocess.Popen([sys.executable, "-c", script, str(path)], stdout=subprocess.PIPE, text=True)
             for _ in range(4)]
    claimed = [int(x) for p in procs for x in p.communicate(timeout=60)[0].split()]
    assert all(p.returncode == 0 for p in procs)
    assert sorted(claimed) == list(range(1, 61)), "every brief claimed exactly once"


def test_events_are_numbered_per_run(tmp_path: Path) -> None:
    store = Store(tmp_path / "b.db")
    a, b = add(store, "a"), add(store, "b")
    assert [e["type"] for e in store.events(a)] == ["accepted"], "accepted is committed with the brief"
    assert store.events(b)[0]["seq"] == 1 and store.events(b)[0]["id"] == "b"
    assert store.add_event(a, "round_started", {"round": 1})[0] == 2
    assert store.add_event(b, "round_started", {"round": 1})[0] == 2
    assert [e["type"] for e in store.events(a)] == ["accepted", "round_started"]
    assert store.events(a)[1]["round"] == 1


def test_reset_round_clears_only_that_round_and_later(tmp_path: Path) -> None:
    store = Store(tmp_path / "b.db")
    run = add(store, "a")
    for round_ in (1, 2):
        store.record_query(run, round_, f"q{round_}", [{"url": "http://x"}], from_cache=False)
        store.add_evidence(run, [{"round": round_, "url": "http://x", "quote": f"q{round_}"}])
    store.record_query(run, 2, "q2 from the cache", [{"url": "http://x"}], from_cache=True)
    store.reset_round(run, 2)
    # round 2's search that really went out is kept (usage counts it); the cache hit and evidence go
    assert [(q["round"], q["text"]) for q in store.queries(run)] == [(1, "q1"), (2, "q2")]
    assert [e["round"] for e in store.evidence(run)] == [1]
    # the redone round takes that search from the cache: listed once, still counted as a search
    store.record_query(run, 2, "q2", [{"url": "http://x"}], from_cache=True)
    assert [q["text"] for q in store.queries(run)] == ["q1", "q2"]
    assert store.search_count(run) == 2


def test_rank_passages_by_bm25_with_hostile_query_text(tmp_path: Path) -> None:
    store = Store(tmp_path / "b.db")
    text = "The bridge opened in 1990. Corrosion was found in the cable anchors. Lunch was served."
    store.save_page(url="http://x", final_url="http://x", status=200, content_type="text/html",
                    title="t", text=text, size=len(text), extraction="trafilatura", error=None,
                    passages=[(0, 0, 26, text[0:26], None), (1, 27, 68, text[27:68], None), (2, 69, 87, text[69:87], None)])
    ids = store.passage_ids("http://x", "page")
    ranked = store.rank_passages(ids, 'Why "corrosion" AND anchors? NEAR( -- cable*', limit=5)
    assert ranked[0] == ids[1]
    assert store.rank_passages(ids, "lunch", limit=5, matching_only=True) == [ids[2]]
    assert store.rank_passages(ids, "zebra", limit=5, matching_only=True) == []


def test_model_usage_comes_from_recorded_calls(tmp_path: Path) -> None:
    from briefd.daemon.model.llm import CallRecord

    store = Store(tmp_path / "b.db")
    run = add(store, "a")
    for outcome, pt, ct, structured in (("ok", 100, 20, "schema"), ("retried", 50, 5, "none"),
                                        ("cached", None, None, None), ("repaired", 10, 2, "schema"),
                                        ("fallback", None, None, None), ("fallback", None, None, None),
                                        ("poisoned", None, None, None), ("replayed", 0, 0, None)):
        store.record_model_call(run, CallRecord(
            purpose="plan", model="m", prompt_hash="h", started_at="2026-11-22T00:00:00Z", seconds=1.5,
            prompt_tokens=pt, completion_tokens=ct, outcome=outcome, answer="{}", error=None,
            truncated_prompt=False, truncated_answer=False, attempt=1, structured=structured))
    usage = store.model_usage(run)
    # a request the server refused every time got no answer: not a model call, counted apart; nor is a
    # kept failure replayed (issue 22): no model time
    assert usage == {"llm_calls": 5, "prompt_tokens": 160, "completion_tokens": 27,
                     "llm_cache_hits": 1, "llm_seconds": 7.5, "repaired_answers": 1,
                     "retried_answers": 1, "fallback_answers": 2, "poisoned_answers": 1, "replayed_failures": 1,
                     "structured": {"none": 1, "schema": 2}}  # answered calls by how their JSON was asked


def test_page_cache_respects_age(tmp_path: Path) -> None:
    store = Store(tmp_path / "b.db")
    store.save_page(url="http://x", final_url="http://x/", status=200, content_type="text/html", title="t",
                    text="hello", size=5, extraction="plain", error=None, passages=[(0, 0, 5, "hello", None)])
    assert store.get_page("http://x", 3600).final_url == "http://x/"
    assert store.get_page("http://x", -1) is None


def test_a_version_1_database_is_migrated_forward_keeping_its_rows(tmp_path: Path) -> None:
    from briefd.store import db as store_db

    path = tmp_path / "old.db"
    conn = sqlite3.connect(path)
    legacy = sqlite_utils_db(conn)
    store_db._migration_1(legacy)
    conn.execute("PRAGMA user_version = 1")
    legacy["evidence"].insert({"run_id": None, "round": 1, "url": "http://x", "quote": "kept"})
    conn.commit()
    conn.close()
    store = Store(path)
    assert store.db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    row = store.db.execute("SELECT quote, low, high, tier FROM evidence").fetchone()
    assert row == ("kept", None, None, None)


def sqlite_utils_db(conn: sqlite3.Connection):
    import sqlite_utils

    return sqlite_utils.Database(conn)


def test_drop_evidence_removes_one_pages_rows_of_one_run_and_counts_by_round(tmp_path: Path) -> None:
    store = Store(tmp_path / "b.db")
    run, other = add(store, "a"), add(store, "b")
    for r in (run, other):
        store.add_evidence(r, [{"round": 1, "url": "http://bad", "quote": "x"},
                               {"round": 2, "url": "http://bad", "quote": "y"},
                               {"round": 2, "url": "http://good", "quote": "z"}])
    assert store.drop_evidence(run, "http://bad") == 2
    assert [e["url"] for e in store.evidence(run)] == ["http://good"]
    assert len(store.evidence(other)) == 3, "another brief keeps what it found on that page"
    assert store.evidence_count(run, 2) == 1 and store.evidence_count(run, 1) == 0
    assert store.evidence_count(other) == 3


def test_a_slow_url_is_remembered_until_it_expires_and_forgotten_when_it_answers(tmp_path: Path) -> None:
    from briefd.daemon.research.pages import SLOW_PAGE_MEMORY_S
    store = Store(tmp_path / "b.db")
    slow, gone, other = "http://a/slow", "http://a/404", "http://a/fine"
    store.mark_bad_url(gone, "HTTP 404")
    store.mark_slow_url(slow, "timeout after 20s", SLOW_PAGE_MEMORY_S)
    assert store.bad_urls([slow, gone, other]) == {slow: "timeout after 20s", gone: "HTTP 404"}
    assert store.slow_until(slow) is not None and store.slow_until(gone) is None

    # a day later: the slow page is due for another try, the 404 is still bad for good
    store.db.execute("UPDATE bad_urls SET expires_at = '2000-01-01T00:00:00Z' WHERE url = ?", [slow])
    assert store.bad_urls([slow, gone]) == {gone: "HTTP 404"}
    assert store.bad_url_reason(slow) is None and store.slow_until(slow) is None

    # remembered again, then it answers: forgotten at once; a bad-for-good mark is never softened
    store.mark_slow_url(slow, "timeout after 20s", SLOW_PAGE_MEMORY_S)
    store.mark_slow_url(gone, "timeout after 20s", SLOW_PAGE_MEMORY_S)
    assert set(store.bad_urls([slow, gone])) == {slow, gone}
    store.forget_slow_url(slow)
    store.forget_slow_url(gone)
    assert store.bad_urls([slow, gone]) == {gone: "HTTP 404"}
    store.close()


def test_a_version_7_store_keeps_its_answers_and_keeps_failures_apart_from_them(tmp_path: Path) -> None:
    """Issue 22: model_answers gains kept failures. An answer written by the previous schema is still
    replayed, a kept failure is never taken for an answer, and one older than the replay age is not given."""
    from briefd.store import db as store_db

    path = tmp_path / "v7.db"
    conn = sqlite3.connect(path)
    legacy = sqlite_utils_db(conn)
    for version in range(1, 8):
        store_db.MIGRATIONS[version](legacy)
    conn.execute("PRAGMA user_version = 7")
    legacy["model_answers"].insert({"prompt_hash": "old", "answer": '{"a": 1}', "prompt_tokens": 9,
                                    "completion_tokens": 3, "created_at": "2026-01-01T00:00:00Z"})
    conn.commit()
    conn.close()
    store = Store(path)
    assert store.cached_answer("old") == '{"a": 1}' and store.cached_failure("old", 3600) is None
    store.cache_failure("bad", "poisoned", "HTTP 500: llama runner process has terminated", False)
    assert store.cached_answer("bad") is None, "a kept failure is not an answer"
    assert store.cached_failure("bad", 3600) == ("poisoned", "HTTP 500: llama runner process has terminated", False)
    store.db.execute("UPDATE model_answers SET created_at = '2026-01-01T00:00:00Z' WHERE prompt_hash = 'bad'")
    assert store.cached_failure("bad", 3600) is None, "too old: asked again"
    store.cache_failure("cut", "fallback", "cut off", True)
    store.cache_answer("cut", '{"a": 2}', 5, 5)  # asked again later and answered: the answer replaces it
    assert store.cached_answer("cut") == '{"a": 2}' and store.cached_failure("cut", 3600) is None


@pytest.mark.skipif(importlib.util.find_spec("numpy") is None,
                    reason="numpy is not installed here, so there is nothing for the store to leave unloaded; the "
                           "test venv has it (llama-cpp-python needs it)")
def test_opening_the_store_loads_neither_numpy_nor_pandas_and_leaves_them_importable(tmp_path: Path) -> None:
    """sqlite_utils imports them where installed; a briefd process needs neither (0.13 s of CPU for numpy at each
    start). Hidden only while sqlite_utils loads: anything that imports numpy later gets it."""
    code = ("import sys; from briefd.store import Store; import sqlite_utils.db as db; "
            f"Store({str(tmp_path / 'briefd.db')!r}).close(); "
            "print(sorted({'numpy', 'pandas'} & set(sys.modules)), db.np is None); "
            "import numpy; print(numpy.__name__)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["[]", "True", "numpy"]
