"""The HTTP API (issue 13 #1), on the lab: `briefd run` with `serve = true`, real SearXNG, the scripted
model, real HTTP over loopback with httpx and raw sockets.

Every route is exercised, with the bad input a client can send: a huge body, a body that is not a
brief, bad ids, a wrong token, another site's request, a client that leaves in the middle of a stream.
"""

from __future__ import annotations

import json
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from briefd.daemon.brief import MAX_BRIEF_BYTES
from briefd.daemon.charts import CHART_FILE, CHART_NAMES
from briefd.daemon.settings import SERVE_TOKEN_MIN_CHARS
from tests.conftest import wait_for
from tests.lab.corpus import TOPICS
from tests.lab.workspace import BRIEFD, Workspace

pytestmark = pytest.mark.lab

JSON = {"Content-Type": "application/json"}
KESTREL = TOPICS["kestrel"].question


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Api:
    """A running briefd (daemon + API) and a client for it."""

    def __init__(self, ws: Workspace, port: int, proc: subprocess.Popen[bytes]) -> None:
        self.ws, self.port, self.proc = ws, port, proc
        self.base = f"http://127.0.0.1:{port}"
        self.client = httpx.Client(base_url=self.base, timeout=30, trust_env=False)

    def done(self, brief_id: str, timeout: float = 120) -> dict:
        def finished() -> dict | None:
            body = self.client.get(f"/briefs/{brief_id}").json()
            return body if body.get("state") in ("done", "failed", "cancelled", "rejected") else None

        return wait_for(finished, timeout, f"{brief_id} to finish")


def start(ws: Workspace, *args: str, **env: str) -> tuple[subprocess.Popen[bytes], int]:
    port = free_port()
    log = open(ws.root / f"briefd-{port}.log", "wb")  # noqa: SIM115 - the process writes it until it ends
    proc = subprocess.Popen([BRIEFD, *args], env=ws.env(BRIEFD_SERVE_PORT=str(port), **env), cwd=ws.root,
                            stdout=log, stderr=log)
    return proc, port


def stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def up(port: int, proc: subprocess.Popen[bytes], headers: dict[str, str] | None = None) -> None:
    def answers() -> bool:
        assert proc.poll() is None, f"briefd exited {proc.returncode}"
        try:
            httpx.get(f"http://127.0.0.1:{port}/", timeout=2, trust_env=False, headers=headers)
            return True
        except httpx.TransportError:
            return False

    wait_for(answers, 60, "the API to answer")


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory, search_lab, scripted_ollama) -> Iterator[Api]:
    root = tmp_path_factory.mktemp("serve")
    (root / "inbox").mkdir()
    ws = Workspace(root=root, searxng_url=search_lab.searxng_url, ollama_url=scripted_ollama.url,
                   model="lab-scripted")
    proc, port = start(ws, "run", BRIEFD_SERVE="true")
    up(port, proc)
    client = Api(ws, port, proc)
    yield client
    client.client.close()
    stop(proc)


def test_a_brief_posted_is_researched_and_its_report_served(api: Api) -> None:
    posted = api.client.post("/briefs", headers=JSON, json={"id": "posted", "question": KESTREL, "depth": "quick",
                                                               "formats": ["md", "json", "html"]})
    assert posted.status_code == 202, posted.text
    assert posted.json()["id"] == "posted" and posted.headers["location"] == "/briefs/posted"
    body = api.done("posted")
    assert body["state"] == "done" and body["report"]["status"] == "done"
    assert body["report"]["question"] == KESTREL
    md = api.client.get("/briefs/posted/report.md")
    assert md.status_code == 200 and md.headers["content-type"].startswith("text/markdown")
    assert md.text == (api.ws.outbox / "posted" / "report.md").read_text(encoding="utf-8")
    html = api.client.get("/briefs/posted/report.html")
    assert html.status_code == 200 and "default-src 'none'" in html.headers["content-security-policy"]
    assert api.client.get("/briefs/posted/report.json").json()["id"] == "posted"
    listed = api.client.get("/briefs", params={"state": "done"}).json()
    assert "posted" in [entry["id"] for entry in listed]


