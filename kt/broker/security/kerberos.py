"""SASL/GSSAPI on the broker (RFC 4752) and Kafka's Kerberos principal mapping.

`GssapiServer` is the sans-IO exchange Java's GssKrb5Server runs for Kafka: GSS-API
context tokens until the Kerberos context is established (the client's AP-REQ, the
broker's AP-REP for mutual authentication), then the security-layer negotiation —
the broker offers only "no security layer" (Kafka's brokers do: TLS, not SASL,
protects data), the client picks it and names an authorization id. As in Kafka, the
authenticated Kerberos principal (not the authorization id) is the identity, mapped
by `sasl.kerberos.principal.to.local.rules` (`KerberosShortNamer`) to `User:<name>`.

The GSS-API work is MIT krb5's, through the `gssapi` binding (`Acceptor`); the
broker's keys come from the keytab and principal of its JAAS line
(`com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true
keyTab="..." principal="kafka/host@REALM";`). KRB5_CONFIG applies as usual.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Protocol

from kt.broker.security.sasl import IllegalSaslStateError, SaslError

GSSAPI = "GSSAPI"
KRB5_LOGIN_MODULE = "com.sun.security.auth.module.Krb5LoginModule"

# the one security layer kt offers: none (RFC 4752 bit 1)
_NO_SECURITY_LAYER = 0x01


class KerberosConfigError(ValueError):
    """A Kerberos setting that cannot work (a bad rule, an unusable keytab)."""


class NoMatchingRule(Exception):
    """No `sasl.kerberos.principal.to.local.rules` rule maps a principal (Kafka's
    message)."""


# --- principals and rules --------------------------------------------------------------------

_NAME = re.compile(r"([^/@]+)(/([^/@]+))?(@([^/@]+))?")


@dataclass(frozen=True, slots=True)
class KerberosName:
    """`service[/host][@REALM]`, as Kafka's KerberosName parses it."""

    service: str
    host: str | None
    realm: str | None

    @classmethod
    def parse(cls, name: str) -> KerberosName:
        """Split a principal name; a name Kafka's parser rejects raises ValueError."""
        m = _NAME.fullmatch(name)
        if m is None:
            if "@" in name:
                raise ValueError(f"Malformed Kerberos name: {name}")
            return cls(name, None, None)
        return cls(m.group(1), m.group(3), m.group(5))

    def __str__(self) -> str:
        out = self.service
        if self.host is not None:
            out += "/" + self.host
        if self.realm is not None:
            out += "@" + self.realm
        return out


# Kafka's KerberosShortNamer.RULE_PARSER, one rule at a time
_RULE = re.compile(
    r"\s*((DEFAULT)|(RULE:\[(\d*):([^\]]*)](\(([^)]*)\))?(s/([^/]*)/([^/]*)/(g)?)?/?(L|U)?))"
)
_PARAMETER = re.compile(r"([^$]*)(\$(\d*))?")
_NON_SIMPLE = re.compile(r"[/@]")


def _java_replacement(template: str) -> Any:
    """A re.sub replacement doing what Java's Matcher.replaceAll does with `template`:
    `$n` is group n, a backslash quotes the next character."""

    def expand(m: re.Match[str]) -> str:
        out: list[str] = []
        i = 0
        while i < len(template):
            c = template[i]
            if c == "\\" and i + 1 < len(template):
                out.append(template[i + 1])
                i += 2
            elif c == "$":
                j = i + 1
                while j < len(template) and template[j].isdigit():
                    j += 1
                if j == i + 1:
                    raise NoMatchingRule(f"Illegal group reference in {template!r}")
                out.append(m.group(int(template[i + 1 : j])) or "")
                i = j
            else:
                out.append(c)
                i += 1
        return "".join(out)

    return expand


