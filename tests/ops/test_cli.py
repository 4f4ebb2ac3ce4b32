"""The command line as a user meets it: exit codes, messages, and what lands on disk."""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import time
from pathlib import Path

import jsonschema
import pytest

from briefd.daemon.core.briefjson import MAX_BRIEF_BYTES
from briefd.daemon.core.settings import DEFAULT_MODEL, settings_table
from tests.conftest import BRIEFD, Workspace


def run(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("BRIEFD_") and k != "OLLAMA_HOST"}
    return subprocess.run([BRIEFD, *args], cwd=cwd, env={**base, **(env or {})}, text=True,
                          capture_output=True, timeout=120)


def test_schema_is_a_valid_json_schema_that_accepts_the_example(tmp_path: Path) -> None:
    result = run("schema", cwd=tmp_path)
    assert result.returncode == 0
    schema = json.loads(result.stdout)
    jsonschema.Draft202012Validator.check_schema(schema)
    example = json.loads((Path(__file__).parents[2] / "inbox" / "example.json.sample").read_text())
    jsonschema.validate(example, schema)


def test_submit_writes_valid_briefs_atomically_and_refuses_invalid_ones(tmp_path: Path) -> None:
    good = tmp_path / "good.json"
    good.write_text(json.dumps({"question": "Why was the bridge closed?"}))
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"question": "Why?", "depht": "quick"}))
    inbox = tmp_path / "inbox"
    refused = run("submit", str(good), str(bad), "--inbox", str(inbox), cwd=tmp_path)
    assert refused.returncode == 2
    assert "bad.json" in refused.stderr and "did you mean 'depth'" in refused.stderr
    assert not inbox.exists() or not list(inbox.iterdir()), "nothing written when any brief is invalid"
    ok = run("submit", str(good), "--inbox", str(inbox), cwd=tmp_path)
    assert ok.returncode == 0, ok.stderr
    again = run("submit", str(good), "--inbox", str(inbox), cwd=tmp_path)
    assert sorted(p.name for p in inbox.iterdir()) == ["good-2.json", "good.json"], "never overwrites"
    assert (inbox / "good.json").read_bytes() == good.read_bytes()
    assert again.stdout.strip().endswith("good-2.json")


def _run_capped(args: list[str], cwd: Path) -> tuple[int, str, float, int]:
    """`briefd ARGS` under a 2 GiB address-space cap (an unbounded read dies of MemoryError instead
    of taking the machine): exit code, stderr, wall seconds and the child's peak RSS in bytes (see
    rss_bound for what it includes)."""
    return _run_capped_argv([BRIEFD, *args], cwd)


def _run_capped_argv(argv: list[str], cwd: Path) -> tuple[int, str, float, int]:
    """`argv` run as _run_capped runs briefd."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("BRIEFD_") and k != "OLLAMA_HOST"}

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))

    started = time.monotonic()
    proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, preexec_fn=cap)
    try:
        stderr = proc.stderr.read().decode("utf-8", "replace") if proc.stderr else ""
        _pid, status, usage = os.wait4(proc.pid, 0)
    finally:
        if proc.stderr:
            proc.stderr.close()
    proc.returncode = os.waitstatus_to_exitcode(status)
    return proc.returncode, stderr, time.monotonic() - started, usage.ru_maxrss * 1024


def rss_bound(cwd: Path) -> int:
    """The peak RSS a capped `briefd` may report and still have read no more than its limit: 400 MiB, or
    what a child started the same way reports doing nothing, if more. Linux keeps a forked child's peak
    RSS across exec, so a child's ru_maxrss is at least its parent's RSS when forked (a test worker under
    coverage holds about 450 MiB): that part is the parent's, not what briefd read."""
    _code, _stderr, _wall, inherited = _run_capped_argv(["true"], cwd)
    return max(400 << 20, inherited + (32 << 20))


