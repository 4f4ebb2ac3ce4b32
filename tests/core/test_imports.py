"""The import graph shows the architecture (issue 20 #4): arrows run one way, and none is hidden.

daemon/ is split into folders by concern, in layers from the top (what a user runs) to the bottom (pure
rules): ops, intake, research, report, sources, model, core, rules. A module may import its own folder
and the folders below it, never one above: the day `sources/` reaches up into `ops/` the layers are only
names. store/ is the daemon's database and imports nothing of the daemon, so it can be read and tested
alone.

An import made inside a function hides an arrow from every reader and every tool; the old flat daemon/
closed two circles that way (actions -> worker -> serve -> checks -> library -> worker; extract <->
documents). So no module imports briefd's own code inside a function, except where the laziness is the
point and says so below. Imports under `if TYPE_CHECKING:` are arrows too (a type names the module it
comes from) and are held to the same layers.

The walk reads the source with `ast` and imports nothing, so a circle fails here, by name, rather than
as an ImportError in whichever test happens to import the modules in the unlucky order.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from lab.servers import REPO_ROOT

LAYERS = ("ops", "intake", "research", "report", "sources", "model", "core", "rules")
"""daemon/'s folders, top to bottom: a module imports only its own folder and those after it here."""

LAZY_BY_DESIGN: dict[str, str] = {
    "daemon/ops/cli.py": "each command imports what it needs, so `briefd --help` and `briefd status` start "
                         "without loading the model client, the fetcher or the store's schema code",
    "daemon/ops/launch.py": "`briefd run` starts its page reader before it imports the daemon, so the two "
                            "imports overlap instead of keeping the first brief's pages waiting (issue 22)",
}
"""Files whose function-level imports of briefd's own modules are deliberate, with why."""


@dataclass(frozen=True)
class Edge:
    """One import of a briefd module by another: where it is written, and whether inside a function."""

    source: str
    target: str
    line: int
    in_function: bool


def module_name(path: Path) -> str:
    """`daemon/ops/cli.py` -> `daemon.ops.cli`; a package's `__init__.py` is the package itself."""
    parts = list(path.relative_to(REPO_ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def product_files() -> list[Path]:
    """Every Python file of daemon/ and store/, as the checkout holds them."""
    return sorted(p for folder in ("daemon", "store") for p in (REPO_ROOT / folder).rglob("*.py"))


def resolve(node: ast.ImportFrom, importer: str, is_package: bool, modules: set[str]) -> list[str]:
    """The briefd modules a relative `from ... import ...` reaches: a submodule when a name is one."""
    if node.level == 0:
        return []  # absolute imports are third-party or the standard library (test_packaging pins this)
    package = importer.split(".") if is_package else importer.split(".")[:-1]
    base = package[: len(package) - (node.level - 1)]
    stem = ".".join(base + (node.module.split(".") if node.module else []))
    found = {f"{stem}.{alias.name}" if f"{stem}.{alias.name}" in modules else stem for alias in node.names}
    return sorted(found & modules)


def walk(tree: ast.AST, in_function: bool = False) -> Iterator[tuple[ast.ImportFrom, bool]]:
    """Every `from ... import` in `tree`, with whether a function (at any depth) holds it."""
    for child in ast.iter_child_nodes(tree):
        if isinstance(child, ast.ImportFrom):
            yield child, in_function
        inner = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
        yield from walk(child, inner)


def import_edges() -> list[Edge]:
    """Every import between briefd's modules, read from the source."""
    files = product_files()
    modules = {module_name(p) for p in files}
    edges = []
    for path in files:
        importer = module_name(path)
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for node, in_function in walk(tree):
            for target in resolve(node, importer, path.name == "__init__.py", modules):
                if target != importer:
                    edges.append(Edge(importer, target, node.lineno, in_function))
    return edges


def cycles(edges: list[Edge]) -> list[list[str]]:
    """The import circles: each strongly connected set of two or more modules (Tarjan's algorithm)."""
    graph: dict[str, set[str]] = {}
    for edge in edges:
        graph.setdefault(edge.source, set()).add(edge.target)
        graph.setdefault(edge.target, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            members = []
            while (member := stack.pop()) != node:
                members.append(member)
            if members:
                found.append(sorted(members + [node]))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def layer(module: str) -> int | None:
    """A daemon module's place in LAYERS (0 is the top); None for store/ and daemon/'s own package."""
    parts = module.split(".")
    if parts[0] != "daemon" or len(parts) < 2:
        return None
    return LAYERS.index(parts[1])


def upward(edge: Edge) -> bool:
    """Whether `edge` reaches above its own folder, or from store/ into the daemon."""
    if edge.source.startswith("store"):
        return edge.target.startswith("daemon")
    source, target = layer(edge.source), layer(edge.target)
    return source is not None and target is not None and target < source


def show(edge: Edge) -> str:
    """An edge as a reader finds it: the file, the line, and what it imports."""
    return f"{edge.source.replace('.', '/')}.py:{edge.line} imports {edge.target}"


def test_every_folder_of_daemon_is_a_known_layer() -> None:
    folders = {p.name for p in (REPO_ROOT / "daemon").iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert folders == set(LAYERS), "a new folder of daemon/ needs its place in LAYERS (and in docs/development.md's Layout)"


def test_the_walk_sees_every_import() -> None:
    """The walk reads what it should: many edges, relative imports resolved to modules that exist."""
    edges = import_edges()
    assert len(edges) > 200
    assert any(e.source == "store" and e.target == "store.briefs" for e in edges)
    assert any(e.source == "daemon.ops.cli" and e.in_function for e in edges)


def test_no_import_circles() -> None:
    found = cycles(import_edges())
    assert found == [], "modules that import one another: move the shared names down a layer"


def test_no_upward_imports() -> None:
    offending = [show(e) for e in import_edges() if upward(e)]
    assert offending == [], f"layers from the top: {', '.join(LAYERS)}; store/ imports nothing of daemon/"


def test_no_function_level_imports_of_briefd() -> None:
    offending = [show(e) for e in import_edges()
                 if e.in_function and f"{e.source.replace('.', '/')}.py" not in LAZY_BY_DESIGN]
    assert offending == [], "import at the top of the module (a circle it would close must be broken instead)"


def test_the_circle_finder_finds_a_circle() -> None:
    """The circle test can fail: a made-up graph with a three-module circle and a tail is caught."""
    edges = [Edge("a", "b", 1, False), Edge("b", "c", 1, True), Edge("c", "a", 1, False), Edge("c", "d", 1, False)]
    assert cycles(edges) == [["a", "b", "c"]]
    assert cycles(edges[1:]) == []


def test_an_upward_import_is_caught() -> None:
    assert upward(Edge("daemon.sources.library", "daemon.ops.worker", 1, True))
    assert upward(Edge("store.briefs", "daemon.core.files", 1, False))
    assert not upward(Edge("daemon.ops.worker", "daemon.sources.library", 1, False))
    assert not upward(Edge("daemon.core.files", "store.db", 1, False))
