"""A brief waiting out an outage resumes when the service answers again, not at its retry time (issue 19
#15): real servers on loopback, really down, then really back."""

from __future__ import annotations

import contextlib
import signal
import sqlite3
import subprocess
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest

from briefd.daemon.core.outages import PROBE_EVERY_S, PROBE_PATHS, Prober
from briefd.daemon.core.retry import QUEUE
from briefd.store import utc_now
from tests.conftest import BRIEFD, Workspace, wait_for
from lab.corpus import TOPICS
from lab.servers import free_port, start_ollama

PUSHED_S = 2 * QUEUE.cap_s  # the retry time the test gives the waiting brief: past any backoff's cap


def push_retry(db: Path, service: str) -> int:
    """The waiting brief's retry time moved PUSHED_S out, as after many outages; 1 when it was queued."""
    if not db.exists():
        return 0
    with contextlib.closing(sqlite3.connect(f"file:{db}?mode=rw", uri=True, timeout=30)) as conn, conn:
        try:
            return conn.execute("UPDATE briefs SET not_before = ? WHERE state = 'queued' AND waiting_for LIKE ?",
                                [utc_now(PUSHED_S), f"{service}: %"]).rowcount
        except sqlite3.OperationalError as exc:  # the daemon is still making (migrating) its tables
            assert "no such" in str(exc), exc
            return 0


@pytest.mark.slow
@pytest.mark.lab
def test_a_brief_waiting_for_the_model_server_resumes_when_it_answers_not_at_its_retry_time(
        tmp_path: Path, search_lab: object) -> None:
    port = free_port()
    ws = Workspace(root=tmp_path, searxng_url=search_lab.searxng_url,  # type: ignore[attr-defined]
                   ollama_url=f"http://127.0.0.1:{port}", model="lab-scripted")
    ws.drop("lakeside.json", {"question": TOPICS["orbital"].question, "depth": "quick", "fetch_pages": False})
    log = tmp_path / "daemon.log"
    with open(log, "w") as sink:
        daemon = subprocess.Popen([BRIEFD, "run"], env=ws.env(), cwd=ws.root, stdout=sink, stderr=sink, text=True)
    try:
        wait_for(lambda: push_retry(ws.db, "ollama") == 1, 120, "the brief to wait on the queue for the model")
        time.sleep(3 * PROBE_EVERY_S)  # the probe knocks on the closed port meanwhile
        assert daemon.poll() is None, log.read_text()[-3000:]
        ollama, _ = start_ollama(tmp_path / "logs", "scripted", name="ollama-late", port=port)
        back = time.monotonic()
        try:
            wait_for(lambda: (ws.outbox / "lakeside" / "report.json").exists(), 120,
                     f"the brief to finish (its retry time was {PUSHED_S:g} s out)")
        finally:
            ollama.stop()
        took = time.monotonic() - back
    finally:
        daemon.send_signal(signal.SIGTERM)
        code = daemon.wait(timeout=60)
    text = log.read_text()
    assert code == 0 and "Traceback" not in text, text[-3000:]
    assert ws.report("lakeside")["status"] == "done"
    print(f"resumed and finished {took:.1f} s after the model server came back (retry time {PUSHED_S:g} s out)")
    assert took < PUSHED_S / 2, took
    assert "ollama answers again: 1 waiting brief(s) resume now, not at their retry time" in text, text[-3000:]


class _Answering(BaseHTTPRequestHandler):
    status = 200

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        self.send_response(type(self).status)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *_args: object) -> None:
        pass


def serve_on(port: int, status: int) -> Iterator[None]:
    handler = type("Handler", (_Answering,), {"status": status})
    server = ThreadingHTTPServer(("127.0.0.1", port), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("status, back", [(200, True), (404, True), (503, False)])
def test_the_probe_says_back_only_after_a_failed_knock_and_a_real_answer(status: int, back: bool) -> None:
    """Closed port (a failed knock), then a server answering `status`: 200 or a proxy's 404 is an answer,
    a 503 (a proxy in front of a stopped server) is not. A service whose probe never failed is not
    'back': its briefs failed with it answering, and keep their backoff."""
    import asyncio

    port = free_port()
    url = f"http://127.0.0.1:{port}{PROBE_PATHS['ollama']}"

    async def knock() -> tuple[list[str], list[str], list[str]]:
        async with httpx.AsyncClient(trust_env=False) as client:
            prober = Prober({"ollama": [(client, url)]})
            closed = await prober.back(["ollama"])
            serving = serve_on(port, status)
            next(serving)
            try:
                reopened = await prober.back(["ollama"])
                again = await prober.back(["ollama"])  # said once: the next knock is no news
            finally:
                next(serving, None)
            return closed, reopened, again

    closed, reopened, again = asyncio.run(knock())
    assert closed == [] and again == []
    assert reopened == (["ollama"] if back else [])


def test_a_service_whose_probe_never_failed_is_not_back() -> None:
    """Its briefs failed while /api/version answered (a model server answering 500 to every chat): a probe
    that answers is no news for them, and they keep their backoff rather than meet the same failure."""
    import asyncio

    port = free_port()

    async def knock() -> list[str]:
        async with httpx.AsyncClient(trust_env=False) as client:
            prober = Prober({"ollama": [(client, f"http://127.0.0.1:{port}{PROBE_PATHS['ollama']}")]})
            serving = serve_on(port, 200)
            next(serving)
            try:
                return await prober.back(["ollama"]) + await prober.back(["ollama"])
            finally:
                next(serving, None)

    assert asyncio.run(knock()) == []
