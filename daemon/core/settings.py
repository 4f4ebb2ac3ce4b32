"""briefd's settings: flag > environment > briefd.toml > default (docs/contract.md, "Settings").

One table (`_SPECS`) drives loading, the error messages, the CLI's setting flags and
their --help (cli.build_parser reads `settings_table()`), and the settings page
docs/settings.md (`settings_markdown()`; tests/core/test_settings.py fails when the page differs), so
none of them can drift apart. The defaults live in one place: the `Settings` dataclass.

Every bad value becomes a `SettingsError` that names where it came from
("BRIEFD_WORKERS in the environment", "/etc/briefd/briefd.toml line 3",
"--workers") and how to fix it: a daemon that starts with a half-understood
setting fails later, somewhere less obvious.
"""

from __future__ import annotations

import dataclasses
import difflib
import ipaddress
import json
import logging
import os
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping
from urllib.parse import urlsplit

from . import crashpoints
from .files import TooLarge, read_file_at_most, secret_line
from ..rules.judge import TIERS
from ..rules.numbers import finite, number_text
from .schedule import DURATION_EXAMPLE, ScheduleError, format_duration, parse_duration
from .errors import BriefdError

log = logging.getLogger("briefd")

DEFAULT_OLLAMA_PORT = 11434
MAX_CONFIG_BYTES = 1 << 20  # briefd.toml is a few lines; /dev/zero given as --config must not be read whole
DEFAULT_OLLAMA_HOST = f"http://127.0.0.1:{DEFAULT_OLLAMA_PORT}"

# The default model: Qwen2.5 3B Instruct, `ollama pull qwen2.5:3b` (Ollama's
# library only hosts the instruct variants of qwen2.5, so the plain tag is the
# instruct model). Why this one:
# - it fits where briefd is meant to run: about 1.9 GB at the library's default
#   Q4_K_M, usable on a CPU-only laptop or a small GPU;
# - Qwen2.5 was trained for structured output (JSON), which is every call briefd
#   makes (`format` = a JSON schema), and reads many languages, as search results are;
# - 32k context, so the default num_ctx of 8192 is well inside what it was trained for;
# - it is not a "thinking" model: no reasoning tokens eat num_predict before the
#   JSON starts (thinking models can leave `content` empty).
# llama3.2:3b is the nearest alternative (same size, weaker at JSON in Qwen's and
# Meta's own reports); qwen3 models think by default and are larger.
DEFAULT_MODEL = "qwen2.5:3b"

LOG_LEVELS = ("debug", "info", "warning", "error")
MODEL_APIS = ("ollama", "openai")  # model.wire's protocols (the setting `model_api`)
STRUCTURED = ("schema", "json", "none")  # how a call asks for JSON (the setting `structured`, model.wire)
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


@dataclass(frozen=True)
class Settings:
    """Everything briefd reads from flags, environment and briefd.toml, defaults resolved.

    `load_settings` returns absolute paths; the relative defaults here are what
    a user sees in --help ("./inbox").
    """

    inbox: Path = Path("./inbox")
    outbox: Path = Path("./outbox")
    db: Path = Path("./briefd.db")
    ollama_host: str = DEFAULT_OLLAMA_HOST
    model: str = DEFAULT_MODEL
    searxng_url: str = "http://127.0.0.1:8888"
    workers: int = 1
    ollama_hosts: tuple[str, ...] = ()  # several model servers (daemon.hosts); empty: ollama_host alone
    model_api: str = "ollama"  # ollama | openai: the protocol of every model call (model.wire)
    openai_base_url: tuple[str, ...] = ()  # model_api = openai: the server(s), each with its /v1
    openai_api_key: str | None = None  # ... the key they ask for (never shown: a secret)
    openai_api_key_file: Path | None = None  # ... or a file holding it (kept out of ps and the environment)
    structured: str = "schema"  # schema | json | none: how a model call asks for JSON (model.wire)
    num_ctx: int = 8192
    num_predict: int = 1024
    llm_timeout_s: float = 300.0
    temperature: float = 0.2
    seed: int = 42
    fetch_timeout_s: float = 20.0
    fetch_max_bytes: int = 5_000_000
    fetch_max_redirects: int = 5
    fetch_concurrency: int = 4
    allow_link_local: bool = False
    search_timeout_s: float = 20.0
    max_age: float = 7 * 86400.0  # seconds a page read earlier is trusted unchecked (daemon.schedule durations)
    settle_seconds: float = 1.0
    poll_seconds: float = 5.0
    use_polling: bool = False
    max_attempts: int = 3
    patience_s: float = 21600.0  # how long a brief waits out a service outage before it fails (6 h)
    once_patience_s: float = 120.0  # `run --once` gives up on a service down this long: briefs stay queued, exit 3
    on_finish: tuple[str, ...] = ()  # a command (argv, never a shell) run when a brief ends (daemon.onfinish)
    on_finish_timeout_s: float = 60.0  # the on_finish command is killed after this long
    log_level: str = "info"
    file_mode: int | None = None  # None: the umask decides (files.use_file_mode)
    # The organisation's own tiers, (host, URL prefix or absolute path, tier): win over the model (judge.capped_tier).
    source_tiers: tuple[tuple[str, str], ...] = ()
    library: tuple[Path, ...] = ()  # folders of documents, indexed into the store (daemon.library)
    archives: tuple[Path, ...] = ()  # Kiwix ZIM files (daemon.archives)
    egress: str = "open"  # open | private | none: who may be contacted (fetch.FetchLimits)
    egress_hosts: tuple[str, ...] = ()  # hosts allowed under egress = private besides private addresses
    serve: bool = False  # briefd run serves the HTTP API too (daemon.serve)
    serve_host: str = "127.0.0.1"  # loopback: no token needed; any other address needs one
    serve_port: int = 8765
    serve_token: str | None = None  # the bearer token the HTTP API asks for (daemon.serve)
    serve_token_file: Path | None = None  # ... or a file holding it (kept out of ps and the environment)
    serve_hosts: tuple[str, ...] = ()  # names the API answers to besides its address (a reverse proxy's)
    # Not a setting: `briefd eval --fresh` sets it to the eval's start; model answers the store kept before it
    # are not replayed (a run's own answers, and a resumed run's, still are: nothing is paid for twice).
    replay_answers_since: str | None = None
    # Not a setting: which briefd.toml was read (None: none), for `briefd check` and logs.
    config_file: Path | None = None
    # Not a setting: where each setting's value came from, recorded by load_settings (`briefd config`).
    origins: Mapping[str, Origin] = field(default_factory=dict, compare=False, repr=False)


