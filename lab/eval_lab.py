"""An eval set built to miss at each stage, on a library the lab writes (tests/ops/test_eval.py).

Each case is a fictional subject with its own words, so the briefs do not find each other's documents,
and its document is written so that the scripted lab model (lab/drivers.py: it quotes sentences
sharing at least two content words with the question or a gap, figures first) and briefd's own rules
lose the answer at one known stage:

    found      the answer sentence shares the question's words: quoted, and the summary states it
    search     the answer's document shares no word with the question (not even "the"): no search
               returns it
    read       the answer's document is returned second, and the brief may read one page
    extract    the answer is only inside a <script> of an HTML document: extraction drops scripts
    shown      the answer is in a passage of its own sharing no word with the question or the gaps:
               the evidence prompt shows only passages that match them
    chosen     the answer sentence is shown, beside a sentence that shares the question's words,
               but shares none itself: the model quotes the other one
    refused    the answer is a question ("Is ... 4.5 metres?"): the model quotes it (figures first),
               and the rule that a question is not a statement drops it
    reported   the answer follows a comma in the quoted sentence: the lab model's summary keeps
               only a quote's first clause, so the quote is kept and the summary lacks it (a second
               sentence is quoted too, so a summary is asked for: one kept quote is its own answer line),
               and that clause states another figure (a year), so code cannot tell the summary dropped
               the one asked (a summary stating no figure gives way to the quote that states one)

The library is served under egress = none with no SearXNG: only the model server is contacted.
`web_eval_set` adds two web briefs on the lab corpus (real SearXNG, the lab web): results and fetches.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

# case id -> (document name, document text)
LONG_LAKE_HISTORY = (
    "Marlow quarry lake filled when the Marlow quarry pumps were switched off in 1968. "
    "The Marlow quarry lake is now a nature reserve owned by the Marlow parish council. "
    "Swimming in the Marlow quarry lake is forbidden because the Marlow quarry lake stays cold all summer. "
    "Anglers fish the Marlow quarry lake for perch and pike under a parish permit. "
    "The footpath around the Marlow quarry lake is two miles long and passes the old Marlow quarry office. "
    "Birdwatchers count grebes on the Marlow quarry lake every winter for the county survey. "
    "The Marlow quarry lake car park opens at eight in the morning and closes at dusk. "
    "School groups visit the Marlow quarry lake to study the rocks the Marlow quarry exposed. "
    "Volunteers from the Marlow parish clear litter from the Marlow quarry lake shore each spring and mend "
    "its fences after the winter storms have passed."
)

DOCUMENTS: dict[str, tuple[str, str]] = {
    "found": ("quillon-lighthouse.md",
              "# Quillon harbour lighthouse\n\n"
              "The Quillon harbour lighthouse was first lit in 1871 by the Marsh Lighthouse Board.\n"),
    "search": ("vessel-register.md",
               "# Boat register\n\nMorrow boat: painted deep ochre from keel to rail.\n"),
    "read-decoy": ("velloway-depot-timetable.md",
                   "# Velloway tram depot timetable\n\n"
                   "The Velloway tram depot timetable lists every Velloway tram leaving the depot. "
                   "Velloway tram depot staff post the Velloway tram timetable at the depot gate.\n"),
    "read": ("velloway-depot-history.md",
             "# Depot history\n\nWhen it opened, the Velloway depot held 40 trams in 1902.\n"),
    "extract": ("zephyr-relay.html",
                "<!doctype html><html><head><title>Zephyr relay configuration</title></head><body>"
                "<h1>Zephyr relay configuration</h1>"
                "<p>The Zephyr relay listens on a default port that its configuration script sets.</p>"
                "<p>The Zephyr relay configuration script is read once when the Zephyr relay starts.</p>"
                "<script>var zephyrRelayDefaultPort = 7431;</script>"
                "</body></html>"),
    "shown": ("marlow-quarry-lake.md",
              "# Marlow quarry lake\n\n" + LONG_LAKE_HISTORY + "\n\n"
              "Divers have measured 63 metres of water below the old crane.\n"),
    "chosen": ("garnet-hill-observatory.md",
               "# Garnet Hill observatory\n\n"
               "The Garnet Hill observatory dome is the largest observatory dome in the county. "
               "Its first visitors came in the spring of 1931.\n"),
    "refused": ("pellham-canal-lock.md",
                "# Pellham canal lock\n\n"
                "Is the Pellham canal lock lift really 4.5 metres?\n\n"
                "Boaters ask this often.\n"),
    "estimate": ("brisk-orchard-annual-report.md",
                 "# Brisk Orchard annual report\n\n"
                 "The Brisk Orchard cider press produced 4,200 litres of cider in 2024.\n"),
    "contract": ("dunmore-ferry.md",
                 "# Dunmore ferry\n\nThe Dunmore ferry carries 12 cars on each crossing of the Dunmore strait.\n"),
    "reported": ("hollin-watermill.md",
                 "# Hollin watermill\n\n"
                 "After the flood of 1961 the Hollin watermill wheel was rebuilt in oak, and it now turns at 9 "
                 "revolutions a minute.\n\n"
                 "Flour was ground there until 1961.\n\n"
                 "The Hollin watermill wheel is an undershot wheel with 24 oak paddles.\n"),
}

QUESTIONS: dict[str, str] = {
    "found": "When was the Quillon harbour lighthouse first lit?",
    "search": "What colour is the Quillon ferry hull?",
    "read": "How many trams did the Velloway tram depot hold?",
    "extract": "Which default port does the Zephyr relay listen on?",
    "shown": "How deep is the Marlow quarry lake?",
    "chosen": "When did the Garnet Hill observatory dome open?",
    "refused": "How high is the Pellham canal lock lift?",
    "reported": "How fast does the Hollin watermill wheel turn?",
    "estimate": "How many litres of cider did the Brisk Orchard cider press produce in 2024?",
    "contract": "Does the Dunmore ferry carry more than 10 cars on each crossing?",
}

PATTERNS: dict[str, str] = {
    "found": r"first lit in 1871",
    "search": r"deep ochre",
    "read": r"\b40 trams\b",
    "extract": r"\b7431\b",
    "shown": r"63 metres",
    "chosen": r"spring of 1931",
    "refused": r"4\.5 metres",
    "reported": r"9 revolutions a minute",
    "estimate": r"4,200 litres",
    "contract": r"12 cars",
}

# what each case must be found lost at (None: found); the refused case's rule, as decide words it
EXPECTED_STAGE: dict[str, str | None] = {
    "found": None, "search": "search", "read": "read", "extract": "extract", "shown": "shown",
    "chosen": "chosen", "refused": "refused", "reported": "reported",
}
# an estimate and a contract through the same run, for the range and verdict columns: where they end is the
# rules' business (tests/ops/test_eval.py holds eval to the report's own range and verdict), not pinned here
MECHANICS = ("estimate", "contract")
BRIEF_EXTRAS: dict[str, dict[str, Any]] = {
    "read": {"budget": {"pages": 1}},  # the decoy is read first and the budget is spent
    "estimate": {"estimate": {"unit": "litres", "low": 100, "high": 100000}},
    "contract": {"hypothesis": {"claim": "The Dunmore ferry carries more than 10 cars on each crossing",
                                "metric": "cars per crossing", "comparator": ">", "target": 10, "unit": "cars"}},
}
EXPECT_EXTRAS: dict[str, dict[str, Any]] = {
    "estimate": {"number": {"value": 4200, "unit": "litres"}},
    "contract": {"verdict": "supported"},
}


def build_library(folder: Path) -> Path:
    """Write every case's document into `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in DOCUMENTS.values():
        (folder / name).write_text(text, encoding="utf-8")
    return folder


