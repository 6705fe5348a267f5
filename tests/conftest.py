"""Shared pytest fixtures."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
SHARED = REPO_ROOT.parent / "shared"
REAL_KAFKA = SHARED / "fixtures" / "real-kafka"


@pytest.fixture(scope="session")
def fixtures_dir() -> Path:
    """The read-only directory of files written by real Apache Kafka brokers."""
    if not REAL_KAFKA.is_dir():
        pytest.fail(f"real Kafka fixtures not found at {REAL_KAFKA}")
    return REAL_KAFKA


@pytest.fixture
def fixture_copy(tmp_path: Path, fixtures_dir: Path):
    """Copy a fixture (file or directory, relative to real-kafka/) into tmp_path."""

    def copy(rel: str) -> Path:
        src = fixtures_dir / rel
        dst = tmp_path / Path(rel).name
        if src.is_dir():
            shutil.copytree(src, dst)
        else:
            shutil.copy2(src, dst)
        return dst

    return copy
