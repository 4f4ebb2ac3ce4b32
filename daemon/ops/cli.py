"""`briefd`: a thin command line over the daemon's modules (docs/contract.md, "Commands").

Exit codes: 0 success; 2 bad usage or invalid input; 3 a required service or path
is unavailable (with the reason).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import signal
import sys
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..rules.numbers import number_text, span_text
from .. import __version__
from . import launch
from ..core.brief import load_schema
from ..core.briefjson import MAX_BRIEF_BYTES, BriefError, too_large
from ..core.files import use_file_mode
from ..core.settings import (CONFIG_VARIABLE, Settings, SettingsError, effective_settings, load_settings, openai_key,
                             settings_table)

if TYPE_CHECKING:  # the store is imported by the commands that open it, not for --help
    from ...store import BriefRow, Store

    from .actions import Outcome

EXIT_OK, EXIT_USAGE, EXIT_UNAVAILABLE = 0, 2, 3
# The one line that opens the store in datasette with its descriptions and canned queries (docs/history.md).
DATASETTE_COMMAND = "briefd datasette > briefd-metadata.json && datasette briefd.db --metadata briefd-metadata.json"
EXIT_PIPE_CLOSED = 128 + signal.SIGPIPE  # what a shell reports for `seq 1000000 | head`: the reader left early

log = logging.getLogger("briefd")


def setting_flags() -> list[dict[str, Any]]:
    """The settings that have a flag, straight from settings.py's one table."""
    return [row for row in settings_table() if row["flag"]]


def other_settings_help() -> str:
    """--help's epilog: the settings without a flag (environment or briefd.toml), from the same table."""
    lines = ["other settings (environment, or briefd.toml by name):"]
    for row in settings_table():
        if not row["flag"]:
            lines.append(f"  {row['name']} (env {row['env']}, default {row['default']})")
            lines.extend(textwrap.wrap(row["help"], width=78, initial_indent=" " * 6, subsequent_indent=" " * 6))
    return "\n".join(lines)


# Each command's --help ends with these (tests/ops/test_cli_edges.py parses every one of them).
EXAMPLES: dict[str, tuple[str, ...]] = {
    "run": ("briefd run", "briefd run --once                      # cron: finish what is there, then exit",
            "briefd run --inbox /srv/briefd/inbox --workers 2 -v"),
    "submit": ("briefd submit question.json", "briefd submit a.json b.json --inbox /srv/briefd/inbox"),
    "status": ("briefd status", "briefd status --json"),
    "show": ("briefd show bridge-closure", "briefd show bridge-closure --events"),
    "retry": ("briefd retry bridge-closure",),
    "cancel": ("briefd cancel bridge-closure",),
    "list": ("briefd list --state failed", "briefd list --since 2026-11-01 --kind estimate --json"),
    "search": ("briefd search gusset plates", "briefd search load rating --limit 5 --json"),
    "check": ("briefd check", "briefd check --searxng-url http://search.lan:8888 --model qwen2.5:7b"),
    "schema": ("briefd schema > brief.schema.json",),
    "eval": ("briefd eval docs.json", "briefd eval docs.json --json --model gemma3:270m > gemma.json",
             "briefd eval docs.json --work eval-runs        # keep the runs, to judge them again",
             "briefd eval docs.json --from-store eval-runs/briefd.db",
             "briefd eval --vectors our-sentences.json --json  # the rules alone, on cases of real text"),
    "serve": ("briefd serve                                  # http://127.0.0.1:8765/: loopback, no token",
              "briefd serve --config /etc/briefd/briefd.toml   # serve_host and serve_token_file set there",
              "briefd serve --inbox /srv/briefd/inbox --outbox /srv/briefd/outbox --db /srv/briefd/briefd.db"),
    "datasette": (DATASETTE_COMMAND,),
    "config": ("briefd config", "briefd config --json", "briefd config --config /etc/briefd/briefd.toml"),
    "library": ("briefd library status", "briefd library search \"gusset plate\"", "briefd library reindex"),
    "library status": ("briefd library status",),
    "library search": ("briefd library search \"gusset plate\"", "briefd library search \"gusset plate\" --limit 20"),
    "library reindex": ("briefd library reindex",),
}


def settings_pointer() -> str:
    """A command's --help: one line on the setting flags it accepts, instead of repeating them all."""
    flags = ", ".join([*(row["flag"] for row in setting_flags()), "--config", "-v"])
    return (f"settings: {flags} work here too (before or after the command); `briefd --help` says what each "
            f"is, `briefd config` shows the values in use and where each came from")


def command_help(command: str) -> dict[str, Any]:
    """add_parser's keywords for `command`: its --help ends with the settings pointer and its examples."""
    examples = "\n".join(f"  {line}" for line in EXAMPLES.get(command, ()))
    epilog = textwrap.fill(settings_pointer(), width=78) + (f"\n\nexamples:\n{examples}" if examples else "")
    return {"parents": [_quiet_settings()], "epilog": epilog,
            "formatter_class": argparse.RawDescriptionHelpFormatter}


