"""Sans-IO SASL for the client side of a Kafka connection: mechanisms and the exchange.

Mechanisms turn server challenges into client responses and know when they are done;
they never touch a socket:

- `PlainMechanism` (RFC 4616): one message, `authzid NUL user NUL password`.
- `ScramMechanism` (RFC 5802, RFC 7677): SCRAM-SHA-256 / SCRAM-SHA-512 (and SHA-1 for
  the RFC's own test vector); it checks the server's signature, so a broker that
  does not know the password cannot pretend it does.
- `OAuthBearerMechanism` (RFC 7628): the GS2 initial response with the bearer token;
  a server error challenge (JSON) is answered with the single byte 0x01, as the RFC
  asks, and kept for the error message.
- `GssapiMechanism` (RFC 4752): Kerberos through a GSS-API security context the
  caller supplies (`GssContext`; kt.client.kerberos wraps the `gssapi` binding), then
  the security-layer negotiation (kt asks for none: TLS protects the connection).

`SaslExchange` is the Kafka part, as a state machine in the style of
`kt.protocol.connection`: it says which request to send next (SaslHandshake, then
SaslAuthenticate with each token, or raw length-prefixed tokens after a v0 handshake
for brokers without SaslAuthenticate), reads the responses, and ends with the
session lifetime the broker announced (KIP-368) or a `SaslError` whose message says
what went wrong in one line. The caller does the I/O.

Kafka's SCRAM hashes the password's UTF-8 bytes without SASLprep (its
`ScramFormatter`), so this module does the same: a library normalising passwords
first would compute different keys for some non-ASCII passwords.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
from dataclasses import dataclass, field
from typing import Any, Protocol

from kt.protocol.apis import SASL_AUTHENTICATE, SASL_HANDSHAKE
from kt.protocol.codec import Api

#: error codes of the SASL APIs (kt.protocol.errors.ErrorCode values)
_UNSUPPORTED_SASL_MECHANISM = 33
_ILLEGAL_SASL_STATE = 34
_SASL_AUTHENTICATION_FAILED = 58
_UNSUPPORTED_VERSION = 35

MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER", "GSSAPI")


class SaslError(Exception):
    """Authentication failed or could not proceed; the message is one line for users.

    `kind` is "auth" (credentials refused), "mechanism" (the broker does not enable
    the mechanism; `offered` lists the ones it does), or "protocol".
    """

    def __init__(self, message: str, *, kind: str = "auth", offered: list[str] | None = None):
        super().__init__(message)
        self.kind = kind
        self.offered = offered or []


class Mechanism(Protocol):
    """A client-side SASL mechanism."""

    name: str
    #: the user name for error messages (None when the mechanism has none)
    user: str | None

    def initial(self) -> bytes:
        """The first client message."""

    def respond(self, challenge: bytes) -> bytes | None:
        """The answer to a server message, or None when nothing more is to be sent."""

    @property
    def complete(self) -> bool:
        """Whether the exchange has ended successfully from this side's view."""


# --- PLAIN -----------------------------------------------------------------------------


class PlainMechanism:
    """SASL/PLAIN: the password travels as is, so use it over TLS only."""

    name = "PLAIN"

    def __init__(self, username: str, password: str, authzid: str = "") -> None:
        self.user: str | None = username
        self._message = f"{authzid}\0{username}\0{password}".encode()
        self._sent = False

    def initial(self) -> bytes:
        """`authzid NUL authcid NUL passwd` in UTF-8."""
        self._sent = True
        return self._message

    def respond(self, challenge: bytes) -> bytes | None:
        """PLAIN has no further messages: the server's (empty) answer ends it."""
        return None

    @property
    def complete(self) -> bool:
        """True once the message went out (the server's verdict is the response's)."""
        return self._sent


# --- SCRAM -----------------------------------------------------------------------------