def test_a_posted_brief_without_an_id_gets_one_and_the_inbox_is_the_one_queue(api: Api) -> None:
    posted = api.client.post("/briefs", headers=JSON, json={"question": KESTREL, "depth": "quick",
                                                               "fetch_pages": False})
    assert posted.status_code == 202, posted.text
    brief_id = posted.json()["id"]
    assert brief_id.startswith("api-")
    assert api.done(brief_id)["state"] == "done"
    # the file went through the inbox as any dropped brief does: the store names it as its source
    assert api.client.get(f"/briefs/{brief_id}").json()["report"]["source_file"] == posted.json()["file"]


def test_an_invalid_brief_is_refused_with_the_inbox_s_own_error_naming_the_field(api: Api) -> None:
    answer = api.client.post("/briefs", headers=JSON, json={"question": KESTREL, "depht": "quick"})
    assert answer.status_code == 422
    body = answer.json()
    assert "depht" in body["error"] and "depth" in body["error"]  # the nearest field named
    assert body["field"] == "depht"
    answer = api.client.post("/briefs", headers=JSON, json={"question": KESTREL,
                                                              "estimate": {"unit": "m", "low": 5, "high": 1}})
    assert answer.status_code == 422 and answer.json()["field"].startswith("estimate")
    answer = api.client.post("/briefs", headers=JSON, content=b"{not json")
    assert answer.status_code == 422 and "JSON" in answer.json()["error"]
    assert not [p for p in api.ws.inbox.iterdir() if not p.name.startswith(".")], "nothing invalid was written"


