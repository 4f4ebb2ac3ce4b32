"""Two pages of one manual, or two articles of one archive, are one source (judge.independent_source): the
issue's real-document runs counted a manual's two pages as two independent sources, and two such pages
corroborated a figure or carried a verdict that one source could not. A web page stays its own source."""

from __future__ import annotations

import pytest

from briefd.daemon.research.loop import _quotes, _readings
from briefd.daemon.rules import judge
from briefd.daemon.rules.contracts import Contract
from briefd.daemon.sources.zim import archive_url

DOCS = "file:///usr/share/doc"


@pytest.mark.parametrize("a, b, same", [
    (f"{DOCS}/bash-doc/bashref.html", f"{DOCS}/bash-doc/bashref.pdf", True),        # one manual, two formats
    (f"{DOCS}/git-doc/git-config.html", f"{DOCS}/git-doc/git-gc.html", True),       # one manual's pages
    (f"{DOCS}/git-doc/git-config.html", f"{DOCS}/bash-doc/bashref.html", False),    # two projects' manuals
    ("https://docs.example.org/a.html", "https://docs.example.org/b/c.html", False),  # a web page is its own
    ("https://docs.example.org/a.html", "https://docs.example.org/a.html", True),
    (archive_url("wiki.zim", "A/One"), archive_url("wiki.zim", "A/Two"), True),      # one archive
    (archive_url("wiki.zim", "A/One"), archive_url("other.zim", "A/One"), False),
])
def test_pages_of_one_manual_or_archive_are_one_source(a: str, b: str, same: bool) -> None:
    assert (judge.independent_source(a) == judge.independent_source(b)) is same


def row(url: str, quote: str = "", low: float | None = None, tier: str = "news") -> dict[str, object]:
    return {"url": url, "quote": quote, "tier": tier, "low": low, "high": low, "confidence": 0.6,
            "impact": "narrows_both", "round": 1, "stance": None}


# bash-doc, HISTSIZE, as the manual says it in HTML and in its PDF
HISTSIZE = "The shell sets the default value to 500 after reading any startup files."


def test_a_manuals_html_and_pdf_do_not_corroborate_each_other() -> None:
    contract = Contract("<", 1000, "commands", "default HISTSIZE")
    quote = "HISTSIZE: The maximum number of commands to remember on the history list. " + HISTSIZE
    rows = [row(f"{DOCS}/bash-doc/bashref.html", quote), row(f"{DOCS}/bash-doc/bashref.pdf", quote)]
    verdict = judge.contract_verdict(contract, _quotes(rows))
    assert verdict.value == "inconclusive", verdict.rule  # two unrated pages of one manual: one source's 0.6
    assert "1 domain(s) support" in verdict.rule
    other = row(f"{DOCS}/bash-completion/README.html", quote)
    assert judge.contract_verdict(contract, _quotes([rows[0], other])).value == "supported", "two projects: two"


def test_two_pages_of_one_manual_are_one_source_at_a_bound() -> None:
    rows = [row(f"{DOCS}/git-doc/git-config.html", low=50), row(f"{DOCS}/git-doc/git-gc.html", low=50)]
    assert judge.credible_sources(_readings(rows, "How many packs does it take to repack?", "packs")) == 1
    rows[1] = row(f"{DOCS}/git-man/git-gc.1.html", low=50)
    assert judge.credible_sources(_readings(rows, "How many packs does it take to repack?", "packs")) == 2
