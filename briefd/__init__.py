"""briefd's one import name: `briefd.daemon` (the service) and `briefd.store` (the SQLite store).

The code lives in the top-level folders daemon/ and store/ (the layout the project was asked for). A wheel holds
them as briefd/daemon and briefd/store (pyproject.toml's package-dir). Nothing is installed as a top-level
`daemon` or `store`: python-daemon installs `daemon`, and two distributions writing one folder break each other;
in a checkout, where the two folders sit on the path, their `__init__.py` refuses those names.

A checkout is read two ways, and both name daemon/ `briefd.daemon`:

* Tools that read files without running them (mypy, an editor's go-to-definition) read the tree of links that
  `make venv` installs: setuptools' strict editable mode writes build/__editable__.briefd-*/briefd/, each file a
  link to the checkout's, with daemon/ and store/ under briefd/, and puts that folder on the venv's path (a
  .pth). `extend_path` below makes briefd's path every `briefd` folder on the path, the checkout's and the link
  tree's, which is also how an editor (jedi) reading this file looks for briefd.daemon in the link tree beside
  the checkout's briefd/. mypy reads the link tree as an installed package that ships its types (py.typed).
* Running code imports the checkout's own files: a finder answers `briefd.daemon` and `briefd.store` with the
  folders beside this checkout's briefd/, ahead of any link tree. So a traceback, coverage and a debugger name
  daemon/..., a checkout runs with nothing installed (PYTHONPATH=<checkout>), and a venv installed editable from
  another checkout runs this one's code (a page-reading child: PYTHONPATH leads with this checkout). Only those
  two names are mapped: `briefd.tests` is not a module. An installed package has its own briefd/daemon and
  needs no finder.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Sequence
from importlib.abc import MetaPathFinder
from importlib.machinery import ModuleSpec
from pathlib import Path
from pkgutil import extend_path
from types import ModuleType

__path__ = extend_path(__path__, __name__)

FOLDERS = ("daemon", "store")
"""The top-level folders of a checkout that are briefd's subpackages (pyproject.toml's package-dir)."""

_HERE = Path(__file__).resolve().parent  # a link tree's briefd/__init__.py is a link to the checkout's
_CHECKOUT = _HERE.parent


class CheckoutFolders(MetaPathFinder):
    """Finds `briefd.daemon` and `briefd.store` as the checkout's daemon/ and store/; their submodules follow
    from the package's path, which is the folder itself."""

    def find_spec(self, fullname: str, path: Sequence[str] | None,
                  target: ModuleType | None = None) -> ModuleSpec | None:
        parent, _, folder = fullname.partition(".")
        if parent != __name__ or folder not in FOLDERS:
            return None
        init = _CHECKOUT / folder / "__init__.py"
        return importlib.util.spec_from_file_location(fullname, init, submodule_search_locations=[str(init.parent)])


if not (_HERE / "daemon").exists() and all((_CHECKOUT / folder / "__init__.py").is_file() for folder in FOLDERS):
    sys.meta_path.insert(0, CheckoutFolders())
    if str(_HERE) not in __path__:  # imported through the link tree: briefd.errors is the checkout's file too
        __path__.insert(0, str(_HERE))
