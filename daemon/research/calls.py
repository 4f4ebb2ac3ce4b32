"""A brief's door to the model, and its running totals: what every call of a run shares.

Each model call of a brief goes through `ModelCalls.ask`: the cancel check before it, the answer
cache (a resumed or repeated run replays what it was answered), the record of every attempt in the
store, the waits an outage imposes (said in the brief's status and events, and once in the daemon's
outage log), and the counts the report's usage shows (fallbacks, poisoned requests, repairs, skipped
retries). `Ledger` reads the run's usage so far from the store and the clock. Both sit below the
loop and are handed the run itself (its state and event log change under them), so the loop keeps
only the story of the brief.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Protocol, TypeVar

from ...store import Store
from ..core import crashpoints
from ..core.outages import OutageLog
from ..model.hosts import ModelHosts
from ..model.llm import KeptFailure, ModelConfig, estimate_tokens, prompt_budget
from ..report.assemble import usage_block
from ..rules import steps
from ..rules.decide import LoopState, Usage
from . import planner
from .pages import LATE_GIVEN_UP
from .run import RunView

T = TypeVar("T")

POISONED_MESSAGE = "the model server fails this request every time while it answers others; its fallback is used"


class Ask(Protocol):
    """The run's model door (calls.ModelCalls.ask), as the parts of a run call it."""

    def __call__(self, purpose: str, user: str, schema: dict[str, Any], coerce: Callable[[Any], T],
                 fallback: Callable[[], T], retry_cut: bool = ...) -> Awaitable[T]: ...


class CallingRun(Protocol):
    """What the model door asks of the brief's run (loop.Research): its state (the door counts fallbacks
    and repairs in it), its event log (hand_over replaces it), and its cancel check (made before every
    call, so a cancelled brief pays for no call after it)."""

    @property
    def state(self) -> LoopState: ...

    def emit(self, kind: str, **fields: Any) -> object: ...

    def check_cancel(self) -> None: ...


def today() -> str:
    """The date the prompts give the model (UTC): what "recent" and "this year" mean to it."""
    return datetime.now(timezone.utc).date().isoformat()


@dataclass
class ModelCalls:
    """The model calls of one run. The run is asked for its state, event log and cancel check as they
    are now (each changes under the door: a test may replace the state, hand_over the event log)."""

    store: Store
    run_id: int
    models: ModelHosts
    model: ModelConfig
    outages: OutageLog
    run: CallingRun
    replay_since: str | None = None  # answers kept before this time are not replayed (briefd eval --fresh)

    def fits(self, prompt: str) -> bool:
        """Does this user prompt, with the system prompt, fit the model's prompt budget?"""
        used = estimate_tokens(planner.system_prompt(prompt)) + estimate_tokens(prompt)
        return used <= prompt_budget(self.model)

    async def ask(self, purpose: str, user: str, schema: dict[str, Any], coerce: Callable[[Any], T],
                  fallback: Callable[[], T], retry_cut: bool = True) -> T:
        """One JSON answer for `purpose`, whatever the model does (llm.call_json): the brief goes on."""
        self.run.check_cancel()
        result = await self.models.call_json(
            purpose=purpose, system=planner.system_prompt(user),
            user=user, schema=schema, coerce=coerce, fallback=fallback,
            cache=_AnswerCache(self.store, self.replay_since),
            record=lambda rec: self.store.record_model_call(self.run_id, rec), on_wait=self.on_wait,
            retry_cut=retry_cut,
        )
        crashpoints.reached("model_answer")
        state = self.run.state
        if result.retry_skipped:
            state.count_skipped(f"{purpose} retry")
        self.store.set_waiting(self.run_id, None)
        self.store.service_back(self.run_id)
        self.outages.came_back("ollama")
        if result.outcome in ("fallback", "poisoned"):
            state.count_fallback(purpose)
        if result.outcome == "poisoned":
            # not an outage: the server answers everything else, so the brief goes on without this answer
            self.run.emit("signal", message=POISONED_MESSAGE, purpose=purpose,
                      reason=result.records[-1].error if result.records else None)
        if result.repairs:
            state.fallbacks["repaired_answers"] = state.fallbacks.get("repaired_answers", 0) + 1
        return result.value

    def on_wait(self, service: str, retry_at: float, reason: str, fix: str | None) -> None:
        """A call waits to try again (retry.call_with_retries): the brief's status and event say why,
        and the daemon's outage log hears it with its fix (SearXNG's engines failing has its own)."""
        when = datetime.fromtimestamp(retry_at, timezone.utc).replace(microsecond=0).isoformat()
        told = f"{reason}; to fix: {fix}" if fix is not None and fix not in reason else reason
        self.store.set_waiting(self.run_id, f"{service}: {told} (retry at {when})")
        self.outages.went_down(service, reason, fix)
        given = {"fix": fix} if fix else {}
        self.run.emit("waiting", service=service, reason=reason, retry_at=when, **given)


@dataclass
class Ledger:
    """What a run has spent so far: tokens (the store's model calls), wall time, pages."""

    store: Store
    run_id: int
    run: RunView  # its state, as it is now (a resumed run loads it; a test may replace it)

    def wall_seconds(self) -> float:
        """Since the run began (resumed runs included: time waiting on the queue counts)."""
        began = self.run.state.began_s
        assert began is not None
        return max(0.0, time.time() - began)

    def tokens_used(self) -> int:
        usage = self.store.model_usage(self.run_id)
        return usage["prompt_tokens"] + usage["completion_tokens"]

    def usage_now(self, tokens: int | None = None) -> Usage:
        """What the stop rule and the budgets read (decide.Usage)."""
        return Usage(tokens=self.tokens_used() if tokens is None else tokens,
                     seconds=self.wall_seconds(), pages=steps.pages_read(self.run.state))

    def usage(self, evidence: list[dict[str, Any]] | None = None) -> dict[str, Any]:
        """report.json's usage; `evidence`: the run's evidence rows when the caller has read them."""
        evidence = self.store.evidence(self.run_id) if evidence is None else evidence
        return usage_block(self.store.model_usage(self.run_id), self.store.search_count(self.run_id), self.run.state,
                           self.wall_seconds(), evidence, LATE_GIVEN_UP)


class _AnswerCache:
    """The store's model_answers table, seen through daemon.llm's AnswerCache protocol."""

    def __init__(self, store: Store, since: str | None = None) -> None:
        self.store, self.since = store, since

    def get(self, key: str) -> str | None:
        return self.store.cached_answer(key, self.since)

    def put(self, key: str, answer: str, prompt_tokens: int | None, completion_tokens: int | None) -> None:
        self.store.cache_answer(key, answer, prompt_tokens, completion_tokens)

    def failure(self, key: str, max_age_s: float) -> KeptFailure | None:
        kept = self.store.cached_failure(key, max_age_s, self.since)
        if kept is None:
            return None
        outcome, error, retry_skipped = kept
        return KeptFailure("poisoned" if outcome == "poisoned" else "fallback", error, retry_skipped)

    def put_failure(self, key: str, failure: KeptFailure) -> None:
        self.store.cache_failure(key, failure.outcome, failure.error, failure.retry_skipped)
