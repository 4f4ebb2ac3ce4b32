"""The second plan's prompt (planning.Planning.plan, planner.replan_prompt): what a small model is shown.

What a user would notice: when the first plan's queries miss the question, the model is asked again for
queries for the question, and is not shown the queries that missed (a small model echoes what it is
shown: Gemma 3 270M answered one of them back, 'what must be found out to answer it'), nor pays for them."""

from __future__ import annotations

import asyncio
import json
from types import SimpleNamespace
from typing import Any

from briefd.daemon.core.brief import parse_brief
from briefd.daemon.research import planner
from briefd.daemon.research.planning import Planning
from briefd.daemon.rules.decide import Limits, LoopState

QUESTION = "Why was the Kestrel River bridge closed in 2025?"
# Gemma 3 270M's first plan for this lab brief (bench-real), its queries an echo of the plan prompt
ECHOED = ["what must be found out to answer it", "what should I do next", "what are the gaps in this article"]


def test_the_second_plan_is_not_shown_the_queries_that_missed() -> None:
    prompts: list[str] = []

    async def ask(purpose: str, user: str, schema: dict[str, Any], coerce: Any, fallback: Any,
                  retry_cut: bool = True) -> Any:
        prompts.append(user)
        if len(prompts) == 1:
            return planner.Plan(research_question="What is an article?", angles=[], queries=ECHOED, gaps=[])
        return ["kestrel river bridge closure 2025 reason"]

    state = LoopState()
    brief = parse_brief(json.dumps({"question": QUESTION, "depth": "quick"}).encode(), "kestrel.json")
    run = SimpleNamespace(store=None, run_id=1, state=state, brief=brief, emit=lambda *a, **k: None,
                          checkpoint=lambda: None, readings=lambda: [], update_estimate=lambda _r: None)
    planning = Planning(run, limits=Limits(max_rounds=2, max_searches_per_round=3, pages_per_round=4),
                        previous=None, ask=ask)
    asyncio.run(planning.plan())
    assert len(prompts) == 2, "the off-topic plan is asked again"
    assert QUESTION in prompts[1]
    for missed in ECHOED:
        assert missed not in prompts[1]
    assert "kestrel river bridge closure 2025 reason" in state.pending_queries
