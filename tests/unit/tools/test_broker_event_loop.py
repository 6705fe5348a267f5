"""KT_EVENT_LOOP: which event loop `kt broker start` runs on (issue 19, §3).

The default is asyncio's own loop even where uvloop is installed (uvloop measured no
faster for this broker: docs/design/event-loops.md); uvloop on request."""

from __future__ import annotations

import asyncio

import click
import pytest

from kt.tools.broker_cmd import _loop_factory


def test_the_default_is_asyncio_even_with_uvloop_installed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("KT_EVENT_LOOP", raising=False)
    name, factory = _loop_factory()
    assert name == "asyncio" and factory is asyncio.new_event_loop
    monkeypatch.setenv("KT_EVENT_LOOP", " AsyncIO ")
    assert _loop_factory()[0] == "asyncio"


def test_uvloop_on_request(monkeypatch: pytest.MonkeyPatch) -> None:
    uvloop = pytest.importorskip("uvloop")
    monkeypatch.setenv("KT_EVENT_LOOP", "uvloop")
    name, factory = _loop_factory()
    assert name == f"uvloop {uvloop.__version__}"
    loop = factory()
    try:
        assert isinstance(loop, uvloop.Loop)
    finally:
        loop.close()


def test_an_unknown_loop_is_a_usage_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KT_EVENT_LOOP", "trio")
    with pytest.raises(click.ClickException) as exc:
        _loop_factory()
    assert exc.value.exit_code == 2
