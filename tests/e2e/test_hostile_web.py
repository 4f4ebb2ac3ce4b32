"""One brief against a hostile web (issue 8 #1 and #11): `briefd run --once` in a subprocess, a
SearXNG whose answer is 200,000 results (about 90 MB) ranking compression bombs first, and the
lab's scripted model. What a user would notice: the brief completes with the corpus pages it
could read, every bomb is remembered as bad for good, the daemon's memory stays bounded and the
store keeps a few dozen results for each query, not the flood.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path


from briefd.daemon.sources.search import MAX_HITS_PER_QUERY
from tests.conftest import OllamaLab
from lab import web
from lab.corpus import TOPICS
from lab.workspace import Workspace

PEAK_RSS_MB = 300
"""The daemon's whole peak, interpreter and libraries included (about 100 MB measured). Before the
fix the flood alone took it to about a gigabyte and the nested bomb to over two."""

ADDRESS_SPACE_CAP = 3 << 30
"""A regression must fail this test, not the machine: the daemon may map 3 GiB at most."""

# VmHWM, not ru_maxrss: the kernel carries a process's ru_maxrss over from whatever it was forked
# (or vforked) from, so under a long pytest run the "daemon's" peak was pytest's own (327 MB);
# VmHWM belongs to the address space exec gave the daemon.
RUN_MEASURED = r"""
import atexit, resource, sys
resource.setrlimit(resource.RLIMIT_AS, (int(sys.argv[1]), resource.RLIM_INFINITY))
report = sys.argv[2]
def peak_kb():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return line.split()[1]
atexit.register(lambda: open(report, "w").write(peak_kb()))
from briefd.daemon.ops.cli import main
sys.exit(main(sys.argv[3:]))
"""


def test_bombs_and_a_flooding_searxng_cost_the_brief_nothing(
        tmp_path: Path, hostile_web: str, scripted_ollama: OllamaLab) -> None:
    ws = Workspace(root=tmp_path, searxng_url=f"{hostile_web}/hostile/searxng", ollama_url=scripted_ollama.url,
                   model="lab-scripted")
    ws.drop("kestrel.json", {"question": TOPICS["kestrel"].question, "depth": "quick", "max_rounds": 1,
                                  "max_searches_per_round": 4})  # 8 pages: the 5 bombs, 3 articles
    scripted_ollama.reset()
    peak_file = tmp_path / "peak_kb"
    env = ws.env(PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    proc = subprocess.run(
        [sys.executable, "-c", RUN_MEASURED, str(ADDRESS_SPACE_CAP), str(peak_file), "run", "--once"],
        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-4000:]

    report = ws.report("kestrel")
    assert report["status"] == "done", report.get("stop_reason")

    bombs = {f"{hostile_web}/hostile/{name}" for name in web.BOMBS}
    with sqlite3.connect(ws.db) as db:
        bad = dict(db.execute("SELECT url, reason FROM bad_urls").fetchall())
        per_query = db.execute("SELECT query, COUNT(*) FROM search_results GROUP BY run_id, round, query").fetchall()
        cached = [len(r) for (r,) in db.execute("SELECT response FROM search_cache")]
    fetched = {e["url"]: e for e in ws.events("kestrel") if e.get("type") == "page_fetched"}
    assert bombs <= set(fetched), "the bombs ranked first and must have been tried"
    assert bombs <= set(bad), f"every bomb is bad for good; got {bad}"
    for url in bombs:
        assert bad[url].startswith(("refused: stacked content encodings", "too large")), bad[url]
    assert any(e.get("ok", True) and e.get("passages") for e in fetched.values()), "the corpus pages were read"

    assert per_query and all(n <= MAX_HITS_PER_QUERY for _, n in per_query)
    assert cached and max(cached) < 200_000  # fifty results as JSON, not 90 MB
    assert ws.db.stat().st_size < 20_000_000
    signals = [e.get("message", "") for e in ws.events("kestrel") if e.get("type") == "signal"]
    assert any("too large" in m and "kept the" in m for m in signals), "the cut answer is said in the events"

    peak_mb = int(peak_file.read_text()) / 1024
    assert peak_mb < PEAK_RSS_MB, f"daemon peak RSS {peak_mb:.0f} MB"
    print(json.dumps({"daemon_peak_rss_mb": round(peak_mb), "db_bytes": ws.db.stat().st_size,
                      "env": os.environ.get("CI", "")}))
