"""The research loop: the story of one brief, top to bottom.

plan → rounds of (search → pick URLs → fetch while the model reads → evidence →
integrate → checkpoint) → synthesis → report. Decisions are pure functions:
which queries and URLs and the one stop rule are `decide`'s, what depends on the
brief's kind (when it is done, aimed queries, what the synthesis must state, the
estimate / verdict / side-by-side blocks) is its `policy`'s; how many pages and
passages a step takes is `steps`'s; prompts and answer parsing are `planner`'s.
The I/O around those rules lives beside this file, one job each, handed the run
itself, typed by the few things each may ask of it (run.py; they import nothing
of this file): the plan phase (planning.py), the sources (reading.py), page
scheduling (pages.py), reading passages into evidence (evidence.py), the model
door and the run's spending (calls.py). This file only sequences them.

Crash safety: the loop state is checkpointed after the plan and after every
round. A resumed run redoes at most the round it was in; that round's model
calls are replayed from the answer cache, its searches from the search cache and
its pages from the page cache, and rows it had written are cleared first, so
nothing is paid for or counted twice.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

import httpx

from ...store import Store
from ..core import crashpoints
from ..core.brief import Brief
from ..core.events import EventLog, LoggedOnly
from ..core.outages import OutageLog
from ..core.settings import Settings
from ..model.hosts import ModelHosts
from ..model.llm import ModelConfig
from ..model.wire import ChatClient
from ..report.assemble import Judged, run_report
from ..rules import decide, figures, judge, steps
from ..rules.citations import Source, number_sources, renumber
from ..rules.decide import LoopState
from ..sources import egress
from ..sources.fetch import FetchLimits
from ..sources.pagework import PageWorkers
from ..sources.sources import ArchiveShelf, Searcher, chosen, fuse
from ..sources.search import SearchHit
from . import followup, planner
from .calls import Ledger, ModelCalls, today
from .evidence import EvidenceReader
from .pages import SLOW_PAGE_MEMORY_S, PageScheduler
from .planning import Planning
from .policy import (EstimatePolicy, Facts, limits_for, next_step, numbered_sources, policy_for,
                     summary_chars, synthesis_lines)
from .reading import Reader
from .run import Cancelled


RUN_JUST_CLAIMED_S = 2.0  # a run whose started_at is this recent, with no checkpoint, began in this attempt


@dataclass
class Services:
    """The clients and limits a brief's loop uses; built once by the worker."""

    settings: Settings
    store: Store
    http: httpx.AsyncClient
    fetch_client: httpx.AsyncClient
    llm_client: ChatClient
    model: ModelConfig
    fetch_limits: FetchLimits
    fetch_slots: asyncio.Semaphore = field(default_factory=lambda: asyncio.Semaphore(4))
    pages: PageWorkers = field(default_factory=PageWorkers)  # reads pages off the event loop, with a deadline
    library: Searcher | None = None  # the local library's index (daemon.library), when one is configured
    archives: ArchiveShelf | None = None  # the ZIM archives (daemon.archives), when configured
    hosts: ModelHosts | None = None  # several model servers (daemon.hosts); None: `llm_client` alone
    # fetches a finished brief handed over (Research.hand_over): they end while the next brief runs,
    # their page cached or, on their own timeout, remembered as slow (the daemon's end cuts them off)
    trailing: set["asyncio.Task[Any]"] = field(default_factory=set)
    outages: OutageLog = field(default_factory=OutageLog)  # said once per outage in the daemon's log


def seconds_since(iso: str | None) -> float:
    if not iso:
        return 0.0
    then = datetime.fromisoformat(iso.replace("Z", "+00:00"))
    return max(0.0, (datetime.now(timezone.utc) - then).total_seconds())


