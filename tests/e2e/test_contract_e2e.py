"""A hypothesis with and without seed 2's contract, end to end through the lab (issue 9 #4).

The lakeside claim is "cut lead levels below 5 ppb"; the corpus has the utility and the state
regulator at 4.6 and 3.9 ppb and a university study at 7.6 ppb. The same brief runs twice:
with a contract (90th-percentile lead level < 5 ppb) its verdict is computed from the figures
code reads in the quotes (`deterministic`), and every quote's stance is its figures', whatever
the scripted model said; without one the verdict weighs the model's labels (`advisory`) and
the report says what that means. The run has `source_tiers` rules for the regulator's letter
and the university's study, as an organisation would for sources it trusts; the model's own
regulator and peer-reviewed labels on other (loopback) pages are capped: the Tribune's news
story "Study challenges utility's claim ..." is what the scripted model, reading its title,
calls peer-reviewed.
"""

from __future__ import annotations

import pytest

from briefd.daemon.rules import contracts, judge
from briefd.daemon.rules.judge import ADVISORY, DETERMINISTIC, EVIDENCE_LEVEL_MEANING, MODEL_TIER_CEILING
from tests.conftest import Workspace, researched
from lab.corpus import TOPICS
from lab.drivers import Source, guess_tier

LAKESIDE = TOPICS["lakeside"]
CONTRACT = {"metric": "90th-percentile lead level", "comparator": "<", "target": 5, "unit": "ppb"}
# the advisory brief first: it searches and fetches, and the contract brief replays its rounds (the
# inbox takes briefs by time, then name: two dropped in one clock tick ran in this order in CI)
BRIEFS = {
    "lakeside-advisory": {"question": LAKESIDE.question, "depth": "standard",
                          "hypothesis": {"claim": LAKESIDE.claim}},
    "lakeside-contract": {"question": LAKESIDE.question, "depth": "standard",
                          "hypothesis": {"claim": LAKESIDE.claim, **CONTRACT}},
}
RULES = {"lakeside-deq-letter": "regulator", "lakeside-university-study": "peer_reviewed"}
NEWS_CALLED_A_STUDY = "lakeside-tribune-study"


@pytest.fixture(scope="module")
def ran(tmp_path_factory, search_lab, paced_ollama) -> tuple[Workspace, dict[str, str]]:
    """Both briefs researched, the model paced (conftest.PACED_SECONDS_PER_ANSWER): the tests name the
    pages each report rests on, the regulator's letter among them, which the first brief fetches late in
    its second round; with an instant model its synthesis could begin before the letter came."""
    urls = {slug: search_lab.page_url(slug) for slug in [*RULES, NEWS_CALLED_A_STUDY]}
    rules = ", ".join(f"{urls[slug]}={tier}" for slug, tier in RULES.items())
    ws = researched(tmp_path_factory.mktemp("contract"), search_lab, paced_ollama, BRIEFS,
                    BRIEFD_SOURCE_TIERS=rules)
    return ws, urls


@pytest.mark.slow
def test_a_contract_gives_a_deterministic_verdict_computed_from_the_quoted_figures(ran) -> None:
    ws, _ = ran
    report = ws.report("lakeside-contract")
    verdict, evidence = report["verdict"], report["evidence"]
    assert verdict["evidence_level"] == DETERMINISTIC
    assert verdict["contract"] == "90th-percentile lead level < 5 ppb"
    contract = contracts.Contract("<", 5.0, "ppb", "90th-percentile lead level")
    stances = {e["quote"]: contracts.quote_stance(contract, e["quote"]).stance for e in evidence}
    assert [e["stance"] for e in evidence] == [stances[e["quote"]] for e in evidence], \
        "each quote's stance is what its figures say, not the model's label"
    assert "contradicts" in stances.values() and "supports" in stances.values(), stances
    assert any("7.6" in q for q, s in stances.items() if s == "contradicts"), "the university's 7.6 ppb counts against"
    recomputed = judge.contract_verdict(contract, [judge.Quoted(e["quote"], e["tier"], judge.independent_source(e["url"]), e["url"]) for e in evidence])
    assert (verdict["value"], verdict["rule"]) == (recomputed.value, recomputed.rule)
    assert verdict["rule"].startswith("contract 90th-percentile lead level < 5 ppb:")
    assert verdict["value"] == "inconclusive", "contested, as the corpus says: the study's 7.6 ppb stands against"
    assert "peer_reviewed source contradicts" in verdict["rule"]
    md = (ws.outbox / "lakeside-contract" / "report.md").read_text(encoding="utf-8").replace("\\", "")
    assert EVIDENCE_LEVEL_MEANING[DETERMINISTIC] in md


def test_a_figure_against_the_contract_is_a_contradiction_whatever_the_model_labelled_it(ran) -> None:
    """The issue's case, on the lab: the scripted model labels the university's sentence with
    "a 90th-percentile lead level of 7.6 ppb" as support (in the brief without a contract);
    with the contract the same quote counts against the claim."""
    ws, _ = ran
    labelled = {e["quote"]: e["stance"] for e in ws.report("lakeside-advisory")["evidence"]}
    computed = {e["quote"]: e["stance"] for e in ws.report("lakeside-contract")["evidence"]}
    overruled = [q for q, s in computed.items() if "7.6 ppb" in q and s == "contradicts"
                 and labelled.get(q) == "supports"]
    assert overruled, (labelled, computed)


def test_without_a_contract_the_verdict_is_advisory_and_says_so(ran) -> None:
    ws, _ = ran
    report = ws.report("lakeside-advisory")
    assert report["verdict"]["evidence_level"] == ADVISORY
    assert report["verdict"]["contract"] is None
    md = (ws.outbox / "lakeside-advisory" / "report.md").read_text(encoding="utf-8").replace("\\", "")
    assert EVIDENCE_LEVEL_MEANING[ADVISORY] in md
    assert EVIDENCE_LEVEL_MEANING[DETERMINISTIC] not in md


def test_only_the_source_tiers_rules_make_a_regulator_or_a_peer_reviewed_source(ran) -> None:
    """The scripted model labels pages regulator or peer_reviewed from their titles; on
    loopback hosts only the organisation's rules stand, and the news story it calls a study
    is capped at MODEL_TIER_CEILING."""
    ws, urls = ran
    assert guess_tier(Source(title="Study challenges utility's claim that the upgrade cut lead below 5 ppb",
                             url=urls[NEWS_CALLED_A_STUDY])) == "peer_reviewed", "the model's label, unchecked"
    for brief_id in BRIEFS:
        evidence = ws.report(brief_id)["evidence"]
        for slug, tier in RULES.items():
            ruled = [e["tier"] for e in evidence if e["url"] == urls[slug]]
            assert ruled and set(ruled) == {tier}, (brief_id, slug, ruled)
        others = [e for e in evidence if e["url"] not in {urls[slug] for slug in RULES}]
        assert others and all(e["tier"] not in ("regulator", "peer_reviewed") for e in others), \
            [(e["url"], e["tier"]) for e in others]
        news = [e["tier"] for e in evidence if e["url"] == urls[NEWS_CALLED_A_STUDY]]
        assert news and set(news) == {MODEL_TIER_CEILING}, (brief_id, news)
