"""The research loop: the story of one brief, top to bottom.

plan → rounds of (search → pick URLs → fetch while the model reads → evidence →
integrate → checkpoint) → synthesis → report. Decisions are pure functions:
which queries and URLs and the one stop rule are `decide`'s, what depends on the
brief's kind (when it is done, aimed queries, what the synthesis must state, the
estimate / verdict / side-by-side blocks) is its `policy`'s; prompts and answer
parsing are `planner`'s; this file only sequences them and does the I/O.

Crash safety: the loop state is checkpointed after the plan and after every
round. A resumed run redoes at most the round it was in; that round's model
calls are replayed from the answer cache, its searches from the search cache and
its pages from the page cache, and rows it had written are cleared first, so
nothing is paid for or counted twice.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Callable, TypeVar

import httpx
import ollama

from ...store import PassageRow, Store, utc_now

from ..core import crashpoints

from ..rules import decide, steps

from ..sources import egress

from . import followup

from ..rules import judge

from . import planner
from ..core.brief import Brief
from ..rules.citations import Source, number_sources, renumber
from ..rules.decide import LoopState, Usage
from ..core.events import EventLog, LoggedOnly
from ..sources.fetch import FetchLimits
from ..model.hosts import ModelHosts, model_hosts
from ..model.llm import CallRecord, ModelConfig, estimate_tokens, prompt_budget
from ..core.outages import OutageLog
from ..sources.pagework import PageWorkers
from .reading import Context, Reader
from .pages import LATE_GIVEN_UP, SLOW_PAGE_MEMORY_S, Hooks, PageScheduler
from .policy import (PLAN_ASK_AGAIN, PLAN_TRIMMED, EstimatePolicy, Facts, accept_labels, disclaimer_for, limits_for,
                     next_step, numbered_sources, policy_for, replan_choice, replan_slots, replanned, reusable_plan,
                     starting_plan, summary_chars, synthesis_lines)
from ..sources.search import SearchHit
from ..core.settings import Settings
from ..report.assemble import done_report, evidence_items, source_items, usage_block
from ..sources.sources import WEB, ArchiveShelf, Searcher, chosen, fuse
from ..core.errors import BriefdError, ServiceUnavailable

log = logging.getLogger("briefd")
T = TypeVar("T")

RUN_JUST_CLAIMED_S = 2.0  # a run whose started_at is this recent, with no checkpoint, began in this attempt
PASSAGES_PER_BATCH = 12    # top BM25 passages offered to one call (then cut to the prompt budget)
POISONED_MESSAGE = "the model server fails this request every time while it answers others; its fallback is used"


@dataclass
class Services:
    """The clients and limits a brief's loop uses; built once by the worker."""

    settings: Settings
    store: Store
    http: httpx.AsyncClient
    fetch_client: httpx.AsyncClient
    llm_client: ollama.AsyncClient
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


class Cancelled(BriefdError):
    """`briefd cancel` was asked for a running brief."""


class Outage(ServiceUnavailable):
    """SearXNG stayed down through the loop's own retries, or refuses us: the brief waits, not fails.

    `fix` is set when it is not "start SearXNG": json format off, limiter on (only the user can
    end those), or SearXNG running while its engines fail (search.EnginesFailing).
    """


def today() -> str:
    return datetime.now(timezone.utc).date().isoformat()


def seconds_since(iso: str | None) -> float:
    if not iso:
        return 0.0
    then = datetime.fromisoformat(iso.replace("Z", "+00:00"))
    return max(0.0, (datetime.now(timezone.utc) - then).total_seconds())


