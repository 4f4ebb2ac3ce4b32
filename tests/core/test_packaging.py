"""One import name (issue 13 #6): briefd's code is `briefd.daemon` and `briefd.store`, never a top-level
`daemon` (python-daemon's) or `store`. In a checkout the folders daemon/ and store/ sit at the top, so
`import daemon` would find them there: a module imported under both names is two modules, with two copies of
every constant and class. No file may use the old names, and from a checkout they fail as from a wheel.

Every tool sees that one package (issue 30): the interpreter, mypy and an editor's go-to-definition (jedi) all
name daemon/ops/cli.py `briefd.daemon.ops.cli`, and coverage counts it once, as daemon/ops/cli.py.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import briefd
import briefd.daemon
import briefd.store
from briefd.daemon.sources.pagework import child_environment
from lab.servers import REPO_ROOT

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
    files = [p for folder in ("daemon", "store", "tests", "lab", "briefd") for p in (REPO_ROOT / folder).rglob("*.py")]
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
    # The wheel's mapping, the checkout's and the type check's are one: a folder left out of one is a module
    # the checkout cannot import, or one mypy does not check.
    assert setuptools["package-dir"] == {f"briefd.{folder}": folder for folder in briefd.FOLDERS}
    mypy = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["mypy"]
    assert mypy["packages"] == ["briefd", *setuptools["package-dir"]]
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert project["scripts"]["briefd"].startswith("briefd.daemon.")


def searched_files(root: Path) -> list[Path]:
    """The files an editor's search reads in the checkout at `root`: those git does not ignore (as VS Code's
    search and ripgrep honour .gitignore), with symbolic links followed into the folders they name (VS Code's
    default, search.followSymlinks; `grep -R`). A tree seen twice through a link shows each hit twice."""
    listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"], cwd=root,
                            capture_output=True, check=True, timeout=60).stdout.decode().split("\0")
    files = []
    for name in filter(None, listed):
        path = root / name
        if path.is_dir():  # git lists a link to a folder as one entry; the editor walks into it
            files += [p for p in path.rglob("*") if p.is_file()]
        elif path.is_file():
            files.append(path)
    return files


def hits(root: Path, text: str) -> list[str]:
    return sorted(p.relative_to(root).as_posix() for p in searched_files(root)
                  if text.encode() in p.read_bytes())


def test_an_editor_search_lists_each_definition_once() -> None:
    # Each needle is cut in two here, so that this file is not a hit itself.
    assert hits(REPO_ROOT, "def child_" "environment(") == ["daemon/sources/pagework.py"]
    assert hits(REPO_ROOT, "class " "Store:") == ["store/briefs.py"]
    links = subprocess.run(["git", "ls-files", "-s"], cwd=REPO_ROOT, capture_output=True, text=True,
                           check=True, timeout=60).stdout.splitlines()
    assert [line for line in links if line.startswith("120000")] == [], "no symbolic link in the tree"


def test_the_search_check_sees_a_tree_shown_twice_by_a_link(tmp_path: Path) -> None:
    (tmp_path / "daemon").mkdir()
    (tmp_path / "daemon" / "x.py").write_text("def marker(): ...\n")
    (tmp_path / "briefd").mkdir()
    (tmp_path / "briefd" / "daemon").symlink_to("../daemon")
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True, timeout=60)
    assert hits(tmp_path, "def marker(") == ["briefd/daemon/x.py", "daemon/x.py"]


def test_coverage_measures_daemon_and_store_from_the_checkout(tmp_path: Path) -> None:
    """`make test` runs the suite under coverage with [tool.coverage]'s source (daemon/, store/): the modules a
    run imports as briefd.daemon.* are counted as the checkout's daemon/ files, each once."""
    pytest.importorskip("coverage", reason="coverage is the test extra's: make test installs it and runs this")
    env = {**os.environ, "COVERAGE_FILE": str(tmp_path / "data"), "PYTHONPATH": str(REPO_ROOT)}
    script = tmp_path / "run.py"
    script.write_text("from briefd.daemon.sources.pagework import child_environment\nchild_environment()\n")
    subprocess.run([sys.executable, "-m", "coverage", "run", str(script)], cwd=REPO_ROOT, env=env, check=True,
                   timeout=120)
    subprocess.run([sys.executable, "-m", "coverage", "json", "-q", "-o", str(tmp_path / "cov.json")],
                   cwd=REPO_ROOT, env=env, check=True, timeout=120)
    files = json.loads((tmp_path / "cov.json").read_text(encoding="utf-8"))["files"]
    assert files["daemon/sources/pagework.py"]["summary"]["covered_lines"] > 10
    assert files["store/briefs.py"]["summary"]["num_statements"] > 100  # source: reported though never run
    assert all(name.startswith(("daemon/", "store/")) for name in files), sorted(files)[:5]


