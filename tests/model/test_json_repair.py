"""parse_json_answer: what small local models really send back, and what briefd makes of it.

The table holds answers of the kinds seen from 0.3B-8B models (prose around the JSON,
code fences, <think> blocks, answers cut off at num_predict, trailing commas). The
properties check the promises for any JSON: damage around it never changes the value,
and a truncated answer either closes into a prefix of the original or raises
AnswerError, never anything else.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from briefd.daemon.model.jsonrepair import AnswerError, parse_json_answer, parse_json_answer_ex

PLAN = {
    "research_question": "How large was the cost overrun of the Berlin airport?",
    "angles": ["official audits", "press reports"],
    "queries": ["BER airport cost overrun audit", "BER final cost billion euro"],
    "gaps": ["final total cost", "original budget"],
}
PLAN_TEXT = json.dumps(PLAN)

# (answer as the model sent it, value briefd reads, repairs it reports)
REPAIRED: list[tuple[str, Any, list[str]]] = [
    (PLAN_TEXT, PLAN, []),
    (json.dumps(PLAN, indent=2), PLAN, []),
    ("\ufeff" + PLAN_TEXT + "\n\n", PLAN, []),
    ("```json\n" + PLAN_TEXT + "\n```", PLAN, ["fence"]),
    ("```\n" + json.dumps(PLAN, indent=2) + "\n```\n", PLAN, ["fence"]),
    ("```JSON\n" + PLAN_TEXT + "```", PLAN, ["fence"]),
    ("Here is the JSON you asked for:\n\n" + PLAN_TEXT, PLAN, ["prose"]),
    (PLAN_TEXT + "\n\nI hope this helps! Let me know if you need more queries.", PLAN, ["prose"]),
    ("Sure! Based on the question, here is my plan:\n```json\n" + PLAN_TEXT + "\n```\nThese queries cover the audits.",
     PLAN, ["fence", "prose"]),
    # Prose that itself holds brackets, like the citations a synthesis talks about.
    ("The summary cites [1] and [2] as asked:\n" + '{"summary": "Costs rose to 7.3 bn EUR [1][2]."}',
     {"summary": "Costs rose to 7.3 bn EUR [1][2]."}, ["prose"]),
    ("<think>\nThe user wants a plan. I should output {research_question, angles}.\n</think>\n\n" + PLAN_TEXT,
     PLAN, ["think"]),
    ("<think></think>" + PLAN_TEXT, PLAN, ["think"]),
    ("<THINK>a</THINK> <think>b</think>\n" + PLAN_TEXT, PLAN, ["think"]),
    ("<think>\nOkay, let me think about the angles first... then answer.\n" + PLAN_TEXT, PLAN, ["think", "prose"]),
    # The chat template opened <think> in the prompt: only the closing tag is in the answer.
    ("so the draft would be {\"angles\": []} but better:\n</think>\n" + PLAN_TEXT, PLAN, ["think"]),
    ('{"angles": ["a", "b",], "gaps": [],}', {"angles": ["a", "b"], "gaps": []}, ["trailing_comma"]),
    ('Result: {"items": [{"gap": "G1",},\n],}', {"items": [{"gap": "G1"}]}, ["prose", "trailing_comma"]),
    # Braces, brackets, quotes, fences and think tags inside strings are data, never structure.
    ('{"summary": "use {braces} and [brackets], \\"quoted\\" } ]", "n": 1}',
     {"summary": 'use {braces} and [brackets], "quoted" } ]', "n": 1}, []),
    ('Answer: {"summary": "a } b { c ] d [", "n": [1, {"x": "}"}]} done',
     {"summary": "a } b { c ] d [", "n": [1, {"x": "}"}]}, ["prose"]),
    ('```json\n{"summary": "Code:\\n```py\\nx = 1\\n```\\nend"}\n```',
     {"summary": "Code:\n```py\nx = 1\n```\nend"}, ["fence"]),
    ('{"summary": "the page said </think> here"}', {"summary": "the page said </think> here"}, []),
    ('{"summary": "line one\nline two"}', {"summary": "line one\nline two"}, []),
    ('[{"a": 1}, {"b": 2}]', [{"a": 1}, {"b": 2}], []),
    # Cut off at num_predict, at many points of an evidence answer.
    ('{"items": [{"sentence_ids": ["S1", "S2"], "summary": "The audit found 7.3 bn", "confidence": 0.8, "gap": "G1"}, '
     '{"sentence_ids": ["S4"], "summ',
     {"items": [{"sentence_ids": ["S1", "S2"], "summary": "The audit found 7.3 bn", "confidence": 0.8, "gap": "G1"},
                {"sentence_ids": ["S4"]}]}, ["truncated"]),
    ('{"items": [{"sentence_ids": ["S1"], "summary": "The audit found 7.3 bn',
     {"items": [{"sentence_ids": ["S1"]}]}, ["truncated"]),
    ('{"items": [{"sentence_ids": ["S1"], "confidence": 0.', {"items": [{"sentence_ids": ["S1"]}]}, ["truncated"]),
    ('{"items": [{"sentence_ids": ["S1"], "ok": tru', {"items": [{"sentence_ids": ["S1"]}]}, ["truncated"]),
    ('{"items": [{"sentence_ids": ["S1"]}], "new_gaps": ["x"', {"items": [{"sentence_ids": ["S1"]}], "new_gaps": ["x"]},
     ["truncated"]),
    ('{"items": [{"sentence_ids": ["S1"]}], "new_gaps": ["x"],', {"items": [{"sentence_ids": ["S1"]}], "new_gaps": ["x"]},
     ["truncated"]),
    ('{"items": [{"sentence_ids": ["S1"]}], "new_gaps": ["x"], "new_q', {"items": [{"sentence_ids": ["S1"]}],
                                                                        "new_gaps": ["x"]}, ["truncated"]),
    ('{"items": [{"sentence_ids": ["S1"]}], "new_gaps": ', {"items": [{"sentence_ids": ["S1"]}]}, ["truncated"]),
    ('{"queries": ["a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l',
     {"queries": ["a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k"]}, ["truncated"]),
    ('```json\n{"angles": ["one", "two"], "queries": ["q1"', {"angles": ["one", "two"], "queries": ["q1"]},
     ["fence", "truncated"]),
    ('{"angles": ["a",], "queries": ["q1", "q2', {"angles": ["a"], "queries": ["q1"]},
     ["trailing_comma", "truncated"]),
    ('<think>long reasoning</think>{"queries": ["q1", "q', {"queries": ["q1"]}, ["think", "truncated"]),
    # ",]" inside a string that was cut off is text, not a trailing comma (found by the property below)
    ('{"a": ["x"], "b": "y,]', {"a": ["x"]}, ["truncated"]),
    ('{"a": ["x"], "b": "y,] and \\', {"a": ["x"]}, ["truncated"]),
]

# (answer, words the reason must contain)
REJECTED: list[tuple[str, str]] = [
    ("", "empty"),
    # a string cut mid-way is dropped, never closed: nothing complete is left
    ('{"summary": "caf\\u00e9 and \\u00', "cut off"),
    ('{"summary": "a backslash \\', "cut off"),
    ('{"summary": "The bridge closed for repairs to a 14-k', "cut off"),
    ("   \n\t ", "empty"),
    ("I'm sorry, but I cannot browse the internet to answer this question.", "no JSON object"),
    ("The plan is to search for audits and press reports.", "no JSON object"),
    ('"just a string"', "a string, not a JSON object"),
    ("42", "a number, not a JSON object"),
    ("null", "null, not a JSON object"),
    ('{"confidence": NaN}', "NaN"),
    ('{"confidence": Infinity}', "Infinity"),
    ('Result: {"low": -Infinity, "high": 3}', "Infinity"),
    ('{"confidence": 1e999}', "1e999"),
    ("<think>The user wants a plan. Let me consider the angles carefully", "<think>"),
    ("<think>I will answer in JSON.</think>\n", "<think>"),
    ("{", "cut off before its first complete value"),
    ('{"items": [', "cut off before its first complete value"),
    ('{"items": [{"sentence_ids": [', "cut off before its first complete value"),
    ('{"research_question": tr', "cut off before its first complete value"),
    ('{"research_question"', "cut off before its first complete value"),
    # Malformed in the middle, not cut off: not silently chopped.
    ('{"angles": ["a" "b"], "queries": ["q"]}', "invalid JSON"),
    ('{"angles": ["a" "b"], "queries": ["q"', "invalid JSON"),
    ("{'angles': ['a']}", "invalid JSON"),
    ("[" * 3000 + "]" * 3000, "nested too deeply"),
]


@pytest.mark.parametrize("answer,expected,repairs", REPAIRED)
def test_small_model_answers_are_repaired(answer: str, expected: Any, repairs: list[str]) -> None:
    value, applied = parse_json_answer_ex(answer)
    assert value == expected
    assert applied == repairs
    assert parse_json_answer(answer) == expected


@pytest.mark.parametrize("answer,words", REJECTED)
def test_unusable_answers_say_why(answer: str, words: str) -> None:
    with pytest.raises(AnswerError) as caught:
        parse_json_answer(answer)
    assert words in caught.value.reason
    assert len(caught.value.reason) < 200  # it is quoted back to the model in the retry


def test_the_longest_json_wins_over_brackets_in_the_prose() -> None:
    answer = 'See sources [1] and [2, 3] below.\n{"summary": "Overrun of 4 bn [1]", "extra": [1, 2, 3]}\nThanks [4].'
    assert parse_json_answer(answer) == {"summary": "Overrun of 4 bn [1]", "extra": [1, 2, 3]}


def test_a_truncated_answer_is_preferred_to_the_complete_pieces_inside_it() -> None:
    # The inner objects are complete JSON; the answer is the outer one, cut off.
    answer = '{"items": [{"gap": "G1"}, {"gap": "G2"}, {"gap": "G'
    assert parse_json_answer_ex(answer) == ({"items": [{"gap": "G1"}, {"gap": "G2"}]}, ["truncated"])


def test_hostile_inputs_fail_fast_with_answer_error() -> None:
    for answer in ("[" * 200_000, '{"a":' * 50_000, "[a] " * 50_000, "x" * 2_000_000):
        with pytest.raises(AnswerError):
            parse_json_answer(answer)


# ---- properties ------------------------------------------------------------------------------------

scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text()
json_values = st.recursive(
    scalars,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4),
    max_leaves=25,
)
json_objects = st.dictionaries(st.text(max_size=12), json_values, max_size=6)
# Prose a model writes around its JSON: anything but brackets and backticks (a bracket in prose
# could itself be JSON, like "[1]"; that case is in the table above).
prose = st.text(alphabet=st.characters(blacklist_characters="{}[]`<>", blacklist_categories=("Cs",)), max_size=80)
thinking = st.text(alphabet=st.characters(blacklist_characters="<>", blacklist_categories=("Cs",)), max_size=80)


def dump(value: Any, indent: int | None, ascii_only: bool) -> str:
    return json.dumps(value, indent=indent, ensure_ascii=ascii_only)


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(
    value=json_objects,
    indent=st.sampled_from([None, 2]),
    ascii_only=st.booleans(),
    before=prose,
    after=prose,
    fence=st.sampled_from(["", "```", "```json"]),
    think=st.none() | thinking,
)
def test_damage_around_any_json_object_never_changes_it(value: dict[str, Any], indent: int | None, ascii_only: bool,
                                                         before: str, after: str, fence: str,
                                                         think: str | None) -> None:
    body = dump(value, indent, ascii_only)
    if fence:
        body = f"{fence}\n{body}\n```"
    answer = before + "\n" + body + "\n" + after
    if think is not None:
        answer = f"<think>{think}</think>\n" + answer
    parsed, repairs = parse_json_answer_ex(answer)
    assert parsed == value
    assert set(repairs) <= {"think", "fence", "prose"}
    if fence:
        assert "fence" in repairs
    if think is not None:
        assert repairs[0] == "think"


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(value=json_objects, indent=st.sampled_from([None, 2]), ascii_only=st.booleans(), data=st.data())
def test_a_truncated_object_closes_into_a_prefix_or_raises_answer_error(value: dict[str, Any], indent: int | None,
                                                                          ascii_only: bool, data: st.DataObject) -> None:
    text = dump(value, indent, ascii_only)
    cut = data.draw(st.integers(min_value=0, max_value=len(text) - 1), label="cut")
    try:
        parsed, repairs = parse_json_answer_ex(text[:cut])
    except AnswerError:
        return
    assert isinstance(parsed, dict)
    assert repairs == ["truncated"]
    keys = list(parsed)
    assert keys == list(value)[: len(keys)]  # the same keys, in order, none invented
    for key in keys[:-1]:
        assert parsed[key] == value[key]  # everything before the cut survives unchanged


@settings(max_examples=200)
@given(answer=st.text(max_size=300))
def test_any_text_parses_or_raises_answer_error(answer: str) -> None:
    try:
        parsed = parse_json_answer(answer)
    except AnswerError as exc:
        assert exc.reason
        return
    assert isinstance(parsed, (dict, list))


@settings(max_examples=200)
@given(answer=st.text(alphabet='{}[]",:\\ abtrue0123.-eE\n', max_size=120))
def test_bracket_soup_parses_or_raises_answer_error(answer: str) -> None:
    try:
        parsed = parse_json_answer(answer)
    except AnswerError:
        return
    assert isinstance(parsed, (dict, list))
