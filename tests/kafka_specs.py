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
