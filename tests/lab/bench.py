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
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests.lab.corpus import TOPICS
from tests.lab.servers import start_ollama, start_search_lab

BRIEFS = {
    "kestrel": {"question": TOPICS["kestrel"].question, "depth": "quick"},
    "northgate": {"question": TOPICS["northgate"].question, "depth": "standard"},
    "lakeside": {"question": TOPICS["lakeside"].question, "depth": "quick"},
    "orbital": {"question": TOPICS["orbital"].question, "depth": "quick", "fetch_pages": False},
}


def run_pass(root: Path, env: dict[str, str], label: str) -> list[dict]:
    inbox = root / "inbox"
    inbox.mkdir(exist_ok=True)
    for brief_id, brief in BRIEFS.items():
        (inbox / f"{brief_id}.json").write_text(json.dumps(brief))
    briefd = str(Path(sys.executable).with_name("briefd"))
    started = time.monotonic()
    subprocess.run([briefd, "run", "--once"], env=env, cwd=root, check=True,
                   stderr=open(root / f"{label}.log", "w"))
    total = time.monotonic() - started
    rows = []
    for brief_id in BRIEFS:
        report = json.loads((root / "outbox" / brief_id / "report.json").read_text())
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
        env = {k: v for k, v in os.environ.items() if not k.startswith("BRIEFD_")}
        env.update({"BRIEFD_INBOX": str(root / "inbox"), "BRIEFD_OUTBOX": str(root / "outbox"),
                    "BRIEFD_DB": str(root / "briefd.db"), "OLLAMA_HOST": url, "BRIEFD_MODEL": "lab-scripted",
                    "BRIEFD_SEARXNG_URL": lab.searxng_url, "BRIEFD_FETCH_TIMEOUT_S": "5",
                    "NO_PROXY": "127.0.0.1,localhost"})
        rows = run_pass(root, env, "first") + run_pass(root, env, "again")
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
