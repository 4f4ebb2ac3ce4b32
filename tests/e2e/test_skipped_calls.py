"""Model calls that cannot change the outcome are not made, and usage says how many (issue 11).

An evidence call reads passages and may keep only quotes that bear on the question or an open
gap (decide.bears_on: two of a longer question's terms, not one common word). Full-text search
matches on any word, "the" and "was" included, so a batch can hold only passages none of whose
sentences could be kept: that call is skipped and counted in usage.calls_skipped.
"""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path

from tests.sources.test_sources import _research


def _page(research, url: str, sentences: list[str]) -> list[int]:
    text = " ".join(sentences)
    research.store.save_page(url=url, final_url=url, status=200, content_type="text/html", title="A page",
                             text=text, size=len(text), extraction="plain", error=None,
                             passages=[(0, 0, len(text), text, None)])
    return research.store.passage_ids(url, "page")


def test_a_batch_whose_passages_cannot_give_evidence_is_not_sent_to_the_model(tmp_path: Path) -> None:
    research = _research(tmp_path, ["web"])  # the model server is a closed port: a call would fail loudly
    try:
        ids = _page(research, "http://a.example/x", ["It was the one that is there.", "They were all of it."])
        asyncio.run(research.evidence.read_batch(1, ids, {}, research.state.open_gaps()))
        assert research.state.calls_skipped == {"evidence": 1}
        assert research.store.model_usage(research.run_id)["llm_calls"] == 0
        assert research.ledger.usage()["calls_skipped"] == {"evidence": 1}
    finally:
        research.store.close()


def test_a_batch_with_one_passage_about_the_question_is_read(tmp_path: Path, scripted_ollama) -> None:
    research = _research(tmp_path, ["web"], scripted_ollama.url)
    try:
        ids = _page(research, "http://a.example/y", ["It was the one that is there.",
                                                     "The Kestrel River is 14 metres deep at the bridge."])
        asyncio.run(research.evidence.read_batch(1, ids, {}, research.state.open_gaps()))
        assert research.state.calls_skipped == {}
        assert research.store.model_usage(research.run_id)["llm_calls"] == 1
    finally:
        research.store.close()


def test_a_rounds_snippets_are_read_in_as_few_calls_as_the_prompt_allows(tmp_path: Path, scripted_ollama) -> None:
    """Twelve snippets fit one prompt of a 2,048-token window: one evidence call, not two (8 + 4)."""
    from briefd.daemon.sources.search import SearchHit

    research = _research(tmp_path, ["web"], scripted_ollama.url)
    research.evidence.limits = dataclasses.replace(research.limits, pages_per_round=6)
    hits = [SearchHit(url=f"http://a.example/{i}", title=f"Result {i}", engine="lab", source="web",
                      content=f"The Kestrel River was {i + 10} metres deep at gauge {i} in 2025, the river authority says.")
            for i in range(12)]
    try:
        asyncio.run(research.evidence.read_snippets(1, hits))
        assert research.store.model_usage(research.run_id)["llm_calls"] == 1
    finally:
        research.store.close()
