"""briefd's SQLite store. `from briefd.store import Store`."""

from .briefs import BriefRow, ModelUsage, PageRow, PassageRow, Store
from .db import (
    CANCELLED, DONE, FAILED, QUEUED, REJECTED, RUNNING, SCHEMA_VERSION, StoreProblem, StoreUnavailable,
    damaged, diagnose, sha256_hex, utc_now,
)

__all__ = ["Store", "BriefRow", "ModelUsage", "PageRow", "PassageRow", "QUEUED", "RUNNING", "DONE", "FAILED",
           "CANCELLED", "REJECTED", "SCHEMA_VERSION", "StoreProblem", "StoreUnavailable", "damaged",
           "diagnose", "sha256_hex", "utc_now"]
