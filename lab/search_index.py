"""The lab's search index: the corpus in SQLite FTS5, served by real datasette.

``build_corpus_db`` writes ``corpus.db`` with sqlite-utils: a table
``pages(id, title, url, content, snippet, slug, topic, kind, host, published)``
with full-text search on title and content. URLs carry the real port of the
lab web and each page's host, so a search result can be fetched as is.

Datasette's own ``_search`` ANDs the words of a query, so a question in plain
language finds next to nothing. The canned query ``search`` (in metadata.json) ORs
them instead, through the SQL function ``lab_fts_or_query`` from the plugin in
``datasette_plugins/``, and ranks by bm25 with titles weighted up, as a web
search engine would. It answers, with ``_shape=objects``::

    GET /corpus/search.json?q=<text>&page=<n>&_shape=objects
    {"ok": true, "rows": [{"url": ..., "title": ..., "content": <snippet>}, ...], ...}

twenty rows a page; ``page`` defaults to 1. SearXNG's json_engine reads ``rows``.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import sqlite_utils

from lab.corpus import PAGES
from lab.servers import Proc, free_port, ready_or_stopped, start_proc

DB_NAME = "corpus"
QUERY_NAME = "search"
PAGE_SIZE = 20
PLUGINS_DIR = Path(__file__).resolve().parent / "datasette_plugins"

# Title matches count four times as much as body matches: a page titled with
# the query's words is what a searcher (and a spammer) expects on top.
SEARCH_SQL = f"""
select pages.url, pages.title, pages.snippet as content
from pages_fts
join pages on pages.rowid = pages_fts.rowid
where pages_fts match lab_fts_or_query(:q)
order by bm25(pages_fts, 4.0, 1.0), pages.id
limit {PAGE_SIZE} offset (max(cast(:page as integer), 1) - 1) * {PAGE_SIZE}
""".strip()


Rows = Callable[[int], Iterable[dict[str, object]]]
"""Another corpus's rows for the index, given the lab web's port (lab/docset.py): the keys of ``pages``."""


def build_corpus_db(path: Path, web_port: int, rows: Rows | None = None) -> Path:
    """Write the corpus (or ``rows``) into a fresh SQLite file at ``path`` (replaced if present)."""
    path = Path(path)
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    db = sqlite_utils.Database(path)
    pages = db.table("pages")
    with db.conn:
        pages.insert_all(
            rows(web_port) if rows is not None else (
                {
                    "id": number,
                    "title": page.title,
                    "url": page.url(web_port),
                    "content": page.search_text,
                    "snippet": page.snippet,
                    "slug": page.slug,
                    "topic": page.topic,
                    "kind": page.kind,
                    "host": page.host,
                    "published": page.published,
                }
                for number, page in enumerate(PAGES, start=1)
            ),
            pk="id",
        )
    pages.enable_fts(["title", "content"], tokenize="porter", create_triggers=False)
    db.close()
    return path


def metadata() -> dict[str, object]:
    return {
        "title": "briefd lab search index",
        "description": "A fictional corpus for testing briefd. Try the search query.",
        "databases": {
            DB_NAME: {
                "queries": {
                    QUERY_NAME: {
                        "title": "Search the corpus (any word, ranked by bm25)",
                        "sql": SEARCH_SQL,
                    }
                }
            }
        },
    }


def write_metadata(path: Path) -> Path:
    Path(path).write_text(json.dumps(metadata(), indent=2) + "\n", encoding="utf-8")
    return Path(path)


@dataclass
class DatasetteServer:
    proc: Proc
    port: int
    db_path: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def search_url(self) -> str:
        """The canned query's JSON endpoint (append ``?q=...&_shape=objects``)."""
        return f"{self.url}/{DB_NAME}/{QUERY_NAME}.json"

    def wait_ready(self, timeout: float = 30.0) -> float:
        return self.proc.wait_ready(f"{self.search_url}?q=ready&_shape=objects", timeout)

    def stop(self) -> None:
        self.proc.stop()


def start_datasette(
    workdir: Path,
    web_port: int,
    *,
    port: int | None = None,
    wait: bool = True,
    timeout: float = 30.0,
    rows: Rows | None = None,
) -> DatasetteServer:
    """Build ``workdir/corpus.db`` (of ``rows``, when given) and serve it with datasette on 127.0.0.1."""
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    db_path = build_corpus_db(workdir / f"{DB_NAME}.db", web_port, rows)
    metadata_path = write_metadata(workdir / "metadata.json")
    port = port or free_port()
    argv = [
        sys.executable,
        "-m",
        "datasette",
        "serve",
        str(db_path),
        "-h",
        "127.0.0.1",
        "-p",
        str(port),
        "--plugins-dir",
        str(PLUGINS_DIR),
        "-m",
        str(metadata_path),
    ]
    return ready_or_stopped(DatasetteServer(start_proc("datasette", argv, workdir / "logs"), port, db_path), wait,
                            timeout)
