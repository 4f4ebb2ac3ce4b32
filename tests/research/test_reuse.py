"""Issue 12, part 2: a brief looks in the store first, and a brief asked again pays for nothing twice.

On the lab (real SearXNG, real pages, the scripted model): the kestrel brief runs on an empty
store; then, in one `run --once`, the same brief under a new id, a brief whose question overlaps
it (which anchorages corroded, who repaired them) and the northgate brief, about something else.
The overlapping brief runs once more on an empty store of its own, to compare what it fetches.
The pure rules underneath (store_hits, bm25_order, replayed_round, rank_batches) are tested here
with plain cases.
"""

from __future__ import annotations

import pytest

from briefd.daemon.rules import decide
from briefd.daemon.research.pages import PAGES_PER_BATCH, first_to_read, rank_batches
from briefd.daemon.sources.sources import STORE, STORE_MIN_SHARE, store_hits
from tests.conftest import Workspace, researched
from lab.bench import REPLAYED_TARGET, Run, changed_prompts, load_run, replayed_share
from lab.corpus import TOPICS

KESTREL = {"question": TOPICS["kestrel"].question, "depth": "quick"}
ANCHORS = {"question": "Which anchorages of the Kestrel River bridge were corroded, and who repaired them?",
           "depth": "quick"}
NORTHGATE = {"question": TOPICS["northgate"].question, "depth": "quick"}


@pytest.fixture(scope="module")
def reused(tmp_path_factory, search_lab, scripted_ollama) -> Workspace:
    ws = researched(tmp_path_factory.mktemp("reuse"), search_lab, scripted_ollama, {"kestrel": KESTREL})
    for brief_id, brief in {"kestrel-again": KESTREL, "anchors": ANCHORS, "northgate": NORTHGATE}.items():
        ws.drop(f"{brief_id}.json", brief)
    result = ws.briefd("run", "--once", timeout=600)
    assert result.returncode == 0, result.stderr[-4000:]
    return ws


@pytest.fixture(scope="module")
def fresh(tmp_path_factory, search_lab, scripted_ollama) -> Workspace:
    """The overlapping brief alone, on an empty store: what it costs with nothing to reuse."""
    return researched(tmp_path_factory.mktemp("fresh"), search_lab, scripted_ollama, {"anchors": ANCHORS})


def offered_by_store(ws: Workspace, brief_id: str) -> list[str]:
    return [url for e in ws.events(brief_id) if e["type"] == "search_result" for url in e.get("from_store", [])]


def test_a_brief_asked_again_under_a_new_id_fetches_no_page_and_replays_its_model_calls(reused: Workspace) -> None:
    first, again = reused.report("kestrel")["usage"], reused.report("kestrel-again")["usage"]
    changed = changed_prompts(load_run(reused.db, "kestrel"), load_run(reused.db, "kestrel-again"))
    assert again["pages_fetched"] == 0, "every page it reads was read by the first run: from the store"
    # the issue asks for REPLAYED_TARGET; replaying the earlier run's rounds gives every answer back
    assert replayed_share(again) == 1.0 >= REPLAYED_TARGET and not changed, (again, changed)
    assert again["llm_cache_hits"] == first["llm_calls"] and again["llm_calls"] == 0, "the same questions, none paid"


def test_a_brief_that_overlaps_an_earlier_one_reads_its_pages_from_the_store(
        reused: Workspace, fresh: Workspace) -> None:
    reusing, alone = reused.report("anchors")["usage"], fresh.report("anchors")["usage"]
    assert reusing["pages_reused"] > 0 and offered_by_store(reused, "anchors")
    assert reusing["pages_reused"] <= reusing["page_cache_hits"], "a page reused is a page read from the store"
    assert reusing["pages_fetched"] < alone["pages_fetched"], (reusing, alone)
    read = {e["url"] for e in reused.events("anchors") if e["type"] == "page_fetched" and e.get("from_cache")}
    assert read & set(offered_by_store(reused, "anchors")), "what the store offered was read without a fetch"


def test_a_first_brief_and_a_brief_on_another_topic_are_offered_nothing_from_the_store(
        reused: Workspace, fresh: Workspace) -> None:
    assert not offered_by_store(reused, "kestrel"), "an empty store offers nothing"
    assert not offered_by_store(fresh, "anchors")
    assert not offered_by_store(reused, "northgate"), "the kestrel pages are off the northgate question"
    assert reused.report("northgate")["usage"]["pages_reused"] == 0
    stores = [e["sources"][STORE] for e in reused.events("kestrel") if e["type"] == "search_result"]
    assert stores and set(stores) == {0}, "events say where hits came from: none from the store"


# ---- the rules, case by case -------------------------------------------------------------------

class Stored:
    def __init__(self, url: str, text: str) -> None:
        self.url, self.text = url, text