def _setting_arguments(parser: argparse.ArgumentParser | Any, shown: bool) -> None:
    """The setting flags, from settings.py's table; `shown` False: accepted, left out of --help."""
    for row in setting_flags():
        # SUPPRESS: a flag given before the subcommand must not be reset by the subcommand's default.
        # Values stay strings: load_settings is the one validator (its errors name the flag and the fix).
        parser.add_argument(row["flag"], dest=row["name"], default=argparse.SUPPRESS,
                            help=f"{row['help']} (env {row['env']}, default {row['default']})"
                            if shown else argparse.SUPPRESS)
    parser.add_argument("--config", dest="config", default=argparse.SUPPRESS,
                        help=f"briefd.toml to read (env {CONFIG_VARIABLE}, default ./briefd.toml if present)"
                        if shown else argparse.SUPPRESS)
    parser.add_argument("-v", "--verbose", action="store_true", default=argparse.SUPPRESS,
                        help="debug logging (the log_level setting, set to debug)" if shown else argparse.SUPPRESS)


def _paragraphs(text: str) -> str:
    """A long --help description wrapped to the terminal's 78 columns, paragraph by paragraph."""
    return "\n\n".join(textwrap.fill(part, width=78) for part in text.split("\n\n"))


def _quiet_settings() -> argparse.ArgumentParser:
    quiet = argparse.ArgumentParser(add_help=False)
    _setting_arguments(quiet, shown=False)
    return quiet


