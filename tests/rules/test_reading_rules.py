"""The reading rules of issue 27, each table-tested on real sentences of the rule vectors' dev half, both ways.

Every case below is a case of lab/vectors/dev.json (other projects' manuals, none of the real-document
set's nor the held-out ones), decided as `briefd eval --vectors` decides it (daemon/ops/vectors.decide_case):
the quote filter, then the figure rule. Each mechanism appears with cases it must keep and cases it must
refuse. The test half is never quoted here: it is the frozen measure (lab/vectors_bench.py).
"""

from __future__ import annotations

import json
from functools import cache

import pytest

from briefd.daemon.ops.vectors import Case, decide_case, parse_vectors
from briefd.daemon.rules import figures, judge
from lab.vectors_bench import VECTORS


@cache
def dev_cases() -> dict[str, Case]:
    _, cases = parse_vectors(json.loads((VECTORS / "dev.json").read_text(encoding="utf-8")))
    return {case.id: case for case in cases}


MECHANISMS: dict[str, list[str]] = {
    # units from the units library: a figure in another unit of the quantity, a size letter, a unit named before
    "units": ["gnupg-03", "gnupg-04", "systemd-08", "systemd-15", "systemd-16", "systemd-02", "exim4-doc-html-05",
              "sudo-01", "squid-common-02", "systemd-07", "e2fsprogs-06", "dnsmasq-base-02", "gzip-04"],
    # what a figure is, from its own clause: an example, the ends of a permitted range, an extreme, an earlier
    # value, an added amount, what the quantity is not, a recommendation; kept where it is what is asked
    "roles": ["squid-common-04", "sudo-02", "systemd-22", "bzip2-02", "e2fsprogs-07", "haproxy-doc-02",
              "iputils-ping-03", "nfs-common-05", "squid-common-05", "smartmontools-03", "openssl-05", "procps-09",
              "openssl-02", "gnupg-02", "systemd-30", "nfs-common-02", "debian-policy-07", "xz-utils-09",
              "systemd-07", "lz4-05"],
    # figures side by side for different cases: the one whose own words the question asks
    "parallel figures": ["debian-reference-en-01", "debian-reference-en-02", "nfs-common-06", "iputils-ping-04",
                         "php8.2-common-05", "lz4-03", "lz4-04"],
    # a figure said of a setting the question does not name; code, a formula, a command line
    "another setting, code": ["apt-02", "systemd-12", "haproxy-doc-05", "exim4-doc-html-02", "exim4-doc-html-05",
                              "dnsmasq-base-05"],
    # contracts: negation and modality, the extreme the metric is, a range's end, a figure in another unit
    "contracts": ["smartmontools-06", "dnsmasq-base-07", "nfs-common-08", "systemd-28", "exim4-doc-html-06",
                  "debian-reference-en-03", "sudo-05", "smartmontools-05", "systemd-27", "bzip2-07", "e2fsprogs-01",
                  "xz-utils-11", "iputils-ping-06", "procps-10", "debian-policy-01", "e2fsprogs-09", "bzip2-08"],
    # relevance: navigation is never evidence, a quote with no figure answers no "how many", a setting's name
    # read as its words, a sentence that leans on its passage
    "relevance": ["gnupg-08", "systemd-32", "procps-07", "debian-policy-31", "debian-policy-32",
                  "debian-reference-en-05", "openssl-09", "xz-utils-15", "systemd-13", "squid-common-08",
                  "dnsmasq-base-09", "xz-utils-07", "haproxy-doc-04"],
}


@pytest.mark.parametrize("mechanism, case_id",
                         [(mechanism, case_id) for mechanism, ids in MECHANISMS.items() for case_id in ids])
def test_each_mechanism_reads_real_sentences_right(mechanism: str, case_id: str) -> None:
    case = dev_cases()[case_id]
    outcome = decide_case(case)
    assert outcome.right, f"{mechanism}: {case_id} got {outcome.got} ({outcome.rule}); {case.quote[:200]!r}"


def test_the_tables_have_both_ways() -> None:
    """Every mechanism is shown keeping a figure (or deciding a claim, or a quote bearing on a question) and
    refusing one: a rule only tested one way could keep everything or nothing."""
    for mechanism, ids in MECHANISMS.items():
        cases = [dev_cases()[i] for i in ids]
        positive = [c for c in cases if c.expect_kept or c.expect_bears_on or c.expect_stance in ("supports",)]
        negative = [c for c in cases if c.expect_kept is False or c.expect_bears_on is False
                    or c.expect_stance in ("contradicts", "neutral")]
        assert positive and negative, mechanism


# What a model says of its figure can set a kept figure aside, never keep a refused one (the model proposes,
# the rules verify): dev sentences with the reading a careless or a careful model gives.
@pytest.mark.parametrize("case_id, said, kept", [
    ("sudo-01", figures.ModelReading(kind="default", of="password timeout"), True),       # a careful model
    ("sudo-01", figures.ModelReading(kind="example", of="password timeout"), False),      # it says an example's
    ("sudo-01", figures.ModelReading(kind="default", of="log line length"), False),       # of what the quote lacks
    ("haproxy-doc-02", figures.ModelReading(kind="default", of="dynamic header table size"), False),  # refused stays
    ("systemd-16", figures.ModelReading(kind="maximum", of="start timeout"), False),       # an extreme, not the default
    ("systemd-16", figures.ModelReading(kind="default", of="timeout for a unit to start"), True),
])
def test_what_a_model_says_of_its_figure_is_verified(case_id: str, said: figures.ModelReading, kept: bool) -> None:
    case = dev_cases()[case_id]
    assert case.proposed is not None
    lead = case.context.partition("\n")[2]
    lead = lead[:lead.find(case.quote)] if case.quote in lead else ""
    figure = figures.read_figure(case.proposed, case.quote, case.unit, asked=case.question, lead=lead, said=said)
    assert (figure.value is not None) is kept, figure