def test_the_old_names_and_other_folders_of_the_checkout_are_not_modules() -> None:
    """From the checkout, with the checkout on the path (as pytest, `python -m` and a page-reading child have it),
    `import daemon` and `import store` fail as they do where the wheel is installed, and briefd holds only its
    own modules and the two folders: the checkout's tests/ is no `briefd.tests`."""
    code = ("import importlib, sys\n"
            "for name in ('daemon', 'store', 'briefd.tests', 'briefd.inbox'):\n"
            "    try:\n"
            "        importlib.import_module(name)\n"
            "    except ModuleNotFoundError as e:\n"
            "        print(name, 'missing', e.name)\n"
            "    else:\n"
            "        print(name, 'imported')\n"
            "import briefd.daemon, briefd.store\n"
            "print(sorted(n for n in sys.modules if n.split('.')[0] in ('daemon', 'store')))\n")
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, env=env, capture_output=True, text=True,
                          timeout=60, check=True)
    assert done.stdout.splitlines() == ["daemon missing daemon", "store missing store",
                                        "briefd.tests missing briefd.tests", "briefd.inbox missing briefd.inbox", "[]"]


def test_mypy_names_each_file_as_imported(monkeypatch: pytest.MonkeyPatch) -> None:
    """`make test`'s `python -m mypy` checks what [tool.mypy] names: every file of briefd/, daemon/ and store/,
    under its import name, read through the link tree `make venv` installs (pyproject.toml says how)."""
    from mypy.main import process_options
    monkeypatch.chdir(REPO_ROOT)  # mypy looks for packages from the working directory first, as `make test` runs it
    sources, _ = process_options(["--config-file", str(REPO_ROOT / "pyproject.toml")], require_targets=True)
    named = {Path(os.path.realpath(s.path or "")).relative_to(REPO_ROOT.resolve()).as_posix(): s.module
             for s in sources if s.path and s.path.endswith(".py")}
    assert named["daemon/ops/cli.py"] == "briefd.daemon.ops.cli" and named["store/__init__.py"] == "briefd.store"
    assert named["briefd/errors.py"] == "briefd.errors"
    on_disk = {p.relative_to(REPO_ROOT).as_posix() for d in ("briefd", "daemon", "store")
               for p in (REPO_ROOT / d).rglob("*.py")}
    assert on_disk - set(named) == set(), "a module mypy does not see: `make venv` links a new module"


def test_mypy_sees_types_across_the_folders() -> None:
    """A module of daemon/ reaches store/ and briefd/ by relative imports, and mypy holds it to their types:
    `...store` from briefd.daemon.ops is briefd.store, found with the configuration alone."""
    from mypy.build import build
    from mypy.main import process_options
    from mypy.modulefinder import BuildSource
    _, options = process_options(["--config-file", str(REPO_ROOT / "pyproject.toml"), "--no-incremental",
                                  "--cache-dir", os.devnull], require_targets=False)
    probe = "from ...errors import BriefdError\nfrom ...store import Store\n\nname: str = Store\ncode: int = BriefdError\n"
    result = build([BuildSource(None, "briefd.daemon.ops.probe", text=probe)], options)
    assert [m for m in result.errors if ": error:" in m] == [
        '<string>:4: error: Incompatible types in assignment (expression has type "type[Store]", variable has '
        'type "str")  [assignment]',
        '<string>:5: error: Incompatible types in assignment (expression has type "type[BriefdError]", variable '
        'has type "int")  [assignment]']


def test_an_editor_goes_to_the_definitions_of_briefd_imports() -> None:
    """jedi, the engine behind go-to-definition in several editors, opened on the checkout: an absolute
    `briefd.daemon...` import of a test and a package module's import of briefd/errors.py land on the files."""
    jedi = pytest.importorskip("jedi", reason="jedi is the test extra's: make test installs it and runs this")
    project = jedi.Project(REPO_ROOT, environment_path=sys.prefix)

    def landing(path: Path, needle: str) -> set[Path]:
        where = next(((n, t) for n, t in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
                      if needle in t), None)
        assert where, f"{path.name} no longer says {needle!r}: point this test at a line that imports it"
        line, text = where
        found = jedi.Script(path=path, project=project).goto(line, text.index(needle) + len(needle) - 1,
                                                              follow_imports=True)
        return {Path(os.path.realpath(d.module_path)) for d in found if d.module_path}

    here = Path(__file__)
    assert landing(here, "pagework import child_environment") == {REPO_ROOT / "daemon/sources/pagework.py"}
    assert landing(here, "from briefd.daemon.sources.pagework") == {REPO_ROOT / "daemon/sources/pagework.py"}
    assert landing(REPO_ROOT / "daemon/core/errors.py", "import BriefdError") == {REPO_ROOT / "briefd/errors.py"}
    assert landing(REPO_ROOT / "daemon/ops/cli.py", "from ...store") == {REPO_ROOT / "store/__init__.py"}


def test_a_page_reading_child_of_the_checkout_imports_the_checkout_s_code(tmp_path: Path) -> None:
    """The child is started with child_environment(): its PYTHONPATH leads with the folder that holds this
    briefd, so the child reads pages with the code the daemon runs, even where this venv is installed
    editable from another checkout (whose briefd its import hook would otherwise answer with)."""
    env = child_environment()
    assert Path(env["PYTHONPATH"].split(os.pathsep)[0]) == Path(briefd.__file__).parents[1]
    code = "import briefd.daemon.sources.pagework as p; print(p.__file__)"
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=60, check=True)
    assert Path(done.stdout.split()[0]) == REPO_ROOT / "daemon" / "sources" / "pagework.py"