def build_parser() -> argparse.ArgumentParser:
    """`briefd --help` lists every setting; a command's --help its own options, a pointer and examples."""
    common = argparse.ArgumentParser(add_help=False)
    _setting_arguments(common.add_argument_group("settings (flag > environment > briefd.toml > default)"),
                       shown=True)

    parser = argparse.ArgumentParser(
        prog="briefd", parents=[common], epilog=other_settings_help(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Offline-first research daemon: drop a JSON brief into the inbox, get a cited report.",
    )
    parser.add_argument("--version", action="version", version=f"briefd {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    run = sub.add_parser("run", **command_help("run"), help="the daemon (foreground; --once for cron)")
    run.add_argument("--once", action="store_true",
                     help="take everything in the inbox, resume interrupted briefs, finish them all, exit 0")
    once = next(row for row in settings_table() if row["name"] == "once_patience_s")
    run.add_argument("--once-patience-s", dest="once_patience_s", default=None, metavar="SECONDS",
                     help=f"with --once: give up on a service down this long, leave its briefs queued and exit 3 "
                          f"(the once_patience_s setting; default {once['default']})")
    submit = sub.add_parser("submit", **command_help("submit"), help="validate briefs and put them into the inbox")
    submit.add_argument("files", nargs="+", type=Path, metavar="FILE")
    status = sub.add_parser("status", **command_help("status"), help="queue counts and running briefs")
    status.add_argument("--json", action="store_true", help="machine-readable output")
    show = sub.add_parser("show", **command_help("show"), help="a finished report, or a brief's event log")
    show.add_argument("id")
    show.add_argument("--events", action="store_true", help="print the event log instead of the report")
    retry = sub.add_parser("retry", **command_help("retry"), help="re-queue a failed or cancelled brief")
    retry.add_argument("id")
    cancel = sub.add_parser("cancel", **command_help("cancel"), help="stop a queued or running brief")
    cancel.add_argument("id")
    listing = sub.add_parser("list", **command_help("list"),
                             help="the briefs researched, queued and running, newest first")
    listing.add_argument("--json", action="store_true", help="machine-readable output")
    listing.add_argument("--state", help="only briefs in this state (queued, running, done, failed, cancelled; "
                                         "rejected lists the files refused)")
    listing.add_argument("--kind", help="only briefs of this kind (plain, estimate, hypothesis)")
    listing.add_argument("--since", metavar="DATE", help="only runs finished on or after DATE (or not finished)")
    listing.add_argument("--until", metavar="DATE", help="only runs accepted on or before DATE")
    listing.add_argument("--limit", metavar="N", help="show at most N, newest first")
    listing.add_argument("--runs", action="store_true", help="every run, not only each brief's latest")
    found = sub.add_parser("search", **command_help("search"),
                           help="questions, answers, summaries and evidence quotes of the briefs researched")
    found.add_argument("text", nargs="+", metavar="TEXT", help="words to look for (quotes not needed)")
    found.add_argument("--json", action="store_true", help="machine-readable output")
    found.add_argument("--limit", metavar="N", help="show at most N results, best first")
    sub.add_parser("serve", **command_help("serve"),
                   help="the HTTP API and the web page (loopback by default; serve_* settings)")
    sub.add_parser("check", **command_help("check"), help="probe Ollama, SearXNG, folders and the database")
    sub.add_parser("schema", **command_help("schema"), help="print the brief JSON Schema")
    config = sub.add_parser("config", **command_help("config"),
                            help="the settings in use and where each came from (flag, environment, file, default)")
    config.add_argument("--json", action="store_true", help="machine-readable output")
    sub.add_parser("datasette", **command_help("datasette"),
                   help="print datasette metadata for the store (what every table, column and canned query means)",
                   description=f"Print datasette metadata for the store (--db) on stdout. Open the store with "
                               f"it (datasette is in the lab extra, or `pip install datasette`):\n\n"
                               f"  {DATASETTE_COMMAND}")
    evaluation = sub.add_parser(
        "eval", **command_help("eval"), help="run an eval set's briefs and measure their answers, stage by stage",
        description=_paragraphs(
                    "Run the briefs of FILE (each with what a right answer is: text patterns, a number with its "
                    "unit, a verdict) as `briefd run --once` would, with the same settings (model, SearXNG, "
                    "library, archives, egress), and print per brief and in total: the answer in a kept quote, in "
                    "the answer line, the truth in the final range and its width, the verdict, quotes verbatim, "
                    "invented citations, tokens and wall time; and for each miss the first stage that lost it "
                    "(search, read, extract, shown, chosen, refused with the rule, reported).\n\n"
                    "The briefs run in a work folder of their own (an inbox, an outbox, a fresh store), never the "
                    "daemon's: removed afterwards unless --keep or --work. --db given as a flag records the runs in "
                    "that store instead (its library index and caches are used; a store named by the environment "
                    "or briefd.toml is not). --from-store judges the latest run of each brief in a store without "
                    "running anything."))
    evaluation.add_argument("file", type=Path, metavar="FILE", nargs="?",
                            help="the eval set (JSON: {name, briefs: [...]})")
    evaluation.add_argument("--vectors", type=Path, metavar="FILE",
                            help="score the rules on a rule-vector file (briefd-rule-vectors/1) instead: "
                                 "no brief runs, no service is needed")
    evaluation.add_argument("--json", action="store_true", help="machine-readable output (its shape: docs/eval.md)")
    evaluation.add_argument("--work", type=Path, metavar="DIR",
                            help="run in this folder (inbox, outbox, briefd.db) and keep it")
    evaluation.add_argument("--keep", action="store_true", help="keep the temporary work folder and say where")
    evaluation.add_argument("--from-store", dest="from_store", type=Path, metavar="DB",
                            help="judge the runs already in this store; run nothing")
    evaluation.add_argument("--fresh", action="store_true",
                            help="ask the model every call anew: answers a store (--db) kept from earlier runs are "
                                 "not replayed (REPLAYED counts the calls that were)")
    library = sub.add_parser("library", **command_help("library"), help="the local library: status, search, reindex")
    actions = library.add_subparsers(dest="action", metavar="ACTION", required=True)
    actions.add_parser("status", **command_help("library status"),
                       help="folders, files indexed, pending, refused (with reasons)")
    lsearch = actions.add_parser("search", **command_help("library search"),
                                 help="what briefd would find in the library")
    lsearch.add_argument("text")
    lsearch.add_argument("--limit", metavar="N", help="show at most N passages, best first (a few from one document)")
    actions.add_parser("reindex", **command_help("library reindex"),
                       help="read every file again (a running daemon does it on its next scan)")
    return parser


def load(args: argparse.Namespace) -> Settings:
    flags = {row["name"]: getattr(args, row["name"], None) for row in setting_flags()}
    flags["once_patience_s"] = getattr(args, "once_patience_s", None)  # `briefd run`'s own setting flag
    config = Path(args.config) if getattr(args, "config", None) else None
    return load_settings(flags, os.environ, config)


def main(argv: Sequence[str] | None = None) -> int:
    """`briefd`: the command, its output flushed here, so a reader that stops early (`briefd schema | head`)
    ends it quietly instead of with a BrokenPipeError traceback (the Python documentation's recipe:
    stdout pointed at /dev/null, so the flush at exit cannot fail again). After `briefd run` the command
    ends without the interpreter's teardown (launch.exit_now): the daemon has closed all it opened."""
    try:
        try:
            code = command(argv)
        finally:
            sys.stdout.flush()  # here, inside the try: at interpreter exit it would print "Exception ignored"
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_PIPE_CLOSED
    if argv is None and launch.daemon_ended:  # the `briefd` command itself, after `briefd run`: no teardown
        launch.exit_now(code)
    return code


def command(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if getattr(args, "verbose", False) else logging.INFO,
        format="%(asctime)s briefd %(levelname)s %(message)s", stream=sys.stderr,
    )
    for noisy in ("httpx", "httpcore", "watchdog"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    if args.command is None:
        parser.print_help()
        return EXIT_USAGE
    if args.command == "schema":
        print(json.dumps(load_schema(), indent=2))
        return EXIT_OK
    try:
        settings = load(args)
        if args.command in ("run", "check", "eval", "serve"):
            openai_key(settings)  # a key file that cannot be used is said now, not at the first model call
    except SettingsError as exc:
        print(f"briefd: {exc}", file=sys.stderr)
        return EXIT_USAGE
    apply_settings(settings, verbose=getattr(args, "verbose", False))
    handler = {
        "run": cmd_run, "submit": cmd_submit, "status": cmd_status, "show": cmd_show,
        "retry": cmd_retry, "cancel": cmd_cancel, "check": cmd_check, "library": cmd_library,
        "list": cmd_list, "search": cmd_search, "serve": cmd_serve, "datasette": cmd_datasette,
        "config": cmd_config, "eval": cmd_eval,
    }[args.command]
    try:
        return handler(settings, args)
    except Exception as exc:  # a failing store (damaged, full, locked too long): exit 3; else re-raised
        code = store_failure(settings, exc, "use")
        if code is None:
            raise
        return code


def apply_settings(settings: Settings, verbose: bool) -> None:
    """What a setting changes for the whole process: the log level (-v wins: debug) and the
    mode of every file briefd creates (files.use_file_mode)."""
    # settings.LOG_LEVELS are the logging module's own level names, lower-cased
    logging.getLogger().setLevel(logging.DEBUG if verbose else settings.log_level.upper())
    use_file_mode(settings.file_mode)
    log.debug("settings: config file %s; inbox %s; outbox %s; db %s; model %s at %s; SearXNG %s; file mode %s",
              settings.config_file or "none", settings.inbox, settings.outbox, settings.db, settings.model,
              settings.ollama_host, settings.searxng_url,
              "the umask's" if settings.file_mode is None else f"{settings.file_mode:04o}")


def cmd_config(settings: Settings, args: argparse.Namespace) -> int:
    """`briefd config`: every setting's value in use and where it came from (settings.effective_settings)."""
    rows = effective_settings(settings)
    config_file = str(settings.config_file) if settings.config_file else None
    if args.json:
        print(json.dumps({"config_file": config_file, "settings": rows}, indent=2, ensure_ascii=False))
        return EXIT_OK
    print(f"briefd.toml: {config_file or f'none (no --config, {CONFIG_VARIABLE} unset, no ./briefd.toml)'}")
    print(_aligned(["SETTING", "VALUE", "FROM"], [[row["name"], row["shown"], row["from"]] for row in rows]))
    return EXIT_OK


def cmd_run(settings: Settings, args: argparse.Namespace) -> int:
    from ..core.files import Locked

    api_errors: tuple[type[Exception], ...] = ()  # the HTTP API's, when it runs inside (serve = true)
    if settings.serve and not args.once:  # the API's settings checked before anything starts
        from .access import ServeError, access_for

        api_errors = (ServeError,)
        try:
            access_for(settings)
        except ServeError as exc:
            print(f"briefd: {exc}", file=sys.stderr)
            return exc.exit_code
    try:
        return asyncio.run(launch.run_daemon(settings, once=args.once))  # page readers first (launch.py)
    except Locked as exc:
        print(f"briefd: {exc}", file=sys.stderr)
        return EXIT_UNAVAILABLE
    except api_errors as exc:  # its port cannot be had: said with the fix
        print(f"briefd: {exc}", file=sys.stderr)
        return getattr(exc, "exit_code", EXIT_UNAVAILABLE)
    except Exception as exc:  # a store failure or a path it cannot use: exit 3; else re-raised
        code = store_failure(settings, exc, "use")
        if code is not None:
            return code
        if isinstance(exc, OSError):
            print(f"briefd: cannot use {exc.filename or 'a required path'}: {exc.strerror or exc}", file=sys.stderr)
            return EXIT_UNAVAILABLE
        raise


def cmd_eval(settings: Settings, args: argparse.Namespace) -> int:
    """`briefd eval FILE`: the eval set's briefs run and judged (daemon/ops/eval_run.py); exit 2 for a file that
    cannot be used, 3 when a service stayed down (the briefs it held are listed as not run)."""
    from .evaluate import EvalFileError
    from .eval_run import EvalWorkError, evaluate_file, not_a_store, table
    from ..core.files import Locked

    if args.vectors is not None or args.file is None:
        return cmd_vectors(args)
    if args.from_store is not None and (why := not_a_store(args.from_store)) is not None:
        print(f"briefd: --from-store {args.from_store} {why}: name the briefd.db an earlier eval kept "
              f"(--keep, or --work DIR: DIR/briefd.db)", file=sys.stderr)
        return EXIT_USAGE
    if not getattr(args, "verbose", False):  # the daemon's event lines (-v shows them); warnings stay
        logging.getLogger("briefd").setLevel(max(logging.WARNING, logging.getLogger().getEffectiveLevel()))
    try:
        result = evaluate_file(settings, args.file, work=args.work, keep=args.keep, from_store=args.from_store,
                               fresh=args.fresh)
    except Locked as exc:  # a daemon already runs on the store --db names
        print(f"briefd: {exc}", file=sys.stderr)
        return EXIT_UNAVAILABLE
    except OSError as exc:
        print(f"briefd: cannot read {exc.filename or args.file}: {exc.strerror or exc}", file=sys.stderr)
        return EXIT_USAGE
    except (EvalFileError, EvalWorkError) as exc:
        print(f"briefd: {exc}", file=sys.stderr)
        return EXIT_USAGE
    print(json.dumps(result, indent=2, ensure_ascii=False) if args.json else table(result))
    return EXIT_OK if result["exit"] == EXIT_OK else EXIT_UNAVAILABLE


def cmd_vectors(args: argparse.Namespace) -> int:
    """`briefd eval --vectors FILE`: the rules scored on cases of real text (daemon/ops/vectors.py); exit 2 for a
    file that cannot be used, naming the case, the key and the fix."""
    from ..core.jsontext import NestedTooDeep, load_json
    from .vectors import VectorFileError, parse_vectors, score, table

    if args.vectors is None or args.file is not None:
        print("briefd: eval takes an eval set FILE or --vectors FILE, one of the two", file=sys.stderr)
        return EXIT_USAGE
    try:
        name, cases = parse_vectors(load_json(args.vectors.read_text(encoding="utf-8")))
    except OSError as exc:
        print(f"briefd: cannot read {exc.filename or args.vectors}: {exc.strerror or exc}", file=sys.stderr)
        return EXIT_USAGE
    except NestedTooDeep as exc:  # the rule briefs and eval sets have (core/jsontext.py), named by case
        item = exc.item_of("cases")
        print(f"briefd: {args.vectors}{f', case {item}' if item else ''}: {exc}; a case is a few levels deep "
              f"(its \"expect\", \"contract\" or \"reading\" object): remove the extra brackets", file=sys.stderr)
        return EXIT_USAGE
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        print(f"briefd: {args.vectors} is not UTF-8 JSON ({exc}): fix the file", file=sys.stderr)
        return EXIT_USAGE
    except VectorFileError as exc:
        print(f"briefd: {args.vectors}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    result = score(name, cases)
    print(json.dumps(result, indent=2, ensure_ascii=False) if args.json else table(result))
    return EXIT_OK


def cmd_serve(settings: Settings, args: argparse.Namespace) -> int:
    """`briefd serve`: the HTTP API alone (daemon.serve); `serve = true` runs it inside `briefd run` instead."""
    from .access import ServeError
    from .serve import serve_forever

    try:
        return serve_forever(settings)
    except ServeError as exc:
        print(f"briefd: {exc}", file=sys.stderr)
        return exc.exit_code


def cmd_submit(settings: Settings, args: argparse.Namespace) -> int:
    """Validate every file first; write nothing unless all are valid (daemon.actions: the API's door too)."""
    from .actions import check_brief, drop_into_inbox, unserved_inbox
    from ..core.files import TooLarge, read_file_at_most

    prepared: list[tuple[Path, bytes]] = []
    ids: list[str] = []
    for path in args.files:
        try:
            data = read_file_at_most(path, MAX_BRIEF_BYTES)
        except OSError as exc:
            print(f"briefd: {path}: cannot read: {exc.strerror or exc}", file=sys.stderr)
            return EXIT_USAGE
        except TooLarge as exc:
            print(f"briefd: {path}: {too_large(exc.size)}", file=sys.stderr)
            return EXIT_USAGE
        try:
            brief = check_brief(settings, data, path.name, ahead=ids)  # a follow-up may name an earlier file's id
        except BriefError as exc:
            print(f"briefd: {path}: {exc}", file=sys.stderr)
            return EXIT_USAGE
        prepared.append((path, data))
        ids.append(brief.id)
    inbox = Path(settings.inbox)
    if (unserved := unserved_inbox(settings)) is not None:
        print(f"briefd: warning: {unserved}", file=sys.stderr)  # still exit 0: run --once takes it later
    try:
        dropped: Path | None = None
        for path, data in prepared:
            dropped = drop_into_inbox(inbox, path.name, data, after=dropped)  # taken in this order
            print(dropped)
    except OSError as exc:
        print(f"briefd: cannot write into the inbox {inbox}: {exc.strerror or exc}", file=sys.stderr)
        return EXIT_UNAVAILABLE
    return EXIT_OK


def _open_store(settings: Settings) -> Store | None:
    from .status import open_store

    return open_store(settings)


def daemon_line(daemon: dict[str, Any]) -> str:
    if daemon["running"]:
        return f"daemon: running (pid {daemon['pid'] or 'unknown'})"
    if daemon["running"] is None:
        return f"daemon: cannot tell whether one is running (lock {daemon['lock']} is not readable)"
    last = f"; the last one was pid {daemon['pid']}" if daemon["pid"] else ""
    return f"daemon: not running{last} (start it: briefd run, or systemctl start briefd)"


def store_failure(settings: Settings, exc: BaseException, doing: str) -> int | None:
    """A command's store failure as the user should meet it: what, why and the fix, exit 3
    (None: not a store failure, a bug to raise as it is)."""
    from ...store import StoreUnavailable, diagnose

    problem = diagnose(exc, Path(settings.db))
    if problem is None:
        return None
    # a failure that names its store (eval's own, --from-store's) is that store's, not the daemon's
    path = exc.path if isinstance(exc, StoreUnavailable) else settings.db
    print(f"briefd: cannot {doing} the store {path}: it {problem.reason}; to fix: {problem.fix}",
          file=sys.stderr)
    return EXIT_UNAVAILABLE


def cmd_status(settings: Settings, args: argparse.Namespace) -> int:
    from .status import status_data

    try:
        data = status_data(settings)
    except Exception as exc:
        code = store_failure(settings, exc, "read")
        if code is None:
            raise
        return code
    if args.json:
        print(json.dumps(data, indent=2))
        return EXIT_OK
    counts = data["counts"]
    print(daemon_line(data["daemon"]))
    if not data["exists"]:
        print(f"no database yet at {settings.db}: nothing has been accepted")
        _print_not_briefs(data["inbox_not_briefs"])
        return EXIT_OK
    print("  ".join(f"{state}: {n}" for state, n in counts.items()))
    for run in data["running"]:
        state = f"running ({run['note']})" if run["note"] else "running"
        line = f"{state} {run['id']} (run {run['run_number']}): round {run['round']}, {run['phase']}"
        if run["next_action"]:
            line += f"; next: {run['next_action']} ({run['why']})"
        left = {k: v for k, v in (run.get("remaining") or {}).items() if v is not None}
        if left:
            line += "; left: " + ", ".join(f"{number_text(v)} {k}" for k, v in left.items())
        if run["estimate"]:
            est = run["estimate"]
            line += f"; range {span_text(est['low'], est['high'], '..')} (progress {est['progress_score']:.2f})"
        if run["waiting_for"]:
            line += f"; WAITING for {run['waiting_for']}"
        print(line)
    for run in data["queued"]:
        waits = f"; WAITING for {run['waiting_for']}" if run["waiting_for"] else ""
        print(f"queued  {run['id']} (run {run['run_number']}) since {run['accepted_at']}{waits}")
    for each in data["series"]:
        print(series_line(each))
    _print_not_briefs(data["inbox_not_briefs"])
    return EXIT_OK


def _print_not_briefs(names: list[str]) -> None:
    """`briefd status`'s line on what sits in the inbox and is never taken (the daemon says it once too)."""
    if names:
        entries = "entry that is not a brief" if len(names) == 1 else "entries that are not briefs"
        shown = ", ".join(names[:STRAYS_SHOWN]) + (f" and {len(names) - STRAYS_SHOWN} more"
                                                   if len(names) > STRAYS_SHOWN else "")
        print(_one_line(f"inbox: {len(names)} {entries}: {shown} (only *.json files are taken; "
                        f"move the others out of the inbox)"))


STRAYS_SHOWN = 10  # names on `briefd status`'s inbox line; `status --json` has them all


def cmd_list(settings: Settings, args: argparse.Namespace) -> int:
    """`briefd list`: store.history's rows, as a table or JSON (the HTTP API's `GET /briefs` objects)."""
    from ...store.history import HistoryError, list_query
    from .status import from_history, state_cell

    try:
        query = list_query(state=args.state, kind=args.kind, since=args.since, until=args.until,
                           limit=args.limit, runs=args.runs)
    except HistoryError as exc:
        print(f"briefd: {exc}", file=sys.stderr)
        return EXIT_USAGE
    entries = from_history(settings, lambda history: history.briefs(query))
    if entries is None:
        return _no_history(settings, args.json)
    if args.json:
        return _print_json(entries)
    if not entries:
        print("no briefs match these filters" if _filtered(args) else "no briefs yet")
        return EXIT_OK
    schedules = any(entry.next_run_at for entry in entries)
    headers = ["ID", "STATE", "KIND", "RUNS", "ACCEPTED", "FINISHED", *(["NEXT RUN"] if schedules else []), "ANSWER"]
    rows = [[entry.id, state_cell(entry), entry.kind or "-", str(entry.runs), _minute(entry.accepted_at),
             _minute(entry.finished_at), *([_minute(entry.next_run_at)] if schedules else []),
             entry.answer or entry.error or ""] for entry in entries]
    print(_aligned(headers, rows))
    return EXIT_OK


def cmd_search(settings: Settings, args: argparse.Namespace) -> int:
    """`briefd search TEXT`: store.history's hits, best first (the HTTP API's `GET /search?q=` objects)."""
    from ...store.history import DEFAULT_SEARCH_LIMIT, HistoryError, check_limit, search_words
    from .status import from_history

    text = " ".join(args.text)
    try:
        search_words(text)
        limit = check_limit(args.limit, DEFAULT_SEARCH_LIMIT)
    except HistoryError as exc:
        print(f"briefd: {exc}", file=sys.stderr)
        return EXIT_USAGE
    hits = from_history(settings, lambda history: history.search(text, limit))
    if hits is None:
        return _no_history(settings, args.json)
    if args.json:
        return _print_json(hits)
    if not hits:
        print(_one_line(f"nothing researched matches {text!r}"))
        return EXIT_OK
    for n, hit in enumerate(hits, 1):
        print(_one_line(f"{n}. {hit.id} (run {hit.run}, {_minute(hit.at)}) {hit.matched}: {hit.snippet}"))
        if hit.url:
            print("   " + _one_line(f"{hit.title} <{hit.url}>" if hit.title else hit.url))
    return EXIT_OK


def _print_json(items: list[Any]) -> int:
    """A list of store.history objects as JSON: what the HTTP API serves too."""
    print(json.dumps([item.to_json() for item in items], indent=2, ensure_ascii=False))
    return EXIT_OK


def _no_history(settings: Settings, as_json: bool) -> int:
    """No store yet: nothing was ever accepted (as `briefd status` says); scripts get an empty list."""
    message = f"no database yet at {settings.db}: nothing has been accepted"
    if as_json:
        print("[]")
        print(f"briefd: {message}", file=sys.stderr)
    else:
        print(message)
    return EXIT_OK


def _filtered(args: argparse.Namespace) -> bool:
    return any(getattr(args, name) is not None for name in ("state", "kind", "since", "until"))


def _minute(stamp: str | None) -> str:
    """A store timestamp as a table shows it: 2026-11-24 06:00 (UTC)."""
    return stamp[:16].replace("T", " ") if stamp else "-"


def _one_line(text: str) -> str:
    """Stored text (questions, answers, quotes: untrusted) on one terminal line, escaped as `briefd show` does."""
    from ..core.untrusted import terminal_text

    return terminal_text(" ".join(text.split()))


def _aligned(headers: list[str], rows: list[list[str]]) -> str:
    """A plain table: columns padded to their widest cell, the last one left ragged."""
    cells = [headers, *([_one_line(cell) for cell in row] for row in rows)]
    widths = [max(len(row[n]) for row in cells) for n in range(len(headers) - 1)]
    return "\n".join("  ".join([*(cell.ljust(width) for cell, width in zip(row, widths)), row[-1]]).rstrip()
                     for row in cells)


def series_line(each: dict[str, Any]) -> str:
    """An active series in `briefd status`: when it runs next, how often it ran, its last run."""
    from ..core.untrusted import terminal_text

    runs = f"{each['runs']} run{'' if each['runs'] == 1 else 's'} so far"
    last = (f", last {each['last_run_at']} (run {each['last_run']}, {each['last_run_state']})"
            if each["last_run"] is not None else "")
    return terminal_text(f"series  {each['id']} every {each['every']}: next run {each['next_run_at']}; {runs}{last}")


def cmd_show(settings: Settings, args: argparse.Namespace) -> int:
    from ..report.outbox import safe_outdir
    from ..core.untrusted import terminal_text

    try:
        outdir = safe_outdir(Path(settings.outbox), args.id)
    except ValueError as exc:
        print(f"briefd: {exc}", file=sys.stderr)
        return EXIT_USAGE
    for name in ("events.ndjson",) if args.events else ("report.md", "report.json", "error.json"):
        path = outdir / name
        if path.exists():
            sys.stdout.write(terminal_text(path.read_text(encoding="utf-8", errors="replace")))
            return EXIT_OK
    store = _open_store(settings)
    run = None
    if store is not None:
        try:
            run = store.latest_run(args.id)
        finally:
            store.close()
    print(f"briefd: {terminal_text(nothing_to_show(args.id, run, outdir, settings.db, args.events))}",
          file=sys.stderr)
    return EXIT_USAGE


def nothing_to_show(brief_id: str, run: BriefRow | None, outdir: Path, db: Path, events: bool) -> str:
    """Why `briefd show` has nothing to print: no brief has this id (and how to find the ids), or the
    brief has no report yet (its state, and where to follow it), or its files are not where they should be."""
    from ...store import QUEUED, RUNNING

    what = "event log" if events else "report"
    if run is None:
        return (f"there is no brief with id '{brief_id}' (nothing in {outdir}, none in the database {db}); "
                f"`briefd list` shows the ids (`briefd list --state rejected` the files refused)")
    if run.state == QUEUED:
        waits = f", waiting for {run.waiting_for}" if run.waiting_for else ""
        return (f"'{brief_id}' has no {what} yet: it is queued (since {_minute(run.accepted_at)}{waits}); "
                f"`briefd status` shows the queue")
    if run.state == RUNNING:
        follow = "`briefd status` shows its round" if events else \
            f"`briefd show {brief_id} --events` shows its progress, `briefd status` its round"
        return (f"'{brief_id}' has no {what} yet: it is running (since {_minute(run.started_at)}); {follow}")
    return (f"'{brief_id}' is {run.state}, but its {what} is not in {outdir}: was it moved or deleted, or does "
            f"--outbox point at another folder than the daemon's?")


def cmd_retry(settings: Settings, args: argparse.Namespace) -> int:
    from .actions import retry

    return _told(retry(settings, args.id))


def cmd_cancel(settings: Settings, args: argparse.Namespace) -> int:
    from .actions import cancel

    return _told(cancel(settings, args.id))


def _told(outcome: Outcome) -> int:
    """An actions.Outcome as the CLI says it: its lines on stdout when it worked (exit 0), else on stderr (exit 2)."""
    for line in outcome.lines:
        print(line if outcome.ok else f"briefd: {line}", file=sys.stdout if outcome.ok else sys.stderr)
    return EXIT_OK if outcome.ok else EXIT_USAGE


def cmd_datasette(settings: Settings, args: argparse.Namespace) -> int:
    """The store's datasette metadata, keyed by the name datasette gives the configured --db."""
    from ...store.browse import metadata_for

    print(json.dumps(metadata_for(settings.db), indent=2, ensure_ascii=False))
    return EXIT_OK


def cmd_check(settings: Settings, args: argparse.Namespace) -> int:
    from .checks import run_checks

    problems = 0
    for ok, message, fix in asyncio.run(run_checks(settings, decoding=True)):
        print(f"{'ok  ' if ok else 'FAIL'} {message}")
        if not ok:
            problems += 1
            if fix:
                print(f"     fix: {fix}")
    return EXIT_OK if problems == 0 else EXIT_UNAVAILABLE


NO_LIBRARY = ("no library configured: set `library` to folders of documents (BRIEFD_LIBRARY, folders "
              "separated by ':', or `library = [...]` in briefd.toml)")


def cmd_library(settings: Settings, args: argparse.Namespace) -> int:
    if not settings.library:
        if args.action == "status":
            print(NO_LIBRARY)
            return EXIT_OK
        print(f"briefd: {NO_LIBRARY}", file=sys.stderr)
        return EXIT_USAGE
    return {"status": _library_status, "search": _library_search, "reindex": _library_reindex}[args.action](
        settings, args)


def _library_status(settings: Settings, args: argparse.Namespace) -> int:
    from ..sources import library
    from ..core.untrusted import terminal_text

    store = _open_store(settings)
    try:
        data = library.status(store, settings.library)
    finally:
        if store is not None:
            store.close()
    for folder in data["folders"]:
        state = f"NOT READABLE ({folder['problem']})" if folder["problem"] else "readable"
        print(terminal_text(f"folder {folder['path']}: {state}; last scan {folder['scanned_at'] or 'never'}"))
    print("  ".join(f"{state}: {n}" for state, n in data["counts"].items()) or "not indexed yet",
          f"({data['passages']} passages)" if data["counts"] else "")
    for kind in ("refused", "pending"):
        for row in data[kind]:
            print(terminal_text(f"{kind} {row['path']}: {row['reason']}"))
    return EXIT_OK


def _library_search(settings: Settings, args: argparse.Namespace) -> int:
    from ..sources import library
    from ..core.untrusted import terminal_text
    from ...store.history import HistoryError, check_limit
    from ...store.library import LIBRARY_SEARCH_LIMIT, PASSAGES_PER_DOCUMENT

    try:
        limit = check_limit(args.limit, LIBRARY_SEARCH_LIMIT)
    except HistoryError as exc:
        print(f"briefd: {exc}", file=sys.stderr)
        return EXIT_USAGE
    store = _open_store(settings)
    if store is None:
        print(f"briefd: the library is not indexed yet (no database at {settings.db}): run `briefd library "
              f"reindex` or `briefd run`", file=sys.stderr)
        return EXIT_USAGE
    try:
        hits = library.find(store, args.text, limit, PASSAGES_PER_DOCUMENT)
    finally:
        store.close()
    if not hits:
        print("nothing in the library matches")
    for n, hit in enumerate(hits, 1):
        page = f", p. {hit.page}" if hit.page is not None else ""
        print(terminal_text(f"{n}. {hit.title} ({hit.path}{page})"))
        print(terminal_text(f"   {library.snippet(hit.text)}"))
    return EXIT_OK


def _library_reindex(settings: Settings, args: argparse.Namespace) -> int:
    from ...store import Store

    from ..sources import library

    store = Store(settings.db)
    try:
        print(library.reindex(store, settings.library, Path(settings.db)))
    finally:
        store.close()
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