class Research:
    """One run of one brief. `await Research(...).run()` returns the report dict.

    Its parts (the model door, planning, the evidence reader, the sources, the page scheduler) are each
    handed this run, typed by the few things they may ask of it (run.py's protocols, and each part's
    own: pages.PageRun, reading.ReadingRun, evidence.EvidenceRun, planning.PlanRun, calls.CallingRun),
    so they read its state, brief and event log as they are now and never import the loop."""

    def __init__(self, svc: Services, run_id: int, brief: Brief, started_at: str, events: EventLog) -> None:
        self.svc = svc
        self.store = svc.store
        self.run_id = run_id
        self.brief = brief
        self.started_at = started_at
        self.events = events
        self.limits = limits_for(brief)
        saved = self.store.load_checkpoint(run_id)
        # began_s: now for a run just claimed; for one resumed before its first checkpoint (or from a
        # checkpoint older than began_s) started_at, to the second, is what is known
        self.state = LoopState.from_dict(saved) if saved else LoopState()
        if self.state.began_s is None:
            since = seconds_since(started_at)
            self.state.began_s = time.time() - (since if saved or since > RUN_JUST_CLAIMED_S else 0.0)
        self.policy = policy_for(brief)  # what depends on the brief's kind is decided there
        self.sources = chosen(brief.sources, svc.settings)  # where this brief may look
        # how old a page read earlier may be and still be used unchecked: the brief's, else the setting
        self.max_age_given = brief.max_age if brief.max_age is not None else svc.settings.max_age
        # a run of an id asked before (by hand or on schedule) is asked to see what changed: it
        # checks every stored page it takes (a conditional request: a 304 costs no body), so its
        # "nothing changed" is what the servers said, not what the store assumed (max_age). Its
        # previous done run (id, report.json) is read once: the plan reuse and "what changed" use it
        self.previous = self.store.previous_report(brief.id, run_id)
        self.titles: dict[str, str] = {}  # url → the title a citation must use, where the source decides it
        # the model servers the calls go to: the worker's pool, or the one client (tests build that)
        self.calls = ModelCalls(self.store, run_id, svc.hosts or ModelHosts.single(svc.llm_client, svc.model),
                                svc.model, svc.outages, run=self, replay_since=svc.settings.replay_answers_since)
        self.ledger = Ledger(self.store, run_id, run=self)  # what the run has spent so far
        # every request made for this brief, by host (this task and the tasks it starts): egress.py;
        # kept in the store as it grows, so a run resumed after a crash still lists every host
        self.egress = egress.start(svc.settings.egress, earlier=self.store.load_egress(run_id))
        self.egress.on_change = lambda log: self.store.save_egress(run_id, log.snapshot())
        self.saved: dict[str, Any] = {}  # the state as last checkpointed (a round's start, mid-round)
        # the parts of the run below (each handed this run, typed by what it may ask of it: run.py):
        # reading evidence (evidence.py) and planning (planning.py), the I/O around their rules
        self.evidence = EvidenceReader(self, limits=self.limits, policy=self.policy,
                                       source_tiers=svc.settings.source_tiers, ask=self.calls.ask,
                                       fits=self.calls.fits)
        self.planning = Planning(self, limits=self.limits, previous=self.previous, ask=self.calls.ask)
        # the fetches that outlive the step that started them, and the earlier run of this question's
        # rounds (replayed): pages.py
        self.pages = PageScheduler.after(self, self.store.earlier_checkpoint(brief.question, run_id, brief.id))
        # every source the brief may use, behind one interface (reading.py)
        self.reader = Reader(self)

    def emit(self, kind: str, **fields: Any) -> object:
        """An event of the brief, in whichever log it has now (hand_over replaces it)."""
        return self.events.emit(kind, **fields)

    @property
    def max_age(self) -> float:
        """Seconds a stored page is used without asking its server: max_age_given; for a re-run,
        no page read before this run began (those read by this run are fresh)."""
        if self.previous is None or self.state.began_s is None:
            return self.max_age_given
        return min(self.max_age_given, max(0.0, time.time() - self.state.began_s))

    # ---- the story --------------------------------------------------------------------------

    async def run(self) -> dict[str, Any]:
        try:
            if self.state.phase == "plan":
                earlier = self.planning.earlier_plan()  # a follow-up's, or this brief's last done run's
                if earlier is None:
                    self.pages.ahead = asyncio.create_task(self.pages.search_ahead())
                    await self.planning.plan()
                else:  # no model call to search ahead of
                    self.planning.use_plan(earlier)
            await self.rounds()
            self.pages.drop_early()
            summary, sources = await self.synthesize()  # the stragglers keep loading meanwhile
        except BaseException:
            self.pages.drop_early()
            self.pages.cut_off()
            raise
        self.state.phase = "done"
        self.checkpoint()
        report = run_report(self, summary, sources, None)
        self.hand_over()
        return report

    def hand_over(self) -> None:
        """The stragglers still loading when the brief is done are not cut off: their bytes are on
        the way, so a running daemon lets them end (by the fetch's own time limit) while the next
        brief runs. A page that arrives is cached for the next brief that finds it; one that times
        out is remembered as slow (SLOW_PAGE_MEMORY_S). Their events are logged, not appended: the
        brief's event file ends with its report. (`run --once` cuts them off when its work is done.)"""
        self.events = LoggedOnly(self.store, self.run_id, self.events.brief_id, self.events.path)
        self.pages.hand_over(self.svc.trailing)

    async def rounds(self) -> None:
        while self.state.phase == "rounds":
            resumed = self.state.current_round
            if resumed.get("round") == self.state.round + 1:
                # a crash interrupted this round: redo it with the same queries and pages (less the
                # stragglers it had gone on without), so its prompts are the same and the answers
                # already received are replayed, not paid again
                # (and in the order it read its batches in, so far as that is known)
                await self.round(resumed["round"], resumed["queries"], resumed.get("urls"), resumed.get("late"),
                                 resumed.get("carried"), resumed.get("order") or resumed.get("read"),
                                 resumed.get("expected"))
                continue
            step = next_step(self.policy, self.facts(), self.question)
            self.state.pending_queries = list(step.pending)
            self.state.next_action, self.state.why = step.next_action, step.why
            if step.stop_reason is not None:
                self.state.stop_reason = step.stop_reason
                await self.pages.last_stragglers()
                # the stragglers read just now may have moved the range: the sentence says where the
                # answer was left, so it is made from the facts after them (the reason stays the one
                # that stopped the rounds)
                self.state.stop_explanation = self.policy.explain_stop(self.facts(), step.stop_reason)
                self.state.phase = "synthesis"
                self.checkpoint()
                break
            await self.round(self.state.round + 1, list(step.queries))

    @property
    def question(self) -> str:
        """What the rounds research: the plan's rewrite of the brief's question once there is one (the
        evidence is ranked against it), else the question as asked."""
        return self.state.research_question or self.brief.question

    async def round(self, round_no: int, queries: list[str], urls: list[str] | None = None,
                    late: list[str] | None = None, carried: list[str] | None = None,
                    order: list[int] | None = None, expected: list[str] | None = None) -> None:
        self.check_cancel()
        self.store.reset_round(self.run_id, round_no)
        self.events.emit("round_started", round=round_no, queries=queries,
                         open_gaps=[g.text for g in self.state.open_gaps()])
        hits = await self.search_all(round_no, queries)
        if self.pages.ahead is not None:
            await self.pages.ahead  # its downloads are started once the question's search is back: take them
        self.state.results_per_round = self.state.results_per_round[:round_no - 1] + [len(hits)]
        # library documents and archive articles are read whole even in snippet mode: they are on
        # this machine, so reading them costs no fetch; only web pages are left to their snippets
        readable = self.reader.read_whole(hits, self.brief.fetch_pages)
        if urls is None:
            # fresh pages by rank, then earlier rounds' stragglers (their fetches still run), read
            # in batches of their own: whether a page was late never changes the others' batches
            carried = self.pages.waiting_stragglers()
            candidates = [h.url for h in readable]
            # a replayed round waits for the pages it read then (expected): see fetch_and_read
            fresh, late, order, expected = self.pages.round_pages(round_no, queries, candidates, carried)
            urls = [*fresh, *carried]
        self.state.current_round = {"round": round_no, "queries": queries, "urls": urls, "late": list(late or []),
                                    "carried": list(carried or []), "order": list(order or []),
                                    "expected": list(expected or [])}
        self.checkpoint()
        await self.pages.fetch_and_read(round_no, urls, {h.url: h for h in hits})
        if not self.brief.fetch_pages:
            await self.evidence.read_snippets(round_no, self.reader.snippets_only(hits))
        # this round's rows (reset at its start); a distrusted page may have taken earlier ones away
        new = self.store.evidence_count(self.run_id, round_no)
        self.state.round = round_no
        self.state.past_rounds = [r for r in self.state.past_rounds if r["round"] < round_no] + [
            self.state.current_round]
        self.state.current_round = {}
        self.state.new_evidence_per_round = self.state.new_evidence_per_round[:round_no - 1] + [new]
        if self.brief.estimate:
            self.update_estimate(round_no)
        self.state.next_action, self.state.why = decide.next_action(self.state, None)
        self.events.emit("signal", message=f"round {round_no} done", new_evidence=new,
                         open_gaps=len(self.state.open_gaps()),
                         tokens_so_far=self.ledger.tokens_used())
        self.checkpoint()

    # ---- search -------------------------------------------------------------------------------

    async def search_all(self, round_no: int, queries: list[str]) -> list[SearchHit]:
        """Every query at every source the brief may use, at once, and in the pages earlier briefs
        read (search_store); one list by rank fusion (daemon/sources/sources.py)."""
        answers = await asyncio.gather(*(self.reader.search_one(round_no, q) for q in queries))
        self.state.asked.extend(q for q in queries if q not in self.state.asked)
        return fuse(hits for lists in answers for hits in lists)

    # ---- fetch while the model reads ------------------------------------------------------------

    def choose_pages(self, candidates: list[str]) -> list[str]:
        """The round's pages, by rank. A page known bad (by an earlier brief, Store.bad_urls) keeps its
        place and is not fetched (skip_known_bad): found bad by this run, it would have taken the same
        place, so a round's batches, and so its prompts, are the same whether its pages' failures
        were learned now or before; a brief asked again then sends the prompts its first run sent."""
        return decide.choose_urls(candidates, self.state, {}, self.pages_allowed())

    def pages_allowed(self) -> int:
        return steps.pages_allowed(self.limits, steps.pages_read(self.state))

    def mark_bad(self, url: str, reason: str, transient: bool, slow: bool = False) -> None:
        """Not read again by this brief; by none for good (a permanent failure), or for
        SLOW_PAGE_MEMORY_S when it was too slow (then tried again); other transient failures
        are not remembered past this brief."""
        self.state.bad[url] = reason
        fate = steps.page_fate(transient, slow)
        if fate == steps.FATE_SLOW:
            self.store.mark_slow_url(url, reason, SLOW_PAGE_MEMORY_S)
        elif fate == steps.FATE_BAD:
            self.store.mark_bad_url(url, reason)

    # ---- estimates and verdicts (computed by rules, seeds 1 and 2) ----------------------------

    def _unit(self) -> str:
        return self.brief.estimate.unit if self.brief.estimate else ""

    def readings(self) -> list[judge.Reading]:
        """The figures the evidence so far holds, as the range rule reads them: the range is a pure
        function of them (update_estimate), and a follow-up's plan starts from its parent's."""
        return _readings(self.store.evidence(self.run_id), self.brief.question, self._unit())

    def facts(self, evidence: list[dict[str, Any]] | None = None, tokens: int | None = None) -> Facts:
        """What the policy decides from, read from the store (once; or the evidence rows and token
        count a caller already read) and the state. A hypothesis is judged on its stances, or,
        with a contract, on its quotes alone (policy.HypothesisPolicy.verdict)."""
        rows = self.store.evidence(self.run_id) if evidence is None else evidence
        hypothesis = self.brief.hypothesis
        return Facts(state=self.state, limits=self.limits, usage=self.ledger.usage_now(tokens),
                     readings=_readings(rows, self.brief.question, self._unit()) if self.brief.estimate else (),
                     stances=_stances(rows) if hypothesis and not hypothesis.contract else (),
                     quotes=_quotes(rows) if hypothesis and hypothesis.contract else ())

    def update_estimate(self, round_no: int) -> None:
        """The range after this round: a pure function of all evidence so far (judge.update_range)."""
        assert isinstance(self.policy, EstimatePolicy)
        low, high = self.policy.range_after(self.readings())
        score = self.policy.score((low, high))
        tokens = self.ledger.tokens_used()
        self.state.estimate_history = [h for h in self.state.estimate_history if h["round"] < round_no]
        self.state.estimate_history.append(
            {"round": round_no, "low": low, "high": high, "progress_score": round(score, 4), "tokens": tokens})
        self.events.emit("iteration_update", round=round_no, low=low, high=high,
                         progress_score=round(score, 4),
                         width_reduction_pct=round(judge.width_reduction_pct(self.policy.initial, (low, high)), 2),
                         tokens_so_far=tokens)

    # ---- synthesis ----------------------------------------------------------------------------------

    async def synthesize(self) -> tuple[str, list[Source]]:
        rows = self.store.evidence(self.run_id)
        evidence = decide.strongest_first(rows, [self.question, self.brief.question])
        lines = synthesis_lines(evidence)
        sources = numbered_sources(evidence, last_title=True)
        if len(evidence) <= steps.QUOTES_WORTH_A_SUMMARY - 1:
            # nothing to write from, or one quote that says it better than a summary of it would (issue 28's
            # decision): no call; the report says what was searched, or leads with that quote
            self.state.count_skipped("synthesis")
            summary, cited = renumber(planner.unsummarised(self.brief.question, lines,
                                                           [q["text"] for q in self.store.queries(self.run_id)]),
                                      sources)
            return summary, number_sources(cited, sources)
        chars = summary_chars(len(lines), self.svc.model.num_predict)
        prompt = planner.synthesis_prompt(self.question, today(), lines, self.calls.fits,
                                          extra=self.policy.synthesis_line(self.facts(rows)), chars=chars)
        # a summary cut off at its budget is not asked for again: the schema already holds the
        # summary to what the budget allows, so a model that ran out of it once writes no better
        # in half the room, and the fallback (the strongest quotes, cited) says what was found
        summary = await self.calls.ask("synthesis", prompt, planner.synthesis_schema(chars),
                                 planner.coerce_synthesis([s.n for s in sources], chars),
                                 lambda: planner.template_summary(self.brief.question, lines), retry_cut=False)
        summary, cited = renumber(summary, sources)
        return summary, number_sources(cited, sources)

    def report_so_far(self, stop_reason: str, note: str) -> dict[str, Any]:
        """The report of a run that ends before its synthesis (a cancel, a failure).

        Everything found so far, through the same rules as a finished report: the evidence,
        its sources, the queries, the usage with the model calls really made, and the
        estimate or verdict computed from that evidence. The model is not asked again (a
        cancel must not cost more), so there is no summary: `note` says why, and every source
        that supplied evidence is numbered by first appearance, so no evidence is unsourced.
        Stopped before any search, it asks the requester nothing (nothing was looked for yet).
        Evidence read in a round the stop interrupted moves the range like any other: the
        range is a pure function of all evidence so far (judge.update_range).
        """
        if self.brief.estimate and any(r.round > self.state.round for r in self.readings()):
            self.update_estimate(self.state.round + 1)
        self.state.stop_reason = stop_reason
        # no summary was written, so none is cited: each is listed as used, with its number
        sources = numbered_sources(self.store.evidence(self.run_id), cited=False)
        report = run_report(self, "", sources, note)
        if not report["queries"]:
            report["open_questions"] = []  # nothing was searched: "no usable sources" would not be true
        return report

    def judged(self, rows: list[dict[str, Any]], evidence: list[dict[str, Any]], tokens: int) -> Judged:
        """What this brief's kind computes for its report (assemble.ReportedRun): the verdict, the range and the
        sides, from the evidence `rows` (and their report items) and the tokens spent."""
        facts = self.facts(rows, tokens=tokens)
        verdict = self.policy.verdict_block(facts)
        estimate = self.policy.estimate_block(facts)
        return Judged(verdict=verdict, estimate=estimate, sides=self.policy.sides(evidence, estimate))

    def follows_block(self) -> dict[str, Any] | None:
        """report.json's `follows` (followup.follows_block): the parent run this one started from."""
        parent_run = self.state.follows_run_id
        parent = self.store.report_of(parent_run) if parent_run is not None else None
        if self.brief.follows is None or parent is None:
            return None
        return followup.follows_block(self.brief.follows, parent)

    def check_cancel(self) -> None:
        """Raises Cancelled when `briefd cancel` was asked: checked before each round and each model
        call, so a cancelled brief pays for nothing after the ask."""
        if self.store.cancel_requested(self.run_id):
            raise Cancelled()

    def checkpoint(self) -> None:
        """The state saved (and kept as `saved`): a run resumed after a crash starts from here, so it
        redoes at most the round it was in, its answers, searches and pages replayed from the caches."""
        self.state.remaining = decide.remaining_budgets(self.state, self.limits, self.ledger.usage_now())
        self.saved = self.state.to_dict()
        self.store.save_checkpoint(self.run_id, self.state.round, self.state.phase, self.saved)
        crashpoints.reached("checkpoint")


