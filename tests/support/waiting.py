"""Waiting in tests for something a real engine does on its own threads."""

from __future__ import annotations

import time
from collections.abc import Callable


def wait_until(
    check: Callable[[], bool], *, timeout_s: float = 120.0, poll_s: float = 0.05
) -> None:
    """Return once `check()` is true; AssertionError after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(poll_s)
    raise AssertionError(f"timed out after {timeout_s:.0f} s")