@dataclass(frozen=True, slots=True)
class KerberosRule:
    """One `DEFAULT` or `RULE:[n:format](match)s/from/to/[g][/L|/U]` rule."""

    text: str
    default_realm: str | None
    is_default: bool = False
    components: int = 0
    fmt: str = ""
    match: re.Pattern[str] | None = None
    from_pattern: re.Pattern[str] | None = None
    to_pattern: str = ""
    repeat: bool = False
    lower: bool = False
    upper: bool = False

    def _format(self, params: list[str]) -> str:
        out: list[str] = []
        for m in _PARAMETER.finditer(self.fmt):
            if not m.group(0):
                continue
            out.append(m.group(1))
            if m.group(3) is not None:
                try:
                    n = int(m.group(3))
                except ValueError:
                    raise NoMatchingRule(
                        f"bad format in username mapping in {m.group(3)}"
                    ) from None
                if n < 0 or n >= len(params):
                    raise NoMatchingRule(
                        f"index {n} from {self.fmt} is outside of the valid range 0 to "
                        f"{len(params) - 1}"
                    )
                out.append(params[n])
        return "".join(out)

    def apply(self, params: list[str]) -> str | None:
        """The short name for `[realm, service(, host)]`, or None if the rule does not
        apply (KerberosRule.apply)."""
        result: str | None = None
        if self.is_default:
            if self.default_realm is not None and self.default_realm == params[0]:
                result = params[1]
        elif len(params) - 1 == self.components:
            base = self._format(params)
            if self.match is None or self.match.fullmatch(base):
                if self.from_pattern is None:
                    result = base
                else:
                    result = self.from_pattern.sub(
                        _java_replacement(self.to_pattern), base, count=0 if self.repeat else 1
                    )
        if result is not None and _NON_SIMPLE.search(result):
            raise NoMatchingRule(f"Non-simple name {result} after auth_to_local rule {self.text}")
        if result is not None and self.lower:
            result = result.lower()
        elif result is not None and self.upper:
            result = result.upper()
        return result


def parse_rules(rules: str, default_realm: str | None) -> list[KerberosRule]:
    """`sasl.kerberos.principal.to.local.rules` (a comma-separated list) as rules;
    an unparseable rule raises KerberosConfigError with Kafka's "Invalid rule" text."""
    items = [r.strip() for r in rules.split(",") if r.strip()] or ["DEFAULT"]
    remaining = " ".join(items)
    out: list[KerberosRule] = []
    while remaining.strip():
        m = _RULE.match(remaining)
        if m is None or not m.group(0).strip():
            raise KerberosConfigError(f"Invalid rule: {remaining.strip()}")
        text = m.group(1)
        if m.group(2) is not None:
            out.append(KerberosRule(text, default_realm, is_default=True))
        else:
            try:
                match = re.compile(m.group(7)) if m.group(7) is not None else None
                from_pattern = re.compile(m.group(9)) if m.group(9) is not None else None
            except re.error as exc:
                raise KerberosConfigError(f"Invalid rule: {text} ({exc})") from None
            out.append(KerberosRule(
                text, default_realm, components=int(m.group(4) or 0), fmt=m.group(5),
                match=match, from_pattern=from_pattern, to_pattern=m.group(10) or "",
                repeat=m.group(11) == "g", lower=m.group(12) == "L",
                upper=m.group(12) == "U"))  # fmt: skip
        remaining = remaining[m.end() :]
    return out


class KerberosShortNamer:
    """Kafka's KerberosShortNamer: the first rule that applies names the user."""

    def __init__(self, rules: str = "DEFAULT", default_realm: str | None = None) -> None:
        self.text = rules
        self.rules = parse_rules(rules, default_realm)

    def short_name(self, name: KerberosName) -> str:
        """The local name of `name` (raises NoMatchingRule)."""
        if name.host is None:
            if name.realm is None:
                return name.service
            params = [name.realm, name.service]
        else:
            params = [name.realm or "", name.service, name.host]
        for rule in self.rules:
            result = rule.apply(params)
            if result is not None:
                return result
        listed = ", ".join(r.text for r in self.rules)
        raise NoMatchingRule(f"No rules apply to {name}, rules [{listed}]")


# --- the GSS-API acceptor --------------------------------------------------------------------


class AcceptContext(Protocol):
    """One GSS-API acceptor security context (the gssapi binding's, or a test's)."""

    @property
    def complete(self) -> bool:
        """Whether the context is established."""
        ...

    @property
    def initiator(self) -> str:
        """The authenticated client principal (once complete)."""
        ...

    def step(self, token: bytes) -> bytes:
        """Accept one context token; the token to send back (maybe empty)."""
        ...

    def wrap(self, data: bytes) -> bytes:
        """Integrity-protect `data` (no confidentiality)."""
        ...

    def unwrap(self, data: bytes) -> bytes:
        """Check and strip the protection of `data`."""
        ...


