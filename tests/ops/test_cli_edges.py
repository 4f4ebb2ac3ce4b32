"""Issue 13's small things, as a user meets them: each command's --help, a pipe closed early,
`briefd show` of an id that does not exist, `check`'s fixes, a misspelt BRIEFD_* variable,
files in the inbox that are not briefs, and `briefd config`."""

from __future__ import annotations

import contextlib
import io
import json
import logging
import os
import re
import shlex
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from briefd.daemon.ops import cli

from briefd.daemon.core import settings as settings_module
from briefd.daemon.ops.cli import EXAMPLES, EXIT_PIPE_CLOSED, build_parser
from briefd.daemon.intake.inbox import Inbox
from briefd.daemon.core.settings import (
    OTHER_VARIABLES,
    Settings,
    effective_settings,
    is_secret,
    load_settings,
    settings_table,
)
from briefd.store import Store
from lab.workspace import BRIEFD
from tests.httpstub import QuietHandler, serving

ROOT = Path(__file__).resolve().parents[2]
CLOSED_PORT = "http://127.0.0.1:9"


def clean_env(**extra: str) -> dict[str, str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("BRIEFD_") and k != "OLLAMA_HOST"}
    return {**base, **extra}


def briefd(*args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([BRIEFD, *args], cwd=cwd, env=clean_env(**env), text=True, capture_output=True,
                          timeout=120)


def help_of(*args: str) -> str:
    """What `briefd ARGS --help` prints, in this process (argparse exits after printing)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit) as done:
        cli.main([*args, "--help"])
    assert done.value.code == 0
    return out.getvalue()


def commands() -> list[str]:
    """Every command and library action the parser has: "run", ..., "library status"."""
    names: list[str] = []

    def walk(parser: Any, prefix: str) -> None:
        for action in parser._actions:
            if action.__class__.__name__ == "_SubParsersAction":
                for name, child in action.choices.items():
                    names.append(f"{prefix}{name}")
                    walk(child, f"{prefix}{name} ")

    walk(build_parser(), "")
    return names


# --------------------------------------------------------------------------- --help


@pytest.mark.parametrize("command", commands())
def test_a_commands_help_shows_its_own_options_a_pointer_and_examples(command: str) -> None:
    text = help_of(*command.split())
    flat = " ".join(text.split())
    for row in settings_table():  # none of the settings is repeated here
        assert row["help"][:40] not in flat and f"env {row['env']}" not in flat
    assert "briefd --help" in flat and "briefd config" in flat
    assert all(row["flag"] in flat for row in settings_table() if row["flag"])  # named, in one line
    assert command in EXAMPLES, f"`briefd {command} --help` has no examples: add them to cli.EXAMPLES"
    assert "examples:" in text and all(example in text for example in EXAMPLES[command])


def test_run_help_is_short_and_its_own() -> None:
    text = help_of("run")
    assert "--once" in text and len(text.splitlines()) < 25, text


@pytest.mark.parametrize("command, example", [(c, e) for c, lines in EXAMPLES.items() for e in lines])
def test_every_example_is_a_command_briefd_accepts(command: str, example: str) -> None:
    words = shlex.split(example, comments=True)
    words = words[:words.index(">")] if ">" in words else words
    assert words[0] == "briefd"
    args = build_parser().parse_args(words[1:])  # exits (fails the test) on a wrong option
    ran = " ".join(filter(None, [args.command, getattr(args, "action", None)]))
    assert ran == command or ran.startswith(command + " ")  # `library`'s examples run its actions


def test_setting_flags_still_work_before_and_after_a_command() -> None:
    after = build_parser().parse_args(["run", "--inbox", "x", "--once", "--workers", "2", "-v"])
    before = build_parser().parse_args(["--inbox", "x", "--workers", "2", "-v", "run", "--once"])
    for args in (after, before):
        assert (args.command, args.inbox, args.workers, args.verbose, args.once) == ("run", "x", "2", True, True)
    nested = build_parser().parse_args(["library", "search", "plates", "--db", "y.db"])
    assert nested.db == "y.db" and nested.text == "plates"


def test_a_setting_whose_default_is_words_has_no_default_value_to_hide() -> None:
    """shown_default replaces the default in --help and docs/settings.md: only for settings whose default is
    nothing (None, an empty list), so no real default (such as --model's) can be hidden behind words."""
    defaults = {name: value for name, value in vars(Settings()).items()}
    for spec in settings_module._SPECS:
        if spec.shown_default is not None:
            assert defaults[spec.name] in (None, ()), f"{spec.name}'s default is hidden behind {spec.shown_default!r}"


# --------------------------------------------------------------------------- a reader that leaves early


@pytest.mark.parametrize("args", [["schema"], ["config"], ["config", "--json"], ["status", "--json"], ["status"],
                                  ["list", "--json"], ["search", "plates", "--json"], ["show", "shown"],
                                  ["show", "shown", "--events"], ["library", "status"]])
def test_output_into_a_closed_pipe_ends_quietly(tmp_path: Path, args: list[str]) -> None:
    """`briefd schema | head` printed a BrokenPipeError traceback when head had gone before briefd wrote
    (a race with head; certain here): the pipe's reader is closed before briefd starts, so its first
    write fails. Exit 141, as for any program whose reader left, and nothing on stderr.
    (argparse's --help swallows write errors itself.)"""
    outdir = tmp_path / "outbox" / "shown"
    outdir.mkdir(parents=True)
    (outdir / "report.md").write_text("# A report\n" + "line of the report\n" * 2000)
    (outdir / "events.ndjson").write_text('{"seq": 1, "type": "accepted"}\n' * 2000)
    Store(tmp_path / "briefd.db").close()
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        done = subprocess.run([BRIEFD, *args], cwd=tmp_path, env=clean_env(), stdout=write_end,
                              stderr=subprocess.PIPE, text=True, timeout=120)
    finally:
        os.close(write_end)
    assert done.stderr == "" and done.returncode == EXIT_PIPE_CLOSED == 141, done.stderr


# --------------------------------------------------------------------------- briefd show


def test_show_tells_an_unknown_id_from_a_brief_without_a_report_yet(tmp_path: Path) -> None:
    unknown = briefd("show", "unknown", cwd=tmp_path)
    assert unknown.returncode == 2
    assert "there is no brief with id 'unknown'" in unknown.stderr and "`briefd list` shows the ids" in unknown.stderr
    assert "yet" not in unknown.stderr
    store = Store(tmp_path / "briefd.db")
    try:
        for brief_id in ("waiting", "busy"):
            store.add_brief(brief_id=brief_id, question="Why?", source_file=f"{brief_id}.json", received=b"{}",
                            brief_json='{"question": "Why?"}', inbox_path=str(tmp_path / f"{brief_id}.json"))
        store.claim_next()  # "waiting" was first: it runs now; "busy" is queued
    finally:
        store.close()
    running = briefd("show", "waiting", cwd=tmp_path)
    assert running.returncode == 2
    assert "'waiting' has no report yet: it is running (since " in running.stderr
    assert "briefd show waiting --events" in running.stderr
    queued = briefd("show", "busy", "--events", cwd=tmp_path)
    assert "'busy' has no event log yet: it is queued (since " in queued.stderr and "briefd status" in queued.stderr
    still_unknown = briefd("show", "unknown", cwd=tmp_path)
    assert "there is no brief with id 'unknown'" in still_unknown.stderr


# --------------------------------------------------------------------------- briefd check


@contextlib.contextmanager
def searxng_whose_engines_fail() -> Iterator[str]:
    """A SearXNG that answers, as it does when every engine it asked failed: HTTP 200, no results."""
    body = json.dumps({"query": "briefd check", "results": [], "answers": [],
                       "unresponsive_engines": [["duckduckgo", "timeout"], ["wikipedia", "HTTP error"]]}).encode()

    class Handler(QuietHandler):
        def do_GET(self) -> None:
            self.send_json(body)

    with serving(Handler) as server:
        yield f"http://127.0.0.1:{server.server_address[1]}"


def test_check_points_at_the_engines_when_searxng_runs_but_its_engines_fail(tmp_path: Path) -> None:
    with searxng_whose_engines_fail() as url:
        done = briefd("check", "--searxng-url", url, cwd=tmp_path, OLLAMA_HOST=CLOSED_PORT)
    assert done.returncode == 3
    lines = done.stdout.splitlines()
    at = next(n for n, line in enumerate(lines) if line.startswith("FAIL SearXNG"))
    assert "every engine that answered failed" in lines[at]
    fix = lines[at + 1]
    assert fix.strip().startswith("fix: SearXNG is running") and "(duckduckgo, wikipedia)" in fix
    assert "SearXNG's log" in fix and "proxy" in fix and "start SearXNG or point" not in fix


def test_check_says_an_outbox_that_is_a_file_is_not_a_folder(tmp_path: Path) -> None:
    (tmp_path / "notes").write_text("not a folder")
    done = briefd("check", "--outbox", str(tmp_path / "notes"), "--inbox", str(tmp_path / "notes" / "in"),
                  cwd=tmp_path, OLLAMA_HOST=CLOSED_PORT, BRIEFD_SEARXNG_URL=CLOSED_PORT)
    out = done.stdout
    assert done.returncode == 3 and "File exists" not in out and "Not a directory" not in out
    assert f"FAIL outbox {tmp_path / 'notes'} is a file, not a folder" in out
    assert f"fix: point --outbox (BRIEFD_OUTBOX) at a folder, or move {tmp_path / 'notes'} away" in out
    assert f"FAIL inbox {tmp_path / 'notes' / 'in'} cannot be created: {tmp_path / 'notes'} is a file" in out
    assert (tmp_path / "notes").read_text() == "not a folder"


# --------------------------------------------------------------------------- BRIEFD_* variables


def test_a_misspelt_variable_is_warned_about_naming_the_nearest_setting(tmp_path: Path) -> None:
    done = briefd("config", cwd=tmp_path, BRIEFD_PATIENCE="60", BRIEFD_WROKERS="2", BRIEFD_ZZZ_QQQ="1",
                  BRIEFD_CONFIG="")
    assert done.returncode == 0, done.stderr
    assert ("BRIEFD_PATIENCE in the environment is not a briefd setting and is ignored; did you mean "
            "BRIEFD_PATIENCE_S?") in done.stderr
    assert "BRIEFD_WROKERS in the environment is not a briefd setting and is ignored; did you mean " \
           "BRIEFD_WORKERS?" in done.stderr
    assert "BRIEFD_ZZZ_QQQ in the environment is not a briefd setting" in done.stderr
    assert "BRIEFD_CONFIG" not in done.stderr, "briefd's own variables are not warned about"
    assert done.stderr.count("not a briefd setting") == 3
    quiet = briefd("config", cwd=tmp_path, BRIEFD_WORKERS="2", BRIEFD_SOCKET_GUARD_LOG=str(tmp_path / "log"))
    assert quiet.stderr == ""


def test_every_briefd_variable_the_code_reads_is_a_setting_or_in_the_one_list() -> None:
    """OTHER_VARIABLES is the one list of BRIEFD_* variables that are not settings; a variable read
    anywhere (daemon/, store/, the lab, a test's os.environ) and missing from both would be warned about."""
    known = {row["env"] for row in settings_table()} | set(OTHER_VARIABLES)
    found: dict[str, str] = {}
    sources = [*ROOT.glob("daemon/**/*.py"), *ROOT.glob("store/*.py"), *ROOT.glob("lab/**/*.py")]
    for path in sources:
        for name in re.findall(r"BRIEFD_[A-Z0-9_]*[A-Z0-9]", path.read_text(encoding="utf-8")):
            found.setdefault(name, str(path.relative_to(ROOT)))
    for path in ROOT.glob("tests/**/*.py"):
        for name in re.findall(r"environ(?:\.get)?[(\[]\s*[\"'](BRIEFD_\w+)", path.read_text(encoding="utf-8")):
            found.setdefault(name, str(path.relative_to(ROOT)))
    assert "BRIEFD_CRASH_AT" in found and "BRIEFD_SOCKET_GUARD_LOG" in found  # the scan sees the code
    assert {name: where for name, where in found.items() if name not in known} == {}


# --------------------------------------------------------------------------- the inbox


def test_entries_that_are_not_briefs_get_one_notice_each(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    folder, outbox = tmp_path / "inbox", tmp_path / "outbox"
    (folder / "old").mkdir(parents=True)
    for name in ("notes.txt", ".hidden", "half.tmp", "half.json.part", "saved~", "README"):
        (folder / name).write_text("x")
    store = Store(tmp_path / "briefd.db")
    try:
        inbox = Inbox(folder, outbox, store)
        with caplog.at_level(logging.INFO, logger="briefd"):
            inbox.scan()
            inbox.scan()
            said = [r.getMessage() for r in caplog.records]
            assert sorted(m.split(" ")[0] for m in said) == ["README", "notes.txt", "old/"], said
            assert all("only *.json" in m or "only files named *.json" in m for m in said)
            assert "rename it to end in .json" in said[1] and "move it out of the inbox" in said[1]
            caplog.clear()
            (folder / "notes.txt").unlink()
            inbox.scan()
            (folder / "notes.txt").write_text("back")
            inbox.scan()
            assert [r.getMessage().split(" ")[0] for r in caplog.records] == ["notes.txt"]
    finally:
        store.close()


def test_inbox_names_cannot_forge_log_lines_or_send_escapes(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A file's name is untrusted: a newline in it must not start a forged log line, nor an escape
    sequence reach the journal or a terminal tailing it. Each notice stays one line, the characters
    shown as visible \\uXXXX escapes (untrusted.log_text)."""
    folder, outbox = tmp_path / "inbox", tmp_path / "outbox"
    folder.mkdir()
    forged = "x\nbriefd ERROR forged \x1b[31m"
    (folder / forged).write_text("not a brief")
    (folder / f"{forged}.json").write_text("{not json")
    store = Store(tmp_path / "briefd.db")
    try:
        inbox = Inbox(folder, outbox, store, settle_seconds=0)
        with caplog.at_level(logging.INFO, logger="briefd"):
            inbox.scan()
            inbox.take_ready()
    finally:
        store.close()
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 2, said
    assert any("is in the inbox but is not a brief" in m for m in said) and any("rejected" in m for m in said)
    for message in said:
        assert "\n" not in message and "\x1b" not in message, message
        assert message.startswith("x\\u000abriefd ERROR forged \\u001b[31m"), message


def test_the_daemon_and_status_name_what_sits_in_the_inbox(tmp_path: Path) -> None:
    (tmp_path / "inbox" / "old").mkdir(parents=True)
    (tmp_path / "inbox" / "notes.txt").write_text("ideas")
    (tmp_path / "inbox" / ".notes.swp").write_text("editor")
    (tmp_path / "inbox" / "draft.json.tmp").write_text("{")
    before = briefd("status", cwd=tmp_path)
    assert "inbox: 2 entries that are not briefs: notes.txt, old/ (only *.json files are taken" in before.stdout
    run = briefd("run", "--once", cwd=tmp_path, OLLAMA_HOST=CLOSED_PORT, BRIEFD_SEARXNG_URL=CLOSED_PORT,
                 BRIEFD_POLL_SECONDS="0.05", BRIEFD_SETTLE_SECONDS="0")
    assert run.returncode == 0, run.stderr
    assert run.stderr.count("notes.txt is in the inbox but is not a brief") == 1
    assert run.stderr.count("old/ is a folder in the inbox, not a brief") == 1
    assert ".notes.swp" not in run.stderr and "draft.json.tmp" not in run.stderr
    data = json.loads(briefd("status", "--json", cwd=tmp_path).stdout)
    assert data["inbox_not_briefs"] == ["notes.txt", "old/"]
    assert (tmp_path / "inbox" / "notes.txt").read_text() == "ideas", "left where it was"


# --------------------------------------------------------------------------- briefd config


def test_config_says_where_each_value_came_from(tmp_path: Path) -> None:
    (tmp_path / "briefd.toml").write_text('# site settings\nmodel = "qwen2.5:7b"\nmax_age = "12h"\n')
    done = briefd("config", "--db", "other.db", cwd=tmp_path, BRIEFD_WORKERS="3", BRIEFD_FILE_MODE="0640")
    assert done.returncode == 0, done.stderr
    rows = {line.split()[0]: line for line in done.stdout.splitlines()[2:]}
    assert set(rows) == {row["name"] for row in settings_table()}
    assert done.stdout.splitlines()[0] == f"briefd.toml: {tmp_path / 'briefd.toml'}"
    assert re.fullmatch(rf"model +qwen2\.5:7b +briefd\.toml {re.escape(str(tmp_path))}/briefd\.toml line 2",
                        rows["model"])
    assert re.fullmatch(r"max_age +12h +briefd\.toml .* line 3", rows["max_age"])
    assert re.fullmatch(r"workers +3 +environment BRIEFD_WORKERS", rows["workers"])
    assert re.fullmatch(r"file_mode +0640 +environment BRIEFD_FILE_MODE", rows["file_mode"])
    assert re.fullmatch(rf"db +{re.escape(str(tmp_path / 'other.db'))} +flag --db", rows["db"])
    assert re.fullmatch(r"num_ctx +8192 +default", rows["num_ctx"])
    assert re.fullmatch(r"library +none +default", rows["library"])

    as_json = json.loads(briefd("config", "--json", cwd=tmp_path, BRIEFD_WORKERS="3").stdout)
    by_name = {row["name"]: row for row in as_json["settings"]}
    assert as_json["config_file"] == str(tmp_path / "briefd.toml")
    assert by_name["workers"].items() >= {"value": 3, "source": "env", "where": "BRIEFD_WORKERS"}.items()
    assert by_name["model"]["source"] == "toml" and by_name["model"]["value"] == "qwen2.5:7b"
    assert by_name["max_age"]["value"] == 43200.0 and by_name["library"]["value"] == []
    assert by_name["inbox"].items() >= {"value": str(tmp_path / "inbox"), "source": "default", "where": ""}.items()


def test_config_without_a_file_says_none_was_read(tmp_path: Path) -> None:
    done = briefd("config", cwd=tmp_path)
    assert done.stdout.splitlines()[0].startswith("briefd.toml: none (no --config, BRIEFD_CONFIG unset")


def test_a_secret_setting_is_shown_as_set_never_its_value(tmp_path: Path) -> None:
    """serve_token (the HTTP API's) and any other setting of kind secret: `briefd config` says whether it is
    set; serve_token_file is a path, no secret, and is shown."""
    assert is_secret("serve_token") and not is_secret("serve_token_file") and not is_secret("model")
    secret = "hunter2-secret-of-enough-length"
    for env, shown in (({"BRIEFD_SERVE_TOKEN": secret}, "(set)"), ({}, "(unset)")):
        row = next(row for row in effective_settings(load_settings({}, env)) if row["name"] == "serve_token")
        assert row["shown"] == shown and "hunter2" not in json.dumps(row)
    for args in (["config"], ["config", "--json"]):
        result = subprocess.run([BRIEFD, *args], env={**os.environ, "BRIEFD_SERVE_TOKEN": secret,
                                                      "BRIEFD_SERVE_TOKEN_FILE": str(tmp_path / "token")},
                                cwd=tmp_path, capture_output=True, text=True, timeout=60)
        assert result.returncode == 0 and "serve_token" in result.stdout and "hunter2" not in result.stdout
        assert str(tmp_path / "token") in result.stdout, "the token file's path is shown: it is no secret"
