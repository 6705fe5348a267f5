"""Kafka's JSON message specs for the tests that check kt against them.

They are Apache's text, so they are not part of kt: the tests read them from the
directory named by KT_KAFKA_MESSAGE_SPECS (either a directory laid out like
../shared/reference/kafka-message-specs, or a Kafka checkout's
clients/src/main/resources/common/message), else from ../shared beside the checkout
when it exists, else they skip. CI (.ci/run) fails when a test of a module named
test_conformance* skipped.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
SPECS_ENV = "KT_KAFKA_MESSAGE_SPECS"
DEFAULT_SPECS = REPO_ROOT.parent / "shared" / "reference" / "kafka-message-specs"
SUBDIRS = ("", "group-coordinator", "transaction-coordinator")
# Where the message specs live inside a Kafka checkout; the coordinators' record schemas
# sit in sibling modules (group-coordinator/, transaction-coordinator/, or core/).
CHECKOUT_MESSAGES = Path("src", "main", "resources", "common", "message")
SKIP_REASON = (
    f"Kafka's message specs not found: set {SPECS_ENV} to a Kafka checkout's "
    f"clients/{CHECKOUT_MESSAGES.as_posix()} (default: {DEFAULT_SPECS}, absent)"
)


def spec_dirs() -> list[Path] | None:
    """The directories to search for spec files, or None when there are none."""
    configured = os.environ.get(SPECS_ENV)
    if configured:
        root = Path(configured).expanduser()
        if not root.is_dir():
            # Asked for by name: a wrong path must fail, not pass quietly as skips.
            pytest.fail(f"{SPECS_ENV}={configured} is not a directory")
    elif DEFAULT_SPECS.is_dir():
        root = DEFAULT_SPECS
    else:
        return None
    # A Kafka checkout, named by its root or by its clients' message directory.
    clients = ("clients", *CHECKOUT_MESSAGES.parts)
    if (root / Path(*clients)).is_dir():
        checkout: Path | None = root
    elif root.resolve().parts[-len(clients) :] == clients:
        checkout = root.resolve().parents[len(clients) - 1]
    else:
        checkout = None
    if checkout is None:
        return [root / sub for sub in SUBDIRS]
    return sorted(checkout.glob(f"*/{CHECKOUT_MESSAGES.as_posix()}"))


def load_spec(name: str) -> dict[str, Any]:
    """Load one spec file by message name, stripping the // comments JSON lacks.

    Skips the calling test when no specs are configured (all with one reason line).
    """
    dirs = spec_dirs()
    if dirs is None:
        pytest.skip(SKIP_REASON)
    for directory in dirs:
        path = directory / f"{name}.json"
        if path.is_file():
            text = "\n".join(
                re.sub(r"^\s*//.*$", "", line) for line in path.read_text().splitlines()
            )
            # A few files put a // comment after a value on the same line.
            text = re.sub(r'(?m)(["\]\}\d,])\s*//.*$', r"\1", text)
            return json.loads(text)  # type: ignore[no-any-return]
    raise FileNotFoundError(f"{name}.json in none of {[str(d) for d in dirs]}")


# --- KRaft's metadata record specs (and quorum-state), a sibling directory -------

METADATA_SPECS_ENV = "KT_KAFKA_METADATA_SPECS"
DEFAULT_METADATA_SPECS = REPO_ROOT.parent / "shared" / "reference" / "kafka-metadata-specs"
# In a Kafka checkout: metadata/src/main/resources/common/metadata, and
# raft/src/main/resources/common/message for QuorumStateData.
CHECKOUT_METADATA = Path("metadata", "src", "main", "resources", "common", "metadata")
METADATA_SKIP_REASON = (
    f"Kafka's metadata record specs not found: set {METADATA_SPECS_ENV} to a directory "
    f"laid out like kafka-metadata-specs or a Kafka checkout's {CHECKOUT_METADATA.as_posix()}"
    f" (default: {DEFAULT_METADATA_SPECS}, absent)"
)


def metadata_spec_dirs() -> list[Path] | None:
    """The directories holding the metadata record specs, or None when there are none."""
    configured = os.environ.get(METADATA_SPECS_ENV)
    if configured:
        root = Path(configured).expanduser()
        if not root.is_dir():
            pytest.fail(f"{METADATA_SPECS_ENV}={configured} is not a directory")
    elif DEFAULT_METADATA_SPECS.is_dir():
        root = DEFAULT_METADATA_SPECS
    else:
        return None
    if (root / CHECKOUT_METADATA).is_dir():
        return [root / CHECKOUT_METADATA, root / "raft" / CHECKOUT_MESSAGES]
    resolved = root.resolve()
    if resolved.parts[-len(CHECKOUT_METADATA.parts) :] == CHECKOUT_METADATA.parts:
        checkout = resolved.parents[len(CHECKOUT_METADATA.parts) - 1]
        return [resolved, checkout / "raft" / CHECKOUT_MESSAGES]
    return [root]


def load_metadata_spec(file_name: str) -> dict[str, Any]:
    """Load one metadata spec by file name (e.g. "TopicRecord"); skips when none exist."""
    dirs = metadata_spec_dirs()
    if dirs is None:
        pytest.skip(METADATA_SKIP_REASON)
    for directory in dirs:
        path = directory / f"{file_name}.json"
        if path.is_file():
            text = "\n".join(
                re.sub(r"^\s*//.*$", "", line) for line in path.read_text().splitlines()
            )
            text = re.sub(r'(?m)(["\]\}\d,])\s*//.*$', r"\1", text)
            return json.loads(text)  # type: ignore[no-any-return]
    raise FileNotFoundError(f"{file_name}.json in none of {[str(d) for d in dirs]}")


def metadata_spec_names() -> list[str]:
    """The file names (without .json) of every metadata record spec found, or []."""
    dirs = metadata_spec_dirs()
    if dirs is None:
        return []
    return sorted(p.stem for p in dirs[0].glob("*Record.json") if p.is_file())