def test_submit_refuses_endless_and_huge_inputs_at_once_with_bounded_memory(tmp_path: Path) -> None:
    """Issue 8 #8: /dev/zero was read until the OOM killer came (23 GB); a 5 GB sparse file took
    22 s. Both are refused as too large (exit 2), having read at most the limit plus one byte."""
    sparse = tmp_path / "sparse.json"
    with open(sparse, "wb") as handle:
        handle.truncate(5_000_000_000)
    inbox = tmp_path / "inbox"
    bound = rss_bound(tmp_path)
    cases = [("/dev/zero", f"more than {MAX_BRIEF_BYTES:,} bytes"), (str(sparse), "5,000,000,000 bytes")]
    for path, size in cases:
        code, stderr, wall, peak = _run_capped(["submit", path, "--inbox", str(inbox)], tmp_path)
        assert code == 2, stderr[-2000:]
        assert "too large" in stderr and size in stderr and f"limit is {MAX_BRIEF_BYTES:,} bytes" in stderr
        assert "Traceback" not in stderr
        assert wall < 30, f"{path}: {wall:.1f} s"
        assert peak < bound, f"{path}: peak RSS {peak >> 20} MiB (bound {bound >> 20} MiB)"
    assert not inbox.exists() or not list(inbox.iterdir()), "nothing was written"
    code, stderr, _wall, peak = _run_capped(["--config", "/dev/zero", "status"], tmp_path)
    assert code == 2 and "too large" in stderr and "/dev/zero" in stderr, stderr[-2000:]
    assert peak < bound, "briefd.toml is read with the same bound"


def test_unknown_command_and_bad_settings_exit_2(tmp_path: Path) -> None:
    assert run("frobnicate", cwd=tmp_path).returncode == 2
    bad_env = run("status", cwd=tmp_path, env={"BRIEFD_WORKERS": "many"})
    assert bad_env.returncode == 2 and "BRIEFD_WORKERS" in bad_env.stderr


def test_flags_before_and_after_the_command_both_count(tmp_path: Path) -> None:
    before = run("--db", str(tmp_path / "a.db"), "check", cwd=tmp_path)
    after = run("check", "--db", str(tmp_path / "b.db"), cwd=tmp_path)
    assert str(tmp_path / "a.db") in before.stdout and str(tmp_path / "b.db") in after.stdout


def test_check_passes_against_the_lab(workspace: Workspace) -> None:
    result = workspace.briefd("check")
    assert result.returncode == 0, result.stdout + result.stderr
    # Ollama, structured output, SearXNG, egress, inbox, outbox, database, library
    assert result.stdout.count("ok  ") == 8
    assert "ok   structured output, one short call each way on lab-scripted: schema " in result.stdout


def test_check_names_each_problem_and_its_fix(workspace: Workspace, search_lab, tmp_path: Path) -> None:
    json_off = search_lab.start_searxng(json_format=False)
    result = workspace.briefd("check", BRIEFD_MODEL="no-such-model:1b", BRIEFD_SEARXNG_URL=json_off.url,
                              BRIEFD_OUTBOX="/proc/briefd-cannot-write-here")
    assert result.returncode == 3
    out = result.stdout
    assert "ollama pull no-such-model:1b" in out
    assert "formats: [html, json]" in out and "403" in out
    assert "outbox /proc/briefd-cannot-write-here is not writable" in out
    down = workspace.briefd("check", OLLAMA_HOST="http://127.0.0.1:9", BRIEFD_SEARXNG_URL="http://127.0.0.1:9")
    assert down.returncode == 3 and down.stdout.count("FAIL") == 2


