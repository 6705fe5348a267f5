"""The broker's configuration is checked when it is loaded: a malformed boolean or a
server.properties file that does not parse is one ConfigError naming what is wrong
(the CLI prints it and exits 2), never a traceback at first use."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from kt.broker.config import DEFAULTS, KAFKA_DEFAULTS, ConfigError, load_config

BOOLEANS = sorted(k for k, v in DEFAULTS.items() if v in ("true", "false"))


def test_the_booleans_include_the_ones_read_late() -> None:
    # read only when a cluster starts, a produce is verified or the broker stops
    assert {"auto.leader.rebalance.enable", "controlled.shutdown.enable",
            "transaction.partition.verification.enable"} <= set(BOOLEANS)  # fmt: skip


@pytest.mark.parametrize("key", BOOLEANS)
def test_a_malformed_boolean_is_refused_at_load(key: str, tmp_path: Path) -> None:
    overrides = {"log.dirs": str(tmp_path / "d"), key: "maybe"}
    # (the log.* defaults' check words it its own way: both name the key and the value)
    with pytest.raises(ConfigError, match=rf"(?=.*{re.escape(key)})(?=.*'maybe')"):
        load_config(None, overrides)
    assert load_config(None, {**overrides, key: "TRUE"}).get_bool(key) is True


def test_a_properties_file_that_does_not_parse_is_named(tmp_path: Path) -> None:
    path = tmp_path / "server.properties"
    path.write_text(f"log.dirs={tmp_path / 'd'}\nbad=\\uZZZZ\n")
    with pytest.raises(ConfigError, match=r"server\.properties: line 2: malformed"):
        load_config(path)


NUMBERS = sorted(
    k
    for k, v in {**KAFKA_DEFAULTS, **DEFAULTS}.items()
    if (re.fullmatch(r"-?\d+(\.\d+)?", v) and not k.startswith("log."))
    or k.startswith("log.cleaner")
)


@pytest.mark.parametrize("key", NUMBERS)
def test_a_malformed_number_is_refused_at_load(key: str, tmp_path: Path) -> None:
    # every numeric setting, read at start or only when a service first needs it
    overrides = {"log.dirs": str(tmp_path / "d"), key: "lots"}
    with pytest.raises(ConfigError, match=rf"(?=.*{re.escape(key)})(?=.*lots)"):
        load_config(None, overrides)


def test_kafkas_defaults_live_in_one_place(tmp_path: Path) -> None:
    cfg = load_config(None, {"log.dirs": str(tmp_path / "d")})
    for key, value in KAFKA_DEFAULTS.items():
        assert key not in DEFAULTS and cfg.value(key) == value
    assert cfg.get_int("offsets.commit.timeout.ms") == 5000
    assert cfg.get_float("log.cleaner.io.buffer.load.factor") == 0.9
    given = load_config(None, {"log.dirs": str(tmp_path / "d"), "log.cleaner.threads": "4"})
    assert given.get_int("log.cleaner.threads") == 4
