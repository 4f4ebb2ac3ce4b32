"""Seed 2's hypothesis contract and the source tiers (issue 9 #4), as tables of cases.

With a contract (comparator, target, unit) the verdict is computed by code from the figures
the quotes state: `deterministic`. Without one it weighs the model's stance labels:
`advisory`. A page's tier comes from the organisation's `source_tiers` rule, else from the
model's label, which cannot make a page a regulator or a peer-reviewed source on its own.
"""

from __future__ import annotations

import html
import json
import subprocess
import sys
from pathlib import Path

import pytest

from briefd.daemon.rules import contracts, judge
from briefd.daemon.core.brief import Hypothesis, parse_brief
from briefd.daemon.rules.contracts import Contract
from briefd.daemon.rules.judge import ADVISORY, DETERMINISTIC, EVIDENCE_LEVEL_MEANING, MODEL_TIER_CEILING, TIER_CAPS, Quoted, Stance
from briefd.daemon.report.html import render_html
from briefd.daemon.report.markdown import render_markdown
from briefd.daemon.core.settings import SettingsError, load_settings, settings_table
from tests.conftest import CONTRACT

LEAD = Contract(comparator="<", target=5.0, unit="ppb", metric="90th-percentile lead level")
ISSUE_QUOTE = "Using sequential sampling, we found a 90th-percentile lead level of 7.6 ppb."


# --------------------------------------------------------------------------- one quote, one comparator

STANCES: list[tuple[str, float | tuple[float, float], str, str, str]] = [
    # comparator, target, unit, quote, the stance its figures give
    ("<", 5, "ppb", ISSUE_QUOTE, "contradicts"),
    ("<", 5, "ppb", "The 90th-percentile lead level was 4.6 ppb.", "supports"),
    ("<", 5, "ppb", "The 90th-percentile lead level was 5 ppb.", "contradicts"),  # 5 is not below 5
    ("<", 5, "ppb", "Lead was 3.9 parts per billion at the 90th percentile.", "supports"),
    ("<=", 5, "ppb", "The 90th-percentile lead level was 5 ppb.", "supports"),
    ("<=", 5, "ppb", "The 90th-percentile lead level was 5.2 ppb.", "contradicts"),
    (">", 20, "%", "Turnout rose to 23 percent.", "supports"),
    (">", 20, "%", "Turnout was 20%.", "contradicts"),
    (">=", 20, "%", "Turnout was 20%.", "supports"),
    (">=", 20, "%", "Turnout was 19.5 per cent.", "contradicts"),
    ("==", 431, "USD million", "The overrun was $431 million.", "supports"),
    ("==", 431, "USD million", "The overrun was US$0.431bn.", "supports"),  # another scale, same figure
    ("==", 431, "USD million", "The overrun was $520 million.", "contradicts"),
    ("between", (4, 6), "ppb", "Lead was 4.6 ppb.", "supports"),
    ("between", (4, 6), "ppb", "Lead was 6 ppb.", "supports"),  # both ends included
    ("between", (4, 6), "ppb", "Lead was 7.6 ppb.", "contradicts"),
    ("between", (4, 6), "ppb", "Lead was between 4.2 and 5.5 ppb.", "supports"),
    ("between", (4, 6), "ppb", "Lead was 2-3 ppb.", "contradicts"),
    ("between", (4, 6), "ppb", "Lead was 3-7 ppb.", "neutral"),  # the range straddles the target
]


@pytest.mark.parametrize("comparator, target, unit, quote, expected", STANCES)
def test_each_comparator_decides_from_the_quoted_figure(comparator: str, target: float | tuple[float, float],
                                                        unit: str, quote: str, expected: str) -> None:
    reading = contracts.quote_stance(Contract(comparator, target, unit), quote)
    assert reading.stance == expected, reading


