"""One exception tree (issue 20 #6): drawn once, at the top of daemon/core/errors.py, and true.

The drawing is what a newcomer reads to learn what briefd raises and who catches it, so it must be the
code's own tree: every class drawn exists where the drawing says, under the parent it is drawn under,
and every public exception class in daemon/ and store/ is drawn. The outage-type classes are
`ServiceUnavailable`s whose `service`, `reason` and `fix` are what the worker says while a brief waits,
so the worker catches them once.
"""

from __future__ import annotations

import ast
import errno
import importlib
import inspect
import pkgutil
import re
from pathlib import Path

import pytest

import briefd.daemon
import briefd.store
from briefd.daemon.core import errors
from briefd.daemon.core.errors import BriefdError, ServiceUnavailable
from briefd.daemon.core.files import WriteFailed
from briefd.daemon.core.retry import Transient
from briefd.daemon.model.llm import ModelMissing, ModelRefused, ServiceDown, refusal_fix
from briefd.daemon.research.run import Outage
from briefd.daemon.sources.search import FIX_JSON_FORMAT, EnginesFailing, SearchRefused, SearchUnavailable, engines_fix
from lab.servers import REPO_ROOT

DRAWN = re.compile(r"^(?P<indent> *)\* (?P<name>\w+) +(?P<where>here|[\w/]+\.py):")


def module_of(where: str) -> str:
    """A drawing's "core/files.py" as an import name; store/ and briefd/ are packages of their own ("briefd/errors.py"
    is briefd.errors), "here" is errors.py."""
    if where == "here":
        return errors.__name__
    dotted = where.removesuffix(".py").replace("/", ".")
    if dotted.startswith("briefd."):
        return dotted
    return f"briefd.{dotted}" if dotted.startswith("store.") else f"briefd.daemon.{dotted}"


def drawing() -> dict[str, tuple[type[BaseException], type[BaseException] | None]]:
    """Each drawn class by name: the class itself, and the class it is drawn under (None: the root)."""
    assert errors.__doc__ is not None
    drawn: dict[str, tuple[type[BaseException], type[BaseException] | None]] = {}
    parents: list[type[BaseException]] = []
    for line in errors.__doc__.splitlines():
        if (m := DRAWN.match(line)) is None:
            continue
        depth = len(m["indent"]) // 2
        cls = getattr(importlib.import_module(module_of(m["where"])), m["name"])
        assert cls.__module__ == module_of(m["where"]), f"{m['name']} is drawn in {m['where']}, defined elsewhere"
        drawn[m["name"]] = (cls, parents[depth - 1] if depth else None)
        parents[depth:] = [cls]
    return drawn


def public_exceptions() -> dict[str, type[BaseException]]:
    """Every exception class defined in briefd's modules whose name has no leading underscore."""
    found: dict[str, type[BaseException]] = {}
    for package in (briefd.daemon, briefd.store):
        for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
            module = importlib.import_module(info.name)
            for name, cls in inspect.getmembers(module, inspect.isclass):
                if issubclass(cls, BaseException) and cls.__module__ == info.name and not name.startswith("_"):
                    found[name] = cls
    return found


def test_the_drawing_is_the_code() -> None:
    drawn = drawing()
    assert len(drawn) > 30
    root = [name for name, (_, parent) in drawn.items() if parent is None]
    assert root == ["BriefdError"]
    for name, (cls, parent) in drawn.items():
        assert parent is None or issubclass(cls, parent), f"{name} is drawn under {parent}, its bases: {cls.__mro__}"


def test_every_public_exception_is_drawn_under_the_root() -> None:
    drawn = drawing()
    found = public_exceptions()
    assert sorted(set(found) - set(drawn)) == [], "draw the new class in daemon/core/errors.py's tree"
    assert [name for name, cls in found.items() if not issubclass(cls, BriefdError)] == []


OUTAGES = [
    # (built as its raiser builds it, the service, reason and fix the worker said before the tree)
    (ServiceDown("http://m:11434", "connection refused (after 3 attempts)"), "ollama",
     "Ollama at http://m:11434 is unavailable: connection refused (after 3 attempts)", None),
    (ModelMissing("qwen3:8b", "http://m:11434", "model not found"), "ollama",
     "model 'qwen3:8b' is not available on Ollama at http://m:11434 (model not found); run: ollama pull qwen3:8b",
     "run: ollama pull qwen3:8b"),
    (ModelRefused("http://m:11434", 403, "Forbidden"), "ollama",
     "the model server at http://m:11434 refuses briefd (HTTP 403: Forbidden; a one-word health probe was refused "
     f"too); {refusal_fix(403)}", refusal_fix(403)),
    (Outage("searxng", "SearXNG at http://s unreachable", fix=None), "searxng",
     "SearXNG at http://s unreachable", None),
    (SearchUnavailable("SearXNG at http://s answered HTTP 502"), "searxng",
     "SearXNG at http://s answered HTTP 502", None),
    (SearchRefused(403, FIX_JSON_FORMAT), "searxng", f"SearXNG answered HTTP 403: {FIX_JSON_FORMAT}", FIX_JSON_FORMAT),
    (EnginesFailing("http://s", ["bing: timeout"]), "searxng",
     "SearXNG at http://s: every engine that answered failed (bing: timeout)", engines_fix(["bing: timeout"])),
]


@pytest.mark.parametrize(("exc", "service", "reason", "fix"), OUTAGES, ids=[type(o[0]).__name__ for o in OUTAGES])
def test_an_outage_says_its_service_reason_and_fix(exc: ServiceUnavailable, service: str, reason: str,
                                                    fix: str | None) -> None:
    assert isinstance(exc, ServiceUnavailable)
    assert (exc.service, exc.reason, exc.fix) == (service, reason, fix)
    if not isinstance(exc, Outage):
        assert str(exc) == reason, "the message is unchanged by the tree"


def test_a_full_outbox_is_an_outage_and_still_an_oserror(tmp_path: Path) -> None:
    exc = WriteFailed(tmp_path / "kestrel" / "report.json", OSError(errno.ENOSPC, "No space left on device"))
    assert isinstance(exc, OSError) and exc.errno == errno.ENOSPC
    assert (exc.service, exc.reason) == ("outbox", f"[Errno 28] could not write {exc.path}: No space left on device")
    assert exc.fix == f"free space on the filesystem that holds {tmp_path / 'kestrel'}"


def test_search_outages_are_still_retried_in_the_call() -> None:
    assert issubclass(SearchUnavailable, Transient) and issubclass(EnginesFailing, Transient)
    assert not issubclass(ServiceDown, Transient), "the model's outage is retried by its transport, not again"


def test_the_worker_catches_an_outage_once() -> None:
    """Daemon.run_brief's handlers: an outage of any service is one clause, none of its kinds named."""
    tree = ast.parse((REPO_ROOT / "daemon" / "ops" / "worker.py").read_text(encoding="utf-8"))
    run_brief = next(n for n in ast.walk(tree) if isinstance(n, ast.AsyncFunctionDef) and n.name == "run_brief")
    caught = [ast.unparse(h.type) for n in ast.walk(run_brief) if isinstance(n, ast.Try)
              for h in n.handlers if h.type is not None]
    assert "ServiceUnavailable" in caught
    kinds = {name for name, cls in public_exceptions().items() if issubclass(cls, ServiceUnavailable)}
    assert kinds & set(caught) == {"ServiceUnavailable"}
