"""Unattended operation without the lab: the settings, the outage log, systemd's notify protocol on a
real datagram socket, the store lock's holder, the on_finish command run for real, the shipped unit."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import re
import shutil
import socket
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from pathlib import Path

import pytest

from briefd.daemon.ops import onfinish

from briefd.daemon.ops import worker
from briefd.daemon.core.events import EventLog
from briefd.daemon.core.files import LOCK_TRY_PAUSE_S, hold_lock, lock_holder, store_lock_path
from briefd.daemon.research.run import Outage
from briefd.daemon.core.outages import OutageLog
from briefd.daemon.ops.sdnotify import Notifier, socket_address, watchdog_interval
from briefd.daemon.core.settings import Settings, SettingsError, load_settings, settings_table
from briefd.daemon.ops.worker import queue_line, restart_fix, startup_line
from briefd.store import Store

ROOT = Path(__file__).resolve().parents[2]
UNIT = ROOT / "contrib" / "systemd" / "briefd.service"
CRON = ROOT / "contrib" / "cron" / "briefd"


@pytest.fixture()
def cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return tmp_path


# --------------------------------------------------------------------------- settings


def test_once_patience_and_on_finish_defaults(cwd: Path) -> None:
    s = load_settings({}, {})
    assert s.once_patience_s == Settings.once_patience_s and s.once_patience_s < s.patience_s
    assert s.on_finish == () and s.on_finish_timeout_s > 0


def test_once_patience_from_flag_env_and_toml(cwd: Path) -> None:
    (cwd / "briefd.toml").write_text("once_patience_s = 30\n")
    assert load_settings({}, {}).once_patience_s == 30
    assert load_settings({}, {"BRIEFD_ONCE_PATIENCE_S": "45"}).once_patience_s == 45
    assert load_settings({"once_patience_s": "7"}, {"BRIEFD_ONCE_PATIENCE_S": "45"}).once_patience_s == 7
    with pytest.raises(SettingsError) as bad:
        load_settings({"once_patience_s": "0"}, {})
    assert "--once-patience-s" in str(bad.value) and "greater than 0" in str(bad.value)


def test_on_finish_is_a_list_of_words_from_toml_or_a_json_array(cwd: Path) -> None:
    (cwd / "briefd.toml").write_text('on_finish = ["/usr/bin/notify", "--to", "ops team"]\n')
    assert load_settings({}, {}).on_finish == ("/usr/bin/notify", "--to", "ops team")
    env = {"BRIEFD_ON_FINISH": '["mail", "-s", "brief done"]'}
    assert load_settings({}, env).on_finish == ("mail", "-s", "brief done")


@pytest.mark.parametrize("raw, words", [
    ("mail -s done ops", ["BRIEFD_ON_FINISH", "JSON array", "never run through a shell"]),
    ('"mail"', ["BRIEFD_ON_FINISH", "list of words"]),
    ("[]", ["BRIEFD_ON_FINISH", "list of words"]),
    ('["mail", 3]', ["BRIEFD_ON_FINISH", "non-empty text"]),
])
def test_a_bad_on_finish_names_the_variable_and_the_form(cwd: Path, raw: str, words: list[str]) -> None:
    with pytest.raises(SettingsError) as bad:
        load_settings({}, {"BRIEFD_ON_FINISH": raw})
    for word in words:
        assert word in str(bad.value)


def test_a_string_on_finish_in_toml_names_the_line_and_shows_an_array(cwd: Path) -> None:
    (cwd / "briefd.toml").write_text('model = "x"\non_finish = "notify --to ops"\n')
    with pytest.raises(SettingsError) as bad:
        load_settings({}, {})
    assert "briefd.toml line 2" in str(bad.value) and 'on_finish = ["' in str(bad.value)


def test_run_has_the_once_patience_flag(cwd: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from briefd.daemon.ops.cli import build_parser, load

    args = build_parser().parse_args(["run", "--once", "--once-patience-s", "9"])
    assert load(args).once_patience_s == 9
    with pytest.raises(SystemExit):
        build_parser().parse_args(["run", "--help"])
    shown = " ".join(capsys.readouterr().out.split())
    [row] = [row for row in settings_table() if row["name"] == "once_patience_s"]
    assert "--once-patience-s SECONDS" in shown and f"the once_patience_s setting; default {row['default']}" in shown


# --------------------------------------------------------------------------- log lines


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_an_outage_is_logged_once_and_its_end_once(caplog: pytest.LogCaptureFixture) -> None:
    clock = Clock()
    book = OutageLog(patience_s=600, clock=clock)
    with caplog.at_level(logging.INFO, logger="briefd"):
        for n in range(5):  # five briefs, or five retries
            book.went_down("searxng", f"connection refused ({n})")
        clock.now += 42
        assert book.down_for("searxng") == 42 and book.summary() == "waiting for searxng"
        book.came_back("searxng")
        book.came_back("searxng")  # already up: nothing to say
    records = [(r.levelname, r.getMessage()) for r in caplog.records]
    assert [level for level, _ in records] == ["WARNING", "INFO"], records
    assert "searxng is unavailable: connection refused (0)" in records[0][1] and "patience_s 600" in records[0][1]
    assert records[1][1] == "searxng is back after 42 s down"
    assert book.down_for("searxng") == 0 and book.summary() == ""


def test_a_new_fix_for_a_service_already_down_is_news(caplog: pytest.LogCaptureFixture) -> None:
    book = OutageLog(clock=Clock())
    with caplog.at_level(logging.WARNING, logger="briefd"):
        book.went_down("ollama", "connection refused")
        book.went_down("ollama", "model missing", fix="run: ollama pull m")
        book.went_down("ollama", "model missing", fix="run: ollama pull m")
    assert [r.getMessage().count("run: ollama pull m") for r in caplog.records] == [0, 1]
    assert book.fix("ollama") == "run: ollama pull m"


def test_run_once_says_each_outage_once_with_its_own_wait_and_counts_briefs_per_service(
        cwd: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Three briefs meet outages under `run --once` (two ollama, one searxng's refusal): the WARNING says
    the reason once (not "searxng is unavailable: searxng is unavailable"), names once_patience_s (the
    wait that applies), and the give-up lines count each service's own briefs."""
    clock = Clock()
    daemon = worker.Daemon(load_settings({"once_patience_s": "30"}, {}), once=True)
    daemon.outages.clock = clock
    daemon.store = store = Store(cwd / "briefd.db")
    try:
        for brief_id in ("a", "b", "c"):
            store.add_brief(brief_id=brief_id, question="Why?", source_file=f"{brief_id}.json", received=b"{}",
                            brief_json='{"question": "Why?"}', inbox_path=str(cwd / f"{brief_id}.json"))
        runs = [store.claim_next() for _ in range(3)]
        outages = [Outage("ollama", "Ollama at http://127.0.0.1:9: connection refused"),
                   Outage("ollama", "Ollama at http://127.0.0.1:9: connection refused"),
                   Outage("searxng", "SearXNG answered HTTP 403: enable json", fix="enable json")]
        with caplog.at_level(logging.WARNING, logger="briefd"):
            for run, outage in zip(runs, outages):  # each brief meets its outage: they wait
                assert run is not None
                events = EventLog(store, run.run_id, run.brief_id, cwd / run.brief_id / "events.ndjson")
                daemon.wait_or_fail(run, None, cwd / run.brief_id, events, outage.service, outage.reason, outage.fix)
            clock.now += 31  # past once_patience_s: each is parked for the next run
            for run, outage in zip(runs, outages):
                assert run is not None
                events = EventLog(store, run.run_id, run.brief_id, cwd / run.brief_id / "events.ndjson")
                daemon.wait_or_fail(run, None, cwd / run.brief_id, events, outage.service, outage.reason, outage.fix)
            daemon.say_gave_up()
    finally:
        store.close()
    said = [r.getMessage() for r in caplog.records]
    warned = [m for m in said if " is unavailable: " in m and "gave up" not in m]
    assert len(warned) == 2 and not [m for m in said if "is unavailable: searxng is unavailable" in m], said
    assert all("up to once_patience_s 30 s, then they stay queued for the next run" in m for m in warned), warned
    assert not [m for m in warned if "up to patience_s" in m], "patience_s is not the wait under --once"
    [ollama] = [m for m in said if m.startswith("run --once gave up waiting for ollama")]
    [searxng] = [m for m in said if m.startswith("run --once gave up waiting for searxng")]
    assert "2 brief(s) stay queued" in ollama and "1 brief(s) stay queued" in searxng
    assert ": SearXNG answered HTTP 403: enable json; 1 brief(s)" in searxng, "the reason, without a second prefix"


