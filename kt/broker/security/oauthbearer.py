"""SASL/OAUTHBEARER (RFC 7628, Kafka's KIP-255 and KIP-768) on the broker.

The client's one message is `n,[a=<authzid>],\\x01auth=Bearer <token>\\x01[k=v\\x01]*\\x01`.
A valid token completes the exchange with an empty answer; the principal is
`User:<the token's principal claim>`, and the token's `exp` bounds the session
(KIP-368: the connection is closed when it passes, even with
`connections.max.reauth.ms=0`). An invalid token is answered, as Kafka does, with a
JSON challenge (`{"status":"invalid_token"}`); the client acknowledges with `\\x01`
and the exchange then fails with that JSON as the message.

Two validators, as Kafka's:

- `UnsecuredValidator` (Kafka's default, for development): an unsigned JWT
  (`alg: none`) with options `unsecuredValidatorPrincipalClaimName`,
  `unsecuredValidatorScopeClaimName`, `unsecuredValidatorRequiredScope`,
  `unsecuredValidatorAllowableClockSkewMs`;
- `JwksValidator` (KIP-768's OAuthBearerValidatorCallbackHandler, for production): a
  signed JWT checked with PyJWT against the keys of `sasl.oauthbearer.jwks.endpoint.url`
  (https or `file:`), `sasl.oauthbearer.expected.audience`/`.expected.issuer`,
  `sasl.oauthbearer.clock.skew.seconds`, the sub and scope claim names; `alg: none`
  is refused and `exp`, `iat` and the sub claim are required. `JwksCache` keeps the
  key set, refreshed off the event loop.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import jwt

from kt.broker.security.sasl import IllegalSaslStateError, SaslAuthenticationError, SaslError

OAUTHBEARER = "OAUTHBEARER"
_SASLNAME = r"(?:[\x01-\x2B\x2D-\x3C\x3E-\x7F]|=2C|=3D)+"
_KVPAIRS = r"(?:[A-Za-z]+=[\x21-\x7E \t\r\n]+\x01)*"
_INITIAL = re.compile(rf"n,(?:a=(?P<authzid>{_SASLNAME}))?,\x01(?P<kv>{_KVPAIRS})\x01")
_AUTH = re.compile(r"(?P<scheme>\w+)[ ]+(?P<token>[-_~+/.a-zA-Z0-9]+=*)")
#: Signature algorithms accepted from a JWKS (public-key ones: never `none` or HMAC).
JWKS_ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512",
                   "ES256", "ES384", "ES512", "EdDSA")  # fmt: skip


@dataclass(frozen=True, slots=True)
class TokenInfo:
    """A validated token: its principal, expiry and issue time (epoch ms), scope."""

    principal: str
    expiry_ms: int
    issued_ms: int | None = None
    scope: frozenset[str] = field(default_factory=frozenset)


class TokenInvalid(Exception):
    """A token that does not validate: `status` and `scope` go into the JSON challenge;
    the message is for the broker's log."""

    def __init__(self, message: str, status: str = "invalid_token", scope: str | None = None):
        super().__init__(message)
        self.status = status
        self.scope = scope


class TokenValidator(Protocol):
    """Turns a compact JWT into a TokenInfo or raises TokenInvalid."""

    def validate(self, token: str) -> TokenInfo:
        """Validate `token`."""
        ...


def challenge(exc: TokenInvalid) -> str:
    """Kafka's JSON error challenge, byte for byte."""
    out = f'{{"status":"{exc.status}"'
    if exc.scope is not None:
        out += f', "scope":"{exc.scope}"'
    return out + "}"


def parse_initial_response(data: bytes) -> tuple[str, str, dict[str, str]]:
    """(authzid, token, extensions) of the client's first message (SaslError)."""
    text = data.decode("utf-8", errors="replace")
    m = _INITIAL.fullmatch(text)
    if m is None:
        raise SaslError("Invalid OAUTHBEARER client first message")
    pairs: dict[str, str] = {}
    for item in m.group("kv").split("\x01"):
        if item:
            key, _, value = item.partition("=")
            pairs[key] = value
    auth = pairs.pop("auth", None)
    if auth is None:
        raise SaslError("Invalid OAUTHBEARER client first message: 'auth' not specified")
    am = _AUTH.fullmatch(auth)
    if am is None:
        raise SaslError("Invalid OAUTHBEARER client first message: invalid 'auth' format")
    if am.group("scheme").lower() != "bearer":
        raise SaslError(f"Invalid scheme in OAUTHBEARER client first message: {am.group('scheme')}")
    authzid = (m.group("authzid") or "").replace("=2C", ",").replace("=3D", "=")
    return authzid, am.group("token"), pairs