FIGURE_RULES: list[tuple[str, str, list[tuple[str, str]]]] = [
    # "from X" is what it was, not what it is
    ("The 90th-percentile lead level fell from 14.2 ppb in 2023 to 4.6 ppb in 2024 and 3.9 ppb in 2025.",
     "supports", [("14.2 ppb", contracts.EARLIER), ("4.6 ppb", contracts.MEETS), ("3.9 ppb", contracts.MEETS)]),
    # a bound at the target restates the claim; a bound elsewhere decides
    ("Twenty-seven homes (18 percent) exceeded 5 ppb and six exceeded 15 ppb.",
     "contradicts", [("exceeded 5 ppb", contracts.RESTATES), ("exceeded 15 ppb", contracts.FAILS)]),
    ("Lead levels are now below 5 ppb, a third of what they were.", "neutral", [("below 5 ppb", contracts.RESTATES)]),
    ("Every sample was at most 3 ppb.", "supports", [("at most 3 ppb", contracts.MEETS)]),
    # a threshold named is a yardstick, not a reading; "compared with X" is what it was
    ("Lead was 4.6 ppb, below the 5 ppb action level.", "supports", [("4.6 ppb", contracts.MEETS), ("5 ppb", contracts.THRESHOLD)]),
    ("Lead was 4.6 ppb, well below the federal action level of 15 ppb.", "supports",
     [("4.6 ppb", contracts.MEETS), ("15 ppb", contracts.THRESHOLD)]),
    ("Lead fell to 3.9 ppb, compared with 14.2 ppb in 2023.", "supports",
     [("3.9 ppb", contracts.MEETS), ("14.2 ppb", contracts.EARLIER)]),
    ("A 90th-percentile lead level of 7.6ppb.", "contradicts", [("7.6ppb", contracts.FAILS)]),
    # counts, years and other units are not figures in ppb
    ("We sampled 148 homes in 2025; 18% had lead lines.", "neutral", []),
    # two readings on both sides: code cannot tell which is the metric
    ("The utility reports 3.9 ppb; the study found 7.6 ppb.", "neutral", [("3.9 ppb", contracts.MEETS), ("7.6 ppb", contracts.FAILS)]),
]


@pytest.mark.parametrize("quote, expected, figures", FIGURE_RULES)
def test_which_figures_a_quote_states(quote: str, expected: str, figures: list[tuple[str, str]]) -> None:
    reading = contracts.quote_stance(LEAD, quote)
    assert [(f.raw, f.outcome) for f in reading.figures] == figures
    assert reading.stance == expected


# --------------------------------------------------------------------------- the verdict


def test_a_quote_whose_figure_contradicts_counts_as_contradiction_whatever_the_model_said() -> None:
    """The issue's case: "a 90th-percentile lead level of 7.6 ppb" was counted as support for
    "below 5 ppb". Labelled supports by the model, the stance verdict is supported; the
    contract verdict, which reads the figure, counts it against the claim."""
    quotes = [(ISSUE_QUOTE, "peer_reviewed", "https://lakeside.edu/study"),
              ("The Department confirms a 90th-percentile lead result of 4.6 ppb.", "regulator",
               "https://deq.state.gov/letter"),
              ("Lakeside's tap water now tests at 3.9 ppb lead at the 90th percentile.", "news",
               "https://ledger.example/news")]
    labelled = judge.verdict([Stance("supports", 0.9, tier, url) for _q, tier, url in quotes])
    assert labelled.value == "supported" and labelled.evidence_level == ADVISORY
    computed = judge.contract_verdict(LEAD, [Quoted(q, tier, url) for q, tier, url in quotes])
    assert computed.evidence_level == DETERMINISTIC
    assert computed.value == "inconclusive", computed.rule
    assert computed.contradiction == pytest.approx(TIER_CAPS["peer_reviewed"])
    assert ("2 quote(s) with a figure that meets it, 1 with one that fails it, 0 with none that decides"
            in computed.rule)


VERDICTS: list[tuple[str, list[tuple[str, str, str]], str]] = [
    ("two credible domains meet it", [
        ("The 90th-percentile lead level was 4.6 ppb.", "regulator", "deq.gov"),
        ("Lead at the 90th percentile: 3.9 ppb.", "industry", "water-engineering.example")], "supported"),
    ("two credible domains fail it", [
        (ISSUE_QUOTE, "peer_reviewed", "lakeside.edu"),
        ("Lead was measured at 8.1 ppb.", "news", "tribune.example")], "refuted"),
    ("one domain is one voice", [  # (a regulator may decide alone: test_source_tiers.py)
        ("The 90th-percentile lead level was 4.6 ppb.", "industry", "water-engineering.example"),
        ("It was 3.9 ppb in 2025.", "industry", "water-engineering.example")], "inconclusive"),
    ("quotes without a figure in the unit decide nothing", [
        ("The upgrade cut lead levels, officials said.", "regulator", "deq.gov"),
        ("Lead fell sharply after the upgrade.", "industry", "lmwa.example")], "inconclusive"),
    ("social sources never decide", [
        ("Lead was 3 ppb at my tap.", "social", f"forum{i}.example") for i in range(5)], "inconclusive"),
]


@pytest.mark.parametrize("name, quotes, expected", VERDICTS, ids=[v[0] for v in VERDICTS])
def test_contract_verdicts(name: str, quotes: list[tuple[str, str, str]], expected: str) -> None:
    v = judge.contract_verdict(LEAD, [Quoted(q, tier, domain) for q, tier, domain in quotes])
    assert v.value == expected, v.rule
    assert v.evidence_level == DETERMINISTIC
    assert v.rule.startswith("contract 90th-percentile lead level < 5 ppb:")


