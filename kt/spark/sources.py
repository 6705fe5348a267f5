"""The list of kt's PySpark data sources (each defined in its own module)."""

from __future__ import annotations

from typing import Any

ALL_SOURCES: list[Any] = []


def _load() -> None:
    import importlib

    for module, attr in (
        ("kt.spark.segments_source", "SegmentsDataSource"),
        ("kt.spark.live_source", "KafkaDataSource"),
    ):
        try:
            ALL_SOURCES.append(getattr(importlib.import_module(module), attr))
        except ModuleNotFoundError as exc:
            if exc.name != module:
                raise


_load()
