"""`make bench`: how fast briefd turns briefs into reports, measured on the lab (not a test).

Runs the four lab briefs through `briefd run --once` against the real search lab and the
scripted model server slowed to a realistic pace (--tokens-per-s), then runs them again to
show what the caches save. Prints one table; numbers are wall-clock on this machine.

What to look at:
- model busy %: llm_seconds / wall_seconds per brief. Fetches overlap the model's reading,
  so this stays high even with slow pages in the results.
- the second pass: page and answer caches mean no page is fetched and no prompt paid twice.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests.lab.corpus import TOPICS
from tests.lab.servers import start_ollama, start_search_lab
from tests.lab.workspace import BRIEFD, Workspace

BRIEFS = {
    "kestrel": {"question": TOPICS["kestrel"].question, "depth": "quick"},
    "northgate": {"question": TOPICS["northgate"].question, "depth": "standard"},
    "lakeside": {"question": TOPICS["lakeside"].question, "depth": "quick"},
    "orbital": {"question": TOPICS["orbital"].question, "depth": "quick", "fetch_pages": False},
}


def run_pass(ws: Workspace, label: str) -> list[dict]:
    for brief_id, brief in BRIEFS.items():
        ws.drop(f"{brief_id}.json", brief)
    started = time.monotonic()
    with open(ws.root / f"{label}.log", "w") as log:
        subprocess.run([BRIEFD, "run", "--once"], env=ws.env(BRIEFD_FETCH_TIMEOUT_S="5"), cwd=ws.root,
                       check=True, stderr=log)
    total = time.monotonic() - started
    rows = []
    for brief_id in BRIEFS:
        report = ws.report(brief_id)
        usage = report["usage"]
        rows.append({"pass": label, "brief": brief_id, **usage, "evidence": len(report["evidence"]),
                     "busy": usage["llm_seconds"] / usage["wall_seconds"] if usage["wall_seconds"] else 0.0})
    rows.append({"pass": label, "brief": "(all, sequential)", "wall_seconds": total})
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens-per-s", type=float, default=60.0,
                        help="pace of the scripted model (a 7B model on a GPU is ~40-80)")
    args = parser.parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="briefd-bench-"))
    lab = start_search_lab(root / "lab")
    try:
        ollama, url = start_ollama(root / "logs", "scripted", extra=("--tokens-per-s", str(args.tokens_per_s)))
    except BaseException:
        lab.stop()
        raise
    try:
        ws = Workspace(root=root, searxng_url=lab.searxng_url, ollama_url=url, model="lab-scripted")
        rows = run_pass(ws, "first") + run_pass(ws, "again")
    finally:
        ollama.stop()
        lab.stop()
    cols = ["pass", "brief", "wall_seconds", "llm_seconds", "busy", "llm_calls", "llm_cache_hits",
            "prompt_tokens", "completion_tokens", "searches", "pages_fetched", "page_cache_hits", "evidence"]
    print(f"briefd bench: scripted model at {args.tokens_per_s:g} tokens/s, real SearXNG and pages on loopback")
    print(" | ".join(cols))
    for row in rows:
        cells = []
        for col in cols:
            value = row.get(col, "")
            if col == "busy" and value != "":
                value = f"{value:.0%}"
            elif isinstance(value, float):
                value = f"{value:.2f}"
            cells.append(str(value))
        print(" | ".join(cells))
    shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