def test_the_models_confidence_does_not_weigh_a_contract_verdict() -> None:
    """Each quote weighs what its tier allows; the model cannot talk a measured figure down."""
    quotes = [Quoted("The 90th-percentile lead level was 4.6 ppb.", "industry", "a.example"),
              Quoted("Lead at the 90th percentile: 3.9 ppb.", "industry", "b.example")]
    assert judge.contract_verdict(LEAD, quotes).support == pytest.approx(2 * TIER_CAPS["industry"])


@pytest.mark.parametrize("stances", [
    [], [Stance("supports", 0.9, "regulator", "a.gov"), Stance("supports", 0.9, "industry", "b.example")],
    [Stance("contradicts", 0.9, "regulator", "a.gov"), Stance("contradicts", 0.85, "peer_reviewed", "b.edu"),
     Stance("contradicts", 0.6, "news", "c.example")],
])
def test_a_verdict_from_stance_labels_is_never_deterministic(stances: list[Stance]) -> None:
    assert judge.verdict(stances).evidence_level == ADVISORY


def test_the_brief_carries_the_contract_only_when_complete() -> None:
    brief = parse_brief(json.dumps({"question": "q", "hypothesis": {
        "claim": "c", "metric": "90th-percentile lead level", "comparator": "between", "target": [4, 6],
        "unit": "ppb"}}).encode(), "x.json")
    assert brief.hypothesis is not None
    assert brief.hypothesis.contract == Contract("between", (4.0, 6.0), "ppb", "90th-percentile lead level", "c")
    assert brief.hypothesis.to_json()["target"] == [4, 6]
    assert Hypothesis("c").contract is None


def test_briefd_schema_documents_the_contract() -> None:
    out = subprocess.run([sys.executable, "-m", "briefd.daemon.ops.cli", "schema"], capture_output=True, text=True,
                         timeout=60, check=False)
    assert out.returncode == 0, out.stderr
    hypothesis = json.loads(out.stdout)["properties"]["hypothesis"]
    assert set(hypothesis["properties"]) == {"claim", "metric", "comparator", "target", "unit"}
    assert hypothesis["properties"]["comparator"]["enum"] == list(contracts.COMPARATORS)
    assert "deterministic" in hypothesis["description"] and "advisory" in hypothesis["description"]


# --------------------------------------------------------------------------- the report says what it means


def _report(level: str) -> dict[str, object]:
    return {"id": "x", "status": "done", "question": "q?", "summary": "s", "sources": [], "evidence": [],
            "verdict": {"value": "supported", "rule": "r", "evidence_level": level}}


@pytest.mark.parametrize("level", [ADVISORY, DETERMINISTIC])
def test_the_report_says_in_words_what_the_evidence_level_means(level: str) -> None:
    meaning = EVIDENCE_LEVEL_MEANING[level]
    assert meaning in render_markdown(_report(level)).replace("\\", "")
    assert meaning in html.unescape(render_html(_report(level)))
    other = EVIDENCE_LEVEL_MEANING[DETERMINISTIC if level == ADVISORY else ADVISORY]
    assert other not in render_markdown(_report(level)).replace("\\", "")


# --------------------------------------------------------------------------- tiers

TIERS_CASES: list[tuple[str, str | None, tuple[tuple[str, str], ...], str]] = [
    # url, the model's label, source_tiers, the tier used
    ("https://www.lakeside-ledger.example/auditor-says", "regulator", (), MODEL_TIER_CEILING),  # news quoting an auditor
    ("https://www.lakeside-ledger.example/study", "peer_reviewed", (), MODEL_TIER_CEILING),
    ("https://www.epa.gov/lead", "regulator", (), "regulator"),
    ("https://www.gov.uk/guidance", "regulator", (), "regulator"),
    ("https://lakeside.edu/study", "peer_reviewed", (), "peer_reviewed"),
    ("https://chem.ox.ac.uk/paper", "peer_reviewed", (), "peer_reviewed"),
    ("https://lakeside.edu/study", "regulator", (), MODEL_TIER_CEILING),  # a university is not a regulator
    ("https://notgov.example/x", "government", (), MODEL_TIER_CEILING),  # an alias is the same label
    ("https://forum.example/t/1", "news", (), "news"),
    ("https://forum.example/t/1", "social", (), "social"),
    ("https://forum.example/t/1", None, (), "news"),
    # the organisation's rules win, both ways
    ("https://audit.intranet.example/r/2024", "news", (("intranet.example", "regulator"),), "regulator"),
    ("https://www.epa.gov/lead", "regulator", (("epa.gov", "industry"),), "industry"),
    ("https://x.example/studies/a.html", "social",
     (("x.example", "news"), ("https://x.example/studies/", "peer_reviewed")), "peer_reviewed"),  # most specific
    ("https://x.example/studies-old/a.html", "social", (("https://x.example/studies", "peer_reviewed"),), "social"),
    ("https://x.example.evil.test/a", "social", (("x.example", "regulator"),), "social"),
]


