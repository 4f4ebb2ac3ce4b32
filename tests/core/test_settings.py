"""Settings: flag > environment > briefd.toml > default, and errors that say where and how to fix."""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path
from typing import Any, Iterator

import ollama
import pytest

from briefd.daemon.core.schedule import parse_duration
from briefd.daemon.core.settings import (
    DEFAULT_MODEL,
    NOT_SETTINGS,
    Settings,
    SettingsError,
    load_settings,
    normalize_ollama_host,
    settings_markdown,
    settings_table,
    stray_variables,
)
from tests.conftest import CONTRACT
from tests.httpstub import QuietHandler, serving


@pytest.fixture()
def cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty working folder (no stray briefd.toml from the repo)."""
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    return work


def write_toml(folder: Path, text: str, name: str = "briefd.toml") -> Path:
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path


def error_of(flags: dict[str, Any] | None = None, env: dict[str, str] | None = None,
             config: Path | None = None) -> SettingsError:
    with pytest.raises(SettingsError) as caught:
        load_settings(flags or {}, env or {}, config)
    return caught.value


# --------------------------------------------------------------------------- where values came from


def test_load_settings_records_where_each_value_came_from(cwd: Path) -> None:
    """`briefd config` shows what load_settings recorded while choosing, not a second guess at it."""
    (cwd / "briefd.toml").write_text('workers = 4\nmodel = "from-file:1b"\n\nnum_ctx = 4096\n')
    s = load_settings({"workers": "2", "db": None}, {"BRIEFD_MODEL": "from-env:1b", "BRIEFD_SEED": " "})
    words = {name: origin.words() for name, origin in s.origins.items()}
    assert words["workers"] == "flag --workers" and s.workers == 2
    assert words["model"] == "environment BRIEFD_MODEL" and s.model == "from-env:1b"
    assert words["num_ctx"] == f"briefd.toml {cwd / 'briefd.toml'} line 4" and s.num_ctx == 4096
    assert words["db"] == words["seed"] == "default", "an empty variable or a None flag is not where it came from"
    assert set(words) == {row["name"] for row in settings_table()}


def test_briefd_variables_that_are_not_settings_are_warned_about(cwd: Path, caplog: pytest.LogCaptureFixture) -> None:
    env = {"BRIEFD_PATIENCE": "60", "BRIEFD_CONFIG": "", "BRIEFD_CRASH_AT": "", "BRIEFD_WORKERS": "2",
           "OLLAMA_MODELS": "/x", "BRIEFD_NUM_CTX": "4096"}
    assert stray_variables(env) == ["BRIEFD_PATIENCE in the environment is not a briefd setting and is ignored; "
                                    "did you mean BRIEFD_PATIENCE_S?"]
    with caplog.at_level("WARNING", logger="briefd"):
        assert load_settings({}, env).num_ctx == 4096
    assert [r.getMessage() for r in caplog.records] == stray_variables(env)


# --------------------------------------------------------------------------- defaults


def test_defaults_in_an_empty_folder(cwd: Path) -> None:
    s = load_settings({}, {})
    assert (s.inbox, s.outbox, s.db) == (cwd / "inbox", cwd / "outbox", cwd / "briefd.db")
    assert s.ollama_host == "http://127.0.0.1:11434"
    assert s.model == DEFAULT_MODEL == "qwen2.5:3b"
    assert s.searxng_url == "http://127.0.0.1:8888"
    assert s.workers == 1
    assert s.config_file is None
    knobs = {f.name: f.default for f in dataclasses.fields(Settings)
             if f.name not in {"inbox", "outbox", "db", *NOT_SETTINGS}}
    assert {name: getattr(s, name) for name in knobs} == knobs
    assert (s.num_ctx, s.num_predict, s.llm_timeout_s, s.temperature, s.seed) == (8192, 1024, 300.0, 0.2, 42)
    assert (s.fetch_timeout_s, s.fetch_max_bytes, s.fetch_max_redirects, s.fetch_concurrency) == (20.0, 5_000_000,
                                                                                                  5, 4)
    assert (s.allow_link_local, s.search_timeout_s, s.max_age) == (False, 20.0, parse_duration("7d"))
    assert (s.settle_seconds, s.poll_seconds, s.use_polling, s.max_attempts, s.log_level) == (1.0, 5.0, False, 3,
                                                                                               "info")


def test_settings_are_frozen(cwd: Path) -> None:
    s = load_settings({}, {})
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.workers = 2  # type: ignore[misc]


# --------------------------------------------------------------------------- precedence

# setting, env name, (toml text value, expected), (env value, expected), (flag value, expected)
# Paths are checked separately (they resolve against different folders).
PRECEDENCE = [
    ("ollama_host", "OLLAMA_HOST", ('"toml-host"', "http://toml-host:11434"),
     ("env-host:1234", "http://env-host:1234"), ("https://flag-host", "https://flag-host:443")),
    ("model", "BRIEFD_MODEL", ('"toml-model:7b"', "toml-model:7b"), ("env-model:1b", "env-model:1b"),
     ("flag-model", "flag-model")),
    ("searxng_url", "BRIEFD_SEARXNG_URL", ('"http://toml-searx:8080/"', "http://toml-searx:8080"),
     ("env-searx:8888", "http://env-searx:8888"), ("https://flag.example/searx/", "https://flag.example/searx")),
    ("workers", "BRIEFD_WORKERS", ("2", 2), ("3", 3), (4, 4)),
    ("workers", "BRIEFD_WORKERS", ("2", 2), (" 5 ", 5), ("6", 6)),
]


@pytest.mark.parametrize("name,env_name,from_toml,from_env,from_flag", PRECEDENCE)
def test_flag_beats_env_beats_toml_beats_default(cwd: Path, name: str, env_name: str, from_toml: tuple[str, Any],
                                                 from_env: tuple[str, Any], from_flag: tuple[Any, Any]) -> None:
    default = getattr(load_settings({}, {}), name)
    write_toml(cwd, f"{name} = {from_toml[0]}\n")
    assert getattr(load_settings({}, {}), name) == from_toml[1] != default
    env = {env_name: from_env[0]}
    assert getattr(load_settings({}, env), name) == from_env[1]
    assert getattr(load_settings({name: from_flag[0]}, env), name) == from_flag[1]
    assert getattr(load_settings({name: None}, env), name) == from_env[1]  # None: flag not given


@pytest.mark.parametrize("name,env_name", [("inbox", "BRIEFD_INBOX"), ("outbox", "BRIEFD_OUTBOX"),
                                           ("db", "BRIEFD_DB")])
def test_path_precedence(cwd: Path, name: str, env_name: str) -> None:
    assert getattr(load_settings({}, {}), name).parent == cwd
    write_toml(cwd, f'{name} = "from-toml"\n')
    assert getattr(load_settings({}, {}), name) == cwd / "from-toml"
    env = {env_name: "from-env"}
    assert getattr(load_settings({}, env), name) == cwd / "from-env"
    assert getattr(load_settings({name: "from-flag"}, env), name) == cwd / "from-flag"
    assert getattr(load_settings({name: Path("/srv/abs")}, env), name) == Path("/srv/abs")


def test_other_knobs_come_from_env_and_toml_by_name(cwd: Path) -> None:
    write_toml(cwd, "num_ctx = 16384\nuse_polling = true\nllm_timeout_s = 60\nlog_level = \"DEBUG\"\n"
                    "allow_link_local = false\n")
    s = load_settings({}, {})
    assert (s.num_ctx, s.use_polling, s.llm_timeout_s, s.log_level) == (16384, True, 60.0, "debug")
    env = {"BRIEFD_NUM_CTX": "4096", "BRIEFD_USE_POLLING": "off", "BRIEFD_ALLOW_LINK_LOCAL": "yes",
           "BRIEFD_SETTLE_SECONDS": "0", "BRIEFD_MAX_AGE": "0", "BRIEFD_TEMPERATURE": "0.7"}
    s = load_settings({}, env)
    assert (s.num_ctx, s.use_polling, s.allow_link_local) == (4096, False, True)
    assert (s.settle_seconds, s.max_age, s.temperature) == (0.0, 0.0, 0.7)
    assert load_settings({"num_ctx": 32768}, env).num_ctx == 32768


def test_empty_environment_variables_count_as_unset(cwd: Path) -> None:
    write_toml(cwd, 'model = "toml-model"\n')
    s = load_settings({}, {"BRIEFD_MODEL": "", "OLLAMA_HOST": "  ", "BRIEFD_WORKERS": ""})
    assert (s.model, s.ollama_host, s.workers) == ("toml-model", "http://127.0.0.1:11434", 1)


def test_flags_that_are_not_settings_are_ignored(cwd: Path) -> None:
    """The CLI may pass vars(argparse.Namespace) whole."""
    s = load_settings({"command": "run", "once": True, "files": ["x"], "workers": None, "model": "m"}, {})
    assert (s.workers, s.model) == (1, "m")


# --------------------------------------------------------------------------- briefd.toml: where and relative to what


def test_toml_paths_are_relative_to_the_toml_folder_and_flag_env_paths_to_cwd(tmp_path: Path, cwd: Path) -> None:
    conf = tmp_path / "conf"
    conf.mkdir()
    toml = write_toml(conf, 'inbox = "in"\ndb = "../data/b.db"\noutbox = "/srv/out"\n')
    s = load_settings({}, {"BRIEFD_CONFIG": "../conf/briefd.toml"})
    assert s.config_file == toml
    assert s.inbox == conf / "in"
    assert s.db == tmp_path / "data" / "b.db"
    assert s.outbox == Path("/srv/out")
    s = load_settings({"inbox": "flag-in"}, {"BRIEFD_OUTBOX": "env-out"}, toml)
    assert (s.inbox, s.outbox, s.db) == (cwd / "flag-in", cwd / "env-out", tmp_path / "data" / "b.db")


def test_home_is_expanded(cwd: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert load_settings({}, {"BRIEFD_INBOX": "~/briefs"}).inbox == tmp_path / "home" / "briefs"


def test_config_path_beats_briefd_config_beats_local_file(tmp_path: Path, cwd: Path) -> None:
    write_toml(cwd, "workers = 2\n")
    other = write_toml(tmp_path, "workers = 3\n", "other.toml")
    third = write_toml(tmp_path, "workers = 4\n", "third.toml")
    assert load_settings({}, {}).workers == 2
    assert load_settings({}, {}).config_file == cwd / "briefd.toml"
    assert load_settings({}, {"BRIEFD_CONFIG": str(other)}).workers == 3
    assert load_settings({}, {"BRIEFD_CONFIG": str(other)}, third).workers == 4


def test_a_utf8_bom_in_the_toml_is_accepted(cwd: Path) -> None:
    (cwd / "briefd.toml").write_bytes(b"\xef\xbb\xbfworkers = 2\n")
    assert load_settings({}, {}).workers == 2


# --------------------------------------------------------------------------- errors name the source and the fix


@pytest.mark.parametrize("env,source,words", [
    ({"BRIEFD_WORKERS": "abc"}, "BRIEFD_WORKERS in the environment",
     ["BRIEFD_WORKERS in the environment must be a whole number from 1 to 64, got 'abc'",
      "set e.g. BRIEFD_WORKERS=1, or unset it"]),
    ({"BRIEFD_WORKERS": "0"}, "BRIEFD_WORKERS in the environment", ["from 1 to 64", "got '0'"]),
    ({"BRIEFD_WORKERS": "1.5"}, "BRIEFD_WORKERS in the environment", ["whole number"]),
    ({"BRIEFD_WORKERS": "9" * 5000}, "BRIEFD_WORKERS in the environment", ["whole number"]),
    ({"BRIEFD_USE_POLLING": "maybe"}, "BRIEFD_USE_POLLING in the environment", ["true or false"]),
    ({"BRIEFD_LLM_TIMEOUT_S": "0"}, "BRIEFD_LLM_TIMEOUT_S in the environment", ["a number greater than 0"]),
    ({"BRIEFD_LLM_TIMEOUT_S": "nan"}, "BRIEFD_LLM_TIMEOUT_S in the environment", ["a number greater than 0"]),
    ({"BRIEFD_FETCH_TIMEOUT_S": "inf"}, "BRIEFD_FETCH_TIMEOUT_S in the environment", ["greater than 0"]),
    ({"BRIEFD_TEMPERATURE": "3"}, "BRIEFD_TEMPERATURE in the environment", ["a number from 0 to 2"]),
    ({"BRIEFD_FETCH_MAX_REDIRECTS": "-1"}, "BRIEFD_FETCH_MAX_REDIRECTS in the environment", ["from 0 to 20"]),
    ({"BRIEFD_LOG_LEVEL": "loud"}, "BRIEFD_LOG_LEVEL in the environment", ["one of debug, info, warning, error"]),
    ({"BRIEFD_MODEL": "two words"}, "BRIEFD_MODEL in the environment", ["Ollama model name", "no spaces"]),
    ({"BRIEFD_SEARXNG_URL": "ftp://x"}, "BRIEFD_SEARXNG_URL in the environment", ["'ftp://' is not http"]),
    ({"BRIEFD_SEARXNG_URL": "http://x/?q=1"}, "BRIEFD_SEARXNG_URL in the environment", ["?query"]),
    ({"OLLAMA_HOST": "ftp://x"}, "OLLAMA_HOST in the environment",
     ["OLLAMA_HOST in the environment must be an address", "'ftp://' is not http"]),
    ({"OLLAMA_HOST": "x:99999"}, "OLLAMA_HOST in the environment", ["port is not a number from 1 to 65535"]),
    ({"OLLAMA_HOST": "[::1"}, "OLLAMA_HOST in the environment", ["not a host[:port] address"]),
    ({"BRIEFD_NUM_PREDICT": "9000"}, "BRIEFD_NUM_PREDICT in the environment",
     ["num_predict (9000) not smaller than num_ctx (8192)", "lower num_predict or raise num_ctx"]),
])
def test_bad_environment_values(cwd: Path, env: dict[str, str], source: str, words: list[str]) -> None:
    err = error_of(env=env)
    assert err.source == source
    for word in words:
        assert word in str(err)


@pytest.mark.parametrize("flags,words", [
    ({"workers": 0}, ["--workers must be a whole number from 1 to 64, got 0", "pass e.g. --workers 1"]),
    ({"workers": True}, ["--workers must be a whole number"]),
    ({"model": ""}, ["--model must be an Ollama model name"]),
    ({"inbox": ""}, ["--inbox must be a path"]),
    ({"ollama_host": "gopher://x"}, ["--ollama-host must be an address"]),
    ({"num_ctx": 100}, ["--num-ctx must be a whole number from 2,048 to 1,048,576, got 100"]),
])
def test_bad_flag_values(cwd: Path, flags: dict[str, Any], words: list[str]) -> None:
    err = error_of(flags=flags)
    assert err.source == words[0].split()[0]
    for word in words:
        assert word in str(err)


def test_bad_toml_value_names_the_file_line_and_fix(cwd: Path) -> None:
    write_toml(cwd, '# briefd\ninbox = "in"\n\nworkers = "x"\n')
    err = error_of()
    assert err.source == f"{cwd / 'briefd.toml'} line 4"
    assert err.setting == "workers"
    assert str(err) == (f"{cwd / 'briefd.toml'} line 4: workers must be a whole number from 1 to 64, got 'x'; "
                        f"write e.g. workers = 1")


@pytest.mark.parametrize("text,line,words", [
    ('inbox = "in"\nwokers = 3\n', 2, ["unknown setting 'wokers'; did you mean 'workers'?"]),
    ('"ollama-host" = "x"\n', 1, ["did you mean 'ollama_host'?"]),
    ("colour = 1\n", 1, ["unknown setting 'colour'", "the settings are: inbox, outbox"]),
    ('model = "m"\n\n[briefd]\nworkers = 2\n', 3, ["unknown setting 'briefd'"]),
    ("inbox = 5\n", 1, ["inbox must be a path (in quotes in briefd.toml), got 5", 'write e.g. inbox = "./inbox"']),
    ("use_polling = \"maybe\"\n", 1, ["use_polling must be true or false (without quotes)"]),
    ("workers = 2.0\n", 1, ["workers must be a whole number"]),
    ("temperature = nan\n", 1, ["temperature must be a number from 0 to 2"]),
    ('model = "m"\nworkers = \n', 2, ["not valid TOML (Invalid value)"]),
    ('model = "m\n', 1, ["not valid TOML"]),
    ("model = 'a'\nmodel = 'b'\n", 2, ["not valid TOML", "Cannot overwrite"]),
])
def test_toml_errors_name_the_line(cwd: Path, text: str, line: int, words: list[str]) -> None:
    toml = write_toml(cwd, text)
    err = error_of()
    assert str(err).startswith(f"{toml} line {line}: ")
    for word in words:
        assert word in str(err)


def test_toml_that_is_not_utf8(cwd: Path) -> None:
    (cwd / "briefd.toml").write_bytes(b'model = "caf\xe9"\n')
    assert "not UTF-8 text (byte 0xe9 at offset 12)" in str(error_of())


def test_toml_that_is_a_folder(cwd: Path) -> None:
    (cwd / "briefd.toml").mkdir()
    err = error_of()
    assert "cannot be read" in str(err) and "briefd.toml" in str(err)


def test_a_missing_named_config_file_is_an_error(cwd: Path) -> None:
    err = error_of(config=Path("nope.toml"))
    assert err.source == "--config"
    assert str(err) == f"--config names {cwd / 'nope.toml'}, which does not exist; create it or drop --config"
    err = error_of(env={"BRIEFD_CONFIG": "/no/such/briefd.toml"})
    assert err.source == "BRIEFD_CONFIG in the environment"
    assert "which does not exist; create it or unset BRIEFD_CONFIG" in str(err)


def test_num_predict_must_leave_room_in_num_ctx_from_toml(cwd: Path) -> None:
    write_toml(cwd, "num_ctx = 4096\nnum_predict = 4096\n")
    err = error_of()
    assert err.source == f"{cwd / 'briefd.toml'} line 2"
    assert "num_predict (4096) not smaller than num_ctx (4096)" in str(err)


# --------------------------------------------------------------------------- OLLAMA_HOST as Ollama reads it

# The inputs of the official client's own doctests: briefd must read OLLAMA_HOST as `ollama` does.
OLLAMA_CLIENT_CASES = [
    "", "1.2.3.4", ":56789", "1.2.3.4:56789", "http://1.2.3.4", "https://1.2.3.4", "https://1.2.3.4:56789",
    "example.com", "example.com:56789", "http://example.com", "https://example.com", "https://example.com:56789",
    "example.com/", "example.com:56789/", "example.com/path", "example.com:56789/path",
    "https://example.com:56789/path", "example.com:56789/path/", "[0001:002:003:0004::1]",
    "[0001:002:003:0004::1]:56789", "http://[0001:002:003:0004::1]", "https://[0001:002:003:0004::1]",
    "https://[0001:002:003:0004::1]:56789", "[0001:002:003:0004::1]/", "[0001:002:003:0004::1]:56789/",
    "[0001:002:003:0004::1]/path", "[0001:002:003:0004::1]:56789/path",
    "https://[0001:002:003:0004::1]:56789/path", "[0001:002:003:0004::1]:56789/path/",
    "localhost", "LocalHost:8080", "127.0.0.1:11434",
]


@pytest.mark.parametrize("value", OLLAMA_CLIENT_CASES)
def test_ollama_host_is_read_as_the_ollama_client_reads_it(value: str) -> None:
    parse_host = sys.modules["ollama._client"]._parse_host
    assert normalize_ollama_host(value) == parse_host(value)


@pytest.mark.parametrize("value,expected", [
    ("0.0.0.0", "http://127.0.0.1:11434"),
    ("0.0.0.0:8080", "http://127.0.0.1:8080"),
    ("http://0.0.0.0", "http://127.0.0.1:80"),
    ("[::]", "http://[::1]:11434"),
    ("[::]:9999", "http://[::1]:9999"),
    ("  gpu-box  ", "http://gpu-box:11434"),
    ("HTTPS://gpu-box", "https://gpu-box:443"),
])
def test_listen_everywhere_addresses_mean_this_machine(value: str, expected: str) -> None:
    assert normalize_ollama_host(value) == expected


class _TagsHandler(QuietHandler):
    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        body = json.dumps({"models": [{"model": "qwen2.5:3b", "name": "qwen2.5:3b"}]}).encode()
        self.send_json(body, 200 if self.path == "/api/tags" else 404)


@pytest.fixture()
def tags_server() -> Iterator[int]:
    with serving(_TagsHandler) as server:
        yield server.server_address[1]


@pytest.mark.parametrize("form", ["127.0.0.1:{port}", "0.0.0.0:{port}", "http://localhost:{port}/",
                                  "localhost:{port}"])
def test_the_normalised_ollama_host_reaches_a_real_server(cwd: Path, tags_server: int, form: str) -> None:
    s = load_settings({}, {"OLLAMA_HOST": form.format(port=tags_server)})
    assert s.ollama_host.endswith(f":{tags_server}")
    listed = ollama.Client(host=s.ollama_host, timeout=5).list()
    assert [m.model for m in listed.models] == ["qwen2.5:3b"]


# --------------------------------------------------------------------------- the table for --help and the docs

SETTINGS_PAGE = Path(__file__).parents[2] / "docs" / "settings.md"
FLAGGED = [row for row in settings_table() if row["flag"]]  # the settings the contract lists with a flag


def readme_settings_rows() -> list[str]:
    """The table on docs/settings.md (under its "# Settings" title), line by line."""
    text = SETTINGS_PAGE.read_text(encoding="utf-8")
    section = text.split("# Settings\n", 1)[1].split("\n#", 1)[0]
    return [line for line in section.splitlines() if line.startswith("|")]


def test_the_readme_settings_table_is_the_table_in_code() -> None:
    """As datasette's docs tests do: the settings page documents every setting the code has, with the
    flag, environment name and default the code uses, and nothing the code does not have."""
    expected = settings_markdown().splitlines()
    assert readme_settings_rows() == expected, (
        "docs/settings.md's settings table differs from daemon/core/settings.py; replace it with the output of\n"
        "  python -c 'from briefd.daemon.core.settings import settings_markdown; print(settings_markdown())'")


def test_a_setting_missing_from_the_readme_is_caught() -> None:
    """The drift test can fail: a page without one row, or with a renamed flag, is not the table."""
    rows = readme_settings_rows()
    assert [r for r in rows if "`workers`" not in r] != settings_markdown().splitlines()
    assert [r.replace("`--workers`", "`--jobs`") for r in rows] != settings_markdown().splitlines()


def test_settings_table_shape() -> None:
    table = settings_table()
    assert [r["name"] for r in table] == [f.name for f in dataclasses.fields(Settings) if f.name not in NOT_SETTINGS]
    for row in table:
        assert row["help"] and row["toml"] == row["name"]
        if not row["flag"]:
            assert row["env"] == f"BRIEFD_{row['name'].upper()}"
    assert [r["name"] for r in table[:len(FLAGGED)]] == [r["name"] for r in FLAGGED], "flagged settings first"
    by_name = {r["name"]: r for r in table}
    assert by_name["use_polling"]["default"] == "false"
    assert by_name["llm_timeout_s"]["default"] == "300.0"
    assert by_name["model"]["default"] == DEFAULT_MODEL
    json.dumps(table)


@pytest.mark.parametrize("row", FLAGGED, ids=[r["name"] for r in FLAGGED])
def test_every_flagged_setting_is_read_from_its_environment_name(cwd: Path, row: dict[str, Any]) -> None:
    name, env = row["name"], row["env"]
    value = {"inbox": "x", "outbox": "x", "db": "x", "ollama_host": "h:1", "model": "x",
             "searxng_url": "http://h:2", "workers": "7"}[name]
    s = load_settings({}, {env: value})
    assert str(getattr(s, name)) in {str(cwd / "x"), "http://h:1", "x", "http://h:2", "7"}
    assert getattr(s, name) != getattr(load_settings({}, {}), name)


# --------------------------------------------------------------------------- file_mode


@pytest.mark.parametrize("raw,mode", [("0640", 0o640), ("640", 0o640), ("0o660", 0o660), (" 0600 ", 0o600),
                                      ("0666", 0o666)])
def test_file_mode_is_an_octal_string(cwd: Path, raw: str, mode: int) -> None:
    assert load_settings({}, {"BRIEFD_FILE_MODE": raw}).file_mode == mode
    write_toml(cwd, f'file_mode = "{raw}"\n')
    assert load_settings({}, {}).file_mode == mode
    (cwd / "briefd.toml").unlink()
    assert load_settings({}, {}).file_mode is None, "unset: the umask decides"


@pytest.mark.parametrize("text,words", [
    ("file_mode = 0o640\n", ['file_mode must be an octal file mode in quotes, such as "0640", got 416',
                             'write e.g. file_mode = "0640"']),
    ("file_mode = 640\n", ["in quotes"]),
    ('file_mode = "0750"\n', ["no execute bits"]),
    ('file_mode = "0400"\n', ["the owner needs read and write"]),
    ('file_mode = "2660"\n', ["3 octal digits"]),
    ('file_mode = "u=rw"\n', ["3 octal digits"]),
])
def test_bad_file_modes_name_the_line_and_the_fix(cwd: Path, text: str, words: list[str]) -> None:
    toml = write_toml(cwd, text)
    err = error_of()
    assert str(err).startswith(f"{toml} line 1: ") and err.setting == "file_mode"
    for word in words:
        assert word in str(err)


# ---------------------------------------------------------------------------------------------
# The contract's settings table, read from docs/contract.md itself, so no copy of it lives here to
# drift: every contract row must be a
# setting with that flag, environment name and default, and the new surface's settings must exist
# under the names the contract fixes.



def contract_settings_rows() -> list[list[str]]:
    text = CONTRACT.read_text(encoding="utf-8")
    block = text.split("| setting | flag | environment | default |", 1)[1].split("\n\n", 1)[0]
    return [[cell.strip().strip("`") for cell in line.strip().strip("|").split("|")]
            for line in block.splitlines()[2:] if line.startswith("|")]


def test_the_contracts_settings_are_the_flags_and_environment_names_in_code() -> None:
    rows = contract_settings_rows()
    assert len(rows) == 7, rows
    by_flag = {row["flag"]: row for row in settings_table() if row["flag"]}
    for _label, flag, env, default in rows:
        assert flag in by_flag, f"docs/contract.md's {flag} is not a flag"
        assert by_flag[flag]["env"] == env, (flag, by_flag[flag]["env"], env)
        if not default.startswith("a sensible"):  # the model: "a sensible small instruct model, documented"
            assert by_flag[flag]["default"] == default, (flag, by_flag[flag]["default"], default)


def test_file_mode_is_named_as_the_contract_fixes_it() -> None:
    text = CONTRACT.read_text(encoding="utf-8")
    assert "`file_mode`" in text
    assert "file_mode" in {row["name"] for row in settings_table()}


def test_a_renamed_setting_says_what_to_write_instead(cwd: Path) -> None:
    write_toml(cwd, "page_ttl_hours = 168\n")
    with pytest.raises(SettingsError, match=r'page_ttl_hours.*max_age = "7d"'):
        load_settings({}, {})
