"""The rule vectors' cases by id, for the rules' tables of real sentences.

Each rule's test module names the cases of lab/vectors (other projects' manuals, none of the real-document
set's nor the held-out ones) that its rule must decide, and reads them here, as `briefd eval --vectors`
reads them (daemon/ops/vectors.parse_vectors). The test half is never quoted in a table: it is the frozen
measure (lab/vectors_bench.py).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import cache

import pytest

from briefd.daemon.ops.vectors import Case, decide_case, parse_vectors
from lab.vectors_bench import VECTORS


@cache
def vector_cases(file: str = "dev.json") -> dict[str, Case]:
    """The cases of one vector file (the dev half unless named), by id."""
    _, cases = parse_vectors(json.loads((VECTORS / file).read_text(encoding="utf-8")))
    return {case.id: case for case in cases}


def assert_decided_right(mechanism: str, case_id: str) -> None:
    """The dev case decided as `briefd eval --vectors` decides it (the quote filter, then the figure rule)."""
    case = vector_cases()[case_id]
    outcome = decide_case(case)
    assert outcome.right, f"{mechanism}: {case_id} got {outcome.got} ({outcome.rule}); {case.quote[:200]!r}"


def assert_both_ways(mechanisms: dict[str, list[str]]) -> None:
    """Every mechanism is shown keeping a figure (or deciding a claim, or a quote bearing on a question) and
    refusing one: a rule only tested one way could keep everything or nothing."""
    for mechanism, ids in mechanisms.items():
        cases = [vector_cases()[i] for i in ids]
        positive = [c for c in cases if c.expect_kept or c.expect_bears_on or c.expect_stance in ("supports",)]
        negative = [c for c in cases if c.expect_kept is False or c.expect_bears_on is False
                    or c.expect_stance in ("contradicts", "neutral")]
        assert positive and negative, mechanism


def mechanism_tests(mechanisms: dict[str, list[str]]) -> tuple[Callable[[str, str], None], Callable[[], None]]:
    """A rule's two tests over its table of mechanisms (each case decided right; both ways shown), for its test
    module to name: `test_each_mechanism_reads_real_sentences_right, test_the_tables_have_both_ways = ...`."""
    @pytest.mark.parametrize("mechanism, case_id",
                             [(mechanism, case_id) for mechanism, ids in mechanisms.items() for case_id in ids])
    def each_case(mechanism: str, case_id: str) -> None:
        assert_decided_right(mechanism, case_id)

    def both_ways() -> None:
        assert_both_ways(mechanisms)

    return each_case, both_ways
