"""Who a connection is: Kafka's DefaultKafkaPrincipalBuilder for kt's listeners.

- PLAINTEXT, and SSL without a client certificate: `User:ANONYMOUS`;
- SSL with a client certificate: `User:<name>`, the certificate's subject DN (RFC
  2253 form, as Java's `X500Principal.getName()`) mapped through
  `ssl.principal.mapping.rules`;
- SASL_PLAINTEXT/SASL_SSL: `User:<authorization id>` of the SASL exchange (a client
  certificate does not count there).

`ssl.principal.mapping.rules` (Kafka's SslPrincipalMapper): a comma-separated list of
`DEFAULT` (the DN as is) and `RULE:<regex>/<replacement>/[L|U]` (commas may appear
inside a rule; `\\/` escapes a slash); the first rule whose regex matches the *whole*
DN wins, its replacement (`$1` back-references) optionally lower- or upper-cased; no
matching rule fails the authentication.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from cryptography import x509
from cryptography.x509.oid import NameOID

ANONYMOUS = "User:ANONYMOUS"

_RULE = r"(DEFAULT)|RULE:((?:\\.|[^\\/])*)/((?:\\.|[^\\/])*)/([LU]?).*?|(.*?)"
_SPLITTER = re.compile(r"\s*(" + _RULE + r")\s*(?:,\s*|$)")
_PARSER = re.compile(_RULE)


class PrincipalMappingError(ValueError):
    """No rule applies to a DN, or the rules do not parse."""


@dataclass(frozen=True, slots=True)
class _Rule:
    default: bool
    pattern: re.Pattern[str] | None = None
    replacement: str = ""
    lower: bool = False
    upper: bool = False

    def apply(self, dn: str) -> str | None:
        if self.default or self.pattern is None:
            return dn
        m = self.pattern.fullmatch(dn)
        if m is None:
            return None
        groups = self.pattern.groups

        def expand(match: re.Match[str]) -> str:
            return _java_replacement(self.replacement, match, groups)

        result = self.pattern.sub(expand, dn)
        if self.lower:
            return result.lower()
        if self.upper:
            return result.upper()
        return result

    def __str__(self) -> str:
        if self.default:
            return "DEFAULT"
        assert self.pattern is not None
        flag = "/L" if self.lower else "/U" if self.upper else ""
        return f"RULE:{self.pattern.pattern}/{self.replacement}{flag}"


def _java_replacement(replacement: str, m: re.Match[str], groups: int) -> str:
    """Java's Matcher.appendReplacement: `$n` is group n (digits taken while the number
    stays a valid group; Kafka escapes higher ones, so they stay literal), `\\x` is x."""
    out: list[str] = []
    i, n = 0, len(replacement)
    while i < n:
        c = replacement[i]
        if c == "\\" and i + 1 < n:
            out.append(replacement[i + 1])
            i += 2
        elif c == "$" and i + 1 < n and replacement[i + 1].isdigit():
            j = i + 2
            ref = int(replacement[i + 1])
            if ref > groups:
                out.append(replacement[i : i + 2])
                i += 2
                continue
            while j < n and replacement[j].isdigit() and int(replacement[i + 1 : j + 1]) <= groups:
                ref = int(replacement[i + 1 : j + 1])
                j += 1
            out.append(m.group(ref) or "")
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


class SslPrincipalMapper:
    """`ssl.principal.mapping.rules`, parsed once."""

    def __init__(self, rules: str | None = "DEFAULT") -> None:
        self.rules: list[_Rule] = []
        text = "DEFAULT" if rules is None else rules.strip()
        for m in _SPLITTER.finditer(text):
            self.rules.extend(_parse_rule(m.group(1)))

    def name(self, dn: str) -> str:
        """The principal name for a certificate's DN (PrincipalMappingError when no
        rule applies)."""
        for rule in self.rules:
            result = rule.apply(dn)
            if result is not None:
                return result
        raise PrincipalMappingError(
            f"No rules apply to {dn}, rules [{', '.join(str(r) for r in self.rules)}]"
        )


def _parse_rule(rule: str) -> list[_Rule]:
    m = _PARSER.match(rule)
    if m is None:
        raise PrincipalMappingError(f"Invalid rule: {rule}")
    if m.end() != len(rule):
        raise PrincipalMappingError(
            f"Invalid rule: `{rule}`, unmatched substring: `{rule[m.end() :]}`"
        )
    if m.group(1) is not None:
        return [_Rule(True)]
    if m.group(2) is not None:
        try:
            pattern = re.compile(m.group(2))
        except re.error as exc:
            raise PrincipalMappingError(f"Invalid rule: {rule}: {exc}") from None
        return [_Rule(False, pattern, m.group(3), m.group(4) == "L", m.group(4) == "U")]
    return []  # empty rules are ignored, as in Kafka


#: RFC 2253 keywords Java's X500Principal.getName() uses; other attributes appear as
#: dotted OIDs.
_KEYWORDS = {
    NameOID.COMMON_NAME: "CN", NameOID.COUNTRY_NAME: "C", NameOID.LOCALITY_NAME: "L",
    NameOID.STATE_OR_PROVINCE_NAME: "ST", NameOID.ORGANIZATION_NAME: "O",
    NameOID.ORGANIZATIONAL_UNIT_NAME: "OU", NameOID.STREET_ADDRESS: "STREET",
    NameOID.DOMAIN_COMPONENT: "DC", NameOID.USER_ID: "UID",
}  # fmt: skip


def certificate_dn(der: bytes) -> str:
    """The subject DN of a DER certificate in RFC 2253 form (most specific RDN
    first, as Java prints it)."""
    cert = x509.load_der_x509_certificate(der)
    overrides = {oid: name for oid, name in _KEYWORDS.items()}
    for attr in cert.subject:
        if attr.oid not in overrides:
            overrides[attr.oid] = attr.oid.dotted_string
    return cert.subject.rfc4514_string(overrides)


def ssl_principal(der: bytes | None, mapper: SslPrincipalMapper) -> str:
    """The principal of a TLS connection: ANONYMOUS without a client certificate."""
    if der is None:
        return ANONYMOUS
    dn = certificate_dn(der)
    try:
        return f"User:{mapper.name(dn)}"
    except PrincipalMappingError:
        raise PrincipalMappingError(
            f"Failed to map name for '{dn}' based on SSL principal mapping rules."
        ) from None