class OAuthBearerServer:
    """The server side of one OAUTHBEARER exchange."""

    mechanism = OAUTHBEARER

    def __init__(self, validator: TokenValidator) -> None:
        self._validator = validator
        self._info: TokenInfo | None = None
        self._error: str | None = None
        self._failed = False
        self.extensions: dict[str, str] = {}

    @property
    def complete(self) -> bool:
        """Whether a valid token was presented."""
        return self._info is not None

    @property
    def authorization_id(self) -> str:
        """The token's principal."""
        if self._info is None:
            raise IllegalSaslStateError("Authentication exchange has not completed")
        return self._info.principal

    @property
    def credential_expiry_ms(self) -> int | None:
        """The token's `exp` in epoch milliseconds."""
        return self._info.expiry_ms if self._info is not None else None

    def evaluate(self, token: bytes) -> bytes:
        """The answer to the client's message: empty on success, the JSON challenge for
        an invalid token (then the client's `\\x01` ends the exchange in failure)."""
        if self._info is not None or self._failed:
            raise IllegalSaslStateError("Unexpected message in OAUTHBEARER server state")
        if token == b"\x01" and self._error is not None:
            self._failed = True
            raise SaslAuthenticationError(self._error)
        self._error = None
        try:
            authzid, jwt_text, extensions = parse_initial_response(token)
        except SaslError:
            self._failed = True
            raise
        try:
            info = self._validator.validate(jwt_text)
        except TokenInvalid as exc:
            self._error = challenge(exc)
            return self._error.encode()
        if authzid and authzid != info.principal:
            self._failed = True
            raise SaslAuthenticationError(
                f"Authentication failed: Client requested an authorization id ({authzid}) "
                f"that is different from the token's principal name ({info.principal})"
            )
        self.extensions = extensions  # both Kafka validators accept every extension
        self._info = info
        return b""


def _b64url(part: str) -> bytes:
    return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))


def _number(claims: Mapping[str, Any], name: str, required: bool) -> float | None:
    value = claims.get(name)
    if value is None:
        if required:
            raise TokenInvalid(f"Required claim missing: {name}")
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TokenInvalid(f"The {name} claim is not a number")
    return float(value)


def _scope(claims: Mapping[str, Any], name: str) -> frozenset[str]:
    value = claims.get(name)
    if value is None:
        return frozenset()
    if isinstance(value, str):
        return frozenset(value.split())
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return frozenset(value)
    raise TokenInvalid(f"The {name} claim is neither a string nor a list of strings")


@dataclass(frozen=True, slots=True)
class UnsecuredValidator:
    """Kafka's OAuthBearerUnsecuredValidatorCallbackHandler (development only)."""

    principal_claim: str = "sub"
    scope_claim: str = "scope"
    required_scope: frozenset[str] = frozenset()
    clock_skew_ms: int = 0
    clock: Callable[[], float] = time.time

    @classmethod
    def from_options(cls, options: Mapping[str, str], clock: Callable[[], float] = time.time
                     ) -> UnsecuredValidator:  # fmt: skip
        """From the JAAS options of the listener's OAuthBearerLoginModule."""
        skew = options.get("unsecuredValidatorAllowableClockSkewMs", "0")
        try:
            skew_ms = int(skew)
        except ValueError:
            raise ValueError(
                f"unsecuredValidatorAllowableClockSkewMs={skew!r} is not an integer"
            ) from None
        return cls(
            options.get("unsecuredValidatorPrincipalClaimName", "sub") or "sub",
            options.get("unsecuredValidatorScopeClaimName", "scope") or "scope",
            frozenset(options.get("unsecuredValidatorRequiredScope", "").split()),
            skew_ms,
            clock,
        )

    def validate(self, token: str) -> TokenInfo:
        """Check an unsigned JWT's header, claims and times."""
        parts = token.split(".")
        if len(parts) != 3 or parts[2]:
            raise TokenInvalid("An unsecured JWS must have 3 parts and no signature")
        try:
            header = json.loads(_b64url(parts[0]))
            claims = json.loads(_b64url(parts[1]))
        except (ValueError, binascii.Error):
            raise TokenInvalid("The token's header or claims are not base64url JSON") from None
        if not isinstance(header, dict) or not isinstance(claims, dict):
            raise TokenInvalid("The token's header and claims must be JSON objects")
        if header.get("alg") != "none":
            raise TokenInvalid("An unsecured JWS must have alg none")
        principal = claims.get(self.principal_claim)
        if not isinstance(principal, str) or not principal.strip():
            raise TokenInvalid(f"Required claim missing: {self.principal_claim}")
        exp = _number(claims, "exp", True)
        iat = _number(claims, "iat", False)
        assert exp is not None
        now_ms = self.clock() * 1000
        if iat is not None and iat * 1000 > now_ms + self.clock_skew_ms:
            raise TokenInvalid("The token's iat is in the future")
        if exp * 1000 <= now_ms - self.clock_skew_ms:
            raise TokenInvalid("The token has expired")
        if iat is not None and exp <= iat:
            raise TokenInvalid("The token's exp is not after its iat")
        scope = _scope(claims, self.scope_claim)
        missing = self.required_scope - scope
        if missing:
            raise TokenInvalid(
                "The token lacks a required scope",
                status="insufficient_scope",
                scope=" ".join(sorted(self.required_scope)),
            )
        return TokenInfo(principal, int(exp * 1000), None if iat is None else int(iat * 1000),
                         scope)  # fmt: skip


