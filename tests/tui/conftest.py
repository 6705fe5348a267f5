"""Fixtures of the TUI's tests: a fixed time zone (times are shown in local time)."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator

import pytest


@pytest.fixture(autouse=True)
def utc() -> Iterator[None]:
    """Render times in UTC whatever the machine's zone."""
    old = os.environ.get("TZ")
    os.environ["TZ"] = "UTC"
    time.tzset()
    yield
    if old is None:
        os.environ.pop("TZ", None)
    else:
        os.environ["TZ"] = old
    time.tzset()