_SCRAM_HASHES = {"SCRAM-SHA-1": "sha1", "SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}


def scram_salted_password(hash_name: str, password: str, salt: bytes, iterations: int) -> bytes:
    """Hi(UTF-8(password), salt, i) of RFC 5802 (PBKDF2 with HMAC-`hash_name`)."""
    return hashlib.pbkdf2_hmac(hash_name, password.encode(), salt, iterations)


def scram_keys(hash_name: str, salted: bytes) -> tuple[bytes, bytes, bytes]:
    """(ClientKey, StoredKey, ServerKey) from a salted password."""
    client_key = hmac.digest(salted, b"Client Key", hash_name)
    stored_key = hashlib.new(hash_name, client_key).digest()
    server_key = hmac.digest(salted, b"Server Key", hash_name)
    return client_key, stored_key, server_key


def _saslname(name: str) -> str:
    # RFC 5802 5.1: ',' and '=' in names are escaped as =2C and =3D
    return name.replace("=", "=3D").replace(",", "=2C")


def _scram_attrs(message: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for part in message.split(","):
        key, sep, value = part.partition("=")
        if sep and len(key) == 1 and key not in out:
            out[key] = value
    return out


class ScramMechanism:
    """SCRAM client (RFC 5802): client-first, client-final, then the server check."""

    def __init__(
        self,
        mechanism: str,
        username: str,
        password: str,
        *,
        nonce: str | None = None,
        extensions: dict[str, str] | None = None,
    ) -> None:
        if mechanism not in _SCRAM_HASHES:
            raise ValueError(f"unknown SCRAM mechanism {mechanism}")
        self.name = mechanism
        self._hash = _SCRAM_HASHES[mechanism]
        self.user: str | None = username
        self._password = password
        # 24 random bytes as printable base64 (no ',' in it)
        self._nonce = nonce or base64.b64encode(secrets.token_bytes(24)).decode()
        ext = "".join(f",{k}={v}" for k, v in (extensions or {}).items())
        self._first_bare = f"n={_saslname(username)},r={self._nonce}{ext}"
        self._server_signature: bytes | None = None
        self._state = "initial"

    def initial(self) -> bytes:
        """client-first-message: gs2 header `n,,` and the bare part."""
        self._state = "first-sent"
        return ("n,," + self._first_bare).encode()

    def respond(self, challenge: bytes) -> bytes | None:
        """client-final-message for server-first; None after a verified server-final."""
        text = challenge.decode("utf-8", "replace")
        if self._state == "first-sent":
            return self._client_final(text)
        if self._state == "final-sent":
            self._verify_server_final(text)
            return None
        raise SaslError(f"{self.name}: unexpected server message", kind="protocol")

    def _client_final(self, server_first: str) -> bytes:
        attrs = _scram_attrs(server_first)
        if "e" in attrs:
            raise SaslError(f"{self.name}: the broker refused: {attrs['e']}")
        nonce, salt_b64, iter_text = attrs.get("r"), attrs.get("s"), attrs.get("i")
        if nonce is None or salt_b64 is None or iter_text is None:
            raise SaslError(f"{self.name}: malformed server-first message", kind="protocol")
        if not nonce.startswith(self._nonce) or len(nonce) == len(self._nonce):
            raise SaslError(f"{self.name}: the broker's nonce does not extend ours",
                            kind="protocol")  # fmt: skip
        try:
            salt = base64.b64decode(salt_b64, validate=True)
            iterations = int(iter_text)
        except ValueError:
            raise SaslError(f"{self.name}: malformed server-first message",
                            kind="protocol") from None  # fmt: skip
        if iterations < 1:
            raise SaslError(f"{self.name}: bad iteration count {iterations}", kind="protocol")
        salted = scram_salted_password(self._hash, self._password, salt, iterations)
        client_key, stored_key, server_key = scram_keys(self._hash, salted)
        without_proof = f"c=biws,r={nonce}"  # biws = base64("n,,")
        auth_message = f"{self._first_bare},{server_first},{without_proof}".encode()
        signature = hmac.digest(stored_key, auth_message, self._hash)
        proof = bytes(a ^ b for a, b in zip(client_key, signature))
        self._server_signature = hmac.digest(server_key, auth_message, self._hash)
        self._state = "final-sent"
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def _verify_server_final(self, server_final: str) -> None:
        attrs = _scram_attrs(server_final)
        if "e" in attrs:
            raise SaslError(f"{self.name}: the broker refused: {attrs['e']}")
        try:
            got = base64.b64decode(attrs.get("v", ""), validate=True)
        except ValueError:
            got = b""
        assert self._server_signature is not None
        if not got or not hmac.compare_digest(got, self._server_signature):
            raise SaslError(
                f"{self.name}: the broker's signature is wrong: it does not know "
                f"user {self.user}'s password (not the broker we meant?)",
                kind="protocol",
            )
        self._state = "done"

    @property
    def complete(self) -> bool:
        """True once the server's signature was verified."""
        return self._state == "done"


# --- OAUTHBEARER -----------------------------------------------------------------------


class OAuthBearerMechanism:
    """SASL/OAUTHBEARER (RFC 7628) with a token obtained beforehand."""

    name = "OAUTHBEARER"

    def __init__(
        self,
        token: str,
        *,
        authzid: str = "",
        extensions: dict[str, str] | None = None,
        user: str | None = None,
    ) -> None:
        self.user: str | None = user
        ext = "".join(f"\x01{k}={v}" for k, v in (extensions or {}).items())
        authz = f"a={_saslname(authzid)}" if authzid else ""
        self._message = f"n,{authz},\x01auth=Bearer {token}{ext}\x01\x01".encode()
        self._state = "initial"
        #: the server's error challenge (JSON text), when it sent one
        self.server_error: str | None = None

    def initial(self) -> bytes:
        """The GS2 header and `auth=Bearer <token>`, kvsep-separated."""
        self._state = "sent"
        return self._message

    def respond(self, challenge: bytes) -> bytes | None:
        """An empty answer means success; a JSON error is acknowledged with 0x01."""
        if not challenge:
            self._state = "done"
            return None
        self.server_error = challenge.decode("utf-8", "replace")
        self._state = "failed"
        return b"\x01"

    @property
    def complete(self) -> bool:
        """True after the server accepted the token."""
        return self._state in ("sent", "done")


class GssContext(Protocol):
    """The initiator side of a GSS-API security context (RFC 2743), as used here."""

    @property
    def complete(self) -> bool:
        """Whether the context is established."""

    def step(self, token: bytes | None) -> bytes | None:
        """Feed the acceptor's token (None at first); the token to send, if any."""

    def wrap(self, data: bytes) -> bytes:
        """Integrity-protect `data` (no confidentiality)."""

    def unwrap(self, data: bytes) -> bytes:
        """Check and strip the protection of `data`."""


class GssapiMechanism:
    """SASL/GSSAPI (RFC 4752): context establishment, then the security layer."""

    name = "GSSAPI"

    def __init__(
        self,
        context: GssContext,
        *,
        user: str | None = None,
        authzid: str = "",
        first_token: bytes | None = None,
    ):
        self._ctx = context
        self.user: str | None = user
        self._authzid = authzid
        self._first = first_token
        self._state = "context"

    def initial(self) -> bytes:
        """The first context token (Kerberos AP-REQ), unless the caller made it."""
        if self._first is not None:
            return self._first
        return self._ctx.step(None) or b""

    def respond(self, challenge: bytes) -> bytes | None:
        """Context tokens until established; then the answer to the layers message."""
        if self._state == "context":
            if not self._ctx.complete:
                out = self._ctx.step(challenge)
                if not self._ctx.complete:
                    return out or b""
                if out:
                    return out
                # established: an empty response asks for the server's layer offer
                self._state = "layers"
                return b""
            self._state = "layers"
        if self._state == "layers":
            if not challenge:
                return b""
            offer = self._ctx.unwrap(challenge)
            if len(offer) != 4:
                raise SaslError("GSSAPI: malformed security layer message", kind="protocol")
            if not offer[0] & 0x01:
                raise SaslError(
                    "GSSAPI: the broker insists on a SASL security layer; kt offers none",
                    kind="protocol",
                )
            self._state = "sent"
            # no security layer, no max buffer size, then the authorization id
            return self._ctx.wrap(b"\x01\x00\x00\x00" + self._authzid.encode())
        self._state = "done"
        return None

    @property
    def complete(self) -> bool:
        """True once the layer choice went out and the server answered."""
        return self._state == "done"


def unsecured_jwt(
    claims: dict[str, Any],
    *,
    now: float,
    lifetime: float = 3600.0,
    principal_claim: str = "sub",
) -> str:
    """An unsecured JWT (`alg: none`) as Kafka's development login module makes it:
    `b64url(header).b64url(claims).` with `iat` and `exp` filled in. For development
    brokers only: anyone can forge one."""
    body = {"iat": int(now), "exp": int(now + lifetime), **claims}
    if principal_claim not in body:
        raise ValueError(f"the token needs a {principal_claim!r} claim")

    def b64(obj: dict[str, Any]) -> str:
        raw = json.dumps(obj, separators=(",", ":")).encode()
        return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()

    return f"{b64({'alg': 'none'})}.{b64(body)}."


def jwt_claims(token: str) -> dict[str, Any]:
    """The claims of a JWT, unverified (the broker verifies; the client reads `exp`
    and the principal for its own scheduling and messages). {} when unreadable."""
    parts = token.split(".")
    if len(parts) < 2:
        return {}
    payload = parts[1] + "=" * (-len(parts[1]) % 4)
    try:
        out = json.loads(base64.urlsafe_b64decode(payload))
    except (ValueError, UnicodeDecodeError):
        return {}
    return out if isinstance(out, dict) else {}


# --- the Kafka exchange ----------------------------------------------------------------


@dataclass(slots=True)
class Step:
    """What to send next: a Kafka request (`api` set) or a raw token (`api` None)."""

    api: Api | None
    version: int
    body: Any = None
    raw: bytes = b""


@dataclass
class SaslExchange:
    """The Kafka SASL exchange of one connection, as a state machine.

    Build it with the mechanism and the broker's versions of SaslHandshake and
    SaslAuthenticate (None when not offered); then loop: `step()` says what to send,
    `handshake_response()` / `authenticate_response()` / `raw_response()` take what
    came back. `done` becomes True on success; failures raise `SaslError`.
    `reauth=True` runs a KIP-368 re-authentication (the same requests).
    """

    mechanism: Mechanism
    handshake_versions: tuple[int, int] | None
    authenticate_versions: tuple[int, int] | None
    reauth: bool = False
    done: bool = False
    #: milliseconds the broker gives this session (0: no limit announced)
    session_lifetime_ms: int = 0
    offered: list[str] = field(default_factory=list)
    _state: str = "handshake"
    _pending: bytes | None = None

    def __post_init__(self) -> None:
        if self.handshake_versions is None:
            raise SaslError(
                "the broker does not offer SaslHandshake: the listener is not a SASL "
                "listener (use security.protocol=PLAINTEXT or SSL)",
                kind="protocol",
            )

    @property
    def handshake_version(self) -> int:
        """v1 when the broker has SaslAuthenticate (tokens framed as requests), else v0."""
        assert self.handshake_versions is not None
        if self.authenticate_versions is None:
            return 0
        return min(self.handshake_versions[1], SASL_HANDSHAKE.max_version, 1)

    @property
    def authenticate_version(self) -> int:
        """The SaslAuthenticate version both speak (v1+ carries the session lifetime)."""
        assert self.authenticate_versions is not None
        return min(self.authenticate_versions[1], SASL_AUTHENTICATE.max_version)

    def step(self) -> Step | None:
        """The next message to send, or None when waiting for a response or done."""
        if self._state == "handshake":
            self._state = "await-handshake"
            return Step(SASL_HANDSHAKE, self.handshake_version,
                        SASL_HANDSHAKE.request(mechanism=self.mechanism.name))  # fmt: skip
        if self._state == "send-token" and self._pending is not None:
            token, self._pending = self._pending, None
            if self.handshake_version == 0:
                self._state = "await-raw"
                return Step(None, 0, raw=token)
            self._state = "await-authenticate"
            return Step(SASL_AUTHENTICATE, self.authenticate_version,
                        SASL_AUTHENTICATE.request(auth_bytes=token))  # fmt: skip
        return None

    def handshake_response(self, body: Any) -> None:
        """The SaslHandshake response: the mechanism is enabled, or a SaslError."""
        self.offered = list(body.mechanisms or [])
        name = self.mechanism.name
        if body.error_code == _UNSUPPORTED_SASL_MECHANISM:
            offered = ", ".join(self.offered) or "none"
            raise SaslError(
                f"SASL mechanism {name} is not enabled on the broker (it offers: {offered})",
                kind="mechanism",
                offered=self.offered,
            )
        if body.error_code == _ILLEGAL_SASL_STATE and self.reauth:
            raise SaslError("the broker refused re-authentication (ILLEGAL_SASL_STATE)",
                            kind="protocol")  # fmt: skip
        if body.error_code != 0:
            raise SaslError(f"SaslHandshake failed with error code {body.error_code}",
                            kind="protocol")  # fmt: skip
        self._pending = self.mechanism.initial()
        self._state = "send-token"

    def authenticate_response(self, body: Any) -> None:
        """A SaslAuthenticate response: the next token, success, or a SaslError."""
        if body.error_code != 0:
            self._state = "failed"
            raise SaslError(self._failure(body.error_message, body.error_code))
        self.session_lifetime_ms = int(getattr(body, "session_lifetime_ms", 0) or 0)
        self._advance(bytes(body.auth_bytes or b""))

    def raw_response(self, token: bytes) -> None:
        """A raw server token (after a v0 handshake)."""
        self._advance(token)

    def raw_closed(self) -> None:
        """The broker closed the connection during a v0 (raw) exchange: it refused."""
        self._state = "failed"
        raise SaslError(self._failure(None, _SASL_AUTHENTICATION_FAILED))

    def _advance(self, challenge: bytes) -> None:
        mech = self.mechanism
        reply = mech.respond(challenge)
        if isinstance(mech, OAuthBearerMechanism) and mech.server_error is not None:
            # RFC 7628: acknowledge the error (0x01); the broker then fails us. Report
            # its JSON now: the failure that follows carries no more than that.
            self._state = "failed"
            raise SaslError(self._failure(mech.server_error, _SASL_AUTHENTICATION_FAILED))
        if reply is None:
            if mech.complete:
                self.done = True
                self._state = "done"
                return
            raise SaslError(f"{mech.name}: the broker ended the exchange early",
                            kind="protocol")  # fmt: skip
        self._pending = reply
        self._state = "send-token"

    def _failure(self, message: str | None, code: int) -> str:
        mech = self.mechanism
        who = f" as user {mech.user}" if mech.user else ""
        what = "re-authentication" if self.reauth else "authentication"
        detail = message or "the broker closed the connection"
        if code == _UNSUPPORTED_VERSION:
            detail = "the broker does not speak our SaslAuthenticate version"
        return f"SASL {what} failed ({mech.name}{who}): {detail}"