def test_the_startup_line_names_what_the_daemon_uses(cwd: Path) -> None:
    settings = load_settings({}, {"BRIEFD_LIBRARY": "/srv/library", "BRIEFD_EGRESS": "private"})
    line = startup_line(settings, once=True)
    for part in ("briefd ", "run --once", f"pid {os.getpid()}", f"model {settings.model} at {settings.ollama_host}",
                 f"SearXNG {settings.searxng_url}", f"inbox {cwd / 'inbox'}", f"outbox {cwd / 'outbox'}",
                 f"db {cwd / 'briefd.db'}", "library /srv/library", "egress private"):
        assert part in line, part
    none = startup_line(load_settings({}, {"BRIEFD_EGRESS": "none"}), once=False)
    assert "SearXNG not used (egress = none)" in none and "(run, pid" in none


def test_the_queue_line_and_the_fixes_said_when_a_run_gives_up(cwd: Path) -> None:
    book = OutageLog(clock=Clock())
    assert queue_line({"queued": 2, "running": 1, "done": 9}, book) == "2 queued, 1 running"
    book.went_down("ollama", "refused")
    assert queue_line({}, book) == "0 queued, 0 running; waiting for ollama"
    settings = load_settings({}, {})
    assert f"start Ollama at {settings.ollama_host}" in restart_fix("ollama", settings)
    assert f"start SearXNG at {settings.searxng_url}" in restart_fix("searxng", settings)
    own = restart_fix("searxng", settings, "read SearXNG's log")
    assert own.startswith("read SearXNG's log;") and "start SearXNG" not in own, "an outage's own fix comes first"