def _readings(rows: list[dict[str, Any]], asked: str, unit: str) -> list[judge.Reading]:
    """The evidence items that carry a figure, as the range rule reads them; whether each states its figure
    plainly for the question `asked` in the brief's `unit` (figures.states_plainly) is what lets an authority's
    reading settle the range."""
    return [judge.Reading(low=e["low"], high=e["high"], confidence=e["confidence"] or 0.0,
                          impact=e["impact"] or "neutral", source=judge.independent_source(e["url"]),
                          round=e["round"], tier=e["tier"],
                          plain=figures.states_plainly(e["quote"], e.get("lead") or "", asked, unit, e["low"]))
            for e in rows if e["low"] is not None and e["high"] is not None]


def _stances(rows: list[dict[str, Any]]) -> list[judge.Stance]:
    return [judge.Stance(stance=e["stance"] or "neutral", confidence=e["confidence"] or 0.0,
                         tier=e["tier"], domain=judge.independent_source(e["url"]), url=e["url"]) for e in rows]


def _quotes(rows: list[dict[str, Any]]) -> list[judge.Quoted]:
    """Each kept quote with its source's tier and domain: what a hypothesis contract is judged on."""
    return [judge.Quoted(quote=e["quote"], tier=e["tier"], domain=judge.independent_source(e["url"]), url=e["url"],
                         lead=e.get("lead") or "", unit_kind=e.get("unit_kind") or "")
            for e in rows]