def test_a_body_over_the_brief_limit_is_refused_unread(api: Api) -> None:
    huge = b'{"question": "' + b"x" * (MAX_BRIEF_BYTES + 10) + b'"}'
    answer = api.client.post("/briefs", headers=JSON, content=huge)
    assert answer.status_code == 413 and str(MAX_BRIEF_BYTES) in answer.json()["fix"]

    def chunks() -> Iterator[bytes]:  # no Content-Length: the limit holds while reading
        yield b'{"question": "'
        for _ in range(MAX_BRIEF_BYTES // 65536 + 2):
            yield b"y" * 65536
        yield b'"}'

    answer = api.client.post("/briefs", headers=JSON, content=chunks())
    assert answer.status_code == 413


def test_requests_that_change_something_must_be_json_and_from_this_server(api: Api) -> None:
    brief = json.dumps({"question": KESTREL}).encode()
    plain = api.client.post("/briefs", content=brief, headers={"Content-Type": "text/plain"})
    assert plain.status_code == 415 and "application/json" in plain.json()["fix"]
    other_site = api.client.post("/briefs", content=brief, headers={**JSON, "Origin": "http://evil.example"})
    assert other_site.status_code == 403
    own = api.client.post("/briefs/nothing-here/cancel", headers={**JSON, "Origin": api.base})
    assert own.status_code == 404
    rebound = api.client.get("/briefs", headers={"Host": "evil.example"})
    assert rebound.status_code == 421


def test_bad_ids_and_unknown_briefs(api: Api) -> None:
    for path in ("/briefs/%2E%2E", "/briefs/.hidden", "/briefs/-rf/report.md", "/briefs/%2e%2e/events"):
        answer = api.client.get(path)
        assert answer.status_code == 400, (path, answer.text)
        assert "invalid brief id" in answer.json()["error"]
    unknown = api.client.get("/briefs/unknown")
    assert unknown.status_code == 404 and unknown.json()["fix"] == "GET /briefs lists them"
    assert api.client.get("/briefs/unknown/events").status_code == 404
    assert api.client.get("/briefs/unknown/report.md").status_code == 404
    assert api.client.get("/briefs/unknown/passwd").status_code == 404
    assert api.client.post("/briefs/unknown/cancel", headers=JSON).status_code == 404
    assert api.client.post("/briefs/unknown/retry", headers=JSON).status_code == 404


def test_the_event_stream_is_live_ndjson_from_seq_onward(api: Api) -> None:
    api.client.post("/briefs", headers=JSON, json={"id": "streamed", "question": KESTREL, "depth": "quick",
                                                      "fetch_pages": False}).raise_for_status()
    events: list[dict] = []
    with api.client.stream("GET", "/briefs/streamed/events") as stream:  # opened before the daemon takes it
        assert stream.headers["content-type"] == "application/x-ndjson"
        for line in stream.iter_lines():
            events.append(json.loads(line))
    assert events[0]["seq"] == 1 and events[-1]["type"] == "complete"
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    assert events == api.ws.events("streamed")  # the same events as the live file
    later = api.client.get("/briefs/streamed/events", params={"seq": 3}).text.splitlines()
    assert [json.loads(line)["seq"] for line in later] == list(range(3, len(events) + 1))
    bad = api.client.get("/briefs/streamed/events", params={"seq": "-1"})
    assert bad.status_code == 400


def test_a_client_that_leaves_mid_stream_closes_its_stream(api: Api) -> None:
    api.client.post("/briefs", headers=JSON, json={"id": "left", "question": KESTREL, "depth": "standard"}
                    ).raise_for_status()
    with socket.create_connection(("127.0.0.1", api.port), timeout=30) as sock:
        sock.sendall(f"GET /briefs/left/events HTTP/1.1\r\nHost: 127.0.0.1:{api.port}\r\n\r\n".encode())
        assert sock.recv(4096).startswith(b"HTTP/1.1 200")
        assert wait_for(lambda: api.client.get("/healthz").json()["streams"] >= 1, 10, "the stream to be counted")
    # the client is gone: the server notices and lets the stream go
    wait_for(lambda: api.client.get("/healthz").json()["streams"] == 0, 30, "the stream to close")
    assert api.proc.poll() is None
    api.done("left", timeout=180)


def test_cancel_and_retry(api: Api) -> None:
    api.client.post("/briefs", headers=JSON, json={"id": "stopped", "question": KESTREL, "depth": "deep"}
                    ).raise_for_status()
    wait_for(lambda: api.client.get("/briefs/stopped").json()["state"] in ("queued", "running"), 30, "it to queue")
    cancelled = api.client.post("/briefs/stopped/cancel", headers=JSON)
    assert cancelled.status_code == 200 and cancelled.json()["ok"], cancelled.text
    assert api.done("stopped")["state"] == "cancelled"
    again = api.client.post("/briefs/stopped/cancel", headers=JSON)
    assert again.status_code == 409 and "cancelled" in again.json()["error"]
    retried = api.client.post("/briefs/stopped/retry", headers=JSON)
    assert retried.status_code == 200 and "re-queued" in retried.json()["message"]
    assert api.done("stopped", timeout=300)["state"] == "done"
    refused = api.client.post("/briefs/stopped/retry", headers=JSON)
    assert refused.status_code == 409 and "done" in refused.json()["error"]


def test_search_list_filters_and_the_chart(api: Api) -> None:
    brief = {"id": "ranged", "question": TOPICS["northgate"].question, "depth": "quick",
             "estimate": {"unit": "USD million", "low": 100, "high": 2000}}
    api.client.post("/briefs", headers=JSON, json=brief).raise_for_status()
    assert api.done("ranged")["state"] == "done"
    chart = api.client.get("/briefs/ranged/chart")
    assert chart.status_code == 200 and chart.headers["content-type"].split(";")[0] == "image/svg+xml"
    assert chart.content == (api.ws.outbox / "ranged" / CHART_FILE).read_bytes()
    for name in CHART_NAMES:  # the evidence charts too, by their file names
        answer = api.client.get(f"/briefs/ranged/{name}")
        assert answer.status_code == 200 and answer.text.startswith("<svg"), name
    hits = api.client.get("/search", params={"q": "Northgate"}).json()
    assert "ranged" in [hit["id"] for hit in hits]
    assert api.client.get("/search", params={"q": ""}).status_code == 400
    assert api.client.get("/briefs", params={"state": "sideways"}).status_code == 400
    assert api.client.get("/briefs", params={"colour": "red"}).status_code == 400
    kinds = {entry["kind"] for entry in api.client.get("/briefs", params={"kind": "estimate"}).json()}
    assert kinds == {"estimate"}


def test_healthz_says_what_check_knows_and_the_page_is_served(api: Api) -> None:
    health = api.client.get("/healthz")
    body = health.json()
    assert health.status_code == (200 if body["ok"] else 503)
    messages = " ".join(check["message"] for check in body["checks"])
    assert "SearXNG" in messages and "database" in messages
    page = api.client.get("/")
    assert page.status_code == 200 and "<title>briefd</title>" in page.text
    assert "script-src 'self' 'unsafe-inline'" in page.headers["content-security-policy"]
    assert "http://" not in page.text.split("<script>")[1].replace("http://www.w3.org/2000/svg", "")


# ---- briefd serve alone, and its access rules


def test_serve_off_loopback_needs_a_token_and_says_so(workspace: Workspace) -> None:
    result = workspace.briefd("serve", BRIEFD_SERVE_HOST="0.0.0.0", BRIEFD_SERVE_PORT=str(free_port()), timeout=30)
    assert result.returncode == 2
    assert "no token is set" in result.stderr and "serve_token_file" in result.stderr
    short = workspace.briefd("serve", BRIEFD_SERVE_TOKEN="short", timeout=30)
    assert short.returncode == 2 and str(SERVE_TOKEN_MIN_CHARS) in short.stderr


def test_a_port_in_use_is_said_with_the_fix(workspace: Workspace) -> None:
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        result = workspace.briefd("serve", BRIEFD_SERVE_PORT=str(port), timeout=30)
        inside = workspace.briefd("run", BRIEFD_SERVE="true", BRIEFD_SERVE_PORT=str(port), timeout=60)
    for answer in (result, inside):
        assert answer.returncode == 3, answer.stderr
        assert f"port {port} is in use" in answer.stderr and "serve_port" in answer.stderr
        assert "Traceback" not in answer.stderr


def test_with_a_token_every_route_asks_for_it(workspace: Workspace, tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text("s3cret-token-of-enough-length\n")
    proc, port = start(workspace, "serve", BRIEFD_SERVE_HOST="0.0.0.0", BRIEFD_SERVE_TOKEN_FILE=str(token_file))
    try:
        up(port, proc)
        base = f"http://127.0.0.1:{port}"
        with httpx.Client(base_url=base, trust_env=False, timeout=10) as client:
            for path in ("/briefs", "/healthz", "/search?q=x", "/briefs/x", "/briefs/x/events"):
                answer = client.get(path)
                assert answer.status_code == 401 and answer.headers["www-authenticate"].startswith("Bearer")
                assert client.get(path, headers={"Authorization": "Bearer wrong-token-of-enough-len"}
                                  ).status_code == 401
            good = {"Authorization": "Bearer s3cret-token-of-enough-length"}
            assert client.get("/briefs", headers=good).json() == []
            posted = client.post("/briefs", headers={**good, **JSON}, json={"question": KESTREL, "id": "alone"})
            assert posted.status_code == 202
            # briefd serve alone is a door: the brief waits in the inbox for the daemon
            assert (workspace.inbox / "alone.json").is_file()
            assert client.get("/briefs/alone", headers=good).json()["state"] == "submitted"
            assert client.get("/", headers={}).status_code == 200  # the page itself asks for the token
    finally:
        stop(proc)
    assert proc.returncode == 0


def test_serve_settings_appear_in_the_log_line(workspace: Workspace) -> None:
    proc, port = start(workspace, "serve")
    try:
        up(port, proc)
        time.sleep(0.2)
    finally:
        stop(proc)
    log = (workspace.root / f"briefd-{port}.log").read_text()
    assert f"on http://127.0.0.1:{port}/ (loopback only, no token)" in log
