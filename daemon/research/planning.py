"""The plan phase of a brief: the model's plan checked against the question, or an earlier run's.

Seed 5: the question is rewritten and planned, the plan is checked against the question and, when
it is off topic, trimmed or asked again once (policy.replan_choice decides which). A follow-up
starts from its parent's latest done run and a brief asked again with the same question, context
and focus from its own last one (policy.reusable_plan, followup.follow_up_plan): the model is not
asked for a plan it already gave. The rules are those pure functions; this module does the I/O
around them for the loop, which hands it the run (a `PlanRun`) and its model door (it imports
nothing of the loop).
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any, Protocol

from ..rules import decide, judge
from ..rules.decide import Limits
from . import followup, planner
from .calls import Ask, today
from .policy import (PLAN_ASK_AGAIN, PLAN_TRIMMED, replan_choice, replan_slots, replanned, reusable_plan,
                     starting_plan)
from .run import Rounds, RunPart, RunView


class PlanRun(RunView, Rounds, Protocol):
    """What planning asks of the brief's run (loop.Research), beyond what every part reads: the figures
    its evidence holds (a follow-up's plan starts from them), its checkpoint and the range they move."""

    def readings(self) -> list[judge.Reading]: ...


class Planning(RunPart[PlanRun]):
    """Plans one run. The run is asked for its state, brief and event log as they are now (each changes
    under it); the model door (`ask`) is the run's."""

    def __init__(self, run: PlanRun, *, limits: Limits, previous: tuple[int, dict[str, Any]] | None,
                 ask: Ask) -> None:
        super().__init__(run)
        self.limits, self.previous = limits, previous
        self.ask = ask

    async def plan(self) -> None:
        """Seed 5: rewrite the question, plan, check the plan against the question, re-plan once."""
        self.emit("signal", message="planning")
        prompt = planner.plan_prompt(self.brief.question, self.brief.context or "", today())
        plan = await self.ask_plan(prompt)
        question = self.brief.question
        score = decide.plan_relevance(question, plan.queries)
        slots = replan_slots(self.limits)  # round 1: the question, then the plan's
        kept = decide.on_topic_queries(question, plan.queries)
        choice = replan_choice(question, plan.queries, score, slots)
        if choice == PLAN_TRIMMED:
            self.state.count_skipped("replan")
            self.emit("signal", message="plan off topic: its off-topic queries dropped; a second plan "
                                               "could not change round 1, so none was asked",
                             plan_relevance=round(score, 3), dropped=[q for q in plan.queries if q not in kept])
            plan = dataclasses.replace(plan, queries=kept)
        elif choice == PLAN_ASK_AGAIN:
            self.state.count_fallback("replan")
            self.emit("signal", message="plan off topic; asking again for its queries",
                             plan_relevance=round(score, 3))
            # only the queries round 1 can use are asked for again: the rest of a plan cannot change
            # round 1, and a second whole plan cost a small model about twice the tokens
            asked = await self.ask("plan", planner.replan_prompt(question, today(), slots),
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
        self.emit("signal", message=followup.PLAN_READY, research_question=plan.research_question,
                         angles=plan.angles, queries=self.state.pending_queries,
                         gaps=[g.text for g in self.state.gaps], plan_relevance=self.state.plan_relevance)
        self.run.checkpoint()

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
            self.emit("signal", message=f"follows {self.brief.follows}, which has no run that finished "
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
        self.emit("signal", message="plan taken from this brief's last done run (the same question, "
                                           "context and focus): the model is not asked again",
                         from_run=earlier[0], finished_at=earlier[1].get("finished_at"))
        return plan

    def start_follow_up(self, parent_run_id: int, parent: dict[str, Any]) -> followup.Plan:
        """A follow-up's starting state: the parent's evidence carried in as round 0 (with the date
        each was read), the range its readings give by rule (when the units match), its pages and
        queries not taken again; the plan is followup.follow_up_plan."""
        rows = self.store.evidence(parent_run_id)
        carried = followup.carried_evidence(rows, parent_run_id, keep_figures=followup.units_match(parent, self.brief))
        self.store.reset_round(self.run.run_id, 0)  # a run resumed before its plan was saved carries them again
        self.store.add_evidence(self.run.run_id, carried)
        self.state.follows_run_id = parent_run_id
        self.state.visited.extend(u for u in followup.visited_pages(rows) if u not in self.state.visited)
        self.state.asked.extend(q for q in followup.asked_before(parent) if q not in self.state.asked)
        if self.brief.estimate is not None and self.run.readings():
            self.run.update_estimate(0)  # the carried readings' range, by the same rule as any round's
        self.emit("signal", message=f"follow-up of {self.brief.follows}: starts from its run that finished "
                                           f"{parent.get('finished_at')}, with its evidence and open gaps; the "
                                           f"model is not asked for a plan",
                         follows=self.brief.follows, from_run=parent_run_id, evidence_reused=len(carried),
                         focus=self.brief.focus or None)
        return followup.follow_up_plan(self.brief, parent)

    async def ask_plan(self, prompt: str) -> planner.Plan:
        return await self.ask("plan", prompt, planner.PLAN_SCHEMA, planner.coerce_plan(self.brief.question),
                              lambda: planner.template_plan(self.brief.question))