@pytest.mark.parametrize("url, model_tier, rules, expected", TIERS_CASES)
def test_capped_tier(url: str, model_tier: str | None, rules: tuple[tuple[str, str], ...], expected: str) -> None:
    assert judge.capped_tier(url, model_tier, rules) == expected


def test_source_tiers_setting_from_the_environment_and_briefd_toml(tmp_path: Path) -> None:
    env = {"BRIEFD_SOURCE_TIERS": "Audit.Example.org=regulator, https://intranet.example/studies/=peer_reviewed"}
    assert load_settings({}, env).source_tiers == (("audit.example.org", "regulator"),
                                                   ("https://intranet.example/studies/", "peer_reviewed"))
    toml = tmp_path / "briefd.toml"
    toml.write_text('[source_tiers]\n"audit.example.org" = "regulator"\n', encoding="utf-8")
    assert load_settings({}, {}, toml).source_tiers == (("audit.example.org", "regulator"),)
    assert load_settings({}, {}).source_tiers == ()


@pytest.mark.parametrize("value, words", [
    ("audit.example.org", ["BRIEFD_SOURCE_TIERS", "has no '=tier'"]),
    ("audit.example.org=government", ["must be one of regulator, peer_reviewed, industry, news, social"]),
    ("audit.example.org/reports=regulator", ["not a host name", "write https://audit.example.org/reports"]),
    ("ftp://x.example/=news", ["not an http(s) URL prefix"]),
])
def test_a_bad_source_tiers_rule_is_named_with_its_fix(value: str, words: list[str]) -> None:
    assert_source_tiers_refused(value, words)


def assert_source_tiers_refused(value: str, words: list[str]) -> None:
    """BRIEFD_SOURCE_TIERS=`value` is refused as the source_tiers setting, in a message with each of `words`."""
    with pytest.raises(SettingsError) as caught:
        load_settings({}, {"BRIEFD_SOURCE_TIERS": value})
    for word in words:
        assert word in str(caught.value)
    assert caught.value.setting == "source_tiers"


def test_the_readmes_worked_examples() -> None:
    """docs/conclusions.md: one deterministic verdict from a contract, one
    advisory verdict from stances, on the same four quotes."""
    quotes = [
        ("The 90th-percentile lead concentrations were 4.6 ppb and 3.9 ppb respectively, below the action level.",
         "regulator", "https://deq.state.example/lakeside"),
        (("In state compliance sampling at 60 homes, the 90th-percentile lead level fell from 14.2 ppb in 2023 "
          "to 4.6 ppb in the second half of 2024 and 3.9 ppb in the first half of 2025."), "industry",
         "https://lmwa.example/news"),
        ("Lakeside's tap water now tests at 3.9 parts per billion of lead at the 90th percentile.", "news",
         "https://ledger.example/a"),
        (ISSUE_QUOTE, "peer_reviewed", "https://lakeside.edu/study"),
        ("Lead levels are now below 5 ppb, a third of what they were.", "industry", "https://lmwa.example/news"),
    ]
    v = judge.contract_verdict(LEAD, [Quoted(*q) for q in quotes])
    assert (v.value, v.evidence_level, v.support, v.contradiction) == ("inconclusive", DETERMINISTIC, 2.25, 0.85)
    assert "support would decide, but a peer_reviewed source contradicts" in v.rule
    without_study = judge.contract_verdict(LEAD, [Quoted(*q) for q in quotes if ".edu" not in q[2]])
    assert without_study.value == "supported"
    labelled = judge.verdict([Stance("supports", 0.9, tier, url) for _q, tier, url in quotes])
    assert (labelled.value, labelled.evidence_level, labelled.support) == ("supported", ADVISORY, 3.05)
    assert "4 domain(s) support (weight 3.05" in labelled.rule


def test_the_names_are_the_ones_the_contract_fixes() -> None:
    text = CONTRACT.read_text(encoding="utf-8")
    assert "`source_tiers`" in text
    assert "comparator? (< <= > >= == between)" in text
    assert "source_tiers" in {row["name"] for row in settings_table()}
    assert " ".join(contracts.COMPARATORS) in text