class Research:
    """One run of one brief. `await Research(...).run()` returns the report dict."""

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
        self.kind = self.policy.kind
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
        self.models = svc.hosts or ModelHosts.single(svc.llm_client, svc.model)
        # every request made for this brief, by host (this task and the tasks it starts): egress.py;
        # kept in the store as it grows, so a run resumed after a crash still lists every host
        self.egress = egress.start(svc.settings.egress, earlier=self.store.load_egress(run_id))
        self.egress.on_change = lambda log: self.store.save_egress(run_id, log.snapshot())
        self.saved: dict[str, Any] = {}  # the state as last checkpointed (a round's start, mid-round)
        self.batches_read = 0  # evidence calls made (a batch of failed or distrusted pages makes none)
        # the fetches that outlive the step that started them, and the earlier run of this question's
        # rounds (replayed): pages.py
        self.pages = PageScheduler.after(self.page_hooks(), self.store.earlier_checkpoint(brief.question, run_id,
                                                                                           brief.id))
        # every source the brief may use, behind one interface (reading.py)
        self.reader = Reader(self.reading_context())

    def page_hooks(self) -> Hooks:
        """What the page scheduler may ask of this run (pages.Hooks): it never reaches for the loop's names."""
        return Hooks(store=self.store, run_id=self.run_id, sources=self.sources, state=lambda: self.state,
                     brief=lambda: self.brief, emit=lambda kind, **fields: self.events.emit(kind, **fields),
                     saved=lambda: self.saved, checkpoint=self.checkpoint, calls_made=lambda: self.batches_read,
                     max_age=lambda: self.max_age, choose_pages=self.choose_pages, read_batch=self.read_batch,
                     mark_bad=self.mark_bad, update_estimate=self.update_estimate,
                     fetch=lambda round_no, url, hit: self.reader.fetch_safely(round_no, url, hit),
                     download=lambda url: self.reader.web.download(url),
                     search_web=lambda query: self.reader.web.search_now(query), retrieved=_retrieved)

    def reading_context(self) -> Context:
        """What the sources may ask of this run (reading.Context): they never reach for the loop's names."""
        return Context(svc=self.svc, store=self.store, run_id=self.run_id, sources=self.sources, pages=self.pages,
                       titles=self.titles, state=lambda: self.state, brief=lambda: self.brief,
                       emit=lambda kind, **fields: self.events.emit(kind, **fields), max_age=lambda: self.max_age,
                       max_age_given=self.max_age_given, title_for=self.title_for, mark_bad=self.mark_bad,
                       on_wait=self.on_wait, outage=Outage, fatal=(Cancelled, Outage))

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
                earlier = self.earlier_plan()  # a follow-up's, or this brief's last done run's
                if earlier is None:
                    self.pages.ahead = asyncio.create_task(self.pages.search_ahead())
                    await self.plan()
                else:  # no model call to search ahead of
                    self.use_plan(earlier)
            await self.rounds()
            self.pages.drop_early()
            summary, sources, disclaimer = await self.synthesize()  # the stragglers keep loading meanwhile
        except BaseException:
            self.pages.drop_early()
            self.pages.cut_off()
            raise
        self.state.phase = "done"
        self.checkpoint()
        report = self.report(summary, sources, disclaimer)
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
                self.state.stop_explanation = step.explanation
                await self.pages.last_stragglers()
                self.state.phase = "synthesis"
                self.checkpoint()
                break
            await self.round(self.state.round + 1, list(step.queries))

    @property
    def question(self) -> str:
        return self.state.research_question or self.brief.question

    async def plan(self) -> None:
        """Seed 5: rewrite the question, plan, check the plan against the question, re-plan once."""
        self.events.emit("signal", message="planning")
        prompt = planner.plan_prompt(self.brief.question, self.brief.context or "", today())
        plan = await self.ask_plan(prompt)
        question = self.brief.question
        score = decide.plan_relevance(question, plan.queries)
        slots = replan_slots(self.limits)  # round 1: the question, then the plan's
        kept = decide.on_topic_queries(question, plan.queries)
        choice = replan_choice(question, plan.queries, score, slots)
        if choice == PLAN_TRIMMED:
            self.state.count_skipped("replan")
            self.events.emit("signal", message="plan off topic: its off-topic queries dropped; a second plan "
                                               "could not change round 1, so none was asked",
                             plan_relevance=round(score, 3), dropped=[q for q in plan.queries if q not in kept])
            plan = dataclasses.replace(plan, queries=kept)
        elif choice == PLAN_ASK_AGAIN:
            self.state.count_fallback("replan")
            self.events.emit("signal", message="plan off topic; asking again for its queries",
                             plan_relevance=round(score, 3))
            # only the queries round 1 can use are asked for again: the rest of a plan cannot change
            # round 1, and a second whole plan cost a small model about twice the tokens
            missed = [q for q in plan.queries if q not in kept]
            asked = await self.ask("plan", planner.replan_prompt(question, today(), missed, slots),
                                   planner.replan_schema(slots), planner.coerce_queries(slots), lambda: [])
            plan, score = replanned(question, plan, score, asked)
        self.use_plan(starting_plan(question, plan, score))

    def use_plan(self, plan: followup.Plan) -> None:
        """The plan becomes the state the rounds start from; its `plan ready` event records it
        (a re-run of the same brief takes it from there: followup.recorded_plan)."""
        self.state.plan_relevance = plan.plan_relevance
        self.state.research_question = plan.research_question
        self.state.angles = list(plan.angles)
        self.state.add_gaps(plan.gaps)
        self.state.add_queries(plan.queries)
        self.state.phase = "rounds"
        self.state.next_action, self.state.why = "search_more", followup.PLAN_READY
        self.events.emit("signal", message=followup.PLAN_READY, research_question=plan.research_question,
                         angles=plan.angles, queries=self.state.pending_queries,
                         gaps=[g.text for g in self.state.gaps], plan_relevance=self.state.plan_relevance)
        self.checkpoint()

    def earlier_plan(self) -> followup.Plan | None:
        """The plan an earlier run makes for this one, so the model is not asked for it: a
        follow-up starts from its parent's latest done run (followup.follow_up_plan, with the
        parent's evidence carried in); a brief asked again with the same question, context and
        focus takes its last done run's plan. None: plan afresh."""
        if self.brief.follows is not None:
            parent = followup.latest_done(self.store, self.brief.follows)
            if parent is not None:
                self.state.count_skipped("plan")
                return self.start_follow_up(*parent)
            self.events.emit("signal", message=f"follows {self.brief.follows}, which has no run that finished "
                                               f"done any more: this brief is planned afresh")
        earlier = self.previous
        if earlier is None:
            return None
        row = self.store.get_brief(earlier[0])
        plan = reusable_plan(self.brief, json.loads(row.brief_json) if row is not None else None,
                             followup.recorded_plan(self.store.events(earlier[0])), earlier[1], today())
        if plan is None:
            return None
        self.state.count_skipped("plan")
        self.events.emit("signal", message="plan taken from this brief's last done run (the same question, "
                                           "context and focus): the model is not asked again",
                         from_run=earlier[0], finished_at=earlier[1].get("finished_at"))
        return plan

    def start_follow_up(self, parent_run_id: int, parent: dict[str, Any]) -> followup.Plan:
        """A follow-up's starting state: the parent's evidence carried in as round 0 (with the date
        each was read), the range its readings give by rule (when the units match), its pages and
        queries not taken again; the plan is followup.follow_up_plan."""
        rows = self.store.evidence(parent_run_id)
        carried = followup.carried_evidence(rows, parent_run_id, keep_figures=followup.units_match(parent, self.brief))
        self.store.reset_round(self.run_id, 0)  # a run resumed before its plan was saved carries them again
        self.store.add_evidence(self.run_id, carried)
        self.state.follows_run_id = parent_run_id
        self.state.visited.extend(u for u in followup.visited_pages(rows) if u not in self.state.visited)
        self.state.asked.extend(q for q in followup.asked_before(parent) if q not in self.state.asked)
        if self.brief.estimate is not None and self.readings():
            self.update_estimate(0)  # the carried readings' range, by the same rule as any round's
        self.events.emit("signal", message=f"follow-up of {self.brief.follows}: starts from its run that finished "
                                           f"{parent.get('finished_at')}, with its evidence and open gaps; the "
                                           f"model is not asked for a plan",
                         follows=self.brief.follows, from_run=parent_run_id, evidence_reused=len(carried),
                         focus=self.brief.focus or None)
        return followup.follow_up_plan(self.brief, parent)

    async def ask_plan(self, prompt: str) -> planner.Plan:
        return await self.ask("plan", prompt, planner.PLAN_SCHEMA, planner.coerce_plan(self.brief.question),
                              lambda: planner.template_plan(self.brief.question))

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
            fresh, late, order, replayed = self.pages.round_pages(round_no, queries, candidates, carried)
            urls = [*fresh, *carried]
            expected = fresh if replayed else []  # a replayed round waits for these: see fetch_and_read
        self.state.current_round = {"round": round_no, "queries": queries, "urls": urls, "late": list(late or []),
                                    "carried": list(carried or []), "order": list(order or []),
                                    "expected": list(expected or [])}
        self.checkpoint()
        await self.pages.fetch_and_read(round_no, urls, {h.url: h for h in hits})
        if not self.brief.fetch_pages:
            await self.read_snippets(round_no, self.reader.snippets_only(hits))
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
                         tokens_so_far=self.tokens_used())
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

    async def read_snippets(self, round_no: int, hits: list[SearchHit]) -> None:
        """fetch_pages: false. The snippets SearXNG returned are the text, read in as few calls as
        the prompt budget allows: each call takes the best-ranked snippets that fit, the next the rest.

        The gaps stay as they stood when the round began, so a call's prompt depends only on the
        snippets (a resumed round sends the same prompts, and the answer cache replays them)."""
        gaps = self.state.open_gaps()
        usable = [h for h in hits if h.content][: steps.snippets_allowed(self.limits)]
        ids = [self.store.save_snippet(h.url, h.content) for h in usable]
        titles = {h.url: h.title for h in usable}
        while ids:
            left = await self.read_batch(round_no, ids, titles, gaps, limit=len(ids))
            if len(left) >= len(ids):
                break  # nothing more fits a prompt: an oversize snippet alone
            ids = left

    async def read_batch(self, round_no: int, ids: list[int], titles: dict[str, str],
                         gaps: list[decide.Gap], limit: int = PASSAGES_PER_BATCH) -> list[int]:
        """Rank a batch's passages by BM25 against the question and gaps; the model reads the top
        `limit` of them that fit the prompt. Returns the ranked ones the prompt had no room for."""
        trusted = self.trusted_passages(round_no, ids, titles)
        if not trusted:
            return []
        focus = steps.focus(self.question, gaps)
        matches = set(self.store.rank_passages(list(trusted), focus, limit=len(trusted), matching_only=True))
        about = steps.topics(self.question, self.brief.question, gaps)
        cut = steps.passage_cut({i: row.text for i, row in trusted.items()}, matches, focus, about, limit)
        rows = [trusted[i] for i in cut.read]
        if cut.skip_call:  # usage says so
            self.state.count_skipped("evidence")
            self.events.emit("signal", message="evidence call skipped: no passage shares a word with the "
                                               "question or an open gap", round=round_no, passages=len(cut.ranked))
        if not rows:
            return []
        passages = [planner.PassageIn(id=r.id, url=r.url, title=self.title_for(r.url, titles),
                                      origin=r.origin, text=r.text) for r in rows]
        line, ask = self.policy.evidence_task(self.state)
        prompt = planner.evidence_prompt(self.question, today(), gaps, passages, self.fits, extra=line, ask=ask)
        if not prompt.used_passages:
            return []
        # the schema allows no more items than the prompt has sentences: the answer's budget follows
        schema = planner.evidence_schema(self.kind, len(prompt.refs))
        self.batches_read += 1
        # which pages this call reads: what tells why a prompt differs from an earlier run's (make bench);
        # and which passages it shows the model (the prompt itself is not kept): `briefd eval` tells
        # from them whether an answer sentence was ever in front of the model (daemon/rules/evaluate.py)
        self.events.emit("signal", message="reading", round=round_no,
                         urls=list(dict.fromkeys(p.url for p in passages if p.id in prompt.used_passages)),
                         passages=list(prompt.used_passages))
        answer = await self.ask("evidence", prompt.text, schema, planner.coerce_evidence,
                                lambda: planner.EvidenceAnswer(items=[], new_gaps=[], new_queries=[]))
        self.integrate(round_no, prompt, answer, gaps)
        used = set(prompt.used_passages)
        return [r.id for r in rows if r.id not in used]

    def trusted_passages(self, round_no: int, ids: list[int], titles: dict[str, str]) -> dict[int, PassageRow]:
        """The passages (by id, in batch order) whose page is not distrusted; a page carrying an
        injection is distrusted here.

        Every passage of the batch's pages (and each page's title) is checked before the model reads
        any of them, so an injected page's text never reaches a prompt: none of its sentences can be
        quoted, and none of its words can come back as a proposed query or gap.
        """
        rows = self.store.passages(ids)
        for row in rows:
            if row.url in self.state.distrusted:
                continue
            reason = decide.distrust_reason(row.text) or decide.distrust_reason(titles.get(row.url) or "")
            if reason:
                self.distrust(round_no, row.url, reason)
        return {row.id: row for row in rows if row.url not in self.state.distrusted}

    def distrust(self, round_no: int, url: str, reason: str) -> None:
        """Distrust a page whole for this brief: its evidence so far goes, and it is never read again."""
        if url in self.state.distrusted:
            return
        self.state.distrusted[url] = reason
        self.state.count_fallback("distrusted_pages")
        dropped = self.store.drop_evidence(self.run_id, url)
        self.events.emit("signal", message="page distrusted", round=round_no, url=url, reason=reason,
                         evidence_dropped=dropped)

    def title_for(self, url: str, titles: dict[str, str]) -> str:
        if url in titles and titles[url]:
            return titles[url]
        page = self.store.get_page(url, float("inf"))
        return page.title if page and page.title else url

    def read_labels(self, round_no: int, item: planner.EvidenceItem, quote: str, row: dict[str, Any]) -> None:
        """The model's labels on `row`, as policy.accept_labels keeps them; a figure it discarded is
        counted and told (evidence_skipped)."""
        labels = accept_labels(self.brief, item, quote, row["url"], self.svc.settings.source_tiers)
        if labels is None:
            return
        for figure in labels.discarded:
            self.state.figures_discarded[figure.reason] = self.state.figures_discarded.get(figure.reason, 0) + 1
            self.events.emit("evidence_skipped", round=round_no, reason=f"number {figure.reason}",
                             proposed=figure.proposed, field=figure.field, written=figure.written, quote=quote[:200])
        row.update(tier=labels.tier, confidence=labels.confidence, stance=labels.stance, low=labels.low,
                   high=labels.high, impact=labels.impact)

    def integrate(self, round_no: int, prompt: planner.EvidencePrompt, answer: planner.EvidenceAnswer,
                  gaps: list[decide.Gap]) -> None:
        """Evidence rows from sentence ids (quotes verbatim by construction), gaps, new queries."""
        quoted = [(item, planner.quote_span(prompt, item.sentence_ids)) for item in answer.items]
        for item, span in quoted:
            # trusted_passages checks every sentence before the model reads it; a quote is checked
            # again, so that no rule change there can let an injected page's quote through
            if span is not None:
                quote = prompt.passages[span[0].passage_id].text[span[1]:span[2]]
                reason = decide.distrust_reason(quote)
                if reason:
                    self.state.count_fallback("injection_skipped")
                    self.distrust(round_no, span[0].url, reason)
        # the model read an injected page in this answer: what it proposes next may carry its text
        tainted = any(p.url in self.state.distrusted for p in prompt.passages.values())
        about = steps.topics(self.question, self.brief.question, gaps)
        known = {(e["url"], e["quote"]) for e in self.store.evidence(self.run_id)}
        # when each quote's text was read: its page's last fetch or confirmation (a snippet: now,
        # the round's search having just returned it)
        read_at = self.store.page_read_at(sorted({p.url for p in prompt.passages.values() if p.origin == "page"}))
        now = utc_now()
        rows: list[dict[str, Any]] = []
        for item, span in quoted:
            if span is None:
                self.state.evaluator_failures += 1
                self.events.emit("evidence_skipped", round=round_no, reason="no known sentence ids",
                                 sentence_ids=item.sentence_ids)
                continue
            ref, start, end = span
            passage = prompt.passages[ref.passage_id]
            # a heading or headline the model took along at either end is not part of the quote
            lead, tail = decide.statement_bounds(passage.text[start:end], passage.title,
                                                 from_page=ref.origin == "page")
            start, end = start + lead, start + tail
            quote = passage.text[start:end]
            skipped = steps.skipped_quote(quote, ref.url, passage.title, ref.origin == "page", self.state.distrusted,
                                          about, known)
            if skipped is not None:
                self.events.emit("evidence_skipped", round=round_no, **skipped)
                continue
            known.add((ref.url, quote))
            stored = self.store.passages([ref.passage_id])[0]
            offset = stored.start
            row = {
                "round": round_no, "url": ref.url, "title": passage.title, "passage_id": ref.passage_id,
                "origin": ref.origin, "quote": quote, "quote_start": offset + start,
                "quote_end": offset + end, "summary": item.summary, "confidence": item.confidence,
                "stance": None, "impact": None, "gap": item.gap or None, "low": None, "high": None,
                "tier": item.tier, "unit": item.unit, "scope": item.scope, "reading_date": item.date,
                "page": stored.page, "read_at": read_at.get(ref.url, now) if ref.origin == "page" else now,
            }
            self.read_labels(round_no, item, quote, row)
            rows.append(row)
            if steps.answers_gap(item.gap, item.confidence) and self.state.answer_gap(item.gap, round_no):
                self.events.emit("signal", message="gap answered", gap=item.gap, round=round_no)
            self.events.emit("evidence_found", round=round_no, url=ref.url, title=passage.title,
                             quote=quote, summary=item.summary, confidence=row["confidence"],
                             gap=item.gap or None, stance=row["stance"], impact=row["impact"],
                             low=row["low"], high=row["high"], tier=row["tier"])
        self.store.add_evidence(self.run_id, rows)
        if tainted:
            if answer.new_gaps or answer.new_queries:
                self.events.emit("signal", message="proposals dropped: the model read a distrusted page",
                                 new_gaps=answer.new_gaps, new_queries=answer.new_queries)
            return
        off_topic = steps.off_topic([*answer.new_queries, *answer.new_gaps], about)
        added = self.state.add_gaps([g for g in answer.new_gaps if g not in off_topic])
        queued = self.state.add_queries([q for q in answer.new_queries if q not in off_topic])
        if added or queued or off_topic:
            self.events.emit("signal", message="plan updated", new_gaps=[g.text for g in added],
                             new_queries=queued, **({"dropped_off_topic": off_topic} if off_topic else {}))

    # ---- estimates and verdicts (computed by rules, seeds 1 and 2) ----------------------------

    def readings(self) -> list[judge.Reading]:
        return _readings(self.store.evidence(self.run_id))

    def usage_now(self, tokens: int | None = None) -> Usage:
        return Usage(tokens=self.tokens_used() if tokens is None else tokens,
                     seconds=self.wall_seconds(), pages=steps.pages_read(self.state))

    def facts(self, evidence: list[dict[str, Any]] | None = None, tokens: int | None = None) -> Facts:
        """What the policy decides from, read from the store (once; or the evidence rows and token
        count a caller already read) and the state. A hypothesis is judged on its stances, or,
        with a contract, on its quotes alone (policy.HypothesisPolicy.verdict)."""
        rows = self.store.evidence(self.run_id) if evidence is None else evidence
        hypothesis = self.brief.hypothesis
        return Facts(state=self.state, limits=self.limits, usage=self.usage_now(tokens),
                     readings=_readings(rows) if self.brief.estimate else (),
                     stances=_stances(rows) if hypothesis and not hypothesis.contract else (),
                     quotes=_quotes(rows) if hypothesis and hypothesis.contract else ())

    def update_estimate(self, round_no: int) -> None:
        """The range after this round: a pure function of all evidence so far (judge.update_range)."""
        assert isinstance(self.policy, EstimatePolicy)
        low, high = self.policy.range_after(self.readings())
        score = self.policy.score((low, high))
        tokens = self.tokens_used()
        self.state.estimate_history = [h for h in self.state.estimate_history if h["round"] < round_no]
        self.state.estimate_history.append(
            {"round": round_no, "low": low, "high": high, "progress_score": round(score, 4), "tokens": tokens})
        self.events.emit("iteration_update", round=round_no, low=low, high=high,
                         progress_score=round(score, 4),
                         width_reduction_pct=round(judge.width_reduction_pct(self.policy.initial, (low, high)), 2),
                         tokens_so_far=tokens)

    # ---- synthesis ----------------------------------------------------------------------------------

    async def synthesize(self) -> tuple[str, list[Source], str | None]:
        rows = self.store.evidence(self.run_id)
        evidence = decide.strongest_first(rows, [self.question, self.brief.question])
        lines, disclaimer = synthesis_lines(evidence), disclaimer_for(evidence)
        sources = numbered_sources(evidence, last_title=True)
        if not evidence:
            self.state.count_fallback("model_only")
        chars = summary_chars(len(lines), self.svc.model.num_predict)
        prompt = planner.synthesis_prompt(self.question, today(), lines, self.fits,
                                          extra=self.policy.synthesis_line(self.facts(rows)), chars=chars)
        # a summary cut off at its budget is not asked for again: the schema already holds the
        # summary to what the budget allows, so a model that ran out of it once writes no better
        # in half the room, and the fallback (the strongest quotes, cited) says what was found
        summary = await self.ask("synthesis", prompt, planner.synthesis_schema(chars),
                                 planner.coerce_synthesis([s.n for s in sources], chars),
                                 lambda: planner.template_summary(self.question, lines), retry_cut=False)
        summary, cited = renumber(summary, sources)
        return summary, number_sources(cited, sources), disclaimer

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
        report = self.report("", sources, note)
        if not report["queries"]:
            report["open_questions"] = []  # nothing was searched: "no usable sources" would not be true
        return report

    def report(self, summary: str, sources: list[Source], disclaimer: str | None) -> dict[str, Any]:
        """report.json of this run (report/assemble.py's shape), from the store and the state."""
        rows = self.store.evidence(self.run_id)
        hypothesis = self.brief.hypothesis
        evidence = evidence_items(rows, sources, contract=bool(hypothesis and hypothesis.contract))
        usage = self.usage(rows)
        facts = self.facts(rows, tokens=usage["prompt_tokens"] + usage["completion_tokens"])
        verdict = self.policy.verdict_block(facts)
        estimate = self.policy.estimate_block(facts)
        asks = decide.open_questions(
            self.brief.question, self.state.research_question, [g.text for g in self.state.open_gaps()],
            had_evidence=bool(evidence), verdict=verdict["value"] if verdict else None,
            estimate=(estimate["final"]["low"], estimate["final"]["high"], estimate["unit"],
                      self.state.stop_reason == decide.TARGET_REACHED) if estimate else None)
        return done_report(
            self.brief.id, self.brief.question, self.started_at,
            sides=self.policy.sides(evidence, estimate),
            research_question=self.state.research_question,
            angles=self.state.angles,
            plan_relevance=self.state.plan_relevance,
            finished_at=utc_now(),
            stop_reason=self.state.stop_reason,
            stop_explanation=self.state.stop_explanation,
            summary=summary,
            disclaimer=disclaimer,
            sources=source_items(sources, self.store.page_hashes([s.url for s in sources])),
            searched=list(self.sources),
            egress=self.egress.block(egress.service_roles(self.svc.settings.searxng_url,
                                                          model_hosts(self.svc.settings))),
            distrusted=[{"url": url, "reason": reason} for url, reason in self.state.distrusted.items()],
            evidence=evidence,
            estimate=estimate,
            verdict=verdict,
            open_questions=asks,
            gaps=[g.text for g in self.state.open_gaps()],
            queries=self.store.queries(self.run_id),
            usage=usage,
            fallbacks=dict(self.state.fallbacks),
            model=self.svc.model.model,
            searxng_url=self.svc.settings.searxng_url if WEB in self.sources else None,  # only if used
            error=None,
            follows=self.follows_block(),
        )

    def follows_block(self) -> dict[str, Any] | None:
        """report.json's `follows` (followup.follows_block): the parent run this one started from."""
        parent_run = self.state.follows_run_id
        parent = self.store.report_of(parent_run) if parent_run is not None else None
        if self.brief.follows is None or parent is None:
            return None
        return followup.follows_block(self.brief.follows, parent)

    # ---- the model ------------------------------------------------------------------------------------

    def fits(self, prompt: str) -> bool:
        used = estimate_tokens(planner.SYSTEM_RESEARCHER) + estimate_tokens(prompt)
        return used <= prompt_budget(self.svc.model)

    async def ask(self, purpose: str, user: str, schema: dict[str, Any], coerce: Callable[[Any], T],
                  fallback: Callable[[], T], retry_cut: bool = True) -> T:
        self.check_cancel()
        result = await self.models.call_json(
            purpose=purpose, system=planner.SYSTEM_RESEARCHER,
            user=user, schema=schema, coerce=coerce, fallback=fallback, cache=_AnswerCache(self.store),
            record=self.record_call, on_wait=self.on_wait, retry_cut=retry_cut,
        )
        crashpoints.reached("model_answer")
        if result.retry_skipped:
            self.state.count_skipped(f"{purpose} retry")
        self.store.set_waiting(self.run_id, None)
        self.store.service_back(self.run_id)
        self.svc.outages.came_back("ollama")
        if result.outcome in ("fallback", "poisoned"):
            self.state.count_fallback(purpose)
        if result.outcome == "poisoned":
            # not an outage: the server answers everything else, so the brief goes on without this answer
            self.events.emit("signal", message=POISONED_MESSAGE, purpose=purpose,
                             reason=result.records[-1].error if result.records else None)
        if result.repairs:
            self.state.fallbacks["repaired_answers"] = self.state.fallbacks.get("repaired_answers", 0) + 1
        return result.value

    def record_call(self, rec: CallRecord) -> None:
        self.store.record_model_call(self.run_id, rec)

    def on_wait(self, service: str, retry_at: float, reason: str, fix: str | None) -> None:
        """A call waits to try again (retry.call_with_retries): the brief's status and event say why,
        and the daemon's outage log hears it with its fix (SearXNG's engines failing has its own)."""
        when = datetime.fromtimestamp(retry_at, timezone.utc).replace(microsecond=0).isoformat()
        told = f"{reason}; to fix: {fix}" if fix is not None and fix not in reason else reason
        self.store.set_waiting(self.run_id, f"{service}: {told} (retry at {when})")
        self.svc.outages.went_down(service, reason, fix)
        given = {"fix": fix} if fix else {}
        self.events.emit("waiting", service=service, reason=reason, retry_at=when, **given)

    # ---- bookkeeping --------------------------------------------------------------------------------

    def wall_seconds(self) -> float:
        """Since the run began (resumed runs included: time waiting on the queue counts)."""
        assert self.state.began_s is not None
        return max(0.0, time.time() - self.state.began_s)

    def tokens_used(self) -> int:
        usage = self.store.model_usage(self.run_id)
        return usage["prompt_tokens"] + usage["completion_tokens"]

    def usage(self, evidence: list[dict[str, Any]] | None = None) -> dict[str, Any]:
        """report.json's usage; `evidence`: the run's evidence rows when the caller has read them."""
        evidence = self.store.evidence(self.run_id) if evidence is None else evidence
        return usage_block(self.store.model_usage(self.run_id), self.store.search_count(self.run_id), self.state,
                           self.wall_seconds(), evidence, LATE_GIVEN_UP)

    def check_cancel(self) -> None:
        if self.store.cancel_requested(self.run_id):
            raise Cancelled()

    def checkpoint(self) -> None:
        self.state.remaining = decide.remaining_budgets(self.state, self.limits, self.usage_now())
        self.saved = self.state.to_dict()
        self.store.save_checkpoint(self.run_id, self.state.round, self.state.phase, self.saved)
        crashpoints.reached("checkpoint")