class JwksCache:
    """The key set of a JWKS endpoint (`https://...` or `file:...`): loaded at start,
    refreshed every `refresh_ms` and when a token names an unknown key (the caller
    runs `load()` off the event loop: it blocks on the network)."""

    def __init__(self, url: str, refresh_ms: int = 3_600_000, timeout_s: float = 10.0) -> None:
        scheme = urllib.parse.urlparse(url).scheme
        if scheme not in ("https", "http", "file"):
            raise ValueError(f"sasl.oauthbearer.jwks.endpoint.url={url}: an https or file: URL")
        self.url = url
        self.refresh_ms = refresh_ms
        self.timeout_s = timeout_s
        self.keys: jwt.PyJWKSet | None = None
        self.loaded_at = 0.0
        self.wanted = False  # a token named a key we do not have

    def load(self) -> None:
        """Fetch and parse the key set (raises OSError/ValueError)."""
        parsed = urllib.parse.urlparse(self.url)
        if parsed.scheme == "file":
            with open(urllib.request.url2pathname(parsed.path), "rb") as f:
                body = f.read()
        else:
            with urllib.request.urlopen(self.url, timeout=self.timeout_s) as resp:
                body = resp.read()
        try:
            self.keys = jwt.PyJWKSet.from_dict(json.loads(body))
        except (jwt.PyJWKSetError, jwt.InvalidKeyError, ValueError) as exc:
            raise ValueError(f"{self.url}: not a usable JWKS: {exc}") from None
        self.loaded_at = time.monotonic()
        self.wanted = False

    def due(self) -> bool:
        """Whether a refresh is due (periodic, or a key was missing)."""
        return self.wanted or (time.monotonic() - self.loaded_at) * 1000 >= self.refresh_ms

    def key(self, kid: str | None) -> jwt.PyJWK | None:
        """The key with id `kid` (the only key when the token names none)."""
        if self.keys is None:
            return None
        keys = self.keys.keys
        if kid is None:
            return keys[0] if len(keys) == 1 else None
        for k in keys:
            if k.key_id == kid:
                return k
        self.wanted = True
        return None


@dataclass(slots=True)
class JwksValidator:
    """Kafka's KIP-768 validator: signed JWTs checked against a JWKS."""

    jwks: JwksCache
    audience: tuple[str, ...] = ()
    issuer: str | None = None
    clock_skew_s: int = 30
    sub_claim: str = "sub"
    scope_claim: str = "scope"

    def validate(self, token: str) -> TokenInfo:
        """Verify the signature, audience, issuer and times; require exp, iat, sub."""
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError as exc:
            raise TokenInvalid(f"Malformed JWT: {exc}") from None
        alg = header.get("alg")
        if alg not in JWKS_ALGORITHMS:
            raise TokenInvalid(f"JWT algorithm {alg!r} is not accepted")
        key = self.jwks.key(header.get("kid"))
        if key is None:
            raise TokenInvalid(f"No key in the JWKS for kid {header.get('kid')!r}")
        try:
            claims = jwt.decode(
                token,
                key.key,
                algorithms=[alg],
                audience=list(self.audience) or None,
                issuer=self.issuer,
                leeway=self.clock_skew_s,
                options={"require": ["exp", "iat", self.sub_claim],
                         "verify_aud": bool(self.audience)},
            )  # fmt: skip
        except jwt.PyJWTError as exc:
            raise TokenInvalid(f"JWT validation failed: {exc}") from None
        principal = claims.get(self.sub_claim)
        if not isinstance(principal, str) or not principal.strip():
            raise TokenInvalid(f"The {self.sub_claim} claim is not a non-empty string")
        return TokenInfo(
            principal,
            int(float(claims["exp"]) * 1000),
            int(float(claims["iat"]) * 1000),
            _scope(claims, self.scope_claim),
        )


def unsecured_token(claims: Mapping[str, Any]) -> str:
    """An unsigned JWT (`alg: none`) with these claims: what Kafka's unsecured login
    module makes, for development and tests."""

    def enc(obj: Mapping[str, Any]) -> str:
        data = json.dumps(obj, separators=(",", ":")).encode()
        return base64.urlsafe_b64encode(data).rstrip(b"=").decode()

    return f"{enc({'alg': 'none'})}.{enc(claims)}."


def initial_response(token: str, authzid: str = "", extensions: Mapping[str, str] | None = None
                     ) -> bytes:  # fmt: skip
    """A client's first OAUTHBEARER message (Kafka's client format)."""
    ext = "".join(f"\x01{k}={v}" for k, v in (extensions or {}).items())
    a = f"a={authzid}" if authzid else ""
    return f"n,{a},\x01auth=Bearer {token}{ext}\x01\x01".encode()
