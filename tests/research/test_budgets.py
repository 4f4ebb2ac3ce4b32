"""Output budgets per purpose: every structured answer is bounded by its schema, and each call asks
for no more tokens than its largest valid answer can take (issue 11).

The sizes are the product's (daemon.planner); the budget rule is daemon.llm.output_budget. A
"largest valid answer" is built from a schema with every array full and every string at its
maxLength of ordinary words, and counted the way briefd counts tokens (estimate_tokens), so the
tests say what a user notices: a valid answer is never cut off by its own budget, and the budget is
no larger than that answer needs.
"""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest

from briefd.daemon.research import planner
from briefd.daemon.model.llm import (
    LONG_TEXT_CHARS,
    OUTPUT_FLOOR_TOKENS,
    ModelConfig,
    answer_token_bound,
    estimate_tokens,
    output_budget,
    shorter_schema,
)
from lab.drivers import fit_to_schema

DEFAULT = ModelConfig(host="http://127.0.0.1:9", model="lab-scripted")
KINDS = ("plain", "estimate", "hypothesis")
WORDS = "the audit office said the overrun reached 431 million dollars in the final report "


def largest_answer(schema: Any) -> Any:
    """The biggest value the schema allows: arrays full, strings at maxLength, long numbers, longest enum."""
    if "enum" in schema:
        return max(schema["enum"], key=lambda v: len(json.dumps(v)))
    kind = schema.get("type")
    kind = next(k for k in kind if k != "null") if isinstance(kind, list) else kind
    if kind == "string":
        return (WORDS * (schema["maxLength"] // len(WORDS) + 1))[: schema["maxLength"]]
    if kind in ("number", "integer"):
        return schema.get("maximum", 123456789.25)
    if kind == "array":
        return [largest_answer(schema["items"]) for _ in range(schema["maxItems"])]
    return {k: largest_answer(v) for k, v in schema["properties"].items()}


def structured_schemas() -> dict[str, dict[str, Any]]:
    return {"plan": planner.PLAN_SCHEMA, "synthesis": planner.SYNTHESIS_SCHEMA,
            **{f"replan-{slots}": planner.replan_schema(slots) for slots in (1, planner.PLAN_MAX_QUERIES)},
            **{f"evidence-{kind}": planner.evidence_schema(kind) for kind in KINDS}}


def unbounded(schema: Any, path: str = "$") -> list[str]:
    """Every place where a schema lets an answer grow without end."""
    if not isinstance(schema, dict):
        return []
    kinds = schema.get("type") if isinstance(schema.get("type"), list) else [schema.get("type")]
    found = []
    if "array" in kinds:
        if "maxItems" not in schema:
            found.append(path)
        found += unbounded(schema.get("items"), path + "[]")
    if "string" in kinds and "maxLength" not in schema and "enum" not in schema:
        found.append(path)
    if "object" in kinds:
        if schema.get("additionalProperties") is not False:
            found.append(path + " (extra keys)")
        for key, child in schema.get("properties", {}).items():
            found += unbounded(child, f"{path}.{key}")
    return found


# ---- every structured call is bounded ----------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(structured_schemas()))
def test_no_structured_answer_can_grow_without_end(name: str) -> None:
    assert unbounded(structured_schemas()[name]) == []


def test_the_plan_schema_holds_what_the_plan_prompt_asks_for() -> None:
    props = planner.PLAN_SCHEMA["properties"]
    assert props["research_question"]["maxLength"] == planner.RESEARCH_QUESTION_MAX_CHARS
    assert (props["angles"]["maxItems"], props["angles"]["items"]["maxLength"]) == (
        planner.PLAN_MAX_ANGLES, planner.ANGLE_MAX_CHARS)
    assert (props["queries"]["maxItems"], props["queries"]["items"]["maxLength"]) == (
        planner.PLAN_MAX_QUERIES, planner.QUERY_MAX_CHARS)
    assert props["queries"]["minItems"] == 1, "a plan without a query is no plan"
    assert (props["gaps"]["maxItems"], props["gaps"]["items"]["maxLength"]) == (
        planner.PLAN_MAX_GAPS, planner.GAP_MAX_CHARS)
    prompt = planner.plan_prompt("How much did the tunnel overrun?", "", "2026-11-22")
    for n, what in ((planner.PLAN_MAX_ANGLES, "angles"), (planner.PLAN_MAX_QUERIES, "specific web search"),
                    (planner.PLAN_MAX_GAPS, "gaps")):
        assert f"-{n} {what}" in prompt, "the prompt asks for what the schema allows"


@pytest.mark.parametrize("kind", KINDS)
def test_the_evidence_schema_holds_what_the_evidence_prompt_asks_for(kind: str) -> None:
    schema = planner.evidence_schema(kind)
    items = schema["properties"]["items"]
    item = items["items"]["properties"]
    assert items["maxItems"] == planner.EVIDENCE_MAX_ITEMS
    assert item["sentence_ids"]["maxItems"] == planner.EVIDENCE_IDS_PER_ITEM
    assert item["sentence_ids"]["items"]["maxLength"] == planner.SENTENCE_ID_MAX_CHARS
    assert item["summary"]["maxLength"] == planner.EVIDENCE_SUMMARY_MAX_CHARS
    assert item["gap"]["maxLength"] == planner.GAP_ID_MAX_CHARS
    assert schema["properties"]["new_gaps"]["maxItems"] == planner.EVIDENCE_MAX_NEW_GAPS
    assert schema["properties"]["new_queries"]["maxItems"] == planner.EVIDENCE_MAX_NEW_QUERIES
    if kind == "estimate":
        assert all(item[k]["maxLength"] == planner.LABEL_MAX_CHARS for k in ("unit", "scope", "date"))
    prompt = planner.evidence_prompt("Q?", "2026-11-22", [], [], lambda _t: True)
    assert f"at most {planner.EVIDENCE_MAX_ITEMS} items" in prompt.text


def test_an_evidence_answer_holds_no_more_items_than_the_prompt_has_sentences() -> None:
    for sentences in (1, 2, planner.EVIDENCE_MAX_ITEMS, planner.EVIDENCE_MAX_ITEMS + 5):
        schema = planner.evidence_schema("plain", sentences)
        assert schema["properties"]["items"]["maxItems"] == min(sentences, planner.EVIDENCE_MAX_ITEMS)
    assert planner.evidence_schema("plain", 0)["properties"]["items"]["maxItems"] == 1
    assert planner.evidence_schema("plain") == planner.evidence_schema("plain", None)


def test_the_synthesis_schema_holds_what_the_synthesis_prompt_asks_for() -> None:
    assert planner.SYNTHESIS_SCHEMA["properties"]["summary"]["maxLength"] == planner.SYNTHESIS_MAX_CHARS
    line = planner.EvidenceLine(1, "The overrun reached $431 million.", "Audit")
    prompt = planner.synthesis_prompt("Q?", "2026-11-22", [line], lambda _t: True)
    assert f"at most {planner.SYNTHESIS_MAX_WORDS} words" in prompt
    for quotes in (0, 1, 2, 3, 4, 9):
        chars = planner.synthesis_chars(quotes)
        assert planner.synthesis_schema(chars)["properties"]["summary"]["maxLength"] == chars
        prompt = planner.synthesis_prompt("Q?", "2026-11-22", [line] * quotes, lambda _t: True, chars=chars)
        assert f"at most {planner.synthesis_words(chars)} words" in prompt or not quotes


def test_a_summary_is_as_long_as_its_quotes_call_for() -> None:
    """One quote gets a short summary (the 270M model, given 1,000 characters for one or two quotes,
    was cut off mid-summary); four or more get the longest a grammar allows."""
    chars = [planner.synthesis_chars(n) for n in range(6)]
    assert chars[0] == chars[1] == planner.SYNTHESIS_MIN_CHARS
    assert chars[1] < chars[2] < chars[3] < chars[4] == chars[5] == planner.SYNTHESIS_MAX_CHARS
    budgets = [output_budget(DEFAULT, planner.synthesis_schema(c)) for c in chars]
    assert budgets[1] < budgets[2] < budgets[4] == output_budget(DEFAULT, planner.SYNTHESIS_SCHEMA)
    long = "The overrun was large [1]. " * 40
    assert len(planner.coerce_synthesis([1], chars[1])({"summary": long})) <= chars[1]


# ---- the budget per purpose --------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["plan", "synthesis", "evidence-plain"])
def test_each_purposes_budget_is_its_largest_valid_answer_under_the_default_ceiling(name: str) -> None:
    schema = structured_schemas()[name]
    answer = largest_answer(schema)
    jsonschema.validate(answer, schema)
    budget = output_budget(DEFAULT, schema)
    assert budget == answer_token_bound(schema) < DEFAULT.num_predict, "smaller than the old flat 1,024"
    assert estimate_tokens(json.dumps(answer, ensure_ascii=False)) <= budget, "a valid answer is never cut off"
    pretty = json.dumps(answer, ensure_ascii=False, indent=2)
    assert estimate_tokens(pretty) <= budget, "not even pretty-printed"


@pytest.mark.parametrize("kind", KINDS)
def test_an_evidence_budget_grows_with_the_sentences_it_may_cite_up_to_the_ceiling(kind: str) -> None:
    budgets = [output_budget(DEFAULT, planner.evidence_schema(kind, n))
               for n in range(1, planner.EVIDENCE_MAX_ITEMS + 1)]
    assert budgets == sorted(budgets) and len(set(budgets)) > 1
    assert max(budgets) <= DEFAULT.num_predict
    for n in range(1, planner.EVIDENCE_MAX_ITEMS + 1):
        schema = planner.evidence_schema(kind, n)
        if (answer_token_bound(schema) or 0) < DEFAULT.num_predict:  # below the ceiling: the whole answer fits
            answer = largest_answer(schema)
            jsonschema.validate(answer, schema)
            assert estimate_tokens(json.dumps(answer)) <= output_budget(DEFAULT, schema)
    one = output_budget(DEFAULT, planner.evidence_schema(kind, 1))
    assert one < DEFAULT.num_predict // 2, "one sentence cannot need half the old budget"


def test_the_setting_stays_the_ceiling_and_an_unbounded_schema_gets_it() -> None:
    small = ModelConfig(host="http://127.0.0.1:9", model="m", num_predict=100)
    for schema in structured_schemas().values():
        assert output_budget(small, schema) <= 100
    loose = {"type": "object", "properties": {"queries": {"type": "array", "items": {"type": "string"}}}}
    assert answer_token_bound(loose) is None
    assert output_budget(DEFAULT, loose) == DEFAULT.num_predict


def test_a_tiny_answer_still_gets_the_floor() -> None:
    tiny = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"],
            "additionalProperties": False}
    assert answer_token_bound(tiny) < OUTPUT_FLOOR_TOKENS
    assert output_budget(DEFAULT, tiny) == OUTPUT_FLOOR_TOKENS


# ---- a shorter answer for the retry ------------------------------------------------------------------


def test_the_retry_of_a_cut_off_plan_asks_for_half_the_items_and_gets_a_smaller_budget() -> None:
    shorter = shorter_schema(planner.PLAN_SCHEMA)
    assert shorter is not None
    props = shorter.schema["properties"]
    assert props["queries"]["maxItems"] == planner.PLAN_MAX_QUERIES // 2
    assert props["angles"]["maxItems"] == planner.PLAN_MAX_ANGLES // 2
    assert f"at most {planner.PLAN_MAX_QUERIES // 2} queries" in shorter.asks
    assert output_budget(DEFAULT, shorter.schema) < output_budget(DEFAULT, planner.PLAN_SCHEMA)
    assert planner.PLAN_SCHEMA["properties"]["queries"]["maxItems"] == planner.PLAN_MAX_QUERIES, "not changed"


def test_the_retry_of_a_cut_off_evidence_answer_keeps_each_quotes_sentences() -> None:
    shorter = shorter_schema(planner.evidence_schema("estimate"))
    assert shorter is not None
    items = shorter.schema["properties"]["items"]
    assert items["maxItems"] == planner.EVIDENCE_MAX_ITEMS // 2
    assert items["items"]["properties"]["sentence_ids"]["maxItems"] == planner.EVIDENCE_IDS_PER_ITEM


def test_a_cut_off_synthesis_is_asked_for_a_shorter_text() -> None:
    shorter = shorter_schema(planner.SYNTHESIS_SCHEMA)
    assert planner.SYNTHESIS_MAX_CHARS >= LONG_TEXT_CHARS and shorter is not None
    assert shorter.schema["properties"]["summary"]["maxLength"] == planner.SYNTHESIS_MAX_CHARS // 2


def test_an_answer_that_cannot_be_shorter_has_no_shorter_schema() -> None:
    at_floor = {"type": "object", "additionalProperties": False, "properties": {
        "label": {"type": "string", "maxLength": 40},
        "ids": {"type": "array", "maxItems": 1, "items": {"type": "string", "maxLength": 6}},
        "stance": {"type": "string", "enum": planner.STANCE_VALUES}}}
    assert shorter_schema(at_floor) is None
    one_item = planner.evidence_schema("plain", 1)
    shorter = shorter_schema(one_item)
    assert shorter is not None and shorter.schema["properties"]["items"]["maxItems"] == 1, "never below one"


# ---- the scripted lab model keeps to the bounds -------------------------------------------------------


@pytest.mark.parametrize("name", sorted(structured_schemas()))
def test_the_scripted_lab_model_bends_an_oversized_answer_to_the_schema(name: str) -> None:
    schema = structured_schemas()[name]
    oversized = largest_answer(schema)

    def grow(value: Any) -> Any:
        if isinstance(value, list):
            return [grow(v) for v in value] * 3 or ["x"] * 10
        if isinstance(value, dict):
            return {k: grow(v) for k, v in value.items()}
        return value * 3 if isinstance(value, str) and value not in sum(
            (planner.TIER_VALUES, planner.IMPACT_VALUES, planner.STANCE_VALUES), []) else value

    fitted = fit_to_schema(grow(oversized), schema)
    jsonschema.validate(fitted, schema)


# --------------------------------------------------------------------------- what a real model server accepts


def test_every_schema_briefd_sends_is_a_grammar_llama_cpp_accepts() -> None:
    """Ollama constrains an answer with a grammar made from the schema (llama.cpp's converter and
    parser); a schema the parser refuses constrains nothing, and a small model then answers in prose
    (the synthesis did, with a 2,100-character summary). Checked with the lab's real llama.cpp."""
    import llama_cpp
    from llama_cpp.llama_grammar import LlamaGrammar

    from lab.drivers import LlamaDriver, make_driver

    driver = make_driver("llama")
    driver.ensure_loaded(LlamaDriver.MODEL, 2048)
    vocab = llama_cpp.llama_model_get_vocab(driver._llm.model)

    def accepted(schema: dict) -> bool:
        grammar = LlamaGrammar.from_json_schema(json.dumps(schema), verbose=False)
        sampler = llama_cpp.llama_sampler_init_grammar(vocab, grammar._grammar.encode(), b"root")
        if not sampler:
            return False
        llama_cpp.llama_sampler_free(sampler)
        return True

    schemas = structured_schemas()
    schemas |= {f"evidence {kind} {n}": planner.evidence_schema(kind, n)
                for kind in KINDS for n in (1, planner.EVIDENCE_MAX_ITEMS)}
    refused = [name for name, schema in schemas.items() if not accepted(schema)]
    assert refused == []
    longest = {"type": "object", "properties": {"t": {"type": "string", "maxLength": planner.GRAMMAR_MAX_TEXT_CHARS}}}
    assert accepted(longest)
    longer = {"type": "object", "properties": {"t": {"type": "string",
                                                     "maxLength": planner.GRAMMAR_MAX_TEXT_CHARS + 1}}}
    assert not accepted(longer), "llama.cpp's limit moved: GRAMMAR_MAX_TEXT_CHARS can follow it"


def test_a_summary_fits_the_num_predict_setting_so_the_grammar_ends_it_before_the_budget() -> None:
    """With `num_predict` 384 (the demo's for a 270M model on 2 cores) the longest summary is
    shortened until its largest answer fits: a model writing to the grammar's bound finishes."""
    from briefd.daemon.research.policy import SUMMARY_MIN_FIT_CHARS, summary_chars
    for ceiling in (120, 200, 384, 1024):
        for quotes in (0, 1, 2, 4, 8):
            chars = summary_chars(quotes, ceiling)
            assert chars <= planner.synthesis_chars(quotes)
            bound = answer_token_bound(planner.synthesis_schema(chars))
            assert bound is not None and (bound <= ceiling or chars <= SUMMARY_MIN_FIT_CHARS), (ceiling, quotes)
    assert summary_chars(4, 1024) == planner.SYNTHESIS_MAX_CHARS and summary_chars(4, 384) < planner.SYNTHESIS_MAX_CHARS