# --------------------------------------------------------------------------- systemd notify


def test_notify_socket_addresses() -> None:
    assert socket_address("/run/systemd/notify") == "/run/systemd/notify"
    assert socket_address("@briefd/notify") == b"\0briefd/notify"
    assert socket_address("") is None and socket_address("@") is None and socket_address("relative") is None


def test_watchdog_interval_is_half_of_watchdog_usec_for_this_process_only() -> None:
    assert watchdog_interval({"WATCHDOG_USEC": "30000000"}, 7) == 15.0
    assert watchdog_interval({"WATCHDOG_USEC": "30000000", "WATCHDOG_PID": "7"}, 7) == 15.0
    assert watchdog_interval({"WATCHDOG_USEC": "30000000", "WATCHDOG_PID": "8"}, 7) is None
    assert watchdog_interval({}, 7) is None and watchdog_interval({"WATCHDOG_USEC": "0"}, 7) is None


@pytest.mark.parametrize("abstract", [False, True])
def test_notifier_sends_datagrams_to_a_real_socket(tmp_path: Path, abstract: bool) -> None:
    name = f"@briefd-test-{uuid.uuid4().hex}" if abstract else str(tmp_path / "notify.sock")
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sink:
        sink.bind(socket_address(name))
        sink.settimeout(5)
        notifier = Notifier.from_env({"NOTIFY_SOCKET": name})
        assert notifier.ready("0 queued, 0 running")
        assert notifier.watchdog() and notifier.stopping("bye")
        got = [sink.recv(4096).decode() for _ in range(3)]
    assert got[0].splitlines() == ["READY=1", "STATUS=0 queued, 0 running", f"MAINPID={os.getpid()}"]
    assert got[1] == "WATCHDOG=1" and got[2].splitlines() == ["STOPPING=1", "STATUS=bye"]


