"""Kafka's JAAS configuration property syntax (`sasl.jaas.config`).

`<LoginModuleClass> <flag> (key=value)* ;`, repeated: the flag is one of
required/requisite/sufficient/optional (any case), values are quoted (`"..."` or
`'...'`, with Java escapes) or bare words, `//` and `/* */` comments are allowed.
Kafka tokenizes with java.io.StreamTokenizer, so an unquoted number is not a value
(`x=8192` fails with "Value not specified for key 'x' in JAAS config"); this
tokenizer keeps that behaviour. Values are secrets more often than not: nothing
here logs them, and errors name keys only.
"""

from __future__ import annotations

from dataclasses import dataclass, field

FLAGS = ("required", "requisite", "sufficient", "optional")


class JaasConfigError(ValueError):
    """A JAAS config Kafka would refuse (Kafka's message)."""


@dataclass(frozen=True, slots=True)
class LoginModule:
    """One login module entry: its class name, control flag and options."""

    name: str
    flag: str
    options: dict[str, str] = field(default_factory=dict)

    def __repr__(self) -> str:
        # never show option values: passwords live there
        return f"LoginModule({self.name!r}, {self.flag!r}, keys={sorted(self.options)})"


_WORD, _NUMBER, _QUOTED, _CHAR, _EOF = range(5)
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f", "a": "\a", "v": "\v"}


def _is_word_start(c: str) -> bool:
    return c.isalpha() or c in "-_$" or ord(c) >= 160


def _is_word_part(c: str) -> bool:
    return _is_word_start(c) or c.isdigit() or c == "."


def _tokens(text: str) -> list[tuple[int, str]]:
    out: list[tuple[int, str]] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c <= " ":
            i += 1
        elif text.startswith("//", i):
            end = text.find("\n", i)
            i = n if end < 0 else end + 1
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            i = n if end < 0 else end + 2
        elif c in "\"'":
            value, i = _quoted(text, i + 1, c)
            out.append((_QUOTED, value))
        elif _is_word_start(c):
            j = i + 1
            while j < n and _is_word_part(text[j]):
                j += 1
            out.append((_WORD, text[i:j]))
            i = j
        elif c.isdigit() or c == ".":
            j = i + 1
            while j < n and (text[j].isdigit() or text[j] == "."):
                j += 1
            out.append((_NUMBER, text[i:j]))
            i = j
        else:
            out.append((_CHAR, c))
            i += 1
    out.append((_EOF, ""))
    return out


def _quoted(text: str, i: int, quote: str) -> tuple[str, int]:
    # StreamTokenizer: the string ends at the matching quote or the end of the line
    chars: list[str] = []
    n = len(text)
    while i < n and text[i] != quote and text[i] not in "\r\n":
        c = text[i]
        if c == "\\" and i + 1 < n:
            nxt = text[i + 1]
            if nxt in "01234567":
                j = i + 1
                while j < n and j < i + 4 and text[j] in "01234567":
                    j += 1
                chars.append(chr(int(text[i + 1 : j], 8) & 0xFF))
                i = j
                continue
            chars.append(_ESCAPES.get(nxt, nxt))
            i += 2
            continue
        chars.append(c)
        i += 1
    if i < n and text[i] == quote:
        i += 1
    return "".join(chars), i


def parse_jaas(text: str) -> list[LoginModule]:
    """Every login module entry of a `sasl.jaas.config` value."""
    toks = _tokens(text)
    pos = 0
    modules: list[LoginModule] = []
    while toks[pos][0] != _EOF:
        kind, name = toks[pos]
        if kind != _WORD:
            raise JaasConfigError("Invalid JAAS config: login module name expected")
        pos += 1
        kind, flag = toks[pos]
        if kind != _WORD or flag.lower() not in FLAGS:
            raise JaasConfigError(f"Invalid login module control flag '{flag}' in JAAS config")
        pos += 1
        options: dict[str, str] = {}
        while not (toks[pos][0] == _CHAR and toks[pos][1] == ";"):
            kind, key = toks[pos]
            if kind == _EOF:
                raise JaasConfigError("JAAS config entry not terminated by semi-colon")
            if kind != _WORD:
                raise JaasConfigError("Invalid JAAS config: option name expected")
            pos += 1
            if toks[pos] != (_CHAR, "="):
                raise JaasConfigError(f"Value not specified for key '{key}' in JAAS config")
            pos += 1
            kind, value = toks[pos]
            if kind not in (_WORD, _QUOTED):
                raise JaasConfigError(f"Value not specified for key '{key}' in JAAS config")
            options[key] = value
            pos += 1
        pos += 1
        modules.append(LoginModule(name, flag.lower(), options))
    return modules


def single_module(text: str) -> LoginModule:
    """The one login module a broker's `<mechanism>.sasl.jaas.config` must hold."""
    modules = parse_jaas(text)
    if len(modules) != 1:
        raise JaasConfigError(
            f"JAAS config property contains {len(modules)} login modules, should be 1 module"
        )
    return modules[0]
