"""The lab watches its own servers: one that dies is reported at once, with its exit signal and its log.

When the lab's model server segfaulted (llama.cpp on a CPU with AMX, issue 19), `make demo` waited
out briefd's once_patience_s (120 s), printed "briefd exited 3" and told the user to start Ollama
at the demo's own port; the server's log said nothing. Here lab servers are killed while something
uses them, and what a person sees is checked: the demo, `make lab` and a test on the session's
fixtures stop within seconds, naming the server, its signal and the end of its log, and the briefd
that was running is gone.
"""

from __future__ import annotations

import ast
import json
import os
import queue
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from briefd.daemon.core.settings import Settings
from tests import conftest
from tests.conftest import wait_for
from lab.servers import REPO_ROOT, LabServerDied, LabWatch, Proc, start_proc

pytestmark = pytest.mark.lab

ONCE_PATIENCE_S = Settings.once_patience_s  # what briefd waited before: every bound here is well under it
AT_ONCE_S = ONCE_PATIENCE_S / 4  # generous for a loaded machine; the watch looks every 0.2 s


def children(parent: int, match: Callable[[list[str]], bool]) -> list[int]:
    """The pids of ``parent``'s children whose argv ``match``es (read from /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            argv = (entry / "cmdline").read_bytes().decode("utf-8", "replace").split("\0")
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == parent and match(argv):
            found.append(int(entry.name))
    return found


def is_briefd_run(argv: list[str]) -> bool:
    return any(arg.endswith("/briefd") for arg in argv) and "run" in argv


def module_child(parent: int, module: str) -> int:
    """The one child of ``parent`` running ``python -m module``, once it is there."""
    pids = wait_for(lambda: children(parent, lambda argv: module in argv), 60, f"{module} under pid {parent}")
    assert len(pids) == 1, pids
    return pids[0]


def lines_of(stream: object) -> queue.Queue[str]:
    """A script's output, line by line, read by a thread (so that waiting for a line can time out)."""
    lines: queue.Queue[str] = queue.Queue()

    def pump() -> None:
        for line in stream:  # type: ignore[attr-defined]
            lines.put(line)
        lines.put("")

    threading.Thread(target=pump, daemon=True).start()
    return lines


def read_until(lines: queue.Queue[str], text: str, timeout: float) -> list[str]:
    """The lines up to the one containing ``text``; fails (with what came) at EOF or after ``timeout`` s."""
    seen: list[str] = []
    deadline = time.monotonic() + timeout
    while True:
        line = lines.get(timeout=max(0.1, deadline - time.monotonic()))
        seen.append(line)
        if text in line:
            return seen
        assert line, f"the script ended before {text!r}: {''.join(seen)}"