def eval_set(name: str = "eval-lab-stages") -> dict[str, Any]:
    """The eval set (EVAL_FORMAT version 1) of the cases above, library only."""
    cases = []
    for case_id, question in QUESTIONS.items():
        brief: dict[str, Any] = {"id": f"stage-{case_id}", "question": question, "depth": "quick",
                                 "sources": ["library"], "max_rounds": 1, **BRIEF_EXTRAS.get(case_id, {})}
        cases.append({"brief": brief, "expect": {"patterns": [PATTERNS[case_id]], **EXPECT_EXTRAS.get(case_id, {})},
                      "where": [DOCUMENTS[case_id][0]], "verified": DOCUMENTS[case_id][1]})
    return {"name": name, "briefs": cases}


def write_eval_set(path: Path) -> Path:
    path.write_text(json.dumps(eval_set(), indent=2), encoding="utf-8")
    return path


def web_eval_set() -> dict[str, Any]:
    """Two web briefs on the lab corpus (real SearXNG, the lab web): one whose answer pages are read, and
    one whose answer document is returned by search but answers 404 (lab/corpus.py's
    lakeside-lead-results-pdf), lost at `read` with the fetch's error."""
    kestrel = {"id": "web-kestrel", "question": "Why was the Kestrel River bridge closed in 2025?", "depth": "quick",
               "max_rounds": 1, "sources": ["web"]}
    lakeside = {"id": "web-missing", "question": "Did the Lakeside water plant upgrade cut lead levels below 5 ppb?",
                "depth": "quick", "max_rounds": 1, "sources": ["web"]}
    return {"name": "eval-lab-web", "briefs": [
        {"brief": kestrel, "expect": {"patterns": [r"\b(?:7|seven) of (?:the )?(?:bridge's )?32\b"]},
         "where": ["kestrel"]},
        {"brief": lakeside, "expect": {"patterns": [r"quarterly lead results table"]},
         "where": ["lakeside-lead-results-pdf"]},
    ]}
