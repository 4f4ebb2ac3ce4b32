"""`make bench-real`'s vector part: Gemma 3 270M reads the rule vectors' figures, the rules verify (not a test).

Issue 27: "the model says what each figure measures; code verifies it". For each estimate case of a vector half
whose true figure is known (expect.kept), the real small model is given the case's passage as briefd gives a
passage to it (planner.evidence_prompt, the estimate's evidence schema with value, unit, of and kind, through
the lab's Ollama-compatible server and the official ollama client), and proposes items. Each item's figure is
then read by code twice: by its unit alone (is it the true figure?) and by the whole rule (figures.read_figure
with the question, the passage before the quote and what the model said of the figure: would briefd keep it?).

Printed: how many right readings the model proposed, how many wrong ones the rules caught, how many wrong ones
they kept, and how many right ones they refused, over the items of every case, with the calls' tokens and time.

Run alone: python -m lab.vectors_real [--half test] [--limit N]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from briefd.daemon.core.brief import validate_brief
from briefd.daemon.model.jsonrepair import parse_json_answer
from briefd.daemon.ops.vectors import Case, parse_vectors
from briefd.daemon.research import planner
from briefd.daemon.research.policy import policy_for
from briefd.daemon.rules.decide import LoopState
from briefd.daemon.rules import amounts, figures, judge
from lab.demo import DEMO_MODEL_ENV
from lab.drivers import LlamaDriver
from lab.servers import start_ollama
from lab.vectors_bench import VECTORS


@dataclass
class Tally:
    cases: int = 0
    items: int = 0
    no_figure: int = 0
    right: int = 0
    wrong: int = 0
    wrong_caught: int = 0
    wrong_kept: int = 0
    right_kept: int = 0
    right_refused: int = 0
    tokens: int = 0
    seconds: float = 0.0


def _passage(case: Case) -> tuple[str, str]:
    title, _, passage = case.context.partition("\n")
    return title.strip() or case.url, passage if case.quote in passage else case.quote


def ask(client: Any, case: Case) -> tuple[list[tuple[planner.EvidenceItem, str, str]], int]:
    """The model's items for one case: (item, the quote it cites, the passage before that quote), and tokens."""
    title, text = _passage(case)
    passage = planner.PassageIn(id=1, url=case.url, title=title, origin="page", text=text)
    brief = validate_brief({"question": case.question, "estimate": {"unit": case.unit, "low": 0, "high": 1e12}},
                           "vector.json")
    line, ask_line = policy_for(brief).evidence_task(LoopState())  # the estimate's own lines, as a run asks
    prompt = planner.evidence_prompt(case.question, "2026-12-06", [], [passage], lambda _: True, extra=line,
                                     ask=ask_line)
    schema = planner.evidence_schema("estimate", len(prompt.refs))
    answer = client.chat(model=LlamaDriver.MODEL, format=schema,
                         messages=[{"role": "system", "content": planner.system_prompt(prompt.text)},
                                   {"role": "user", "content": prompt.text}],
                         options={"num_ctx": int(DEMO_MODEL_ENV["BRIEFD_NUM_CTX"]),
                                  "num_predict": int(DEMO_MODEL_ENV["BRIEFD_NUM_PREDICT"]), "temperature": 0})
    tokens = int(answer.get("prompt_eval_count") or 0) + int(answer.get("eval_count") or 0)
    try:
        parsed = planner.coerce_evidence(parse_json_answer(answer["message"]["content"]))
    except ValueError:
        return [], tokens
    items = []
    for item in parsed.items:
        span = planner.quote_span(prompt, item.sentence_ids)
        if span is not None:
            ref, start, end = span
            items.append((item, text[start:end], text[:start]))
    return items, tokens


def tally_case(case: Case, items: list[tuple[planner.EvidenceItem, str, str]], t: Tally) -> None:
    truth = case.expect_value
    assert truth is not None
    for item, quote, lead in items:
        t.items += 1
        if item.value is None:
            t.no_figure += 1
            continue
        as_read = figures.read_figure(item.value, quote, case.unit)  # the unit alone: which figure did it mean
        right = any(x is not None and math.isclose(x, truth, rel_tol=amounts.SAME_FIGURE)
                    for x in (as_read.value, item.value))
        kept = figures.read_figure(item.value, quote, case.unit, asked=case.question, lead=lead,
                                 said=figures.ModelReading(kind=item.kind, of=item.of)).value is not None
        if right:
            t.right += 1
            t.right_kept += kept
            t.right_refused += not kept
        else:
            t.wrong += 1
            t.wrong_kept += kept
            t.wrong_caught += not kept


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--half", choices=("dev", "test"), default="test")
    parser.add_argument("--limit", type=int, default=0, help="at most this many cases (0: every one)")
    args = parser.parse_args(argv)
    import ollama

    _, cases = parse_vectors(json.loads((VECTORS / f"{args.half}.json").read_text(encoding="utf-8")))
    chosen = [c for c in cases if c.kind == "estimate" and c.expect_kept]
    chosen = chosen[:args.limit] if args.limit else chosen
    t = Tally()
    with tempfile.TemporaryDirectory(prefix="briefd-vectors-real-") as tmp:
        proc, url = start_ollama(Path(tmp) / "logs", "llama", name="ollama-llama", timeout=300)
        try:
            client = ollama.Client(host=url, timeout=600)
            for case in chosen:
                started = time.monotonic()
                items, tokens = ask(client, case)
                t.seconds += time.monotonic() - started
                t.tokens += tokens
                t.cases += 1
                tally_case(case, items, t)
        finally:
            proc.stop()
    print(f"briefd bench-real: Gemma 3 270M reads the figures of the rule vectors' {args.half} half "
          f"({t.cases} estimate cases whose figure is known); the rules verify its readings")
    print("| items proposed | with a figure | right readings | wrong readings | wrong caught by the rules | "
          "wrong kept | right kept | right refused | tokens | seconds |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    print(f"| {t.items} | {t.items - t.no_figure} | {t.right} | {t.wrong} | {t.wrong_caught} | {t.wrong_kept} | "
          f"{t.right_kept} | {t.right_refused} | {t.tokens:,} | {t.seconds:.0f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
