"""Every flag briefd's words name is one briefd accepts (issue 19 #14).

With its port taken, `briefd serve` said "set serve_port (--serve-port, BRIEFD_SERVE_PORT)", and
`--serve-port` was "unrecognized arguments": a fix that cannot be followed. This walks every string
literal of the product (daemon/ and store/: messages, help, docstrings; an f-string read whole,
its fields as a word), finds each `--flag`, and asks the real argparse parser: a flag must be an
option of some briefd command, and one written after `briefd <command>` an option of that
command. The other programs' flags briefd names (datasette's, the on_finish example's) are listed
below with the program their text must name.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from briefd.daemon.ops.cli import build_parser

ROOT = Path(__file__).resolve().parents[2]
SOURCES = sorted([*ROOT.joinpath("daemon").rglob("*.py"), *ROOT.joinpath("store").glob("*.py")])
FLAG = re.compile(r"(?<![\w-])--[a-z][a-z0-9]*(?:-[a-z0-9]+)*")
# `briefd <command> words...`: the words up to the end of the command as written (a code span's
# backtick, a quote, a shell operator or comment, a closing bracket, the end of the line)
COMMAND_LINE = re.compile(r"\bbriefd ((?:library )?[a-z]+)([^`'\"\n;|&>#)]*)")
# Flags of other programs that briefd's text names, and the word their text must also hold.
FOREIGN = {"--metadata": "datasette", "--to": "notify",
           # a manual's own options, quoted where the rules and the extraction cite real documents
           "--max-redirs": "curl", "--hashsize": "m4", "--auto": "git", "--blocking-factor": "BLOCKS",
           "--keepalive-time": "curl"}


def parsers() -> dict[str, Any]:
    """Each command's parser by its name ("run", "library status"), and "" for `briefd` itself."""
    found: dict[str, Any] = {}

    def walk(parser: Any, name: str) -> None:
        found[name] = parser
        for action in parser._actions:
            if action.__class__.__name__ == "_SubParsersAction":
                for child_name, child in action.choices.items():
                    walk(child, f"{name} {child_name}".strip())

    walk(build_parser(), "")
    return found


def options(parser: Any) -> set[str]:
    return {option for action in parser._actions for option in action.option_strings}


PARSERS = parsers()
ANY_COMMAND = set().union(*(options(parser) for parser in PARSERS.values()))


def texts(path: Path) -> Iterator[tuple[int, str]]:
    """(line, text) of every string literal in `path`; an f-string whole, each field written X."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    inside_fstrings: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            inside_fstrings.update(id(part) for part in node.values)
            yield node.lineno, "".join(part.value if isinstance(part, ast.Constant) else "X" for part in node.values)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in inside_fstrings:
            yield node.lineno, node.value


def wrong_flags(text: str) -> list[str]:
    """What is wrong with the flags `text` names: one no briefd command has, one its command lacks."""
    wrong = []
    for flag in FLAG.findall(text):
        if flag in FOREIGN:
            if FOREIGN[flag] not in text:
                wrong.append(f"{flag} (another program's flag, but the text does not name {FOREIGN[flag]})")
        elif flag not in ANY_COMMAND:
            wrong.append(f"{flag} (no briefd command has it)")
    for command, words in COMMAND_LINE.findall(text):
        parser = PARSERS.get(command)
        if parser is None:
            continue  # "briefd is ..." and the like: prose, not a command line
        wrong += [f"{flag} (not an option of `briefd {command}`)" for flag in FLAG.findall(words)
                  if flag not in options(parser)]
    return wrong


def test_the_check_finds_a_flag_that_does_not_exist() -> None:
    """The walk below can fail: the message of issue 19 #14, and a real flag on the wrong command."""
    assert wrong_flags("set serve_port (--serve-port, BRIEFD_SERVE_PORT)") == [
        "--serve-port (no briefd command has it)"]
    assert wrong_flags("`briefd list --events` shows it") == ["--events (not an option of `briefd list`)"]
    assert wrong_flags("datasette briefd.db --metadata m.json") == []
    assert wrong_flags("pass --metadata") != []
    assert wrong_flags("`briefd show X --events`, `briefd run --once --inbox /srv/in`, briefd --help") == []


@pytest.mark.parametrize("path", SOURCES, ids=lambda path: str(path.relative_to(ROOT)))
def test_every_flag_a_message_names_exists(path: Path) -> None:
    wrong = [f"{path.relative_to(ROOT)}:{line}: {problem}" for line, text in texts(path)
             for problem in wrong_flags(text)]
    assert not wrong, "a message names a flag briefd does not accept:\n" + "\n".join(wrong)


def test_the_walk_sees_the_product_s_messages() -> None:
    """The walk reads f-strings whole: a flag after a field (`briefd show {id} --events`) is checked."""
    cli = ROOT / "daemon" / "ops" / "cli.py"
    walked = [text for _, text in texts(cli)]
    assert any("`briefd show X --events`" in text for text in walked)
    assert len(SOURCES) > 30