def test_the_store_offers_a_page_read_before_only_when_it_is_on_the_query_topic() -> None:
    query = "kestrel bridge anchorage corrosion"  # four content words: half of them is the floor
    found = [Stored("http://a/on", "The Kestrel bridge anchorage showed corrosion."),
             Stored("http://a/half", "The Kestrel bridge reopened."),
             Stored("http://a/off", "The tunnel under the bridge was dug in 2025.")]
    hits = store_hits(query, found, lambda url: {"http://a/on": "On topic"}.get(url, ""))
    assert [h.url for h in hits] == ["http://a/on", "http://a/half"]
    assert STORE_MIN_SHARE == 0.5 and all(h.source == STORE for h in hits) and hits[0].title == "On topic"
    assert store_hits("the of and", found, {}.__getitem__) == [], "a query without content words offers nothing"


def test_passages_rank_among_themselves_so_the_same_passages_always_make_the_same_order() -> None:
    texts = ["The weather was fine.", "Anchorage corrosion closed the bridge.", "The bridge is old."]
    assert decide.bm25_order(texts, "why was the bridge closed: corrosion") == [1, 2, 0]
    assert decide.bm25_order(texts, "the of") == [0, 1, 2], "no content word: the given order"


def test_a_round_the_same_as_the_earlier_runs_takes_its_pages_and_its_late_ones() -> None:
    past = [{"round": 1, "queries": ["q"], "urls": ["a", "b", "c", "s"], "late": ["b", "s"], "carried": ["s"],
             "read": [1, 0]}]
    found = ["c", "x", "b", "a"]  # this round's results: the store, grown since, ranks others first

    def replay(round_no: int = 1, queries: tuple[str, ...] = ("q",), visited: tuple[str, ...] = (),
               n: int = 3) -> tuple[list[str], list[str], list[int]] | None:
        return decide.replayed_round(past, round_no, queries, visited, found, n)

    assert replay() == (["a", "b", "c"], ["b", "s"], [1, 0])
    assert replay(queries=("other",)) is None, "other queries: another round"
    assert replay(round_no=2) is None
    assert replay(visited=("a",)) is None, "the runs went apart"
    assert replay(n=4) is None, "another depth or page budget: another brief"
    assert decide.replayed_round(past, 1, ["q"], [], ["a", "b"], 3) is None, "a page no longer found"


def test_batches_are_read_in_the_order_the_earlier_run_read_them_else_by_rank() -> None:
    assert first_to_read([0, 2], order=[2, 1, 0]) == 2
    assert first_to_read([0, 2], order=[]) == 0
    assert first_to_read([3, 1], order=[0]) == 1, "batches the earlier run did not read: by rank"


def test_stragglers_are_read_in_batches_of_their_own() -> None:
    fresh = [f"f{i}" for i in range(PAGES_PER_BATCH + 1)]
    assert rank_batches([*fresh, "s1"], ["s1"]) == [fresh[:PAGES_PER_BATCH], fresh[PAGES_PER_BATCH:], ["s1"]]


def test_the_bench_says_which_prompt_changed_and_why() -> None:
    def reading(round_no: int, *urls: str) -> dict:
        return {"type": "signal", "message": "reading", "round": round_no, "urls": list(urls)}

    first = Run("k", [("plan", "p", "ok"), ("evidence", "e1", "ok"), ("evidence", "e2", "ok")],
                [{"type": "page_late", "round": 1, "url": "http://a/slow", "loading_s": 1.2},
                 reading(1, "http://a/one"), reading(2, "http://a/slow", "http://a/two")], evidence=3)
    again = Run("k-again", [("plan", "p", "cached"), ("evidence", "e3", "ok"), ("evidence", "e4", "ok")],
                [reading(1, "http://a/one", "http://a/slow"), reading(2, "http://a/two")], evidence=3)
    assert changed_prompts(first, again) == [
        "k-again: evidence: round 1: pages differ: slow is here, first pass: late (loading 1.2 s) in round 1, "
        "read in round 2",
        "k-again: evidence: round 2: pages differ: slow was with them in the first pass, now: read in round 1"]


def test_the_bench_counts_a_replayed_failure_as_replayed_not_as_a_changed_prompt() -> None:
    """Issue 22: a failure kept by the first pass and given again costs nothing: not a prompt that changed."""
    first = Run("n", [("plan", "p", "ok"), ("synthesis", "s", "fallback")], [], evidence=2)
    again = Run("n-again", [("plan", "p", "cached"), ("synthesis", "s", "replayed")], [], evidence=2)
    assert changed_prompts(first, again) == []
    assert replayed_share({"llm_cache_hits": 1, "replayed_failures": 1, "llm_calls": 0}) == 1.0
