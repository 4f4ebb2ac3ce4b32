"""`make demo`: the lab on loopback with REAL inference, and briefd on the example brief.

Starts the search lab (real SearXNG over the corpus, datasette, the local web) and the
Ollama-compatible server with the llama driver (Gemma 3 270M via llama-cpp-python), writes
the lab library (PDF, DOCX, Markdown and three hostile files: lab/library.py) and a
ZIM archive of the corpus (lab/zim.py), copies inbox/example.json.sample into a fresh
lab inbox, runs `briefd run --once` against them (web, library and archives), and prints
which sources were used and where the report is. Everything stays on 127.0.0.1; nothing
needs the internet.

A lab server that dies meanwhile (the model server crashing in llama.cpp, say) stops the demo at
once, briefd included, with the server's exit signal and the end of its log (servers.LabWatch),
rather than briefd waiting out once_patience_s and telling the user to start Ollama.
`--driver scripted` (instant, deterministic answers) and `--workdir` are for the tests.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from lab.drivers import LlamaDriver
from lab.library import build_library
from lab.servers import REPO_ROOT, LabServerDied, lab_with_model
from lab.zim import build_corpus_zim

MODEL = LlamaDriver.MODEL
# what a 270M model on 2 CPU cores is given (make bench-real runs with the same)
DEMO_MODEL_ENV = {"BRIEFD_NUM_CTX": "2048", "BRIEFD_NUM_PREDICT": "384"}


MODELS = {"llama": (MODEL, "real inference, llama-cpp-python"), "scripted": ("lab-scripted", "scripted answers")}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--driver", choices=list(MODELS), default="llama",
                        help="the model server's driver: llama (real inference, the demo) or scripted (tests)")
    parser.add_argument("--workdir", type=Path, default=REPO_ROOT / "lab-run",
                        help="the demo's folder (servers, library, store, report), replaced at each run")
    args = parser.parse_args(argv)
    try:
        return demo(args.workdir, args.driver)
    except LabServerDied:  # the watch has said which server died, of what, and what its log says
        print("briefd demo: stopped, briefd with it: a lab server died (above); see README.md, "
              "'When things go wrong'", file=sys.stderr, flush=True)
        return 1


def demo(root: Path, driver: str) -> int:
    """The demo in ``root`` (emptied first) with the model server's ``driver``; its exit status."""
    if root.exists():
        if any(root.iterdir()) and not (root / "search").is_dir():
            print(f"briefd demo: {root} holds files and no earlier demo (no search/ folder); the demo empties "
                  f"its folder at each run: give --workdir a new folder", file=sys.stderr)
            return 2
        shutil.rmtree(root)
    root.mkdir(parents=True)
    started = time.monotonic()
    model, kind = MODELS[driver]
    print("briefd demo: starting the lab on loopback (SearXNG, datasette, local web, model server)...",
          flush=True)
    with lab_with_model(root, driver, lab_dir="search", name=f"ollama-{driver}") as (lab, ollama_url):
        print(f"  SearXNG     {lab.searxng_url}\n  local web   {lab.web_url}\n"
              f"  model       {model} ({kind}) at {ollama_url}", flush=True)
        library = build_library(root / "library")
        archive = build_corpus_zim(root / "lab-encyclopedia.zim")
        print(f"  library     {library.folder} ({len(library.readable)} documents, "
              f"{len(library.hostile)} hostile files)\n  archive     {archive}", flush=True)
        inbox = root / "inbox"
        inbox.mkdir()
        shutil.copyfile(REPO_ROOT / "inbox" / "example.json.sample", inbox / "example.json")
        env = {k: v for k, v in os.environ.items() if not k.startswith("BRIEFD_")}
        env.update({
            "BRIEFD_INBOX": str(inbox), "BRIEFD_OUTBOX": str(root / "outbox"),
            "BRIEFD_DB": str(root / "briefd.db"), "OLLAMA_HOST": ollama_url, "BRIEFD_MODEL": model,
            "BRIEFD_SEARXNG_URL": lab.searxng_url,
            "BRIEFD_LIBRARY": str(library.folder), "BRIEFD_ARCHIVES": str(archive),
            # a 270M model on 2 CPU cores: a small context and short answers keep each call near 30 s
            **DEMO_MODEL_ENV, "BRIEFD_FETCH_TIMEOUT_S": "5",
            "NO_PROXY": "127.0.0.1,localhost",
        })
        brief = json.loads((inbox / "example.json").read_text())
        print(f"briefd demo: researching \u201c{brief['question']}\u201d (a few minutes on 2 cores; "
              f"follow it with: tail -f {root / 'outbox' / 'example' / 'events.ndjson'})", flush=True)
        briefd = str(Path(sys.executable).with_name("briefd"))
        with open(root / "briefd.log", "w") as log:  # killed, should a lab server die meanwhile (LabServerDied)
            result = subprocess.run([briefd, "run", "--once"], env=env, cwd=root, stderr=log)
        report_path = root / "outbox" / "example" / "report.json"
        if result.returncode != 0 or not report_path.exists():
            print(f"briefd demo: briefd exited {result.returncode}; see {root / 'briefd.log'}", file=sys.stderr)
            return 1
        report = json.loads(report_path.read_text())
        usage = report["usage"]
        print(f"\nbriefd demo: done in {time.monotonic() - started:.0f} s, status {report['status']}, "
              f"stopped by {report['stop_reason']}; {usage['llm_calls']} model calls, "
              f"{usage['prompt_tokens'] + usage['completion_tokens']} tokens, {usage['searches']} searches, "
              f"{usage['pages_fetched']} pages fetched, {len(report['evidence'])} evidence items, "
              f"{len(report['sources'])} sources cited.")
        print(used_sources(report, report_path.parent / "events.ndjson"))
        if report.get("disclaimer"):
            print(f"\n> {report['disclaimer']}")
        answer = report.get("answer") or {}
        source = {"quote": " (a kept quote: the model wrote no summary)", "summary": " (the model's summary)"}
        print(f"\nAnswer{source.get(str(answer.get('from')), '')}: "
              f"{answer.get('text') if answer.get('found') else 'none found. ' + str(answer.get('text'))}")
        print("\n" + report["summary"][:1200] + "\n")
        print("(Gemma 3 270M is a tiny base model: briefd keeps only evidence whose sentences it can\n"
              " quote verbatim and that bear on the question, so expect few items. Point briefd at a real\n"
              " Ollama model for real answers: see README.md, 'Real use'.)\n")
        for name in ("report.md", "report.html", "report.json", "events.ndjson"):
            print(f"  {report_path.parent / name}")
        print(f"\nThe report is in {report_path.parent}")
        return 0


def used_sources(report: dict, events_path: Path) -> str:
    """Which sources the brief searched, what it read from each, and the evidence and sources each gave."""
    from briefd.daemon.sources.sources import kind_of_url

    read: dict[str, int] = {}
    for line in events_path.read_text(encoding="utf-8").splitlines():
        event = json.loads(line)
        if event["type"] == "page_fetched" and event.get("ok") is not False:
            kind = kind_of_url(event["url"])
            read[kind] = read.get(kind, 0) + 1
    hosts = ", ".join(h["host"] + (f" ({h['role']})" if h.get("role") else "")
                      for h in (report.get("egress") or {}).get("hosts", []))
    lines = [f"\nbriefd demo: searched {', '.join(report.get('searched') or ['web'])}; hosts contacted: {hosts}"]
    for kind in ("web", "library", "archives"):
        cited = [s for s in report["sources"] if s.get("kind") == kind]
        urls = {s["url"] for s in cited}
        quotes = sum(1 for e in report["evidence"] if e["url"] in urls)
        lines.append(f"  {kind:<9} {read.get(kind, 0)} read, {quotes} evidence item(s), {len(cited)} source(s)"
                     + "".join(f"\n            [{s['n']}] {s['title']}" for s in cited[:5]))
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
