"""Which system prompt each model call of a run sends (calls.ModelCalls.ask, planner.system_prompt).

What a user would notice: a plan call, which carries no page's text, is not sent (and does not pay
for) the warning about untrusted page text; an evidence call still is."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

from briefd.daemon.research import planner
from briefd.daemon.research.calls import ModelCalls
from briefd.daemon.rules.decide import Gap, LoopState


@dataclass
class _Answer:
    value: Any
    outcome: str = "ok"
    retry_skipped: bool = False
    repairs: int = 0
    records: list[Any] = field(default_factory=list)


class _Models:
    """A model host that answers every call with the fallback and keeps the system prompts it was sent."""

    def __init__(self) -> None:
        self.systems: dict[str, str] = {}

    async def call_json(self, *, purpose: str, system: str, fallback: Any, **_: Any) -> _Answer:
        self.systems[purpose] = system
        return _Answer(fallback())


class _Store:
    def set_waiting(self, *_: Any) -> None: ...

    def service_back(self, *_: Any) -> None: ...


class _Outages:
    def came_back(self, *_: Any) -> None: ...


def test_a_plan_call_is_sent_no_warning_about_page_text_and_an_evidence_call_is() -> None:
    models = _Models()
    state = LoopState()
    run = SimpleNamespace(state=state, emit=lambda *a, **k: None, check_cancel=lambda: None)
    calls = ModelCalls(store=_Store(), run_id=1, models=models, model=None, outages=_Outages(),  # type: ignore[arg-type]
                       run=run)
    plan = planner.plan_prompt("Did the Lakeside upgrade cut lead below 5 ppb?", "", "2026-11-27")
    passage = planner.PassageIn(id=1, url="http://127.0.0.1/r", title="Lead", origin="snippet",
                                text="Lead fell to 3.9 ppb in 2025.")
    evidence = planner.evidence_prompt("Did lead fall?", "2026-11-27", [Gap("G1", "lead level")], [passage],
                                       lambda _t: True).text

    async def ask() -> None:
        await calls.ask("plan", plan, planner.PLAN_SCHEMA, lambda d: d, lambda: None)
        await calls.ask("evidence", evidence, planner.EVIDENCE_SCHEMA, lambda d: d, lambda: None)
    asyncio.run(ask())
    assert models.systems["plan"] == planner.SYSTEM_JSON
    assert "untrusted" not in models.systems["plan"]
    assert models.systems["evidence"] == planner.SYSTEM_RESEARCHER
