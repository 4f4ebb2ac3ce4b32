"""The run of one brief as its parts see it: small protocols that `loop.Research` implements.

The parts of a run (the model door, the planner, the evidence reader, the sources, the page
scheduler) sit below the loop and import nothing of it, yet each must read the run's state as it is
now: a resumed run loads its state, a test may replace the state or the brief, the event log is
replaced when the brief is handed over. So each part is handed the run itself, typed by the few
things it may ask of it (one protocol per job), never a copy of a value or a bag of callables.

The run's own failures are here too, so a part can let them through (reading.Reader.fetch_safely)
or raise one (an outage of SearXNG) without importing the loop.
"""

from __future__ import annotations

from typing import Any, Generic, Protocol, TypeVar

from ...store import Store
from ..core.brief import Brief, SourceKind
from ..core.errors import BriefdError, ServiceUnavailable
from ..rules.decide import LoopState


class Cancelled(BriefdError):
    """`briefd cancel` was asked for a running brief."""


class Outage(ServiceUnavailable):
    """SearXNG stayed down through the loop's own retries, or refuses us: the brief waits, not fails.

    `fix` is set when it is not "start SearXNG": json format off, limiter on (only the user can
    end those), or SearXNG running while its engines fail (search.EnginesFailing).
    """


class RunView(Protocol):
    """What every part of a run reads of it: where it is kept, its state and brief as they are now,
    and its event log (whichever the brief has now: hand_over replaces it)."""

    store: Store
    run_id: int
    state: LoopState
    brief: Brief

    def emit(self, kind: str, **fields: Any) -> object: ...


class PageRules(Protocol):
    """How the run treats the pages it finds: where it may look, how old a stored page may be and
    still be used unchecked, and what becomes of a page that failed."""

    @property
    def sources(self) -> tuple[SourceKind, ...]: ...

    @property
    def max_age(self) -> float: ...

    @property
    def max_age_given(self) -> float: ...

    def mark_bad(self, url: str, reason: str, transient: bool, slow: bool = False) -> None: ...


class Rounds(Protocol):
    """What a part may ask the run to record: its state checkpointed, the range moved by a round's readings."""

    def checkpoint(self) -> None: ...

    def update_estimate(self, round_no: int) -> None: ...


R = TypeVar("R", bound=RunView)


class RunPart(Generic[R]):
    """A part of the run that reads the run's state, brief and event log through the run itself: each can
    change under it (a resumed run loads its state, a test may replace either, hand_over replaces the
    event log), so it never keeps a copy."""

    run: R

    def __init__(self, run: R) -> None:
        self.run = run

    @property
    def state(self) -> LoopState:
        return self.run.state

    @property
    def brief(self) -> Brief:
        return self.run.brief

    def emit(self, kind: str, **fields: Any) -> object:
        """An event of the brief, in whichever log the run has now."""
        return self.run.emit(kind, **fields)

    @property
    def store(self) -> Store:
        """Where the run is kept (the same for the run's life)."""
        return self.run.store
