"""The research loop's own rules, one pure function each (issue 20: "Research only sequences").

The loop (daemon/research/loop.py) used to decide these inline, where only the lab could reach
them. Each takes plain data (the loop state, the limits, counts, labels, texts) and returns a
decision, so each has a table test (tests/test_loop_rules.py) and a change of rule is one
function and one table row. Nothing here does I/O or imports the loop; the kind-dependent
rules (when to stop, which queries to aim) stay in research/policy.py, the stop rule in decide.
"""

from __future__ import annotations

from .decide import Limits, LoopState

SNIPPETS_PER_PAGE = 2  # fetch_pages: false reads up to this many snippets for each page a round may read


def pages_read(state: LoopState) -> int:
    """Pages this run has read, however they came (fetched, cached, confirmed unchanged, on this
    machine): what the page budget counts."""
    return state.pages_fetched + state.page_cache_hits + state.pages_not_modified + state.local_reads


def pages_allowed(limits: Limits, read: int) -> int:
    """How many pages a round may choose: its pages per round, cut to what the page budget has left
    after `read` pages (never below 0)."""
    n = limits.pages_per_round
    if limits.budget_pages is not None:
        n = min(n, max(0, limits.budget_pages - read))
    return n


def snippets_allowed(limits: Limits) -> int:
    """How many search snippets a round of a fetch_pages: false brief reads (its best-ranked ones)."""
    return limits.pages_per_round * SNIPPETS_PER_PAGE


# A page's fate after its read failed: what the store remembers of it (mark_bad)
FATE_THIS_BRIEF = "this brief"  # a passing failure: not read again by this brief, tried again by the next
FATE_SLOW = "slow"              # too slow: no brief fetches it for a while, then it is tried again
FATE_BAD = "bad"                # a permanent failure: no brief fetches it again


def page_fate(transient: bool, slow: bool) -> str:
    """What becomes of a page whose read failed. Too slow outranks transient (a timeout is both):
    a slow page is remembered for a while, so the next briefs do not wait for it again; another
    passing failure (a 503, a reset) is not remembered past this brief; any other is for good."""
    if slow:
        return FATE_SLOW
    return FATE_THIS_BRIEF if transient else FATE_BAD
