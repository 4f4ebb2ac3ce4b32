"""The HTTP API (issue 13 #1), on the lab: `briefd run` with `serve = true`, real SearXNG, the scripted
model, real HTTP over loopback with httpx and raw sockets.

Every route is exercised, with the bad input a client can send: a huge body, a body that is not a
brief, bad ids, a wrong token, another site's request, a client that leaves in the middle of a stream.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from briefd.daemon.core.briefjson import MAX_BRIEF_BYTES
from briefd.daemon.report.charts import CHART_FILE, CHART_NAMES
from briefd.daemon.core.settings import SERVE_TOKEN_MIN_CHARS
from briefd.daemon.ops.api import FRESH_MIN_S
from tests.conftest import wait_for
from lab.corpus import TOPICS
from lab.servers import free_port
from lab.workspace import BRIEFD, Workspace

pytestmark = pytest.mark.lab

JSON = {"Content-Type": "application/json"}
KESTREL = TOPICS["kestrel"].question



class Api:
    """A running briefd (daemon + API) and a client for it."""

    def __init__(self, ws: Workspace, port: int, proc: subprocess.Popen[bytes]) -> None:
        self.ws, self.port, self.proc = ws, port, proc
        self.base = f"http://127.0.0.1:{port}"
        # connections kept idle 1 s at most: uvicorn closes them after 5 s, httpx kept them 5 s too, and a request
        # sent as the server closed its connection failed "Server disconnected" (once in a loaded run)
        self.client = httpx.Client(base_url=self.base, timeout=30, trust_env=False,
                                   limits=httpx.Limits(keepalive_expiry=1.0))

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
    token_file.chmod(0o600)
    proc, port = start(workspace, "serve", BRIEFD_SERVE_HOST="0.0.0.0", BRIEFD_SERVE_TOKEN_FILE=str(token_file))
    try:
        up(port, proc)
        base = f"http://127.0.0.1:{port}"
        routes = [("GET", "/briefs"), ("GET", "/healthz"), ("GET", "/status"), ("GET", "/search?q=x"),
                  ("GET", "/briefs/x"), ("GET", "/briefs/x/events"), ("GET", "/briefs/x/report.md"),
                  ("GET", "/briefs/x/report.html"), ("GET", "/briefs/x/report.json"), ("GET", "/briefs/x/chart"),
                  ("POST", "/briefs"), ("POST", "/briefs/x/cancel"), ("POST", "/briefs/x/retry")]
        with httpx.Client(base_url=base, trust_env=False, timeout=10) as client:
            for method, path in routes:
                body = {"question": KESTREL, "id": "sneaked"} if path == "/briefs" else None
                for given in ({}, {"Authorization": "Bearer wrong-token-of-enough-len"},
                              {"Authorization": "Basic s3cret-token-of-enough-length"}):
                    answer = client.request(method, path, headers={**JSON, **given}, json=body)
                    assert answer.status_code == 401, (method, path, given, answer.text)
                    assert answer.headers["www-authenticate"].startswith("Bearer")
            assert not (workspace.inbox / "sneaked.json").exists()
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
    assert "can be read by other users" not in (workspace.root / f"briefd-{port}.log").read_text()


def test_a_token_file_others_can_read_is_warned_about(workspace: Workspace, tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text("s3cret-token-of-enough-length\n")
    token_file.chmod(0o644)
    proc, port = start(workspace, "serve", BRIEFD_SERVE_TOKEN_FILE=str(token_file))
    try:
        up(port, proc)
    finally:
        stop(proc)
    assert f"can be read by other users (mode 0644): chmod 600 {token_file}" in (
        workspace.root / f"briefd-{port}.log").read_text()


@pytest.fixture
def alone(workspace: Workspace) -> Iterator[Api]:
    """`briefd serve` with no daemon: what is posted stays in the inbox until a `briefd run`."""
    proc, port = start(workspace, "serve")
    up(port, proc)
    api = Api(workspace, port, proc)
    yield api
    api.client.close()
    stop(proc)


def open_stream(port: int, path: str) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=30)
    sock.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode())
    return sock


def test_a_client_that_leaves_mid_stream_closes_its_stream(alone: Api) -> None:
    alone.client.post("/briefs", headers=JSON, json={"id": "left", "question": KESTREL}).raise_for_status()
    with open_stream(alone.port, "/briefs/left/events") as sock:  # a brief that cannot move: no daemon
        assert sock.recv(4096).startswith(b"HTTP/1.1 200")
        wait_for(lambda: alone.client.get("/healthz").json()["streams"] == 1, 10, "the stream to be counted")
    wait_for(lambda: alone.client.get("/healthz").json()["streams"] == 0, 30, "the stream to close")
    assert alone.client.get("/briefs/left").json()["state"] == "submitted"  # it closed for the client, not the end
    assert alone.proc.poll() is None


def test_open_streams_are_capped_and_cost_no_thread_or_descriptor_each(alone: Api) -> None:
    from briefd.daemon.ops.api import MAX_STREAMS

    alone.client.post("/briefs", headers=JSON, json={"id": "watched", "question": KESTREL}).raise_for_status()
    threads, fds = (len(list(Path(f"/proc/{alone.proc.pid}/{what}").iterdir())) for what in ("task", "fd"))
    socks = [open_stream(alone.port, "/briefs/watched/events") for _ in range(MAX_STREAMS)]
    try:
        for sock in socks:
            assert sock.recv(4096).startswith(b"HTTP/1.1 200")
        over = alone.client.get("/briefs/watched/events")
        assert over.status_code == 503 and over.headers["retry-after"] == "5"
        # the events reader's one thread, and asyncio's own pool (min(32, cpus + 4)): not a thread a stream
        pool = min(32, (os.cpu_count() or 1) + 4)
        assert len(list(Path(f"/proc/{alone.proc.pid}/task").iterdir())) <= threads + 1 + pool < MAX_STREAMS
        assert len(list(Path(f"/proc/{alone.proc.pid}/fd").iterdir())) <= fds + MAX_STREAMS + 8  # a socket each
    finally:
        for sock in socks:
            sock.close()
    wait_for(lambda: alone.client.get("/healthz").json()["streams"] == 0, 30, "the streams to close")


def test_briefs_posted_at_once_under_one_id_are_all_kept(alone: Api) -> None:
    from concurrent.futures import ThreadPoolExecutor

    def post(n: int) -> int:
        with httpx.Client(base_url=alone.base, trust_env=False, timeout=30) as client:
            return client.post("/briefs", headers=JSON, json={"id": "same", "question": f"{KESTREL} ({n})"}
                               ).status_code

    with ThreadPoolExecutor(12) as pool:
        codes = list(pool.map(post, range(12)))
    assert codes == [202] * 12
    kept = sorted(json.loads(p.read_text())["question"] for p in alone.ws.inbox.glob("same*.json"))
    assert kept == sorted(f"{KESTREL} ({n})" for n in range(12))  # none lost, none overwritten


def test_a_brief_waiting_in_the_inbox_is_found_by_its_id_not_its_file_name(alone: Api) -> None:
    alone.ws.drop("question.json", {"id": "northgate-cost", "question": KESTREL})
    alone.ws.drop("northgate-cost-2024.json", {"question": KESTREL})  # another brief whose name starts alike
    body = alone.client.get("/briefs/northgate-cost").json()
    assert body["state"] == "submitted" and body["file"] == "question.json"
    assert alone.client.get("/briefs/question").status_code == 404
    assert alone.client.get("/briefs/northgate-cost-2024").json()["file"] == "northgate-cost-2024.json"


def test_a_brief_asked_again_is_its_next_run_not_its_last_one(alone: Api) -> None:
    ws = alone.ws
    ws.drop("again.json", {"id": "again", "question": KESTREL, "depth": "quick", "fetch_pages": False})
    assert ws.briefd("run", "--once").returncode == 0
    first = alone.client.get("/briefs/again").json()
    assert first["state"] == "done"
    alone.client.post("/briefs", headers=JSON, json={"id": "again", "question": KESTREL, "depth": "quick",
                                                      "fetch_pages": False}).raise_for_status()
    body = alone.client.get("/briefs/again").json()
    assert body["state"] == "submitted" and body["previous_report"]["status"] == "done"
    events: list[dict] = []
    with alone.client.stream("GET", "/briefs/again/events") as stream:
        daemon = subprocess.Popen([BRIEFD, "run", "--once"], env=ws.env(), cwd=ws.root,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for line in stream.iter_lines():  # not the first run's events: the second's, as they come
            events.append(json.loads(line))
        assert daemon.wait(120) == 0
    second = alone.client.get("/briefs/again").json()
    assert second["run"] > first["run"]
    assert events[-1]["type"] == "complete" and events == ws.events("again")


def test_another_site_cannot_use_the_api_but_a_proxy_with_serve_hosts_can(workspace: Workspace,
                                                                          tmp_path: Path) -> None:
    proc, port = start(workspace, "serve")
    try:
        up(port, proc)
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", trust_env=False, timeout=10) as client:
            for site in ("cross-site", "same-site"):  # another port of localhost is the same site
                assert client.get("/briefs", headers={"Sec-Fetch-Site": site}).status_code == 403
            assert client.get("/briefs", headers={"Sec-Fetch-Site": "same-origin"}).status_code == 200
            assert client.get("/", headers={"Sec-Fetch-Site": "cross-site"}).status_code == 200  # a link to it
            proxied = client.get("/briefs", headers={"X-Forwarded-For": "203.0.113.9"})
            assert proxied.status_code == 403 and "serve_token" in proxied.json()["fix"]
            assert client.get("/briefs", headers={"Host": "briefd.example.org"}).status_code == 421
    finally:
        stop(proc)
    token = tmp_path / "token"
    token.write_text("s3cret-token-of-enough-length\n")
    token.chmod(0o600)
    proc, port = start(workspace, "serve", BRIEFD_SERVE_HOSTS="briefd.example.org",
                       BRIEFD_SERVE_TOKEN_FILE=str(token))
    try:
        up(port, proc)
        good = {"Authorization": "Bearer s3cret-token-of-enough-length", "X-Forwarded-For": "203.0.113.9"}
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", trust_env=False, timeout=10) as client:
            proxied = {**good, "Host": "BRIEFD.example.org", "Origin": "https://briefd.example.org"}
            assert client.get("/briefs", headers=proxied).status_code == 200
            posted = client.post("/briefs", headers={**proxied, **JSON}, json={"question": KESTREL, "id": "via"})
            assert posted.status_code == 202, posted.text
    finally:
        stop(proc)


def test_errors_are_json_with_the_fix(alone: Api) -> None:
    nested = b"[" * 100_000 + b"]" * 100_000
    answer = alone.client.post("/briefs", headers=JSON, content=nested)
    assert answer.status_code == 422 and "nested" in answer.json()["error"]
    wrong_method = alone.client.get("/briefs/x/cancel")
    assert wrong_method.status_code == 405 and wrong_method.headers["allow"] == "POST"
    assert alone.client.get("/search", params={"q": "x", "colour": "red"}).status_code == 400
    alone.ws.db.write_bytes(b"this is not a database" * 1000)
    broken = alone.client.get("/briefs/x")
    assert broken.status_code == 503 and broken.json()["fix"]


def test_healthz_probes_at_most_once_a_minute_unless_asked(alone: Api) -> None:
    first = alone.client.get("/healthz").json()
    time.sleep(1.1)
    again = alone.client.get("/healthz").json()
    assert again["checks"] == first["checks"] and again["checked_s_ago"] >= 1.0  # the same probe
    soon = alone.client.get("/healthz", params={"fresh": "1"}).json()  # a probe that young is not run again
    assert soon["checked_s_ago"] >= 1.0
    time.sleep(max(0.0, FRESH_MIN_S - soon["checked_s_ago"]))
    fresh = alone.client.get("/healthz", params={"fresh": "1"}).json()
    assert fresh["checked_s_ago"] < 1.0
    assert not alone.ws.db.exists() or first  # asking did not make a store...
    assert "not made yet" in " ".join(c["message"] for c in first["checks"])


def test_serve_settings_appear_in_the_log_line(workspace: Workspace) -> None:
    proc, port = start(workspace, "serve")
    try:
        up(port, proc)
        time.sleep(0.2)
    finally:
        stop(proc)
    log = (workspace.root / f"briefd-{port}.log").read_text()
    assert f"on http://127.0.0.1:{port}/ (loopback only, no token)" in log