def _retrieved(task: "asyncio.Task[Any]") -> None:
    """A task nobody may await (an early search, a trailing fetch): its failure is logged, not lost.
    An outage is the round's to report (it awaits the same search): only the log's debug level has it."""
    failure = None if task.cancelled() else task.exception()
    if isinstance(failure, Outage):
        log.debug("a background fetch met an outage: %s", failure)
    elif failure is not None:
        log.warning("a background fetch failed: %r", failure)




def _readings(rows: list[dict[str, Any]]) -> list[judge.Reading]:
    """The evidence items that carry a figure, as the range rule reads them."""
    return [judge.Reading(low=e["low"], high=e["high"], confidence=e["confidence"] or 0.0,
                          impact=e["impact"] or "neutral", source=e["url"], round=e["round"])
            for e in rows if e["low"] is not None and e["high"] is not None]


def _stances(rows: list[dict[str, Any]]) -> list[judge.Stance]:
    return [judge.Stance(stance=e["stance"] or "neutral", confidence=e["confidence"] or 0.0,
                         tier=e["tier"], domain=e["url"]) for e in rows]


def _quotes(rows: list[dict[str, Any]]) -> list[judge.Quoted]:
    """Each kept quote with its source's tier and domain: what a hypothesis contract is judged on."""
    return [judge.Quoted(quote=e["quote"], tier=e["tier"], domain=e["url"]) for e in rows]


class _AnswerCache:
    """The store's model_answers table, seen through daemon.llm's AnswerCache protocol."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def get(self, key: str) -> str | None:
        return self.store.cached_answer(key)

    def put(self, key: str, answer: str, prompt_tokens: int | None, completion_tokens: int | None) -> None:
        self.store.cache_answer(key, answer, prompt_tokens, completion_tokens)
