"""Citations are renumbered by first appearance and every one resolves (seed 3)."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from briefd.daemon.rules.citations import Source, cited_numbers, find_citations, number_sources, renumber


def src(n: int) -> Source:
    return Source(n=n, url=f"https://example.org/{n}", title=f"Source {n}")


SOURCES = [src(n) for n in range(1, 13)]


def urls(sources: list[Source]) -> list[str]:
    return [s.url.rsplit("/", 1)[1] for s in sources]


# (summary, available source numbers, expected text, expected old numbers in new order)
CASES = [
    pytest.param("Rates rose [3] and fell [1].", [1, 3], "Rates rose [1] and fell [2].", ["3", "1"],
                 id="first-appearance"),
    pytest.param("A [5]. B [2]. Again A [5].", [2, 5], "A [1]. B [2]. Again A [1].", ["5", "2"],
                 id="repeats-same-number"),
    pytest.param("Claim [9].", [1], "Claim.", [], id="unknown-removed-before-period"),
    pytest.param("Claim [9] continues.", [1], "Claim continues.", [], id="unknown-removed-mid-sentence"),
    pytest.param("[9] Opening claim.", [1], "Opening claim.", [], id="unknown-at-line-start"),
    pytest.param("Claim ([9]).", [1], "Claim.", [], id="unknown-in-parentheses"),
    pytest.param("Claim [2].", [1, 2, 3, 4], "Claim [1].", ["2"], id="uncited-dropped"),
    pytest.param("Claim [4, 2].", [2, 4], "Claim [1][2].", ["4", "2"], id="comma-group"),
    pytest.param("Claim [2; 4].", [2, 4], "Claim [1][2].", ["2", "4"], id="semicolon-group"),
    pytest.param("Claim [2][4].", [2, 4], "Claim [1][2].", ["2", "4"], id="adjacent-groups"),
    pytest.param("Claim [2-4].", [2, 3, 4], "Claim [1][2][3].", ["2", "3", "4"], id="range"),
    pytest.param("Claim [2–4].", [2, 3, 4], "Claim [1][2][3].", ["2", "3", "4"], id="en-dash-range"),
    pytest.param("Claim [ 2 ].", [2], "Claim [1].", ["2"], id="spaces-inside"),
    pytest.param("Claim [2, 9].", [2], "Claim [1].", ["2"], id="group-keeps-known"),
    pytest.param("Claim [1-5].", [2, 4], "Claim [1][2].", ["2", "4"], id="range-keeps-known"),
    pytest.param("Claim [1], [9] more.", [1], "Claim [1] more.", ["1"], id="separator-goes-with-removed"),
    pytest.param("Claim [9], [1] more.", [1], "Claim [1] more.", ["1"], id="separator-before-kept"),
    pytest.param("Claim [3][9][1].", [1, 3], "Claim [1][2].", ["3", "1"], id="hole-between-kept"),
    pytest.param("Claim [9][10], next.", [1], "Claim, next.", [], id="two-unknown-one-hole"),
    pytest.param("See [the docs](https://x.org) and [3].", [3], "See [the docs](https://x.org) and [1].",
                 ["3"], id="markdown-link-ignored"),
    pytest.param("See [2](https://x.org) and [3].", [2, 3], "See [2](https://x.org) and [1].", ["3"],
                 id="numeric-link-text-ignored"),
    pytest.param("Note[^1] and [3].", [1, 3], "Note[^1] and [1].", ["3"], id="footnote-ignored"),
    pytest.param("Years [1990-2020] then [2].", [2], "Years then [1].", ["2"], id="wide-range-not-expanded"),
    pytest.param("Claim [4, 2] then [2, 4].", [2, 4], "Claim [1][2] then [1][2].", ["4", "2"],
                 id="group-sorted-consistently"),
    pytest.param("Line one [3].\n\nLine two [9].\n- item [1]", [1, 3],
                 "Line one [1].\n\nLine two.\n- item [2]", ["3", "1"], id="markdown-kept"),
    pytest.param("No citations at all.", [1, 2], "No citations at all.", [], id="none-cited"),
    pytest.param("Claim [1000000000000000000000] and [1].", [1], "Claim and [1].", ["1"], id="absurd-number-removed"),
    pytest.param("Claim [1234567890123].", [1], "Claim.", [], id="thirteen-digits-removed"),
    pytest.param("Claim [1, 99999999999999999999] end.", [1], "Claim [1] end.", ["1"], id="absurd-in-group"),
    pytest.param("Claim [0001] end.", [1], "Claim [1] end.", ["1"], id="leading-zeros"),
    pytest.param("Claim [2-" + "9" * 40 + "].", [2], "Claim [1].", ["2"], id="absurd-range-end"),
]


@pytest.mark.parametrize(("summary", "available", "expected", "order"), CASES)
def test_renumber_table(summary: str, available: list[int], expected: str, order: list[str]) -> None:
    text, cited = renumber(summary, [src(n) for n in available])
    assert text == expected
    assert urls(cited) == order
    assert [s.n for s in cited] == list(range(1, len(cited) + 1))
    assert renumber(text, cited) == (text, cited)


def test_returned_sources_keep_url_and_title() -> None:
    _, cited = renumber("x [7] y [2]", [Source(2, "https://b.org", "B"), Source(7, "https://a.org", "A")])
    assert cited == [Source(1, "https://a.org", "A"), Source(2, "https://b.org", "B")]


def test_duplicate_source_numbers_use_the_first() -> None:
    _, cited = renumber("x [1]", [Source(1, "https://first", "F"), Source(1, "https://second", "S")])
    assert cited == [Source(1, "https://first", "F")]


def test_brackets_joined_by_a_removal_do_not_leave_a_dangling_citation() -> None:
    text, cited = renumber("odd [[9]1] text [2]", SOURCES[:2])
    assert set(cited_numbers(text)) <= {s.n for s in cited}
    assert renumber(text, cited) == (text, cited)


def test_cited_numbers_distinct_in_order() -> None:
    assert cited_numbers("b [3] a [1, 3] c [2-4] [x](y) [^5] [7](z)") == [3, 1, 2, 4]


def test_find_citations_positions() -> None:
    text = "a [2] b [1, 3]"
    found = find_citations(text)
    assert [text[c.start : c.end] for c in found] == ["[2]", "[1, 3]"]
    assert [c.numbers for c in found] == [(2,), (1, 3)]


# --- property: whatever the model writes, the output's citations resolve and count 1..k

_piece = st.one_of(
    st.sampled_from(["Claim", "rates rose", ".", ",", " ", "\n", "(", ")", "[", "]", "-", "[^2]",
                     "[link](https://x.org)", "[2](https://x.org)", "foo;", "\n\n"]),
    st.integers(0, 15).map(lambda n: f"[{n}]"),
    st.lists(st.integers(0, 15), min_size=1, max_size=4).map(lambda ns: "[" + ", ".join(map(str, ns)) + "]"),
    st.tuples(st.integers(0, 15), st.integers(0, 15)).map(lambda ab: f"[{ab[0]}-{ab[1]}]"),
    st.text(alphabet="ab []0123456789,-.(", max_size=6),
    st.text(alphabet="0123456789", min_size=13, max_size=80).map(lambda digits: f"[{digits}]"),
)


@settings(max_examples=400, deadline=None)
@given(pieces=st.lists(_piece, max_size=25), available=st.sets(st.integers(1, 12), max_size=12))
def test_every_output_citation_resolves_and_is_numbered_by_first_appearance(
    pieces: list[str], available: set[int]
) -> None:
    summary = "".join(pieces)
    text, cited = renumber(summary, [src(n) for n in sorted(available)])
    numbers = cited_numbers(text)
    # numbering is 1..k in first-appearance order, and the sources are exactly those k
    assert numbers == list(range(1, len(numbers) + 1))
    assert [s.n for s in cited] == numbers
    # a naive checker (one regex for [n]) also finds only resolvable numbers
    assert {int(n) for n in re.findall(r"\[(\d+)\]", text)} - {s.n for s in cited} <= _link_texts(text)
    # each returned source is one of the given ones, never invented
    assert {s.url for s in cited} <= {src(n).url for n in available}
    assert renumber(text, cited) == (text, cited)


def _link_texts(text: str) -> set[int]:
    """Numbers that appear only as Markdown link text `[n](url)`, which are not citations."""
    return {int(n) for n in re.findall(r"\[(\d+)\]\(", text)}


def test_a_digit_run_of_any_length_is_a_citation_and_is_removed() -> None:
    """docs/contract.md: every [n] in the final summary resolves, however long the number the model wrote."""
    for digits in ("1" * 13, "1" * 100, "9" * 5000):
        text, cited = renumber(f"Claim [{digits}] and [2].", [src(1), src(2)])
        assert re.findall(r"\[(\d+)\]", text) == ["1"], text[:80]
        assert urls(cited) == ["2"]
    # leading zeros are read past, however many: this one is source 1
    assert renumber("Claim [" + "0" * 5000 + "1].", [src(1)]) == ("Claim [1].", [src(1)])


# --- every source the conclusions rest on is numbered: cited first, then the others


def used(*names: str) -> list[Source]:
    return [Source(n=i, url=f"https://example.org/{name}", title=name.upper()) for i, name in enumerate(names, 1)]


# (cited URLs in order, used URLs strongest first, expected (url, n, cited) list)
NUMBERING = [
    pytest.param(["a", "b"], ["a", "b", "c"], [("a", 1, True), ("b", 2, True), ("c", 3, False)],
                 id="one-uncited-continues"),
    pytest.param(["c"], ["a", "b", "c"], [("c", 1, True), ("a", 2, False), ("b", 3, False)],
                 id="uncited-in-strength-order"),
    pytest.param([], ["b", "a"], [("b", 1, False), ("a", 2, False)], id="nothing-cited"),
    pytest.param(["a", "b"], ["b", "a"], [("a", 1, True), ("b", 2, True)], id="all-cited-unchanged"),
    pytest.param(["a"], ["b", "b", "a"], [("a", 1, True), ("b", 2, False)], id="a-url-numbered-once"),
    pytest.param([], [], [], id="no-sources"),
]


@pytest.mark.parametrize(("cited", "offered", "expected"), NUMBERING)
def test_number_sources_table(cited: list[str], offered: list[str], expected: list[tuple[str, int, bool]]) -> None:
    cited_sources = [Source(n=i, url=f"https://example.org/{u}", title=u.upper()) for i, u in enumerate(cited, 1)]
    numbered = number_sources(cited_sources, used(*offered))
    assert [(s.url.rsplit("/", 1)[1], s.n, s.cited) for s in numbered] == expected
    assert all(s.title == s.url.rsplit("/", 1)[1].upper() for s in numbered), "titles travel with their URL"


def test_numbering_after_renumber_keeps_the_summarys_numbers_and_numbers_every_source() -> None:
    offered = used("a", "b", "c", "d")  # numbers as the synthesis was shown them
    text, cited = renumber("C rose [3] and A fell [1].", offered)
    numbered = number_sources(cited, offered)
    assert text == "C rose [1] and A fell [2]."
    assert [(s.n, s.url.rsplit("/", 1)[1], s.cited) for s in numbered] == [
        (1, "c", True), (2, "a", True), (3, "b", False), (4, "d", False)]
    assert cited_numbers(text) == [s.n for s in numbered if s.cited]