@contextmanager
def started(argv: list[str]) -> Iterator[subprocess.Popen[str]]:
    """A lab command run from the checkout, its output piped; killed at the end if it is still running
    (its pipes stay open, for the test to read what it said)."""
    proc = subprocess.Popen(argv, cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()


def seconds_to_exit(parent: subprocess.Popen[str], server: int, sig: signal.Signals, timeout: float) -> float:
    """Kill one of the parent's servers with `sig`: the seconds until the parent exits, which it must with 1."""
    os.kill(server, sig)
    killed = time.monotonic()
    assert parent.wait(timeout=timeout) == 1
    return time.monotonic() - killed


def last_line(path: Path) -> str:
    return path.read_text(encoding="utf-8", errors="replace").rstrip().splitlines()[-1]


def sleeper(tmp_path: Path, name: str) -> Proc:
    """A stand-in lab server: a real process with a log, saying one thing, then idle."""
    code = f"import time; print('{name} is serving', flush=True); time.sleep(300)"
    proc = start_proc(name, [sys.executable, "-c", code], tmp_path / "logs")
    wait_for(lambda: "serving" in proc.log_tail(), 30, f"{name} to start")
    return proc


def test_the_watch_ends_a_blocking_wait_at_once_and_ignores_servers_stopped_on_purpose(tmp_path: Path) -> None:
    quiet, doomed = sleeper(tmp_path, "web"), sleeper(tmp_path, "ollama-doomed")
    try:
        with LabWatch() as watch:
            watch.add("lab", quiet, doomed)
            with watch.armed():
                quiet.stop()  # a server the lab stops itself (teardown) is no death
                time.sleep(5 * watch.interval)
            assert watch.death() is None
            threading.Timer(0.5, os.kill, (doomed.pid, signal.SIGKILL)).start()
            started = time.monotonic()
            with pytest.raises(LabServerDied) as died, watch.armed():
                subprocess.run(["sleep", str(ONCE_PATIENCE_S)])  # as a test waits on `briefd run --once`
            assert time.monotonic() - started < AT_ONCE_S
            with pytest.raises(LabServerDied):
                with watch.armed(["lab"]):  # whoever uses it next fails at its start
                    pass
    finally:
        doomed.stop()
    said = str(died.value)
    assert said.startswith(f"lab: the model server (ollama-doomed, pid {doomed.pid}) died of SIGKILL; "
                           f"its log ({doomed.log_path}) ends:\n"), said
    assert said.endswith("ollama-doomed is serving")


NESTED_TESTS = """
import os, signal, threading
from lab.workspace import Workspace

def test_briefd_on_a_model_server_that_dies({fixture}, tmp_path):
    ws = Workspace(root=tmp_path, searxng_url="http://127.0.0.1:9", ollama_url={fixture}.url,
                   model="lab-scripted")
    ws.drop("doomed.json", {{"question": "Why are bridges inspected every six years?", "depth": "quick"}})
    threading.Timer(1.0, os.kill, ({fixture}.proc.pid, signal.SIGSEGV)).start()
    result = ws.briefd("run", "--once", timeout=600)
    print("BRIEFD ENDED", result.returncode, result.stderr[-2000:])

def test_a_later_test_on_the_same_server({fixture}):
    print("RAN ON A DEAD SERVER")
"""


def session_fixtures_watching_a_server() -> set[str]:
    """The conftest fixtures that hand their servers to `lab_watch` (they ask for it), read from its source."""
    tree = ast.parse(Path(conftest.__file__).read_text(encoding="utf-8"))
    return {node.name for node in tree.body if isinstance(node, ast.FunctionDef)
            and any("fixture" in ast.unparse(decorator) for decorator in node.decorator_list)
            and "lab_watch" in [arg.arg for arg in node.args.args]}


def test_every_fixture_whose_servers_are_watched_is_a_lab_fixture() -> None:
    """A fixture missing from LAB_FIXTURES is watched but never armed: its dead server is waited out
    (paced_ollama was, issue 30)."""
    watching = session_fixtures_watching_a_server()
    assert {"search_lab", "scripted_ollama", "paced_ollama", "llama_ollama"} <= watching
    assert watching <= conftest.LAB_FIXTURES, sorted(watching - conftest.LAB_FIXTURES)


@pytest.mark.parametrize(("fixture", "server"), [("scripted_ollama", "ollama-scripted"),
                                                 ("paced_ollama", "ollama-paced")])
def test_a_fixture_server_that_dies_fails_the_test_at_once_and_the_next_that_uses_it(
        tmp_path: Path, fixture: str, server: str) -> None:
    """The session fixtures (tests/conftest.py), in a pytest of their own: the test's briefd is stopped."""
    tests = tmp_path / "test_nested_lab.py"
    tests.write_text(textwrap.dedent(NESTED_TESTS.format(fixture=fixture)), encoding="utf-8")
    started = time.monotonic()
    pytest_args = ["-p", "tests.conftest", "-c", str(REPO_ROOT / "pyproject.toml"), "--rootdir", str(REPO_ROOT),
                   "-p", "no:cacheprovider", "-q", "-s", "--basetemp", str(tmp_path / "base"), str(tests)]
    run = subprocess.run([sys.executable, "-m", "pytest", *pytest_args], cwd=REPO_ROOT, capture_output=True,
                         text=True, timeout=ONCE_PATIENCE_S * 3)
    elapsed = time.monotonic() - started
    out = run.stdout + run.stderr
    assert "1 failed, 1 error" in out, out[-4000:]
    assert f"LabServerDied: lab: the model server ({server}, pid " in out and "died of SIGSEGV" in out
    assert "Fatal Python error: Segmentation fault" in out, "the end of its log: faulthandler's trace of the crash"
    assert "BRIEFD ENDED" not in out and "start Ollama" not in out, "briefd was stopped, not left to wait"
    assert "RAN ON A DEAD SERVER" not in out
    assert elapsed < ONCE_PATIENCE_S / 2, f"{elapsed:.0f} s: briefd waited for the dead server"


@pytest.mark.slow
def test_make_demo_stops_at_once_when_its_model_server_dies_and_says_of_what(tmp_path: Path) -> None:
    with started([sys.executable, "-m", "lab.demo", "--driver", "scripted", "--workdir", str(tmp_path / "demo")]) \
            as demo:
        read_until(lines_of(demo.stdout), "briefd demo: researching", timeout=300)
        briefd = wait_for(lambda: children(demo.pid, is_briefd_run), 30, "briefd run --once")[0]
        model = module_child(demo.pid, "lab.ollama_server")
        # SIGSEGV, as llama.cpp's AMX kernel did
        elapsed = seconds_to_exit(demo, model, signal.SIGSEGV, timeout=ONCE_PATIENCE_S * 2)
    assert demo.stderr is not None
    said = demo.stderr.read()
    log = tmp_path / "demo" / "logs" / "ollama-scripted.log"
    assert f"lab: the model server (ollama-scripted, pid {model}) died of SIGSEGV; its log ({log}) ends:\n" in said
    assert "Fatal Python error: Segmentation fault" in said, said
    assert "briefd demo: stopped, briefd with it: a lab server died (above)" in said
    assert "start Ollama" not in said and "briefd exited" not in said
    assert elapsed < AT_ONCE_S, f"{elapsed:.0f} s after the crash"
    assert not Path(f"/proc/{briefd}").exists(), "the briefd the demo ran is stopped with it"


@pytest.mark.slow
def test_make_lab_reports_a_dead_server_at_once_with_its_signal_and_log(tmp_path: Path) -> None:
    with started([sys.executable, "-m", "lab.servers", "--workdir", str(tmp_path / "lab"), "--driver", "scripted"]) \
            as lab:
        json.loads(read_until(lines_of(lab.stdout), "searxng_url", timeout=300)[-1])
        index = module_child(lab.pid, "datasette")
        elapsed = seconds_to_exit(lab, index, signal.SIGKILL, timeout=ONCE_PATIENCE_S)
    assert lab.stderr is not None
    said = lab.stderr.read()
    log = tmp_path / "lab" / "logs" / "datasette.log"
    assert f"lab: the search index (datasette, pid {index}) died of SIGKILL; its log ({log}) ends:\n" in said, said
    assert last_line(log) in said, "the log's last line is quoted"
    assert elapsed < AT_ONCE_S
