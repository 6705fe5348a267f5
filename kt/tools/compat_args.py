"""Kafka's tool command lines parsed as Kafka's tools parse them (joptsimple's rules).

Kafka's `bin/` tools take GNU-style long options: `--name value` or `--name=value`,
flags without a value, repeatable options, and any unambiguous prefix of an option's
name (`--bootstrap` for `--bootstrap-server`). An option no Kafka 3.x version of the
tool knows is refused with joptsimple's own words ("zookeeper is not a recognized
option"); an option Kafka knows but kt does not implement is refused naming it, so
nothing a runbook asks for is silently ignored.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum


class Arity(Enum):
    """How many values an option takes."""

    FLAG = 0
    VALUE = 1
    OPTIONAL = 2  # `--state` or `--state Stable` (a value unless the next word is an option)


class CompatUsageError(Exception):
    """A command line Kafka's tool would refuse (exit 1, as Kafka's tools exit)."""


class KafkaMessage(CompatUsageError):
    """A failure Kafka's tool reports as one bare line on stderr (a TerseException,
    or an exception's message), printed as it is; exit 1."""


class UnrecognizedOption(CompatUsageError):
    """An option the Kafka tool does not have: joptsimple's message."""

    def __init__(self, name: str) -> None:
        super().__init__(f"{name} is not a recognized option")
        self.name = name


class UnsupportedOption(CompatUsageError):
    """An option of Kafka's tool that kt does not implement."""

    def __init__(self, tool: str, name: str, why: str = "") -> None:
        detail = f": {why}" if why else ""
        super().__init__(f"{tool}: option --{name} is not supported by kt{detail}")
        self.name = name


@dataclass(frozen=True)
class Spec:
    """A tool's options: those kt implements and those Kafka has that kt refuses."""

    supported: dict[str, Arity]
    # Kafka's options kt does not implement, each with an optional reason.
    unsupported: dict[str, str] = field(default_factory=dict)
    # argparse4j tools' short names: "-c" -> "config"
    short: dict[str, str] = field(default_factory=dict)
    # supported options that the tool always refuses, in Kafka's own words (parsed so
    # that the words can be Kafka's): name -> why, for `kt compat list`
    refused: dict[str, str] = field(default_factory=dict)


@dataclass
class Parsed:
    """The options given (name -> values; a flag has one None value) and the words
    that are not options, in order."""

    options: dict[str, list[str | None]]
    positional: list[str]
    # each option's word as typed (`--feat`, `-t`, `--feature=a=1`), in order: the
    # name argparse4j's refusals quote
    typed: list[tuple[str, str]] = field(default_factory=list)

    def has(self, name: str) -> bool:
        """Whether the option was given."""
        return name in self.options

    def value(self, name: str) -> str | None:
        """The option's last value (None when absent or given without one)."""
        values = self.options.get(name)
        return values[-1] if values else None

    def values(self, name: str) -> list[str]:
        """Every value the option was given, in order."""
        return [v for v in self.options.get(name, []) if v is not None]

    def first_typed(self, names: list[str]) -> str | None:
        """The first of these options on the command line, as typed (None if none)."""
        return next((word for name, word in self.typed if name in names), None)


def _resolve(tool: str, spec: Spec, given: str) -> tuple[str, Arity]:
    known = {**spec.supported, **{name: Arity.VALUE for name in spec.unsupported}}
    if given in known:
        name = given
    else:
        matches = [n for n in known if n.startswith(given)]
        if len(matches) != 1:
            # joptsimple names the option without its dashes.
            raise UnrecognizedOption(given)
        name = matches[0]
    if name in spec.unsupported:
        raise UnsupportedOption(tool, name, spec.unsupported[name])
    return name, spec.supported[name]


def parse(tool: str, spec: Spec, argv: list[str]) -> Parsed:
    """Parse `argv` against `spec`; CompatUsageError on what Kafka (or kt) refuses."""
    options: dict[str, list[str | None]] = {}
    positional: list[str] = []
    typed: list[tuple[str, str]] = []
    i = 0
    while i < len(argv):
        word = typed_word = argv[i]
        i += 1
        if word in spec.short:
            word = "--" + spec.short[word]
        if word == "--":
            positional += argv[i:]
            break
        if not word.startswith("--") or word == "-":
            if word.startswith("-") and len(word) > 1 and not _is_number(word):
                raise UnrecognizedOption(word.lstrip("-"))
            positional.append(word)
            continue
        given, eq, inline = word[2:].partition("=")
        name, arity = _resolve(tool, spec, given)
        value: str | None = None
        if arity is Arity.FLAG:
            if eq:
                raise CompatUsageError(f"Option {name} does not take an argument")
        elif eq:
            value = inline
        elif arity is Arity.VALUE:
            if i >= len(argv):
                raise CompatUsageError(f"Option {name} requires an argument")
            value = argv[i]
            i += 1
        elif i < len(argv) and not argv[i].startswith("--"):
            value = argv[i]
            i += 1
        options.setdefault(name, []).append(value)
        typed.append((name, typed_word))
    return Parsed(options, positional, typed)


def _is_number(word: str) -> bool:
    try:
        int(word)
    except ValueError:
        return False
    return True