class SettingsError(BriefdError, ValueError):
    """A setting that can't be used. `source` says where it came from, `setting` which one (None: the file)."""

    def __init__(self, message: str, source: str, setting: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.source = source
        self.setting = setting

    def __str__(self) -> str:
        return self.message


@dataclass(frozen=True)
class _Spec:
    name: str
    kind: str  # path | paths | ollama | ollamas | url | model | int | float | bool | level | mode | tiers | egress | hosts
    #       | duration | optpath | secret | apikey | bindhost | argv | modelapi | openaiurls
    help: str
    flag: str | None = None  # only the contract settings have a documented flag
    env: str | None = None  # None: BRIEFD_<NAME>
    low: float | None = None
    high: float | None = None
    above_low: bool = False  # low itself not allowed (timeouts must be > 0)
    shown_default: str | None = None  # the default in words, where the value itself says nothing (None)
    example: str | None = None  # the value error messages suggest (else the default)

    @property
    def env_name(self) -> str:
        return self.env or f"BRIEFD_{self.name.upper()}"

    @property
    def flag_name(self) -> str:
        return self.flag or f"--{self.name.replace('_', '-')}"


_SPECS: tuple[_Spec, ...] = (
    _Spec("inbox", "path", "drop folder for briefs (*.json)", "--inbox", "BRIEFD_INBOX"),
    _Spec("outbox", "path", "folder for reports, one sub-folder per brief id", "--outbox", "BRIEFD_OUTBOX"),
    _Spec("db", "path", "SQLite database holding the queue and every brief's state", "--db", "BRIEFD_DB"),
    _Spec("ollama_host", "ollama", "Ollama server; host, host:port or URL as Ollama itself accepts "
                                   "(0.0.0.0 means this machine)", "--ollama-host", "OLLAMA_HOST"),
    _Spec("model", "model", "Ollama model to use (must be pulled: ollama pull <model>)", "--model", "BRIEFD_MODEL"),
    _Spec("searxng_url", "url", "SearXNG base URL (its settings.yml must allow the json format)",
          "--searxng-url", "BRIEFD_SEARXNG_URL"),
    _Spec("workers", "int", "briefs researched at once", "--workers", "BRIEFD_WORKERS", 1, 64),
    _Spec("ollama_hosts", "ollamas", "several Ollama servers sharing the work, each serving the same model: "
                                     "each model call goes to the least busy one, a failing one is left out and "
                                     "tried again later; comma-separated in the environment, a list in "
                                     "briefd.toml; unset: ollama_host alone",
          shown_default="none", example="gpu-1:11434"),
    _Spec("model_api", "modelapi", "how briefd talks to the model server: ollama (Ollama's own API) or openai "
                                   "(the OpenAI-compatible /v1 API of vLLM, llama.cpp's server, LM Studio, "
                                   "LocalAI, TGI, or Ollama's /v1)", example="openai"),
    _Spec("openai_base_url", "openaiurls", "model_api = openai: the server's base URL with its /v1 (e.g. "
                                           "http://gpu-box:8000/v1); several, comma-separated (a TOML list in "
                                           "briefd.toml), share the work as ollama_hosts do",
          example="http://gpu-box:8000/v1"),
    _Spec("openai_api_key", "apikey", "model_api = openai: the API key the server asks for (the one it was started with), "
                                      "sent as a bearer token and never shown; prefer openai_api_key_file"),
    _Spec("openai_api_key_file", "optpath", "model_api = openai: a file whose first line is the API key "
                                            "(mode 0600)"),
    _Spec("structured", "structured", "how a model call asks for JSON: schema (decoding constrained by the JSON "
                                      "schema: Ollama's format, response_format), json (JSON mode, the schema in "
                                      "the prompt) or none (the schema in the prompt only; parse, repair and retry "
                                      "as ever): a grammar costs some servers many times the time per token; "
                                      "`briefd check` times one short call each way on the model",
          example="none"),
    _Spec("num_ctx", "int", "model context window in tokens (one value per model: changing it reloads the model)",
          low=2048, high=1_048_576),
    _Spec("num_predict", "int", "most tokens a model answer may use (less than num_ctx)", low=64, high=1_048_576),
    _Spec("llm_timeout_s", "float", "seconds to wait for one model answer", low=0, above_low=True),
    _Spec("temperature", "float", "model sampling temperature", low=0, high=2),
    _Spec("seed", "int", "model sampling seed (same seed, same prompt: same answer)", low=0, high=2**31 - 1),
    _Spec("fetch_timeout_s", "float", "seconds to fetch one page", low=0, above_low=True),
    _Spec("fetch_max_bytes", "int", "largest page body read, in bytes", low=1024),
    _Spec("fetch_max_redirects", "int", "redirects followed per page", low=0, high=20),
    _Spec("fetch_concurrency", "int", "pages fetched at once", low=1, high=64),
    _Spec("allow_link_local", "bool", "allow fetching link-local/metadata addresses (169.254.x.x, fe80::)"),
    _Spec("search_timeout_s", "float", "seconds to wait for SearXNG", low=0, above_low=True),
    _Spec("max_age", "duration", "how old a page read earlier may be and still be used without asking its server "
                                 "(\"12h\", \"7d\", \"0\": always ask); an older one is asked for again with a "
                                 "conditional request, and an unchanged page is not downloaded; a brief's max_age wins",
          example="12h"),
    _Spec("settle_seconds", "float", "a dropped file is taken once its size and mtime are unchanged this long",
          low=0),
    _Spec("poll_seconds", "float", "seconds between rescans of the inbox", low=0, above_low=True),
    _Spec("use_polling", "bool", "poll the inbox instead of inotify (NFS/SMB mounts)"),
    _Spec("max_attempts", "int", "attempts before a brief that keeps failing is marked failed", low=1, high=100),
    _Spec("patience_s", "float", "seconds a brief waits out an Ollama or SearXNG outage before failing",
          low=0, above_low=True),
    _Spec("once_patience_s", "float", "seconds `briefd run --once` (cron) waits for a service that is down before it "
                                      "gives up: its briefs stay queued with the reason and the run exits 3; a later "
                                      "run takes them (patience_s still bounds their whole wait); flag on `run`: "
                                      "--once-patience-s", low=0, above_low=True),
    _Spec("on_finish", "argv", "a command run when a brief ends (done, failed or cancelled), as a list of words, "
                               "never through a shell, with BRIEFD_ID, BRIEFD_STATUS, BRIEFD_REPORT (report.json) "
                               "and BRIEFD_OUTDIR in its environment; a JSON array in the environment, an array "
                               "in briefd.toml; its failure is logged and never fails the brief",
          shown_default="none", example='["/usr/local/bin/briefd-notify", "--to", "research"]'),
    _Spec("on_finish_timeout_s", "float", "seconds the on_finish command may run before it is killed",
          low=0, above_low=True),
    _Spec("log_level", "level", "log detail: debug, info, warning or error (-v is debug)"),
    _Spec("file_mode", "mode", "mode of every file briefd writes, in octal (e.g. \"0640\"; folders it makes get "
                               "x where r); unset: what the umask gives, 0644 under umask 022",
          shown_default="unset", example="0640"),
    _Spec("source_tiers", "tiers", "your own trusted sources: host, URL prefix, library folder or archive file = "
                                   "tier (regulator, peer_reviewed, industry, news, social), comma-separated in the "
                                   "environment, a [source_tiers] table in briefd.toml; wins over the model's label",
          shown_default="none", example="audit.example.org=regulator"),
    _Spec("library", "paths", "folders of documents to research (PDF, DOCX, ODT, EPUB, Markdown, text, HTML), "
                              "indexed into the store and kept current; separated by ':' in the environment, "
                              "a list in briefd.toml", shown_default="none", example="/srv/library"),
    _Spec("archives", "paths", "Kiwix ZIM archives to research (Wikipedia, Stack Exchange...); separated by ':' "
                               "in the environment, a list in briefd.toml",
          shown_default="none", example="/srv/zim/wikipedia_en_all.zim"),
    _Spec("egress", "egress", "who briefd may contact: open (any address), private (loopback, private ranges "
                              "including 100.64/10, the configured SearXNG and model server, and egress_hosts), "
                              "none (the model server only: library and archives); enforced when connecting"),
    _Spec("egress_hosts", "hosts", "hosts with public addresses that egress = private still allows (e.g. your "
                                   "SearXNG), comma-separated in the environment, a list in briefd.toml",
          shown_default="none", example="search.example.org"),
    _Spec("serve", "bool", "briefd run serves the HTTP API and the web page too (as briefd serve does alone)"),
    _Spec("serve_host", "bindhost", "address the HTTP API listens on; loopback by default, any other needs "
                                    "serve_token or serve_token_file", example="0.0.0.0"),
    _Spec("serve_port", "int", "port the HTTP API listens on", low=1, high=65535),
    _Spec("serve_token", "secret", "bearer token the HTTP API asks for (Authorization: Bearer ...); at least 16 "
                                   "characters; prefer serve_token_file, which keeps it out of ps and the "
                                   "environment", shown_default="unset", example="<32 random characters>"),
    _Spec("serve_token_file", "optpath", "file whose first line is the HTTP API's bearer token (mode 0600)",
          shown_default="unset", example="/etc/briefd/token"),
    _Spec("serve_hosts", "hosts", "host names the HTTP API answers to besides its own address, such as a reverse "
                                  "proxy's public name (the Host and Origin a browser sends); comma-separated in "
                                  "the environment, a list in briefd.toml", shown_default="none",
          example="briefd.example.org"),
)
_BY_NAME = {spec.name: spec for spec in _SPECS}
# settings an earlier briefd had, and what to write instead
RENAMED = {"page_ttl_hours": 'it is now max_age, a duration (168 hours: max_age = "7d"; 0: "0")'}
# Fields of Settings that are not settings: what load_settings read, and where it found each value.
NOT_SETTINGS = ("config_file", "origins", "replay_answers_since")
_DEFAULTS = {f.name: f.default for f in dataclasses.fields(Settings) if f.name not in NOT_SETTINGS}
CONTRACT_SETTINGS = tuple(spec.name for spec in _SPECS if spec.flag)

ENV_PREFIX = "BRIEFD_"
CONFIG_VARIABLE = "BRIEFD_CONFIG"
# The one list of BRIEFD_* variables briefd (or its test lab) reads that are not settings: any other
# BRIEFD_* variable in the environment is a typo or a leftover, and load_settings warns about it.
OTHER_VARIABLES: dict[str, str] = {
    CONFIG_VARIABLE: "the briefd.toml to read (--config)",
    crashpoints.ENV: "tests only: where the daemon kills itself (daemon/core/crashpoints.py)",
    "BRIEFD_SOCKET_GUARD_LOG": "tests only: the socket guard's log (tests/socket_guard)",
    "BRIEFD_KILL_SEED": "tests only: the seed of tests/e2e/test_crash.py's random kills",
    # what briefd gives an on_finish command (daemon.onfinish): a command that runs briefd again passes them on
    "BRIEFD_ID": "given to on_finish: the brief's id",
    "BRIEFD_STATUS": "given to on_finish: done, failed or cancelled",
    "BRIEFD_REPORT": "given to on_finish: the path of report.json",
    "BRIEFD_OUTDIR": "given to on_finish: the brief's outbox folder",
    "BRIEFD_ANSWER_FOUND": "given to on_finish: yes when the report found an answer, no when it found none",
}


def stray_variables(env: Mapping[str, str]) -> list[str]:
    """A warning for each BRIEFD_* variable that is neither a setting's nor in OTHER_VARIABLES, naming
    the nearest setting's variable: a typo (patience for patience_s) would otherwise be ignored without
    a word. Not an error: a variable that does nothing must not stop a daemon that was running fine."""
    known = {spec.env_name for spec in _SPECS} | set(OTHER_VARIABLES)
    settings_env = tuple(sorted(spec.env_name for spec in _SPECS if spec.env_name.startswith(ENV_PREFIX)))
    warnings = []
    for name in sorted(env):
        if not name.startswith(ENV_PREFIX) or name in known:
            continue
        nearest = difflib.get_close_matches(name.upper(), settings_env, n=1, cutoff=0.6)
        hint = (f"did you mean {nearest[0]}?" if nearest
                else "`briefd --help` lists the settings and their variables")
        warnings.append(f"{name} in the environment is not a briefd setting and is ignored; {hint}")
    return warnings


@dataclass(frozen=True)
class _Source:
    """Where a value came from: how to name it in a message, how to word the fix, what a relative path means."""

    kind: str  # flag | env | toml | default
    label: str
    base: Path
    where: str = ""  # the flag, the variable or "<file> line N" alone (Origin.where); "" for the default


@dataclass(frozen=True)
class Origin:
    """Where a setting's value came from, as load_settings found it (not re-derived): `briefd config` shows it."""

    kind: str  # flag | env | toml | default
    where: str  # the flag (--model), the variable (BRIEFD_MODEL), "<briefd.toml> line N"; "" for the default

    def words(self) -> str:
        """"flag --model", "environment BRIEFD_MODEL", "briefd.toml /etc/briefd/briefd.toml line 3", "default"."""
        what = {"flag": "flag", "env": "environment", "toml": "briefd.toml", "default": "default"}[self.kind]
        return f"{what} {self.where}" if self.where else what


def config_knobs(settings: Settings, config: type, prefix: str) -> dict[str, Any]:
    """The fields of a component's config dataclass (fetch.FetchLimits, llm.ModelConfig) that a user
    sets, by name: the field `timeout_s` takes the setting `<prefix>timeout_s`, else the setting of its
    own name (`seed`, `egress`); fields no setting names keep the config's own default. Why: the worker
    copied each knob field by field, so a new knob was three edits (Settings, the config, the copy);
    now it is a Settings field and a config field of the same name, whose default is Settings'."""
    names = {f.name for f in dataclasses.fields(Settings) if f.init}
    knobs: dict[str, Any] = {}
    for f in dataclasses.fields(config):
        name = prefix + f.name if prefix + f.name in names else f.name
        if f.init and name in names:
            knobs[f.name] = getattr(settings, name)
    return knobs


def load_settings(flags: Mapping[str, Any], env: Mapping[str, str], config_path: Path | None = None) -> Settings:
    """Resolve every setting: flag > environment > briefd.toml > default.

    `flags` is keyed by setting name, None meaning "not given"; keys that are not
    settings are ignored, so `vars(argparse_namespace)` can be passed whole.
    An empty environment variable counts as unset (as Ollama treats OLLAMA_HOST).
    The toml file is `config_path`, else $BRIEFD_CONFIG, else ./briefd.toml if it
    exists; paths inside it are relative to its folder, paths from flags and the
    environment to the current directory. Returned paths are absolute.
    """
    cwd = Path.cwd()
    toml_path = _find_config(config_path, env, cwd)
    table: dict[str, Any] = {}
    text = ""
    if toml_path is not None:
        table, text = _read_toml(toml_path)
        for key in table:
            if key not in _BY_NAME:
                nearest = _nearest(key, tuple(_BY_NAME))
                hint = (RENAMED[key] if key in RENAMED else f"did you mean '{nearest}'?" if nearest
                        else f"remove it (the settings are: {', '.join(_BY_NAME)})")
                raise SettingsError(f"{_toml_label(toml_path, text, key)}: unknown setting '{key}'; {hint}",
                                    _toml_label(toml_path, text, key), None)
    values: dict[str, Any] = {}
    sources: dict[str, _Source] = {}
    for spec in _SPECS:
        raw, source = _pick(spec, flags, env, table, toml_path, text, cwd)
        values[spec.name] = _convert(spec, raw, source)
        sources[spec.name] = source
    for warning in stray_variables(env):
        log.warning("%s", warning)
    if values["model_api"] == "openai" and not values["openai_base_url"]:
        source = sources["model_api"]
        raise SettingsError(f"{source.label} sets model_api = openai, but no openai_base_url names the server; set "
                            f"BRIEFD_OPENAI_BASE_URL (or openai_base_url in briefd.toml) to its base URL with its /v1, "
                            f"e.g. http://gpu-box:8000/v1", source.label, "openai_base_url")
    if values["num_predict"] >= values["num_ctx"]:
        source = sources["num_predict"] if sources["num_predict"].kind != "default" else sources["num_ctx"]
        raise SettingsError(
            f"{source.label} makes num_predict ({values['num_predict']}) not smaller than num_ctx "
            f"({values['num_ctx']}), which leaves no room for the prompt; lower num_predict or raise num_ctx",
            source.label, "num_predict")
    origins = {name: Origin(source.kind, source.where) for name, source in sources.items()}
    return Settings(**values, config_file=toml_path, origins=origins)


def settings_table() -> list[dict[str, Any]]:
    """Each setting: name, flag (None: environment/toml only), env, toml key, default as shown, help."""
    return [
        {"name": spec.name, "flag": spec.flag, "env": spec.env_name, "toml": spec.name,
         "default": _shown_default(spec), "help": spec.help}
        for spec in _SPECS
    ]


SECRET_KINDS = ("secret", "apikey")


def is_secret(name: str) -> bool:
    """A setting whose value must never be shown or passed on: its kind is a secret's (serve_token,
    openai_api_key). The kind, not the name: serve_token_file's value is a path, no secret, and `briefd
    config` shows it."""
    spec = _BY_NAME.get(name)
    return spec is not None and spec.kind in SECRET_KINDS


def openai_key(settings: Settings) -> str | None:
    """The API key of the OpenAI-compatible server: openai_api_key, else the first line of openai_api_key_file;
    None when neither is set or model_api is not openai. A file that cannot be used raises SettingsError
    naming it and the fix (`briefd run`, `check` and `eval` read it before anything starts); the key itself
    is never in a message."""
    if settings.model_api != "openai":
        return None
    if settings.openai_api_key:
        return settings.openai_api_key
    path = settings.openai_api_key_file
    if path is None:
        return None
    try:
        key = secret_line(path, "openai_api_key_file", "the API key")
    except ValueError as exc:
        raise SettingsError(str(exc), f"openai_api_key_file {path}", "openai_api_key_file") from None
    if not key or not all(33 <= ord(c) < 127 for c in key):
        raise SettingsError(f"openai_api_key_file {path}: its first line must be the API key, printable ASCII "
                            "without spaces", f"openai_api_key_file {path}", "openai_api_key_file")
    return key


def secret_variables() -> frozenset[str]:
    """The environment variables of the secret settings (is_secret): what the daemon never passes on
    to a command it starts (daemon.onfinish)."""
    return frozenset(spec.env_name for spec in _SPECS if is_secret(spec.name))


def effective_settings(settings: Settings) -> list[dict[str, Any]]:
    """`briefd config`: each setting's value in use and where it came from, as load_settings recorded it.

    `shown` is the value as a user would write it ("7d", "0640", "none"), `value` the same for JSON
    (lists, numbers, null); a secret is "(set)" in both, or unset, never its value.
    """
    rows = []
    for spec in _SPECS:
        value = getattr(settings, spec.name)
        origin = settings.origins.get(spec.name, Origin("default", ""))
        if is_secret(spec.name):
            shown, data = ("(set)", "(set)") if value else ("(unset)", None)
        else:
            shown, data = _shown_value(spec, value), _json_value(spec, value)
        rows.append({"name": spec.name, "shown": shown, "value": data, "source": origin.kind,
                     "where": origin.where, "from": origin.words(), "flag": spec.flag, "env": spec.env_name})
    return rows


SETTINGS_MARKDOWN_HEADER = ("| setting (`briefd.toml`) | flag | environment | default | what it is |\n"
                            "|---|---|---|---|---|")


def settings_markdown() -> str:
    """docs/settings.md's table, made from `settings_table()` (a test compares the two)."""
    def cell(text: str | None, code: bool = True) -> str:
        if not text:
            return "–"
        if code:
            return "`" + text.replace("|", "\\|") + "`"
        return re.sub(r"([\\`*_<>\[\]|])", r"\\\1", text)  # Markdown's own characters, shown as they are

    rows = [f"| {cell(r['toml'])} | {cell(r['flag'])} | {cell(r['env'])} | {cell(r['default'])} | "
            f"{cell(r['help'], code=False)} |" for r in settings_table()]
    return "\n".join([SETTINGS_MARKDOWN_HEADER, *rows])


# --------------------------------------------------------------------------- Ollama and SearXNG addresses


def normalize_ollama_host(value: str) -> str:
    """OLLAMA_HOST as Ollama's own client reads it → "scheme://host:port[/path]".

    A bare host or host:port is http on port 11434; an explicit http:// or
    https:// without a port means 80 or 443 (as the `ollama` client does). One
    difference, on purpose: 0.0.0.0 and :: are listen-on-everything addresses
    (OLLAMA_HOST=0.0.0.0 is a common *server* setting that leaks into clients'
    environments), so a client reads them as this machine's loopback.
    Raises ValueError with the reason.
    """
    text = value.strip()
    if not text:
        return DEFAULT_OLLAMA_HOST
    scheme, sep, rest = text.partition("://")
    if not sep:
        scheme, rest, default_port = "http", text, DEFAULT_OLLAMA_PORT
    else:
        scheme = scheme.lower()
        if scheme not in ("http", "https"):
            raise ValueError(f"the scheme '{scheme}://' is not http:// or https://")
        default_port = 80 if scheme == "http" else 443
    try:
        split = urlsplit(f"{scheme}://{rest}")
    except ValueError:
        raise ValueError("it is not a host[:port] address") from None
    try:
        port = split.port
    except ValueError:
        raise ValueError("its port is not a number from 1 to 65535") from None
    if split.query or split.fragment:
        raise ValueError("it has a ?query or #fragment; give only scheme, host, port and path")
    host = split.hostname or "127.0.0.1"
    if not re.fullmatch(r"[A-Za-z0-9._:%-]+", host):
        raise ValueError(f"'{host}' is not a host name or IP address")
    host = {"0.0.0.0": "127.0.0.1", "::": "::1"}.get(host, host)
    try:
        if isinstance(ipaddress.ip_address(host), ipaddress.IPv6Address):
            host = f"[{host}]"
    except ValueError:
        pass
    path = split.path.strip("/")
    return f"{scheme}://{host}:{port or default_port}" + (f"/{path}" if path else "")


def normalize_searxng_url(value: str) -> str:
    """A SearXNG base URL: http(s), a host, no query; "host:8888" gets http:// added; no trailing slash."""
    text = value.strip()
    if not text:
        raise ValueError("it is empty")
    if "://" not in text:
        text = f"http://{text}"
    try:
        split = urlsplit(text)
    except ValueError:
        raise ValueError("it is not a URL") from None
    try:
        split.port  # noqa: B018 - raises ValueError on a bad port
    except ValueError:
        raise ValueError("its port is not a number from 1 to 65535") from None
    scheme = split.scheme.lower()
    if scheme not in ("http", "https"):
        raise ValueError(f"the scheme '{scheme}://' is not http:// or https://")
    if not split.hostname:
        raise ValueError("it has no host")
    if split.query or split.fragment:
        raise ValueError("it has a ?query or #fragment; give the base URL only")
    return f"{scheme}://{split.netloc}{split.path.rstrip('/')}"


# --------------------------------------------------------------------------- where values come from


def _find_config(config_path: Path | None, env: Mapping[str, str], cwd: Path) -> Path | None:
    if config_path is not None:
        path, label = Path(config_path), "--config"
    elif env.get(CONFIG_VARIABLE, "").strip():
        path, label = Path(env[CONFIG_VARIABLE].strip()), f"{CONFIG_VARIABLE} in the environment"
    else:
        found = cwd / "briefd.toml"
        return found if found.exists() else None
    path = Path(os.path.abspath(cwd / path.expanduser()))
    if not path.exists():
        hint = "drop --config" if label == "--config" else f"unset {CONFIG_VARIABLE}"
        raise SettingsError(f"{label} names {path}, which does not exist; create it or {hint}", label, None)
    return path


def _read_toml(path: Path) -> tuple[dict[str, Any], str]:
    try:
        data = read_file_at_most(path, MAX_CONFIG_BYTES)
    except OSError as exc:
        raise SettingsError(f"{path}: cannot be read ({exc.strerror or exc}); make it a readable file",
                            str(path), None) from None
    except TooLarge as exc:
        raise SettingsError(f"{exc}; a briefd.toml is a few lines: point --config at the right file",
                            str(path), None) from None
    if data.startswith(b"\xef\xbb\xbf"):  # Windows editors add one; tomllib refuses it
        data = data[3:]
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SettingsError(f"{path}: not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start}); "
                            f"save it as UTF-8", str(path), None) from None
    try:
        return tomllib.loads(text), text
    except tomllib.TOMLDecodeError as exc:
        reason = str(exc)
        match = re.search(r"\(at line (\d+), column \d+\)", reason)
        line = int(match.group(1)) if match else text.count("\n") + 1
        reason = re.sub(r"\s*\(at (line \d+, column \d+|end of document)\)", "", reason)
        label = f"{path} line {line}"
        raise SettingsError(f"{label}: not valid TOML ({reason}); fix that line, e.g. model = \"{DEFAULT_MODEL}\" "
                            f"(strings in double quotes, one key = value a line)", label, None) from None


def _pick(spec: _Spec, flags: Mapping[str, Any], env: Mapping[str, str], table: dict[str, Any],
          toml_path: Path | None, text: str, cwd: Path) -> tuple[Any, _Source]:
    if flags.get(spec.name) is not None:
        return flags[spec.name], _Source("flag", spec.flag_name, cwd, spec.flag_name)
    env_value = env.get(spec.env_name)
    if env_value is not None and env_value.strip():
        return env_value, _Source("env", f"{spec.env_name} in the environment", cwd, spec.env_name)
    if spec.name in table and toml_path is not None:
        label = _toml_label(toml_path, text, spec.name)
        return table[spec.name], _Source("toml", label, toml_path.parent, label)
    return _DEFAULTS[spec.name], _Source("default", "the default", cwd)


def _toml_label(path: Path, text: str, key: str) -> str:
    """"<path> line N" for the line where `key` is set (bare, quoted, dotted or a [table])."""
    k = re.escape(key)
    pattern = re.compile(rf"""^[ \t]*(\[+[ \t]*)?(?:{k}|"{k}"|'{k}')[ \t]*[=.\]]""", re.MULTILINE)
    match = pattern.search(text)
    return f"{path} line {text.count(chr(10), 0, match.start()) + 1}" if match else str(path)


# --------------------------------------------------------------------------- turning values into settings


class _Bad(Exception):
    def __init__(self, expected: str, why: str = "", hide: bool = False) -> None:
        super().__init__(expected)
        self.expected = expected
        self.why = why
        self.hide = hide  # the value holds a secret (a key in a URL): the message never shows it


def _convert(spec: _Spec, raw: Any, source: _Source) -> Any:
    try:
        return _CONVERTERS[spec.kind](spec, raw, source)
    except _Bad as bad:
        got = f"{len(raw)} characters (not shown: a secret)" if (spec.kind in SECRET_KINDS or bad.hide) and \
            isinstance(raw, str) else _shown(raw)
        raise SettingsError(
            f"{_lead(source, spec.name)}{_subject(source, spec.name)} must be {bad.expected}, got {got}"
            f"{f' ({bad.why})' if bad.why else ''}; {_fix(spec, source)}", source.label, spec.name) from None


def _lead(source: _Source, name: str) -> str:
    return f"{source.label}: " if source.kind in ("toml", "default") else ""


def _subject(source: _Source, name: str) -> str:
    return source.label if source.kind in ("flag", "env") else name


def _fix(spec: _Spec, source: _Source) -> str:
    example = spec.example or _display(_DEFAULTS[spec.name])
    if source.kind == "flag":
        return f"pass e.g. {spec.flag_name} {example}"
    if source.kind == "env":
        return f"set e.g. {spec.env_name}={example}, or unset it"
    toml_value = example if spec.kind in ("int", "float", "bool") else f'"{example}"'
    if spec.kind in ("paths", "hosts", "ollamas"):
        toml_value = f"[{toml_value}]"
    if spec.kind == "argv":
        toml_value = example
        if source.kind == "env":
            return f"set e.g. {spec.env_name}='{example}' (a JSON array), or unset it"
    return f"write e.g. {spec.name} = {toml_value}"


def _to_path(spec: _Spec, raw: Any, source: _Source) -> Path:
    if isinstance(raw, os.PathLike):
        raw = os.fspath(raw)
    if not isinstance(raw, str) or not raw.strip() or "\x00" in raw:
        raise _Bad("a path (in quotes in briefd.toml)" if source.kind == "toml" else "a path")
    path = Path(raw).expanduser()
    return Path(os.path.abspath(path if path.is_absolute() else source.base / path))


def _to_optpath(spec: _Spec, raw: Any, source: _Source) -> Path | None:
    """A path that may be left unset ("" in the environment unsets it)."""
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return None
    return _to_path(spec, raw, source)


SERVE_TOKEN_MIN_CHARS = 16


def _to_secret(spec: _Spec, raw: Any, source: _Source) -> str | None:
    """A bearer token: printable ASCII without spaces, long enough not to be guessed."""
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return None
    text = raw.strip() if isinstance(raw, str) else None
    if text is None or len(text) < SERVE_TOKEN_MIN_CHARS or not all(33 <= ord(c) < 127 for c in text):
        raise _Bad(f"at least {SERVE_TOKEN_MIN_CHARS} printable ASCII characters without spaces "
                   "(python3 -c 'import secrets; print(secrets.token_urlsafe(32))' makes one)")
    return text


def _to_apikey(spec: _Spec, raw: Any, source: _Source) -> str | None:
    """An API key of someone else's server: any printable ASCII without spaces (its length is that server's
    business). The reason given never quotes it."""
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return None
    if not isinstance(raw, str) or not all(33 <= ord(c) < 127 for c in raw.strip()):
        raise _Bad("printable ASCII characters without spaces (the key the server was started with)")
    return raw.strip()


def _to_structured(spec: _Spec, raw: Any, source: _Source) -> str:
    if isinstance(raw, str) and raw.strip().lower() in STRUCTURED:
        return raw.strip().lower()
    raise _Bad(f"one of {', '.join(STRUCTURED)}")


def _to_modelapi(spec: _Spec, raw: Any, source: _Source) -> str:
    if isinstance(raw, str) and raw.strip().lower() in MODEL_APIS:
        return raw.strip().lower()
    raise _Bad(f"one of {', '.join(MODEL_APIS)}")


def _to_openaiurls(spec: _Spec, raw: Any, source: _Source) -> tuple[str, ...]:
    """Base URLs of OpenAI-compatible servers: a TOML list, or comma-separated text; each http(s), no query, no
    user or password (a key in a URL would be shown wherever the URL is: it goes in openai_api_key)."""
    def with_no_user(item: str) -> str:
        if "@" in urlsplit(item if "://" in item else f"http://{item}").netloc:
            raise _Bad(expected, "a user or key in the URL: put the key in BRIEFD_OPENAI_API_KEY or "
                                 "openai_api_key_file instead", hide=True)
        return normalize_searxng_url(item)

    expected = "base URLs such as \"http://gpu-box:8000/v1\""
    return _addresses(raw, expected, with_no_user)


def _addresses(raw: Any, expected: str, normalize: Callable[[str], str]) -> tuple[str, ...]:
    """Several addresses (`ollama_hosts`, `openai_base_url`, `egress_hosts`, `serve_hosts`): a TOML list, or
    comma-separated text; each read by `normalize` (a ValueError is its reason), duplicates dropped."""
    if raw is None or raw == ():
        return ()
    if isinstance(raw, str):
        items: list[Any] = [part.strip() for part in raw.split(",") if part.strip()]
    elif isinstance(raw, (list, tuple)):
        items = list(raw)
    else:
        raise _Bad(expected)
    found: list[str] = []
    for item in items:
        if not isinstance(item, str) or not item.strip():
            raise _Bad(expected, "an empty or non-text entry")
        try:
            address = normalize(item.strip())
        except ValueError as exc:
            raise _Bad(expected, f"'{item.strip()}': {exc}") from None
        if address not in found:
            found.append(address)
    return tuple(found)


def _to_bindhost(spec: _Spec, raw: Any, source: _Source) -> str:
    """An address to listen on: an IP address or a host name, without a scheme or port."""
    if isinstance(raw, str):
        text = raw.strip().removeprefix("[").removesuffix("]")
        try:
            return str(ipaddress.ip_address(text))
        except ValueError:
            if re.fullmatch(r"[A-Za-z0-9]([A-Za-z0-9.-]{0,252})", text) and ".." not in text:
                return text
    raise _Bad("an address to listen on, such as 127.0.0.1, ::1 or 0.0.0.0 (no scheme, no port: that is serve_port)")


def _normalized(raw: Any, normalize: Callable[[str], str], not_text: str, expected: str) -> str:
    """Text read by `normalize`: `not_text` when it is no text at all, `expected` with the reason it was refused."""
    if not isinstance(raw, str):
        raise _Bad(not_text)
    try:
        return normalize(raw)
    except ValueError as exc:
        raise _Bad(expected, str(exc)) from None


def _to_ollama(spec: _Spec, raw: Any, source: _Source) -> str:
    return _normalized(raw, normalize_ollama_host,
                       "an address such as \"127.0.0.1:11434\" or \"http://gpu-box:11434\"",
                       "an address such as 127.0.0.1:11434 or http://gpu-box:11434")


def _to_ollamas(spec: _Spec, raw: Any, source: _Source) -> tuple[str, ...]:
    """Several Ollama addresses: a TOML list, or comma-separated text; each as `normalize_ollama_host` reads it."""
    return _addresses(raw, "Ollama addresses such as \"gpu-1:11434, http://gpu-2:11434\"", normalize_ollama_host)


def _to_url(spec: _Spec, raw: Any, source: _Source) -> str:
    expected = "a URL such as http://127.0.0.1:8888"
    return _normalized(raw, normalize_searxng_url, expected, expected)


def _to_model(spec: _Spec, raw: Any, source: _Source) -> str:
    if isinstance(raw, str) and raw.strip() and not re.search(r"\s", raw.strip()):
        return raw.strip()
    raise _Bad(f"an Ollama model name such as {DEFAULT_MODEL} (no spaces)")


def _range_words(spec: _Spec, noun: str) -> str:
    if spec.low is not None and spec.high is not None:
        return f"{noun} from {number_text(spec.low)} to {number_text(spec.high)}"
    if spec.low is not None:
        low = number_text(spec.low)
        return f"{noun} greater than {low}" if spec.above_low else f"{noun} of at least {low}"
    return noun


def _in_range(spec: _Spec, value: float) -> bool:
    if spec.low is not None and (value <= spec.low if spec.above_low else value < spec.low):
        return False
    return spec.high is None or value <= spec.high


def _to_int(spec: _Spec, raw: Any, source: _Source) -> int:
    expected = _range_words(spec, "a whole number")
    value: int | None = None
    if isinstance(raw, bool):
        value = None
    elif isinstance(raw, int):
        value = raw
    elif isinstance(raw, str) and re.fullmatch(r"[ \t]*[+-]?[0-9]{1,30}[ \t]*", raw):
        value = int(raw)
    if value is None or not _in_range(spec, value):
        raise _Bad(expected)
    return value


def _to_float(spec: _Spec, raw: Any, source: _Source) -> float:
    expected = _range_words(spec, "a number")
    value = finite(raw, text=isinstance(raw, str) and len(raw) < 100)
    if value is None or abs(value) >= 1e300 or not _in_range(spec, value):
        raise _Bad(expected)
    return value


def _to_duration(spec: _Spec, raw: Any, source: _Source) -> float:
    """A duration as daemon.schedule reads it ("7d", "12h", "0"), or a number of seconds."""
    seconds = finite(raw)
    if seconds is not None and seconds >= 0:
        return seconds
    if isinstance(raw, str):
        try:
            return parse_duration(raw)
        except ScheduleError:
            pass
    raise _Bad(f"a duration such as {DURATION_EXAMPLE}, or a number of seconds")


def _to_bool(spec: _Spec, raw: Any, source: _Source) -> bool:
    if isinstance(raw, bool):
        return raw
    if isinstance(raw, str) and raw.strip().lower() in _TRUE | _FALSE:
        return raw.strip().lower() in _TRUE
    raise _Bad("true or false" + (" (1/0, yes/no, on/off)" if source.kind != "toml" else " (without quotes)"))


def _to_level(spec: _Spec, raw: Any, source: _Source) -> str:
    if isinstance(raw, str) and raw.strip().lower() in LOG_LEVELS:
        return raw.strip().lower()
    raise _Bad(f"one of {', '.join(LOG_LEVELS)}")


def _to_mode(spec: _Spec, raw: Any, source: _Source) -> int | None:
    """An octal file mode as a string ("0640", "640", "0o640"). Only as a string: TOML's 640
    would be decimal, and its 0o640 cannot be told from a decimal 416 once read. No x, setuid,
    setgid or sticky bits (reports are not programs), and owner read+write (briefd rewrites
    and appends to its own files)."""
    if raw is None:
        return None
    expected = 'an octal file mode in quotes, such as "0640"' if source.kind == "toml" else \
        "an octal file mode such as 0640"
    if not isinstance(raw, str):
        raise _Bad(expected)
    match = re.fullmatch(r"[ \t]*(?:0o|0)?([0-7]{3})[ \t]*", raw)
    if match is None:
        raise _Bad(expected, "3 octal digits, optionally after a 0: owner, group, others")
    mode = int(match.group(1), 8)
    if mode & 0o111:
        raise _Bad(expected, "no execute bits: briefd's files are not programs")
    if mode & 0o600 != 0o600:
        raise _Bad(expected, "the owner needs read and write (6): briefd rewrites and appends to its own files")
    return mode


_TIER_HOST = re.compile(r"(?=.{1,254}$)[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
                        r"(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*\.?")


_PATH_KEY_STARTS = ("/", "~", "./", "../")


def _to_tiers(spec: _Spec, raw: Any, source: _Source) -> tuple[tuple[str, str], ...]:
    """host, URL prefix or path -> tier: a TOML table, or "key=tier, key=tier" (environment, flag, TOML string).

    A key is a host name (covering its subdomains), an http(s) URL prefix, or a path (starting
    with "/", "~", "./" or "../"; relative to the file it is written in, like every path
    setting): a library folder or document, or an archive file, so that an operator can say
    their own manuals are the authority (judge.tier_rule). A path is stored absolute, so
    judge.is_path_key knows it; whether it exists is `briefd check`'s to say (a folder may be
    mounted later). A tier is one of judge.TIERS exactly (an alias the model may use is not
    accepted here: this is the organisation's own word and should say what it means)."""
    if raw is None or raw == ():
        return ()
    expected = ('host, URL prefix or path = tier pairs, e.g. "audit.example.org=regulator, '
                'https://intranet.example.org/studies/=peer_reviewed, /srv/library/vendor-manuals=regulator"')
    if isinstance(raw, dict):
        pairs = list(raw.items())
    elif isinstance(raw, str):
        pairs = []
        for part in (p.strip() for p in raw.split(",")):
            if not part:
                continue
            key, sep, tier = part.rpartition("=")
            if not sep:
                raise _Bad(expected, f"'{part}' has no '=tier'")
            pairs.append((key.strip(), tier.strip()))
    else:
        raise _Bad(expected)
    out: list[tuple[str, str]] = []
    for key, tier in pairs:
        if not isinstance(tier, str) or tier.strip() not in TIERS:
            raise _Bad(expected, f"the tier for '{key}' must be one of {', '.join(TIERS)}, not {tier!r}")
        if not isinstance(key, str) or not key.strip():
            raise _Bad(expected, "a rule has an empty host, URL prefix or path")
        key = key.strip()
        if key.startswith(_PATH_KEY_STARTS):
            key = str(_to_path(spec, key, source))
        elif "://" in key:
            try:
                split = urlsplit(key)
            except ValueError:
                split = None
            if split is not None and split.scheme.lower() == "file":
                raise _Bad(expected, f"'{key}' is a file URL: write the folder's path ({split.path or '/'})")
            if split is None or split.scheme.lower() not in ("http", "https") or not split.hostname:
                raise _Bad(expected, f"'{key}' is not an http(s) URL prefix with a host")
        elif not _TIER_HOST.fullmatch(key):
            raise _Bad(expected, f"'{key}' is not a host name (no path without a scheme: write https://{key}; "
                       f"a folder or archive: its full path)"
                       if "/" in key else f"'{key}' is not a host name")
        else:
            key = key.lower().rstrip(".")
        out.append((key, tier.strip()))
    return tuple(out)


EGRESS_POLICIES = ("open", "private", "none")


def _to_paths(spec: _Spec, raw: Any, source: _Source) -> tuple[Path, ...]:
    """Several paths: a TOML list (or one string), or os.pathsep-separated text (like PATH)."""
    if raw is None or raw == ():
        return ()
    if isinstance(raw, str):
        items: list[Any] = [part for part in raw.split(os.pathsep) if part.strip()]
    elif isinstance(raw, (list, tuple)):
        items = list(raw)
    else:
        raise _Bad("a list of paths" if source.kind == "toml" else f"paths separated by '{os.pathsep}'")
    paths: list[Path] = []
    for item in items:
        path = _to_path(spec, item, source)
        if path not in paths:
            paths.append(path)
    return tuple(paths)


def _to_egress(spec: _Spec, raw: Any, source: _Source) -> str:
    if isinstance(raw, str) and raw.strip().lower() in EGRESS_POLICIES:
        return raw.strip().lower()
    raise _Bad(f"one of {', '.join(EGRESS_POLICIES)}")


def _to_hosts(spec: _Spec, raw: Any, source: _Source) -> tuple[str, ...]:
    """Host names (or literal addresses): a TOML list, or comma-separated text."""
    def host_name(item: str) -> str:
        host = item.lower().rstrip(".").strip("[]")
        try:
            return str(ipaddress.ip_address(host))
        except ValueError:
            if not _TIER_HOST.fullmatch(host):
                raise ValueError("not a host name or address (no scheme, port or path)") from None
        return host

    return _addresses(raw, 'host names, e.g. "search.example.org, 203.0.113.7"', host_name)


def _to_argv(spec: _Spec, raw: Any, source: _Source) -> tuple[str, ...]:
    """A command as its words (argv): a TOML array, or a JSON array in the environment or a flag.

    Never one string split on spaces or handed to a shell: a report path or an id inside it
    must not be able to become a second command, and quoting rules differ between shells."""
    if raw is None or raw == ():
        return ()
    expected = "a command as a list of words, e.g. " + (spec.example or '["notify", "--to", "ops"]')
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except ValueError:
            raise _Bad(expected, "not a JSON array; a command is never run through a shell") from None
    if not isinstance(raw, (list, tuple)) or not raw:
        raise _Bad(expected)
    if not all(isinstance(word, str) and word and "\x00" not in word for word in raw):
        raise _Bad(expected, "every word must be non-empty text")
    if not raw[0].strip():
        raise _Bad(expected, "the first word is the program to run")
    return tuple(raw)


_CONVERTERS = {
    "path": _to_path, "paths": _to_paths, "egress": _to_egress, "hosts": _to_hosts, "ollama": _to_ollama,
    "ollamas": _to_ollamas, "url": _to_url, "model": _to_model,
    "int": _to_int, "float": _to_float, "bool": _to_bool, "level": _to_level, "mode": _to_mode,
    "tiers": _to_tiers, "duration": _to_duration, "optpath": _to_optpath, "secret": _to_secret,
    "apikey": _to_apikey, "modelapi": _to_modelapi, "openaiurls": _to_openaiurls, "structured": _to_structured,
    "bindhost": _to_bindhost, "argv": _to_argv,
}


# --------------------------------------------------------------------------- small helpers


def _shown_default(spec: _Spec) -> str:
    return spec.shown_default or _display_setting(spec, _DEFAULTS[spec.name])


def _shown_value(spec: _Spec, value: Any) -> str:
    """A value in use as a user would write it: lists comma-separated, tiers as host=tier, modes in octal."""
    if value is None or value == ():
        return spec.shown_default or "unset"
    if spec.kind == "mode":
        return f"{value:04o}"
    if spec.kind == "tiers":
        return ", ".join(f"{key}={tier}" for key, tier in value)
    if isinstance(value, tuple):
        return ", ".join(str(item) for item in value)
    return _display_setting(spec, value)


def _json_value(spec: _Spec, value: Any) -> Any:
    """A value in use for JSON: paths as text, lists as lists, tiers as an object, a mode as "0640"."""
    if spec.kind == "mode":
        return None if value is None else f"{value:04o}"
    if spec.kind == "tiers":
        return dict(value)
    if isinstance(value, tuple):
        return [str(item) if isinstance(item, Path) else item for item in value]
    return str(value) if isinstance(value, Path) else value


def _display(value: Any) -> str:
    """A default as a user would type it: ./inbox, true, 300.0."""
    if isinstance(value, Path):
        return str(value) if value.is_absolute() else f"./{value}"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _display_setting(spec: _Spec, value: Any) -> str:
    """A setting's value as a user would type it: durations as "7d", the rest as _display does."""
    return format_duration(value) if spec.kind == "duration" else _display(value)


def _shown(raw: Any) -> str:
    text = repr(os.fspath(raw) if isinstance(raw, os.PathLike) else raw)
    return text if len(text) <= 60 else text[:60] + "...'"


def _nearest(word: str, options: tuple[str, ...]) -> str | None:
    probe = word.lower().replace("-", "_")
    if probe in options:
        return probe
    found = difflib.get_close_matches(probe, options, n=1, cutoff=0.6)
    return found[0] if found else None