def test_a_second_daemon_on_the_same_inbox_exits_3_naming_the_first(workspace: Workspace) -> None:
    first = subprocess.Popen([BRIEFD, "run"], env=workspace.env(), cwd=workspace.root,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 20
        lock = workspace.inbox / ".briefd.lock"
        while time.monotonic() < deadline and not (lock.exists() and lock.read_text().strip()):
            time.sleep(0.1)
        time.sleep(0.5)
        second = workspace.briefd("run", "--once", timeout=60)
        assert second.returncode == 3
        assert f"pid {first.pid}" in second.stderr
    finally:
        first.send_signal(signal.SIGTERM)
        assert first.wait(timeout=30) == 0, "SIGTERM is a graceful exit 0"


@pytest.mark.slow
def test_the_daemon_takes_files_as_they_arrive_and_stops_on_sigterm(workspace: Workspace) -> None:
    # settle 3 s: a writer pausing for 1 s mid-file must not see its file taken half-written
    daemon = subprocess.Popen([BRIEFD, "run"], env=workspace.env(BRIEFD_SETTLE_SECONDS="3"), cwd=workspace.root,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(1.5)
        # a slow writer: the file is incomplete for a while and must not be taken early
        path = workspace.inbox / "slow.json"
        with open(path, "w") as handle:
            handle.write('{"question": "Which programming language is the Orbital text editor ')
            handle.flush()
            time.sleep(1.0)
            handle.write('written in?", "depth": "quick", "fetch_pages": false}')
        # a file moved in from elsewhere
        outside = workspace.root / "moved.json"
        outside.write_text(json.dumps({"question": "Why was the Kestrel River bridge closed in 2025?",
                                       "depth": "quick", "max_rounds": 1}))
        os.rename(outside, workspace.inbox / "moved.json")
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            done = [b for b in ("slow", "moved") if (workspace.outbox / b / "report.json").exists()]
            if len(done) == 2:
                break
            time.sleep(0.3)
        assert (workspace.outbox / "slow" / "report.json").exists()
        assert (workspace.outbox / "moved" / "report.json").exists()
        assert not (workspace.outbox / "slow" / "error.json").exists(), "the half-written file was not taken"
        assert workspace.report("slow")["status"] == "done"
    finally:
        daemon.send_signal(signal.SIGTERM)
        assert daemon.wait(timeout=30) == 0


def test_cancel_and_retry(workspace: Workspace) -> None:
    workspace.drop("later.json", {"question": "Why was the Kestrel River bridge closed in 2025?"})
    # accept without running: the model host is unreachable, so take it and stop
    status = workspace.briefd("cancel", "later")
    assert status.returncode == 2, "not accepted yet: nothing to cancel"
    from briefd.daemon.intake.inbox import Inbox
    from briefd.store import Store

    store = Store(workspace.db)
    Inbox(workspace.inbox, workspace.outbox, store, settle_seconds=0).scan()
    inbox = Inbox(workspace.inbox, workspace.outbox, store, settle_seconds=0)
    inbox.scan()
    assert inbox.take_ready()[0].brief_id == "later"
    store.close()
    cancelled = workspace.briefd("cancel", "later")
    assert cancelled.returncode == 0 and "cancelled" in cancelled.stdout
    assert json.loads(workspace.briefd("status", "--json").stdout)["counts"]["cancelled"] == 1
    retried = workspace.briefd("retry", "later")
    assert retried.returncode == 0 and "re-queued" in retried.stdout
    assert json.loads(workspace.briefd("status", "--json").stdout)["counts"]["queued"] == 1
    assert workspace.briefd("retry", "later").returncode == 2, "only failed or cancelled briefs are retried"


def test_help_lists_every_setting_from_the_one_table(tmp_path: Path) -> None:
    """`briefd --help` is built from settings.py's table: each flag with its environment name and default,
    and every setting without a flag by name, so a setting added to the table shows up here. (A command's
    own --help points here instead of repeating them: tests/ops/test_cli_edges.py.)"""
    shown = " ".join(run("--help", cwd=tmp_path).stdout.split())  # argparse wraps lines
    for row in settings_table():
        if row["flag"]:
            assert f"{row['flag']} {row['name'].upper()}" in shown
            assert f"(env {row['env']}, default {row['default']})" in shown
        else:
            assert f"{row['name']} (env {row['env']}, default {row['default']})" in shown
    assert f"(env BRIEFD_MODEL, default {DEFAULT_MODEL})" in shown  # issue 13: it was once left out


def test_a_flag_from_the_table_reaches_the_settings(tmp_path: Path) -> None:
    """Flags are read as strings and checked by load_settings, whose message names the flag and the fix."""
    bad = run("--workers", "many", "status", cwd=tmp_path)
    assert bad.returncode == 2
    assert "--workers must be a whole number from 1 to 64, got 'many'; pass e.g. --workers 1" in bad.stderr
    assert run("status", "--workers", "3", cwd=tmp_path).returncode == 0


def _run_once_logging(tmp_path: Path, *flags: str, **env: str) -> str:
    """`briefd run --once` with one INFO line due (a temp file a crash left in the outbox is
    swept) and one WARNING line (a rejected brief); no service is needed for either."""
    work = tmp_path / "w"
    (work / "inbox").mkdir(parents=True, exist_ok=True)
    (work / "outbox" / "old").mkdir(parents=True, exist_ok=True)
    (work / "outbox" / "old" / ".report.json.abc123.tmp").write_text("half")
    (work / "inbox" / "bad.json").write_text('{"qestion": "Why?"}')
    result = run(*flags, "run", "--once", cwd=work, env={"BRIEFD_SETTLE_SECONDS": "0", "OLLAMA_HOST": "127.0.0.1:9",
                                                          "BRIEFD_SEARXNG_URL": "http://127.0.0.1:9", **env})
    assert result.returncode == 0, result.stderr
    return result.stderr


@pytest.mark.slow
def test_log_level_is_applied(tmp_path: Path) -> None:
    """Issue 9 #10: log_level was parsed and validated, then never used."""
    levels = {}
    for level in ("debug", "info", "warning", "error"):
        stderr = _run_once_logging(tmp_path / level, BRIEFD_LOG_LEVEL=level)
        levels[level] = {name for name in ("DEBUG", "INFO", "WARNING") if f" briefd {name} " in stderr}
    assert levels == {"debug": {"DEBUG", "INFO", "WARNING"}, "info": {"INFO", "WARNING"}, "warning": {"WARNING"},
                      "error": set()}
    assert "bad.json rejected" in _run_once_logging(tmp_path / "default")
    verbose = _run_once_logging(tmp_path / "verbose", "-v", BRIEFD_LOG_LEVEL="error")
    assert " briefd DEBUG settings: " in verbose, "-v is debug whatever log_level says"


def test_check_reports_the_library(tmp_path: Path) -> None:
    """Issue 10: a line on the library's health; a missing folder fails with the fix."""
    unset = run("check", "--db", str(tmp_path / "briefd.db"), cwd=tmp_path)
    assert "library: none configured" in unset.stdout
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "note.md").write_text("A note on gusset plates.\n")
    env = {"BRIEFD_LIBRARY": f"{tmp_path / 'docs'}"}
    indexed = run("library", "reindex", "--db", str(tmp_path / "briefd.db"), cwd=tmp_path, env=env)
    assert indexed.returncode == 0, indexed.stderr
    good = run("check", "--db", str(tmp_path / "briefd.db"), cwd=tmp_path, env=env)
    assert "ok   library: 1 folder(s) readable; 1 indexed" in good.stdout
    env = {"BRIEFD_LIBRARY": f"{tmp_path / 'docs'}:{tmp_path / 'gone'}"}
    bad = run("check", "--db", str(tmp_path / "briefd.db"), cwd=tmp_path, env=env)
    assert bad.returncode == 3
    assert f"FAIL library folder(s) not readable: {tmp_path / 'gone'} (missing)" in bad.stdout
    assert "fix: create the folder" in bad.stdout
