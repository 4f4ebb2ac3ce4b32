"""`make bench`'s rule-vector part: `briefd eval --vectors` on both halves of briefd's vectors (not a test).

The vectors (lab/vectors/dev.json and test.json: real sentences of other projects' manuals,
configuration references, normative texts, books, changelogs and licence texts; lab/vectorset.py) were
split by project into a dev half, which rules may be written from, and a test half, frozen before any rule
changed, which a change is judged on and never tuned on. This prints the two halves side by side, by genre,
and issue 27's goals on the test half as met or not.

Run alone: python -m lab.vectors_bench [--json]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from lab.workspace import BRIEFD

VECTORS = Path(__file__).resolve().parent / "vectors"
HALVES = ("dev", "test")
# issue 28's relevance cases: another program's sentence sharing only a question's common words (tests/ops/test_vectors.py)
COMMON_WORDS = {half: f"common-words-{half}" for half in HALVES}
# issue 27's goals, on the test half
KEPT_GOAL = 0.90       # figures that state the quantity asked, kept with the right value
TRAPS_GOAL = 0.03      # traps kept, at most
CONTRACTS_GOAL = 0.85  # contracts decided right, none the wrong way
RELEVANCE_GOAL = 0.90


def scored(half: str) -> dict[str, Any]:
    """`briefd eval --vectors <half>.json --json` (a file of lab/vectors/), the real console script, as a site
    runs it."""
    path = VECTORS / f"{half}.json"
    done = subprocess.run([BRIEFD, "eval", "--vectors", str(path), "--json"], capture_output=True, text=True,
                          timeout=600)
    if done.returncode != 0:
        raise SystemExit(f"briefd eval --vectors {path} exited {done.returncode}: {done.stderr[-2000:]}")
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def share(n: int, of: int) -> str:
    return f"{n}/{of} ({100 * n // of} %)" if of else "-"


ROWS = (("all cases right", "right", "cases"), ("figures stating the quantity, kept right", "kept_right", "should_keep"),
        ("traps kept", "traps_kept", "traps"), ("contracts decided right", "contracts_right", "contracts"),
        ("contracts decided the wrong way", "contracts_wrong_way", "contracts"),
        ("relevance right", "relevance_right", "relevance"))


def by_genre(result: dict[str, Any]) -> dict[str, tuple[int, int]]:
    out: dict[str, tuple[int, int]] = {}
    for case in result["cases"]:
        right, total = out.get(case.get("genre", ""), (0, 0))
        out[case.get("genre", "")] = (right + case["right"], total + 1)
    return out


def goals(t: dict[str, int]) -> list[str]:
    def line(ok: bool, text: str) -> str:
        return f"  [{'met' if ok else 'NOT met'}] {text}"

    kept = t["kept_right"] / t["should_keep"] if t["should_keep"] else 0.0
    traps = t["traps_kept"] / t["traps"] if t["traps"] else 0.0
    contracts = t["contracts_right"] / t["contracts"] if t["contracts"] else 0.0
    relevance = t["relevance_right"] / t["relevance"] if t["relevance"] else 0.0
    return [
        line(kept >= KEPT_GOAL, f"figures that state the quantity asked kept with the right value >= 90 %: "
                                f"{share(t['kept_right'], t['should_keep'])}"),
        line(traps <= TRAPS_GOAL, f"traps kept <= 3 %: {share(t['traps_kept'], t['traps'])}"),
        line(contracts >= CONTRACTS_GOAL and t["contracts_wrong_way"] == 0,
             f"contracts decided right >= 85 %, none the wrong way: {share(t['contracts_right'], t['contracts'])}, "
             f"{t['contracts_wrong_way']} the wrong way"),
        line(relevance >= RELEVANCE_GOAL, f"relevance right >= 90 %: {share(t['relevance_right'], t['relevance'])}"),
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--json", action="store_true", help="both halves' `briefd eval --vectors --json`")
    args = parser.parse_args(argv)
    results = {half: scored(half) for half in HALVES}
    common = {half: scored(COMMON_WORDS[half]) for half in HALVES}
    if args.json:
        results.update({COMMON_WORDS[half]: common[half] for half in HALVES})
        print(json.dumps(results, indent=1))
        return 0
    print("briefd bench: the rules on the rule vectors (`briefd eval --vectors`), dev half and frozen test half")
    print("| | dev | test |\n|---|---|---|")
    for label, n, of in ROWS:
        cells = [share(results[h]["totals"][n], results[h]["totals"][of]) for h in HALVES]
        print(f"| {label} | {' | '.join(cells)} |")
    cells = [share(common[h]["totals"]["relevance_right"], common[h]["totals"]["relevance"]) for h in HALVES]
    print(f"| relevance right, another program's sentence sharing common words (common-words-*.json) | "
          f"{' | '.join(cells)} |")
    genres = sorted({g for h in HALVES for g in by_genre(results[h])})
    for genre in genres:
        cells = [share(*by_genre(results[h]).get(genre, (0, 0))) for h in HALVES]
        print(f"| {genre or '(no genre)'}: right | {' | '.join(cells)} |")
    print("issue 27's goals, on the frozen test half:")
    for line in goals(results["test"]["totals"]):
        print(line)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
