"""mypy over briefd under the names it is imported by: `python -m tests.typecheck` (make test runs it).

daemon/ and store/ sit at the top of the checkout and are imported as briefd.daemon and briefd.store
(pyproject.toml's package-dir). mypy runs no import hooks and reads no package-dir, so `mypy daemon store`
would name daemon/ops/cli.py `daemon.ops.cli`, and its `from ...store import Store` would reach above the
top. Here each file is handed to mypy with the module name it has when imported, and mypy checks them with
[tool.mypy]'s options (strict). Extra arguments go to mypy as they are (`--no-incremental`, ...).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from mypy.build import build
from mypy.errors import CompileError
from mypy.main import process_options
from mypy.modulefinder import BuildSource

ROOT = Path(__file__).resolve().parents[1]
# Import name -> folder, as in pyproject.toml's [tool.setuptools.package-dir] (tests/core/test_packaging.py
# checks they agree). `briefd` itself is briefd/.
PACKAGE_DIRS = {"briefd": "briefd", "briefd.daemon": "daemon", "briefd.store": "store"}


def sources(root: Path) -> list[BuildSource]:
    """Every .py file under the three folders, named as imported: daemon/ops/cli.py is briefd.daemon.ops.cli."""
    found = []
    for package, folder in PACKAGE_DIRS.items():
        top = root / folder
        for path in sorted(top.rglob("*.py")):
            parts = path.relative_to(top).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            if package == "briefd" and len(parts) > 1:  # briefd/'s own modules; a folder below is not the package
                continue
            found.append(BuildSource(str(path), ".".join((package, *parts)), None))
    return found


def check(root: Path, args: list[str]) -> tuple[list[str], int]:
    """mypy's messages for the checkout at `root`, and how many files it checked."""
    files = sources(root)
    _, options = process_options(["--config-file", str(root / "pyproject.toml"), *args], require_targets=False)
    try:
        result = build(files, options)
    except CompileError as blocking:
        return list(blocking.messages), len(files)
    return list(result.errors), len(files)


def main(args: list[str]) -> int:
    started = time.monotonic()
    messages, count = check(ROOT, args)
    for line in messages:
        print(line)
    errors = sum(": error:" in line for line in messages)
    took = f"{time.monotonic() - started:.0f} s"
    if errors:
        print(f"Found {errors} errors in {count} source files ({took})")
        return 1
    print(f"Success: no issues found in {count} source files (briefd/, daemon/, store/; {took})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
