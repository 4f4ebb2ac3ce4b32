"""briefd's SQLite store. `from briefd.store import Store`.

This folder is the package `briefd.store`, never a top-level `store`: in a checkout, where it sits on the path as
a folder of its own, `import store` fails here, as it does where briefd is installed.
"""

if __name__ != "briefd.store":
    raise ModuleNotFoundError(f"No module named {__name__!r}: this folder is briefd.store", name=__name__)

from .briefs import BriefRow, ModelUsage, PageRow, PassageRow, Store
from .db import (
    CANCELLED, DONE, FAILED, QUEUED, REJECTED, RUNNING, SCHEMA_VERSION, StoreProblem, StoreUnavailable,
    damaged, diagnose, sha256_hex, utc_now,
)

__all__ = ["Store", "BriefRow", "ModelUsage", "PageRow", "PassageRow", "QUEUED", "RUNNING", "DONE", "FAILED",
           "CANCELLED", "REJECTED", "SCHEMA_VERSION", "StoreProblem", "StoreUnavailable", "damaged",
           "diagnose", "sha256_hex", "utc_now"]
