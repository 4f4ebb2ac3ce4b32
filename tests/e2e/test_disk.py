"""A full disk or a read-only outbox: a clear error, the brief waits, and it finishes once fixed.

The daemon runs in this process (against the real lab servers and a real store) so that
the filesystem's refusal can be simulated where the OSError really arises: os.replace
of an outbox file, the step that makes a report visible.
"""

from __future__ import annotations

import asyncio
import errno
import json
import os
import threading
import time
from pathlib import Path

import pytest

from briefd.daemon.core import files
from briefd.daemon.core.settings import load_settings
from briefd.daemon.ops.worker import Daemon
from tests.conftest import Workspace
from lab.corpus import TOPICS


@pytest.mark.parametrize("code, fix", [
    (errno.ENOSPC, "free space on the filesystem"),
    (errno.EROFS, "writable by the user briefd runs as"),
])
def test_an_outbox_that_refuses_writes_makes_the_brief_wait_then_finish(
        code: int, fix: str, workspace: Workspace, monkeypatch: pytest.MonkeyPatch) -> None:
    refusing = threading.Event()
    refusing.set()
    refused: list[str] = []
    real_replace = os.replace

    def replace(src: str, dst: str) -> None:
        if refusing.is_set() and Path(dst).name.startswith("report."):
            refused.append(Path(dst).name)
            raise OSError(code, os.strerror(code), src)
        real_replace(src, dst)

    monkeypatch.setattr(files.os, "replace", replace)
    workspace.drop("full.json", {"question": TOPICS["orbital"].question, "depth": "quick", "fetch_pages": False})
    settings = load_settings({}, workspace.env(BRIEFD_MAX_ATTEMPTS="1"))
    result: list[int] = []
    daemon = threading.Thread(target=lambda: result.append(asyncio.run(Daemon(settings, once=True).serve())))
    daemon.start()
    try:
        deadline = time.monotonic() + 120
        waiting: dict | None = None
        while waiting is None and time.monotonic() < deadline and daemon.is_alive():
            events = workspace.outbox / "full" / "events.ndjson"
            if events.exists():
                waiting = next((e for e in workspace.events("full") if e["type"] == "waiting"), None)
            time.sleep(0.2)
        assert waiting is not None, "the refused write made the brief wait"
        assert waiting["service"] == "outbox" and fix in waiting["fix"]
        assert os.strerror(code) in waiting["reason"] and "report." in waiting["reason"]
        assert not (workspace.outbox / "full" / "report.json").exists()
        assert not list((workspace.outbox / "full").glob(".*.tmp")), "no temp file left behind"
        # the brief is back on the queue between its tries (2 s, then 4 s, 8 s...): on a busy machine
        # one `status` may land while it is being tried again, so ask until it is seen waiting
        queued: dict = {}
        while time.monotonic() < deadline and "full" not in queued:
            status = workspace.briefd("status", "--json")
            queued = {q["id"]: q for q in json.loads(status.stdout)["queued"]}
        assert "full" in queued and fix in queued["full"]["waiting_for"]
        refusing.clear()  # the user freed space / remounted read-write
        daemon.join(timeout=120)
    finally:
        refusing.clear()
        daemon.join(timeout=120)
    assert result == [0]
    assert refused, "the simulated refusal really happened"
    report = workspace.report("full")
    assert report["status"] == "done" and report["evidence"]
    assert report["usage"]["llm_cache_hits"] >= 1, "the research done before the refusal was not paid again"
    types = [e["type"] for e in workspace.events("full")]
    assert types.count("complete") == 1 and "failed" not in types
