"""`make bench`'s library figures: indexing throughput, a rescan's bytes, search latency, a big PDF's memory.

- Indexing: a mixed library of real files (`documents.write_library`: PDF, DOCX, Markdown, ODT,
  EPUB, text, and the hostile kinds) indexed by the daemon's own `Library` with the daemon's
  reader (the page workers' child processes), into a real store. Documents per second.
- Rescan: the same library looked at again, unchanged: the bytes of file content briefd read
  (its own count) and what the kernel says this process read (/proc/self/io rchar).
- Search: the library's search at 100,000 passages (synthetic documents with a Zipf-like
  vocabulary, so common words match tens of thousands of passages); p50/p95/max.
- A 200 MB PDF read through the page workers: time per page and the reading child's peak RSS.

Run alone: python -m lab.library_bench [--files N] [--pdf-megabytes M]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

from briefd.daemon.sources.library import Library, search
from briefd.daemon.sources.pagework import PageWorkers
from briefd.store import Store
from briefd.store.library import INDEXED, LibraryFiles
from lab.documents import measure_big_pdf, write_library


def kernel_read_bytes() -> int | None:
    """rchar of this process: every byte read() returned, files and pipes alike (None where absent)."""
    try:
        for line in Path("/proc/self/io").read_text().splitlines():
            if line.startswith("rchar:"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


def measure_indexing(files: int = 1000) -> dict[str, float]:
    """Index a fresh mixed library of `files` documents, then rescan it unchanged."""
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "library"
        made = write_library(folder, files=files, hostile=True)
        store = Store(Path(tmp) / "briefd.db")

        async def run() -> dict[str, float]:
            workers = PageWorkers()
            try:
                library = Library((folder,), store, workers.read_file)
                started = time.perf_counter()
                first = await library.scan()
                seconds = time.perf_counter() - started
                kernel_before = kernel_read_bytes()
                started = time.perf_counter()
                again = await library.scan()
                rescan_s = time.perf_counter() - started
                kernel_after = kernel_read_bytes()
                return {
                    "files": float(len(made)), "indexed": float(first.indexed), "refused": float(first.refused),
                    "seconds": seconds, "docs_per_s": first.indexed / seconds if seconds else 0.0,
                    "rescan_s": rescan_s, "rescan_bytes_read": float(again.bytes_read),
                    "rescan_reader_calls": float(again.reader_calls),
                    "rescan_kernel_bytes": float(kernel_after - kernel_before)
                    if kernel_before is not None and kernel_after is not None else float("nan"),
                    "child_peak_rss_mb": workers.peak_rss_mb,
                }
            finally:
                await workers.close()

        try:
            return asyncio.run(run())
        finally:
            store.close()


def measure_search(passages: int = 100_000, queries: int = 200, per_document: int = 100,
                   limit: int = 10) -> dict[str, float]:
    """Library search latency at `passages` passages: p50/p95/max in milliseconds."""
    rng = random.Random(10)
    vocab = [f"w{i}" for i in range(20_000)] + ["corrosion", "anchorage", "bridge", "cable", "steel", "load"]
    weights = [1 / (i + 1) for i in range(len(vocab))]
    with tempfile.TemporaryDirectory() as tmp:
        store = Store(Path(tmp) / "bench.db")
        store.db.execute("PRAGMA synchronous = OFF")  # a throw-away store: its build need not survive a crash
        files = LibraryFiles(store)
        started = time.perf_counter()
        for doc in range(passages // per_document):
            url = (Path(tmp) / f"doc{doc}.txt").as_uri()
            texts = [" ".join(rng.choices(vocab, weights, k=60)) for _ in range(per_document)]
            store.save_page(url=url, final_url=url, status=None, content_type="text/plain", title=f"doc {doc}",
                            text="\n".join(texts), size=0, extraction="plain", error=None,
                            passages=[(i, 0, 0, t, i // 10 + 1) for i, t in enumerate(texts)])
            files.record(path=str(Path(tmp) / f"doc{doc}.txt"), folder=tmp, size=0, mtime_ns=0, sha256=str(doc),
                         state=INDEXED, url=url, indexed=True)
        built = time.perf_counter() - started
        times = []
        for _ in range(queries):
            text = " ".join(rng.choices(vocab[:2000], k=rng.randint(2, 5)))
            t0 = time.perf_counter()
            search(store, text, limit)
            times.append((time.perf_counter() - t0) * 1000)
        store.close()
    times.sort()
    return {"passages": float(passages), "build_s": built, "p50_ms": statistics.median(times),
            "p95_ms": times[int(len(times) * 0.95) - 1], "max_ms": times[-1]}


def print_library(files: int = 1000, pdf_megabytes: int = 200) -> None:
    print(f"briefd bench: the library ({files} mixed documents, real readers in child processes)")
    index = measure_indexing(files)
    print("what | figure")
    print(f"indexed | {index['indexed']:.0f} of {index['files']:.0f} files ({index['refused']:.0f} hostile refused) "
          f"in {index['seconds']:.1f} s = {index['docs_per_s']:.0f} documents/s")
    print(f"rescan, unchanged | {index['rescan_s'] * 1000:.0f} ms, {index['rescan_bytes_read']:.0f} bytes of content "
          f"read by briefd, {index['rescan_reader_calls']:.0f} documents re-read, "
          f"{index['rescan_kernel_bytes']:.0f} bytes read() by the process (rchar: store pages included)")
    print(f"reading children's peak RSS | {index['child_peak_rss_mb']:.0f} MB")
    found = measure_search()
    print(f"search at {found['passages']:,.0f} passages | p50 {found['p50_ms']:.1f} ms, p95 {found['p95_ms']:.1f} ms, "
          f"max {found['max_ms']:.1f} ms")
    with tempfile.TemporaryDirectory() as tmp:
        big = measure_big_pdf(Path(tmp), pdf_megabytes)
    print(f"a {big['megabytes']:.0f} MB PDF ({big['pages']:.0f} pages) | {big['seconds']:.1f} s, "
          f"{big['ms_per_page']:.1f} ms a page, reading child's peak RSS {big['child_peak_rss_mb']:.0f} MB")
    print()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=1000)
    parser.add_argument("--pdf-megabytes", type=int, default=200)
    args = parser.parse_args(argv)
    print_library(args.files, args.pdf_megabytes)
    return 0


if __name__ == "__main__":
    sys.exit(main())
