"""briefd's one import name: `briefd.daemon` (the service) and `briefd.store` (the SQLite store).

The code lives in the top-level folders daemon/ and store/ (DESIGN.md's layout). A wheel holds them as
briefd/daemon and briefd/store (pyproject.toml's package-dir). Nothing is installed as a top-level `daemon` or
`store`: python-daemon installs `daemon`, and two distributions writing one folder break each other
(tests/core/test_packaging.py checks it).

In a checkout, this file sits in briefd/ beside daemon/ and store/, and the checkout's root joins the
package's path, so `briefd.daemon` is the checkout's daemon/ with nothing installed (PYTHONPATH=<checkout>,
a page-reading child, a venv installed editable from another checkout): the copy on the path is the one
imported, with no symbolic link that would show every tool a second tree. An installed package has its own
briefd/daemon, and its parent (site-packages) never joins: python-daemon's `daemon` may live there.
"""

from pathlib import Path

_HERE = Path(__file__).parent
if not (_HERE / "daemon").exists() and (_HERE.parent / "daemon" / "__init__.py").is_file():
    __path__.append(str(_HERE.parent))
