"""Waiting on a condition from inside a test's event loop."""

from __future__ import annotations

import asyncio
import time


async def until(check: object, timeout: float = 60.0) -> bool:
    """Poll `check()` every 0.05 s for up to `timeout` seconds, the loop's tasks running meanwhile: whether it came
    true (a bound only a hang reaches; the caller asserts on the answer)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():  # type: ignore[operator]
            return True
        await asyncio.sleep(0.05)
    return False
