"""briefd's SQLite store. `from briefd.store import Store`.

This folder is the package `briefd.store`, never a top-level `store`: in a checkout, where it sits on the path as
a folder of its own, `import store` fails here, as it does where briefd is installed.
"""

if __name__ != "briefd.store":
    raise ModuleNotFoundError(f"No module named {__name__!r}: this folder is briefd.store", name=__name__)

import sys

# Where they are installed, sqlite_utils imports numpy and pandas as it loads, only to map their scalar types in
# its inserts; the store inserts none. Importing them cost every briefd process that opens the store 0.13 s of CPU
# for numpy (and pandas takes longer): each daemon start, each `briefd status` from a script. They are hidden
# while sqlite_utils loads (an import of a module set to None in sys.modules fails), unless already loaded.
_UNNEEDED = ("numpy", "pandas")
if "sqlite_utils" not in sys.modules:
    _hidden = [name for name in _UNNEEDED if name not in sys.modules]
    sys.modules.update(dict.fromkeys(_hidden))  # type: ignore[arg-type]  # None: "not importable", by design
    try:
        import sqlite_utils  # noqa: F401  (loaded here, without them)
    finally:
        for _name in _hidden:
            if sys.modules.get(_name, 0) is None:
                del sys.modules[_name]

from .briefs import BriefRow, ModelUsage, PageRow, PassageRow, Store  # noqa: E402
from .db import (  # noqa: E402
    CANCELLED, DONE, FAILED, QUEUED, REJECTED, RUNNING, SCHEMA_VERSION, StoreProblem, StoreUnavailable,
    damaged, diagnose, sha256_hex, utc_now,
)

__all__ = ["Store", "BriefRow", "ModelUsage", "PageRow", "PassageRow", "QUEUED", "RUNNING", "DONE", "FAILED",
           "CANCELLED", "REJECTED", "SCHEMA_VERSION", "StoreProblem", "StoreUnavailable", "damaged",
           "diagnose", "sha256_hex", "utc_now"]