class GssapiServer:
    """SASL/GSSAPI's server side for one connection (RFC 4752, Java's GssKrb5Server):
    context tokens, then the security-layer offer and the client's choice."""

    mechanism = GSSAPI
    credential_expiry_ms: int | None = None

    def __init__(self, context: AcceptContext, namer: KerberosShortNamer) -> None:
        self._ctx = context
        self._namer = namer
        self._stage = "context"
        self._user: str | None = None

    @property
    def complete(self) -> bool:
        """Whether the client authenticated."""
        return self._user is not None

    @property
    def authorization_id(self) -> str:
        """The short name of the client's Kerberos principal."""
        if self._user is None:
            raise IllegalSaslStateError("Authentication exchange has not completed")
        return self._user

    def evaluate(self, token: bytes) -> bytes:
        """The answer to the client's next message."""
        if self._stage == "context":
            out = self._ctx.step(token)
            if self._ctx.complete:
                # the offer goes with the client's next (empty) message, after it has
                # read our AP-REP
                self._stage = "offer"
            return out
        if self._stage == "offer":
            self._stage = "choice"
            # offer no security layer; the maximum buffer size is then meaningless: 0
            return self._ctx.wrap(bytes([_NO_SECURITY_LAYER, 0, 0, 0]))
        if self._stage == "choice":
            self._stage = "done"
            choice = self._ctx.unwrap(token)
            if len(choice) < 4:
                raise SaslError("GSSAPI: the client's security layer message is too short")
            if choice[0] != _NO_SECURITY_LAYER:
                raise SaslError(
                    f"GSSAPI: the client chose security layer {choice[0]:#04x}; only "
                    "no security layer (0x01) is offered"
                )
            # Kafka's callback handler authorizes the authenticated principal whatever
            # authorization id the client names, and maps that principal
            principal = self._ctx.initiator
            try:
                self._user = self._namer.short_name(KerberosName.parse(principal))
            except (NoMatchingRule, ValueError) as exc:
                raise SaslError(
                    f"Failed to set name for '{principal}' based on Kerberos authentication "
                    f"rules. ({exc})"
                ) from None
            return b""
        raise IllegalSaslStateError("Unexpected challenge in Sasl server state")


class _GssContext:
    """AcceptContext over gssapi.SecurityContext; GSS errors become SaslErrors (their
    text is logged, never sent to the client)."""

    def __init__(self, ctx: Any, errors: type[Exception]) -> None:
        self._ctx = ctx
        self._errors = errors

    def _call(self, what: str, fn: Any, *args: Any) -> Any:
        try:
            return fn(*args)
        except self._errors as exc:
            raise SaslError(f"GSSAPI: {what} failed: {' '.join(str(exc).split())}") from None

    @property
    def complete(self) -> bool:
        # a failed accept returns the KRB-ERROR token and raises here, on next use
        return bool(self._call("accepting the security context", lambda: self._ctx.complete))

    @property
    def initiator(self) -> str:
        return str(self._ctx.initiator_name)

    def step(self, token: bytes) -> bytes:
        return bytes(self._call("accepting the security context", self._ctx.step, token) or b"")

    def wrap(self, data: bytes) -> bytes:
        return bytes(self._call("wrap", self._ctx.wrap, data, False).message)

    def unwrap(self, data: bytes) -> bytes:
        return bytes(self._call("unwrap", self._ctx.unwrap, data).message)


def _gssapi() -> Any:
    try:
        import gssapi
    except ImportError:
        raise KerberosConfigError(
            "GSSAPI needs the gssapi package (pip install gssapi; it builds against libkrb5-dev)"
        ) from None
    return gssapi


def default_realm() -> str | None:
    """The default realm of the Kerberos configuration (KRB5_CONFIG), if it names one."""
    gssapi = _gssapi()
    try:
        name = gssapi.Name("kt", gssapi.NameType.kerberos_principal)
        full = str(name.canonicalize(gssapi.MechType.kerberos))
    except gssapi.exceptions.GSSError:
        return None
    return full.partition("@")[2] or None


class Acceptor:
    """The broker's Kerberos identity: accepting credentials for `principal` from
    `keytab`, acquired (and so checked) once at start-up."""

    def __init__(self, principal: str, keytab: str) -> None:
        gssapi = _gssapi()
        self._gssapi = gssapi
        self.principal = principal
        try:
            name = gssapi.Name(principal, gssapi.NameType.kerberos_principal)
            self._creds = gssapi.Credentials(name=name, usage="accept", store={"keytab": keytab})
            # acquiring is lazy in places: ask for the lifetime so a keytab without
            # this principal's keys fails now, not on the first client
            _ = self._creds.lifetime
        except gssapi.exceptions.GSSError as exc:
            raise KerberosConfigError(
                f"cannot use the keys of {principal} in keytab {keytab}: "
                f"{' '.join(str(exc).split())}"
            ) from None

    def context(self) -> AcceptContext:
        """A fresh acceptor context for one connection."""
        ctx = self._gssapi.SecurityContext(creds=self._creds, usage="accept")
        return _GssContext(ctx, self._gssapi.exceptions.GSSError)
