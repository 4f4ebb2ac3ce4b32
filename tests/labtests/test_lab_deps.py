"""The lab's and the tests' dependencies are bounded above, by releases that include the ones installed.

A fresh clone's `pip install -e .[test]` took the newest llama-cpp-python the extra allowed (`>=0.3`), and
0.3.36 segfaulted on CPUs with AMX (issue 19): nothing the project tested had changed, only a release.
Every requirement of the `lab` and `test` extras names an upper bound, and this environment (the one the
suite runs in) lies inside each, so a bound cannot exclude what was tested either.
"""

from __future__ import annotations

import tomllib
from importlib.metadata import PackageNotFoundError, version

import pytest
from packaging.requirements import Requirement

from lab.servers import REPO_ROOT

UPPER = ("<", "<=", "==", "~=", "===")


def extra_requirements() -> list[Requirement]:
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    extras = project["optional-dependencies"]
    return [Requirement(r) for group in ("lab", "test") for r in extras[group] if not r.startswith("briefd[")]


@pytest.mark.parametrize("requirement", extra_requirements(), ids=str)
def test_every_lab_and_test_requirement_is_bounded_above_and_holds_the_installed_release(
        requirement: Requirement) -> None:
    assert any(spec.operator in UPPER for spec in requirement.specifier), \
        f"{requirement} has no upper bound: a new release could break a fresh clone unseen"
    if requirement.marker is not None and not requirement.marker.evaluate():
        return
    try:
        installed = version(requirement.name)
    except PackageNotFoundError:
        pytest.skip(f"{requirement.name} is not installed here")
    assert requirement.specifier.contains(installed, prereleases=True), \
        f"{requirement.name} {installed} is installed and tested; pyproject.toml allows only {requirement.specifier}"
