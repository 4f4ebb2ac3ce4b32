"""The air-gapped install (docs/running.md, "Installing without internet"): `make wheelhouse` on a connected
machine, then `pip install --no-index --find-links wheelhouse briefd` where there is no index.

Here the wheelhouse is built by the Makefile target itself (it reaches the package index, as on
the connected machine; about 20 s), from a copy of this checkout as git writes it where symbolic links
are off (core.symlinks=false, as on Windows: a link becomes a file naming its target), then installed
into a fresh venv with the index switched off and nothing but the wheelhouse to find packages in: no
pip configuration, no extra find-links, no PYTHONPATH pointing back at this checkout. The briefd that
answers is the installed one.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
import venv
from pathlib import Path

import pytest

from briefd.daemon import __version__
from lab.servers import REPO_ROOT

pytestmark = pytest.mark.slow


def extras_only() -> set[str]:
    """Distributions the lab and test extras add that the runtime does not need (from pyproject.toml)."""
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]

    def name(requirement: str) -> str:
        return re.sub(r"[-_.]+", "_", re.split(r"[\s<>=!~;\[]", requirement, maxsplit=1)[0]).lower()
    runtime = {name(r) for r in project["dependencies"]}
    extras = {name(r) for group in project["optional-dependencies"].values() for r in group}
    return extras - runtime - {"briefd"}


def isolated_env() -> dict[str, str]:
    """The environment of a machine with no index: no pip configuration or find-links of this
    one's, and no PYTHONPATH that would let this checkout answer instead of the installed package."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_") and k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    return {**env, "PIP_CONFIG_FILE": os.devnull, "PIP_NO_INDEX": "1"}


def checkout_without_links(dest: Path) -> Path:
    """The files of this checkout that git tracks or would add, copied to `dest` as git writes them with
    core.symlinks=false: a symbolic link becomes a plain file holding the path it named."""
    listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"], cwd=REPO_ROOT,
                            capture_output=True, check=True, timeout=60).stdout.decode().split("\0")
    for name in filter(None, listed):
        source, copy = REPO_ROOT / name, dest / name
        copy.parent.mkdir(parents=True, exist_ok=True)
        if source.is_symlink():
            copy.write_text(os.readlink(source), encoding="utf-8")
        elif source.is_file():  # not a file: deleted from the work tree, still in git's index
            shutil.copy2(source, copy)
    return dest


def test_briefd_installs_from_the_wheelhouse_alone_and_runs(tmp_path: Path) -> None:
    wheelhouse = tmp_path / "wheelhouse"
    checkout = checkout_without_links(tmp_path / "checkout")
    subprocess.run(["make", "--no-print-directory", "wheelhouse", f"WHEELHOUSE={wheelhouse}",
                    f"PYTHON={sys.executable}"], cwd=checkout, check=True, timeout=300)
    wheels = {re.sub(r"[-_.]+", "_", w.name.split("-")[0]).lower() for w in wheelhouse.glob("*.whl")}
    assert "briefd" in wheels and {"httpx", "sqlite_utils", "trafilatura"} <= wheels
    assert wheels & extras_only() == set(), "the lab and test extras are not in the wheelhouse"

    fresh = tmp_path / "fresh"
    venv.create(fresh, with_pip=True)
    bin_dir = fresh / "bin"
    env = isolated_env()
    subprocess.run([str(bin_dir / "python"), "-m", "pip", "install", "--quiet", "--no-index", "--find-links",
                    str(wheelhouse), "briefd"], cwd=tmp_path, env=env, check=True, timeout=300)

    def briefd(*args: str) -> str:
        done = subprocess.run([str(bin_dir / "briefd"), *args], cwd=tmp_path, env=env, capture_output=True,
                              text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        return done.stdout
    assert briefd("--version").strip() == f"briefd {__version__}"
    schema = json.loads(briefd("schema"))
    assert "question" in schema["required"]
    assert list(json.loads(briefd("datasette", "--db", str(tmp_path / "site.db")))["databases"]) == ["site"]
    def python(code: str, **more: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(bin_dir / "python"), "-c", code], cwd=tmp_path, env={**env, **more},
                              capture_output=True, text=True, timeout=60)

    where = python("import briefd.daemon, briefd.store; print(briefd.daemon.__file__); print(briefd.store.__file__)")
    assert all(Path(p).is_relative_to(fresh) for p in where.stdout.split()), where
    for name in ("daemon", "store"):  # one import name: nothing of briefd's is a top-level module
        assert "ModuleNotFoundError" in python(f"import {name}").stderr

    # A page-reading (or archive-reading) child starts with the environment child_environment() gives it:
    # it finds the installed briefd, and still no top-level `daemon` (python-daemon's name).
    child = python("import json; from briefd.daemon.sources.pagework import child_environment as c; "
                   "print(json.dumps(c()))")
    child_env = json.loads(child.stdout)
    found = subprocess.run([str(bin_dir / "python"), "-c", "import importlib.util as u; "
                            "print(u.find_spec('briefd.daemon.sources.pagework').origin); import daemon"],
                           cwd=tmp_path, env=child_env, capture_output=True, text=True, timeout=60)
    assert Path(found.stdout.strip()).is_relative_to(fresh), found
    assert "No module named 'daemon'" in found.stderr, found


def test_python_daemon_installed_beside_briefd_breaks_neither(tmp_path: Path) -> None:
    """python-daemon installs a top-level `daemon`: briefd's import name must not meet it, neither when
    it is installed after briefd nor when it is uninstalled again (that once took briefd's files along)."""
    fresh = tmp_path / "fresh"
    venv.create(fresh, with_pip=True)
    bin_dir = fresh / "bin"
    env = {**isolated_env(), "PIP_NO_INDEX": "0"}  # this one installs from the index, as a user would
    pip = [str(bin_dir / "python"), "-m", "pip", "install", "--quiet"]
    subprocess.run([*pip, "--no-deps", str(REPO_ROOT)], cwd=tmp_path, env=env, check=True, timeout=300)
    subprocess.run([*pip, "python-daemon"], cwd=tmp_path, env=env, check=True, timeout=300)

    def python(code: str) -> str:
        done = subprocess.run([str(bin_dir / "python"), "-c", code], cwd=tmp_path, env=env, capture_output=True,
                              text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()

    assert python("import daemon; print(hasattr(daemon, 'DaemonContext'))") == "True"  # python-daemon's
    assert python("from briefd.daemon import __version__; print(__version__)") == __version__
    subprocess.run([str(bin_dir / "python"), "-m", "pip", "uninstall", "--quiet", "--yes", "python-daemon"],
                   cwd=tmp_path, env=env, check=True, timeout=120)
    assert python("from briefd.daemon import __version__; print(__version__)") == __version__