def test_the_daemon_pings_the_watchdog_on_every_tick_not_once_per_half_of_its_limit(
        tmp_path: Path, cwd: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """WatchdogSec=120 with a 5 s tick: a ping every 5 s survives a stall of up to 115 s; pinging only
    every 60 s (half of WATCHDOG_USEC) survived about 60. Here, scaled down: a 0.1 s tick under a 2 s
    watchdog pings about every 0.1 s, not once a second."""
    monkeypatch.setattr(worker, "STATUS_EVERY_S", 0.1)
    name = str(tmp_path / "notify.sock")
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sink:
        sink.bind(name)
        sink.settimeout(0.05)
        daemon = worker.Daemon(load_settings({}, {}), once=False)
        daemon.notifier = Notifier.from_env({"NOTIFY_SOCKET": name, "WATCHDOG_USEC": "2000000"})
        monkeypatch.setattr(daemon, "queue_status", lambda: "0 queued, 0 running")

        async def tell_for_a_while() -> None:
            teller = asyncio.create_task(daemon.tell_systemd())
            await asyncio.sleep(1.25)
            teller.cancel()

        asyncio.run(tell_for_a_while())
        pings = 0
        with contextlib.suppress(TimeoutError):
            while True:
                pings += sink.recv(4096).decode().splitlines().count("WATCHDOG=1")
    assert pings >= 8, f"{pings} pings in 1.25 s with a 0.1 s tick"


def test_without_notify_socket_nothing_is_sent_and_a_missing_socket_is_not_an_error(tmp_path: Path) -> None:
    assert not Notifier.from_env({}).enabled and not Notifier.from_env({}).ready("x")
    assert not Notifier.from_env({"NOTIFY_SOCKET": str(tmp_path / "gone.sock")}).ready("x")


# --------------------------------------------------------------------------- the store lock's holder


def test_lock_holder_tells_a_held_lock_from_a_dead_daemons(tmp_path: Path) -> None:
    db = tmp_path / "briefd.db"
    lock = store_lock_path(db)
    assert lock_holder(lock).held is False and lock_holder(lock).pid is None and not lock.exists()
    held = hold_lock(lock, "using the store", "stop it")
    try:
        state = lock_holder(lock)
        assert state.held is True and state.pid == os.getpid()
    finally:
        held.release()
    state = lock_holder(lock)
    assert state.held is False and state.pid == os.getpid(), "the last holder's pid, now not holding it"


def test_a_status_probe_does_not_turn_a_starting_daemon_away(tmp_path: Path) -> None:
    """lock_holder takes the lock for an instant; hold_lock tries LOCK_TRIES times before refusing."""
    import fcntl

    lock = tmp_path / "briefd.db.lock"
    lock.write_text("pid 1\n")
    fd = os.open(lock, os.O_RDONLY)
    fcntl.flock(fd, fcntl.LOCK_SH)  # a probe holding it the moment a daemon starts
    release = threading.Timer(LOCK_TRY_PAUSE_S * 2, os.close, [fd])
    release.start()
    try:
        hold_lock(lock, "using the store", "stop it").release()
    finally:
        release.join()


# --------------------------------------------------------------------------- on_finish, run for real


HOOK = textwrap.dedent("""
    import json, os, sys
    out = sys.argv[1]
    with open(out, "a") as f:
        f.write(json.dumps({k: v for k, v in os.environ.items() if k.startswith("BRIEFD_")}) + "\\n")
    sys.stderr.write("notified\\n")
    sys.exit(int(sys.argv[2]) if len(sys.argv) > 2 else 0)
""")


def test_on_finish_runs_with_the_brief_in_its_environment(tmp_path: Path) -> None:
    script = tmp_path / "hook.py"
    script.write_text(HOOK)
    out = tmp_path / "seen.ndjson"
    ended = onfinish.Ended("b-1", "done", tmp_path / "outbox" / "b-1")
    assert asyncio.run(onfinish.run((sys.executable, str(script), str(out)), ended, 10)) == 0
    seen = json.loads(out.read_text())
    told = {"BRIEFD_ID", "BRIEFD_STATUS", "BRIEFD_OUTDIR", "BRIEFD_REPORT", "BRIEFD_ANSWER_FOUND"}  # the five (docs/running.md)
    assert {k: v for k, v in seen.items() if k in told} == {
        "BRIEFD_ID": "b-1", "BRIEFD_STATUS": "done", "BRIEFD_OUTDIR": str(tmp_path / "outbox" / "b-1"),
        "BRIEFD_REPORT": str(tmp_path / "outbox" / "b-1" / "report.json"), "BRIEFD_ANSWER_FOUND": "no"}


def test_on_finish_never_gets_the_daemons_secrets_or_its_notify_socket(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """The API's token and systemd's notify protocol are the daemon's: a child that inherited
    NOTIFY_SOCKET could ping the watchdog for a stuck daemon. PATH, HOME and LANG still reach it."""
    secret = "hunter2-secret-of-enough-length"
    for name, value in {"BRIEFD_SERVE_TOKEN": secret, "NOTIFY_SOCKET": "@briefd-notify", "WATCHDOG_USEC": "120000000",
                        "WATCHDOG_PID": str(os.getpid()), "LANG": "C.UTF-8", "HOME": str(tmp_path)}.items():
        monkeypatch.setenv(name, value)
    script = tmp_path / "dump.py"
    script.write_text("import json, os, sys\nopen(sys.argv[1], 'w').write(json.dumps(dict(os.environ)))\n")
    ended = onfinish.Ended("b-5", "done", tmp_path)
    for run in (lambda argv: asyncio.run(onfinish.run(argv, ended, 10)),
                lambda argv: onfinish.run_now(argv, ended, 10)):
        out = tmp_path / "env.json"
        assert run((sys.executable, str(script), str(out))) == 0
        seen = json.loads(out.read_text())
        assert secret not in json.dumps(seen)
        assert not {"BRIEFD_SERVE_TOKEN", "NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID"} & set(seen)
        assert seen["PATH"] == os.environ["PATH"] and seen["HOME"] == str(tmp_path) and seen["LANG"] == "C.UTF-8"
        assert seen["BRIEFD_ID"] == "b-5"
        out.unlink()


def test_a_failing_on_finish_is_logged_with_its_code_and_stderr(tmp_path: Path,
                                                               caplog: pytest.LogCaptureFixture) -> None:
    script = tmp_path / "hook.py"
    script.write_text(HOOK)
    ended = onfinish.Ended("b-2", "failed", tmp_path)
    with caplog.at_level(logging.WARNING, logger="briefd"):
        assert asyncio.run(onfinish.run((sys.executable, str(script), str(tmp_path / "o"), "5"), ended, 10)) == 5
    [record] = caplog.records
    assert "b-2: on_finish" in record.getMessage() and "exited 5" in record.getMessage()
    assert "notified" in record.getMessage()


def test_an_on_finish_past_its_limit_is_killed_with_its_children(tmp_path: Path,
                                                                caplog: pytest.LogCaptureFixture) -> None:
    marker = tmp_path / "child-lived"
    # a shell script's child would outlive a kill of the shell alone: the whole group is killed
    script = tmp_path / "slow.sh"
    script.write_text(f"#!/bin/sh\n(sleep 3; touch {marker}) &\nsleep 30\n")
    script.chmod(0o755)
    with caplog.at_level(logging.WARNING, logger="briefd"):
        assert asyncio.run(onfinish.run((str(script),), onfinish.Ended("b-3", "done", tmp_path), 0.5)) is None
    assert "ran past on_finish_timeout_s (0.5 s) and was killed" in caplog.text
    time.sleep(3.5)
    assert not marker.exists(), "the command's children were killed with it"


def test_an_on_finish_that_leaves_a_child_in_the_background_succeeds_when_it_exits(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """`notify &`-style commands: the command's exit decides, at once, though its child still holds
    stderr; the child is left to finish (in both the daemon's and the command line's version), and
    what the command wrote before exiting is still in the log when it fails."""
    ended = onfinish.Ended("b-6", "done", tmp_path)
    # the child outlives the limit: waiting for its end of stderr said "ran past ... and was killed"
    runs = {"async": lambda argv: asyncio.run(onfinish.run(argv, ended, 1.0)),
            "run_now": lambda argv: onfinish.run_now(argv, ended, 1.0)}
    for how, run in runs.items():
        marker = tmp_path / f"{how}-child-finished"
        script = tmp_path / f"{how}.sh"
        script.write_text(f"#!/bin/sh\n(sleep 2; touch {marker}) &\necho told >&2\nexit ${{1:-0}}\n")
        script.chmod(0o755)
        caplog.clear()
        began = time.monotonic()
        with caplog.at_level(logging.INFO, logger="briefd"):
            assert run((str(script),)) == 0, how
        assert time.monotonic() - began < 0.9, f"{how}: decided by the command's exit, not its child's"
        assert [r.levelname for r in caplog.records] == ["INFO"] and "on_finish" in caplog.text
        assert "done" in caplog.text and "killed" not in caplog.text, how
        wait_for_file = time.monotonic() + 10
        while not marker.exists() and time.monotonic() < wait_for_file:
            time.sleep(0.1)
        assert marker.exists(), f"{how}: the background child lived to finish"
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="briefd"):
            assert run((str(script), "4")) == 4, how
        assert "exited 4; its stderr ends: told" in caplog.text, how


def test_an_on_finish_that_cannot_start_says_so(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="briefd"):
        assert asyncio.run(onfinish.run((str(tmp_path / "missing"),), onfinish.Ended("b-4", "done", tmp_path), 5)) \
            is None
        assert onfinish.run_now((str(tmp_path / "missing"),), onfinish.Ended("b-4", "done", tmp_path), 5) is None
    assert caplog.text.count("on_finish could not start") == 2


# --------------------------------------------------------------------------- the shipped unit and cron file


def unit_sections(path: Path) -> dict[str, dict[str, list[str]]]:
    """A unit file as systemd reads it: sections of keys, a key may repeat."""
    sections: dict[str, dict[str, list[str]]] = {}
    current: dict[str, list[str]] | None = None
    for line in path.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("["):
            current = sections.setdefault(line.strip("[]"), {})
            continue
        key, sep, value = line.partition("=")
        assert sep and current is not None, f"not a key=value line in a section: {line!r}"
        current.setdefault(key.strip(), []).append(value.strip())
    return sections


def test_the_unit_is_a_hardened_notify_service() -> None:
    unit = unit_sections(UNIT)
    service = unit["Service"]
    assert service["Type"] == ["notify"] and service["WatchdogSec"][0]
    for key in ("User", "WorkingDirectory", "ExecStart", "ReadWritePaths"):
        assert service[key][0], key
    assert service["ProtectSystem"] == ["strict"] and service["NoNewPrivileges"] == ["yes"]
    assert service["ExecStart"][0].endswith("briefd run"), "the daemon, not --once"
    assert service["WorkingDirectory"][0] in service["ReadWritePaths"][0].split()
    assert service["RestartPreventExitStatus"] == ["2"]
    assert unit["Install"]["WantedBy"] == ["multi-user.target"]


def test_the_unit_gives_the_start_an_explicit_timeout() -> None:
    """READY=1 waits for the store's check and recovery (archives open after it, issue 29 #5): the unit
    says how long systemd allows for that, and more than systemd's default 90 s, which a large store's
    check on a slow disk can pass (systemd would kill the start and restart it for ever)."""
    service = unit_sections(UNIT)["Service"]
    assert "TimeoutStartSec" in service, "the start timeout is systemd's default (90 s) unless the unit says it"
    [timeout] = service["TimeoutStartSec"]
    assert timeout.isdigit() and int(timeout) > 90, timeout


def test_the_docs_say_the_stall_the_watchdog_survives_as_the_code_and_unit_make_it() -> None:
    """The tick is STATUS_EVERY_S (shorter than half of WatchdogSec=) and each tick pings: a stall
    shorter than WatchdogSec= less one tick is survived."""
    limit = float(unit_sections(UNIT)["Service"]["WatchdogSec"][0])
    tick = min(worker.STATUS_EVERY_S, limit / 2)
    readme = " ".join(RUNNING.read_text().split())
    assert (f"pings the watchdog every {tick:g} s (systemd restarts a daemon whose event loop stops pinging for "
            f"`WatchdogSec=`, {limit:g} s, so a stall shorter than {limit - tick:g} s is always survived and one "
            f"of {limit:g} s never is;") in readme


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze is not installed here")
def test_systemd_analyze_verifies_the_unit(tmp_path: Path) -> None:
    """systemd's own reading: no unknown key or section, every setting valid. ExecStart points at
    the briefd being tested (verify checks that the program exists)."""
    briefd = Path(sys.executable).with_name("briefd")
    text = UNIT.read_text().replace("/opt/briefd/venv/bin/briefd", str(briefd))
    copy = tmp_path / "briefd.service"
    copy.write_text(text)
    result = subprocess.run(["systemd-analyze", "verify", str(copy)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0 and result.stderr.strip() == "", result.stderr


RUNNING = ROOT / "docs" / "running.md"
"""The page on running unattended, whose words these tests hold to the unit, the cron file and the code."""


def readme_section(title: str) -> str:
    """docs/running.md's text under a heading, up to the next heading (## to ####; a `# ` line is a
    comment in a code block), on one line."""
    text = RUNNING.read_text(encoding="utf-8")
    start = text.index(title)
    end = re.search(r"\n#{2,4} ", text[start + len(title):])
    return " ".join(text[start:start + len(title) + end.start() if end else None].split())


def test_the_exit_codes_say_that_a_stopped_run_once_exits_0_with_its_briefs_requeued() -> None:
    """SIGTERM/SIGINT to `run --once` is a graceful exit 0 (tests/e2e/test_crash.py) that leaves briefs
    unfinished: the docs' table and the cron file must not say 0 means every brief finished, alone."""
    cron = " ".join(line.lstrip("# ") for line in CRON.read_text().splitlines() if line.startswith("#"))
    [zero] = [row for row in readme_section("## With cron").split("| 0 |")[1:2]]
    for said in (zero.split("|")[0], cron.split(" 2 ")[0]):
        assert "SIGTERM" in said and "re-queued" in said and "next run" in said, said


def test_the_on_finish_example_mails_over_smtp_which_the_units_sandbox_allows() -> None:
    """`mail` cannot deliver under the shipped unit (ProtectSystem=strict makes the spool read-only,
    NoNewPrivileges ignores postdrop's setgid): the example submits over SMTP and says why."""
    service = unit_sections(UNIT)["Service"]
    assert service["ProtectSystem"] == ["strict"] and service["NoNewPrivileges"] == ["yes"]
    assert "AF_INET" in service["RestrictAddressFamilies"][0].split()
    section = readme_section("## Being told when a brief ends: `on_finish`")
    assert "curl -sS --url smtp://" in section and "--mail-rcpt" in section and "--upload-file -" in section
    assert "mail -s" not in section
    assert "ProtectSystem=strict" in section and "NoNewPrivileges=yes" in section and "setgid" in section


def test_the_cron_example_runs_once_with_a_short_patience() -> None:
    lines = [line for line in CRON.read_text().splitlines() if line.strip() and not line.startswith("#")]
    env = dict(line.split("=", 1) for line in lines if "=" in line.split()[0])
    assert int(env["BRIEFD_ONCE_PATIENCE_S"]) > 0
    [job] = [line for line in lines if "=" not in line.split()[0]]
    fields = job.split(None, 6)
    assert len(fields[:5]) == 5 and fields[5] == "briefd", "cron.d lines name the user"
    assert "briefd run --once" in fields[6]
