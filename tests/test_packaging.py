"""One import name (issue 13 #6): briefd's code is `briefd.daemon` and `briefd.store`, never a top-level
`daemon` (python-daemon's) or `store`. In a checkout the folders daemon/ and store/ sit at the top, so
`import daemon` would still find them there: a module imported under both names is two modules, with
two copies of every constant and class. No file may use the old names.
"""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

import briefd
import briefd.daemon
import briefd.store
from tests.lab.servers import REPO_ROOT

OLD_NAMES = ("daemon", "store")


def top_level_imports(path: Path) -> list[str]:
    """Every absolute import in `path` whose first name is one of OLD_NAMES, as "line: statement"."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        found += [f"{node.lineno}: {name}" for name in names if name.split(".")[0] in OLD_NAMES]
    return found


def test_no_module_imports_the_old_top_level_names() -> None:
    files = [p for folder in ("daemon", "store", "tests", "briefd") for p in (REPO_ROOT / folder).rglob("*.py")
             if "briefd/daemon" not in p.as_posix() and "briefd/store" not in p.as_posix()]
    assert len(files) > 100
    offending = {str(p.relative_to(REPO_ROOT)): found for p in files if (found := top_level_imports(p))}
    assert offending == {}, "import briefd.daemon / briefd.store (or relatively inside the package)"


def test_the_check_catches_an_old_import(tmp_path: Path) -> None:
    sample = tmp_path / "old.py"
    sample.write_text("import os\nfrom store import Store\nimport daemon.cli\nfrom .store import x\n")
    assert top_level_imports(sample) == ["2: store", "3: daemon.cli"]


def test_the_package_is_the_checkout_s_folders_and_the_wheel_names_only_briefd() -> None:
    assert Path(briefd.daemon.__file__).resolve() == (REPO_ROOT / "daemon" / "__init__.py").resolve()
    assert Path(briefd.store.__file__).resolve() == (REPO_ROOT / "store" / "__init__.py").resolve()
    setuptools = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]
    folders = sorted(p.parent.name for p in (REPO_ROOT / "daemon").glob("*/__init__.py"))
    assert sorted(setuptools["packages"]) == sorted(["briefd", "briefd.daemon", "briefd.store",
                                                     *(f"briefd.daemon.{name}" for name in folders)])
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert project["scripts"]["briefd"].startswith("briefd.daemon.")
