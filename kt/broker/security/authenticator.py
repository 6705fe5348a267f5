"""One connection's SASL authentication, as Kafka's SaslServerAuthenticator does it,
sans-IO: the network layer feeds it each request (or, after a v0 handshake, each
raw frame) and does what the returned `Step` says.

Before authentication only ApiVersions (once, before the handshake; the broker's
own answer) and SaslHandshake are accepted; any other request closes the
connection without an answer, after `connection.failed.authentication.delay.ms`,
with Kafka's log line (`Unexpected Kafka request of type METADATA during SASL
handshake.`). SaslHandshake v1 wraps every token in SaslAuthenticate; v0 sends them
as raw length-prefixed frames. A failure answers (SaslAuthenticate:
SASL_AUTHENTICATION_FAILED with Kafka's message) and closes, both after the delay;
nothing else is ever served on that connection. With GSSAPI enabled, a first frame
that is no Kafka request is a raw GSSAPI token (Kafka 0.9's clients send no
handshake; `start_raw_gssapi`).

After success the session may have a lifetime (KIP-368): the smaller of the
mechanism's `connections.max.reauth.ms` and the credential's expiry (an OAUTHBEARER
token's `exp`), returned in SessionLifetimeMs. A SaslHandshake after that starts a
re-authentication (same mechanism, same principal, not twice within a second); any
other request after the session expired closes the connection without an answer.
"""

from __future__ import annotations

import enum
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from kt.broker.security.sasl import SaslError, SaslServer, client_message
from kt.protocol import ErrorCode, apis

API_VERSIONS = apis.API_VERSIONS.key
SASL_HANDSHAKE = apis.SASL_HANDSHAKE.key
SASL_AUTHENTICATE = apis.SASL_AUTHENTICATE.key
GSSAPI = "GSSAPI"


@dataclass(frozen=True, slots=True)
class Step:
    """What to do with one request: `forward` it to the handlers, or send `response`
    (a response body for the request) and/or answer with `error_code` (the request's
    own error response), `close` the connection, all after `delay_s`; `log` is a
    line for the broker's log (INFO)."""

    forward: bool = False
    response: object | None = None
    raw: bytes | None = None  # a v0 raw token to send, length-prefixed
    error_code: int | None = None
    close: bool = False
    delay_s: float = 0.0
    log: str | None = None


FORWARD = Step(forward=True)


class State(enum.Enum):
    """Kafka's SaslServerAuthenticator states (the re-authentication ones folded in)."""

    HANDSHAKE_OR_VERSIONS = "handshake_or_versions"
    HANDSHAKE = "handshake"
    AUTHENTICATE = "authenticate"
    RAW_AUTHENTICATE = "raw_authenticate"
    COMPLETE = "complete"
    REAUTH_AUTHENTICATE = "reauth_authenticate"
    FAILED = "failed"


@dataclass(frozen=True, slots=True)
class SaslSettings:
    """A listener's SASL settings: enabled mechanisms and their server factories,
    `connections.max.reauth.ms` per mechanism (0: off), the failure delay, and
    `sasl.server.max.receive.size` (the largest frame before authentication)."""

    mechanisms: tuple[str, ...]
    servers: Mapping[str, Callable[[], SaslServer]]
    reauth_ms: Mapping[str, int]
    failure_delay_ms: int = 100
    max_receive_size: int = 524288


class SaslAuthenticator:
    """The SASL state machine of one connection."""

    def __init__(
        self,
        settings: SaslSettings,
        peer: str,
        clock: Callable[[], float],
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self.settings = settings
        self.peer = peer
        # `clock` (monotonic) times the session; `wall_clock` (epoch seconds) reads a
        # credential's expiry, which is a date (an OAUTHBEARER token's exp)
        self._clock = clock
        self._wall = wall_clock
        self.state = State.HANDSHAKE_OR_VERSIONS
        self.mechanism: str | None = None
        self.principal: str | None = None
        self._server: SaslServer | None = None
        self._reauthenticating = False
        self._authenticate_version = 0
        #: When the session expires (clock seconds), if it does.
        self.session_expiry: float | None = None
        self._reauth_started = -1e18

    @property
    def complete(self) -> bool:
        """Whether the connection is authenticated (and not re-authenticating)."""
        return self.state == State.COMPLETE

    @property
    def expects_raw(self) -> bool:
        """Whether the next frame is a raw v0 token, not a Kafka request."""
        return self.state == State.RAW_AUTHENTICATE

    def expired(self) -> bool:
        """Whether the session's lifetime is over."""
        return self.session_expiry is not None and self._clock() >= self.session_expiry

    def _delay(self) -> float:
        return self.settings.failure_delay_ms / 1000.0

    def _fail(self, message: str, response: object | None = None,
              raw_close: bool = False) -> Step:  # fmt: skip
        self.state = State.FAILED
        self._server = None
        what = "re-authentication" if self._reauthenticating else "authentication"
        log = f"Failed {what} with /{self.peer} ({message})"
        if raw_close:
            return Step(close=True, delay_s=self._delay(), log=log)
        return Step(response=response, close=True, delay_s=self._delay(), log=log)

    def on_request(self, api_key: int, api_version: int, body: object) -> Step:
        """The step for one decoded request on this connection."""
        if self.state == State.COMPLETE:
            if api_key == SASL_HANDSHAKE and self._may_reauthenticate():
                return self._handshake(body, api_version, reauth=True)
            if self.expired():
                # Kafka: "Disconnecting expired channel", no response
                return Step(close=True, log=f"Disconnecting expired channel from /{self.peer}")
            return FORWARD
        if self.state == State.FAILED:
            return Step(close=True)
        name = apis.api_for_key(api_key)
        api_name = _enum_name(name.name if name is not None else str(api_key))
        if self.state == State.HANDSHAKE_OR_VERSIONS and api_key == API_VERSIONS:
            self.state = State.HANDSHAKE
            return FORWARD
        if api_key == API_VERSIONS:
            self.state = State.FAILED
            return Step(close=True, log=(
                f"Unexpected ApiVersions request received during SASL authentication state "
                f"{self.state.name} from /{self.peer}"))  # fmt: skip
        if self.state in (State.HANDSHAKE_OR_VERSIONS, State.HANDSHAKE):
            if api_key == SASL_HANDSHAKE:
                return self._handshake(body, api_version, reauth=False)
            return self._fail(f"Unexpected Kafka request of type {api_name} during SASL handshake.")
        if self.state in (State.AUTHENTICATE, State.REAUTH_AUTHENTICATE):
            if api_key == SASL_AUTHENTICATE:
                return self._authenticate(getattr(body, "auth_bytes", b""), api_version)
            # handshake v1: any other request is answered ILLEGAL_SASL_STATE, then closed
            step = self._fail(
                f"Unexpected Kafka request of type {api_name} during SASL authentication."
            )
            return Step(error_code=ErrorCode.ILLEGAL_SASL_STATE, close=True,
                        delay_s=step.delay_s, log=step.log)  # fmt: skip
        return self._fail(f"Unexpected Kafka request of type {api_name} during SASL handshake.")

    def _may_reauthenticate(self) -> bool:
        # Kafka: only with a session expiry, and not again within one second
        if self.session_expiry is None:
            return False
        return self._clock() - self._reauth_started >= 1.0

    def _handshake(self, body: object, version: int, reauth: bool) -> Step:
        mech = str(getattr(body, "mechanism", ""))
        enabled = list(self.settings.mechanisms)
        if reauth:
            self._reauthenticating = True
            self._reauth_started = self._clock()
            if mech != self.mechanism:
                response = apis.SASL_HANDSHAKE.response(
                    error_code=ErrorCode.UNSUPPORTED_SASL_MECHANISM, mechanisms=enabled
                )
                return self._fail(
                    f"SASL mechanism '{mech}' requested by client is not supported for "
                    f"re-authentication of mechanism '{self.mechanism}'", response)  # fmt: skip
        elif mech not in self.settings.servers:
            response = apis.SASL_HANDSHAKE.response(
                error_code=ErrorCode.UNSUPPORTED_SASL_MECHANISM, mechanisms=enabled)  # fmt: skip
            return self._fail(
                f"Unsupported SASL mechanism {mech}", response)  # fmt: skip
        self.mechanism = mech
        self._server = self.settings.servers[mech]()
        if version == 0 and not reauth:
            self.state = State.RAW_AUTHENTICATE
        else:
            self.state = State.REAUTH_AUTHENTICATE if reauth else State.AUTHENTICATE
        return Step(response=apis.SASL_HANDSHAKE.response(error_code=ErrorCode.NONE,
                                                          mechanisms=enabled))  # fmt: skip

    def _evaluate(self, token: bytes) -> tuple[bytes | None, SaslError | None]:
        assert self._server is not None
        try:
            return self._server.evaluate(bytes(token)), None
        except SaslError as exc:
            return None, exc

    def _authenticate(self, token: bytes, version: int) -> Step:
        self._authenticate_version = max(self._authenticate_version, version)
        answer, error = self._evaluate(token)
        mech = self.mechanism or ""
        if error is not None:
            message = client_message(error, mech, self._reauthenticating)
            response = apis.SASL_AUTHENTICATE.response(
                error_code=ErrorCode.SASL_AUTHENTICATION_FAILED, error_message=message,
                auth_bytes=b"", session_lifetime_ms=0)  # fmt: skip
            return self._fail(f"{error}", response)
        assert self._server is not None and answer is not None
        lifetime = 0
        if self._server.complete:
            principal = f"User:{self._server.authorization_id}"
            if self._reauthenticating and principal != self.principal:
                old = (self.principal or "").replace(":", ".", 1)
                new = principal.replace(":", ".", 1)
                response = apis.SASL_AUTHENTICATE.response(
                    error_code=ErrorCode.SASL_AUTHENTICATION_FAILED,
                    error_message=f"Cannot change principals during re-authentication from "
                    f"{old}: {new}", auth_bytes=b"", session_lifetime_ms=0)  # fmt: skip
                return self._fail(f"Cannot change principals during re-authentication from "
                                  f"{old}: {new}", response)  # fmt: skip
            lifetime = self._complete(principal)
        return Step(response=apis.SASL_AUTHENTICATE.response(
            error_code=ErrorCode.NONE, error_message=None, auth_bytes=answer,
            session_lifetime_ms=lifetime))  # fmt: skip

    def start_raw_gssapi(self) -> bool:
        """Whether a first frame that is no Kafka request starts a raw GSSAPI exchange
        (Kafka 0.9 clients send the Kerberos token without a handshake): only as the
        connection's first frame, and only with GSSAPI enabled, as Kafka."""
        if self.state != State.HANDSHAKE_OR_VERSIONS or GSSAPI not in self.settings.servers:
            return False
        self.mechanism = GSSAPI
        self._server = self.settings.servers[GSSAPI]()
        self.state = State.RAW_AUTHENTICATE
        return True

    def on_raw_frame(self, frame: bytes) -> Step:
        """A raw token after a SaslHandshake v0 (the answer, if any, goes back raw;
        a failure just closes, after the delay)."""
        answer, error = self._evaluate(frame)
        if error is not None:
            return self._fail(str(error), raw_close=True)
        assert self._server is not None
        if self._server.complete:
            self._complete(f"User:{self._server.authorization_id}")
        # Kafka's SaslServerAuthenticator sends whatever the SaslServer answered,
        # even empty: PLAIN's (and OAUTHBEARER's) success is an empty frame the client
        # waits for. Java's GSSAPI server answers null (nothing is sent) where kt's
        # answers empty (the end of the exchange).
        if answer is None or (not answer and self.mechanism == GSSAPI):
            return Step()
        return Step(raw=answer)

    def _complete(self, principal: str) -> int:
        assert self._server is not None and self.mechanism is not None
        now = self._clock()
        max_ms = self.settings.reauth_ms.get(self.mechanism, 0)
        expiry_ms = self._server.credential_expiry_ms
        lifetime: int | None = None
        if expiry_ms is not None:
            left = max(0, int(expiry_ms - self._wall() * 1000))
            lifetime = min(left, max_ms) if max_ms > 0 else left
        elif max_ms > 0:
            lifetime = max_ms
        self.session_expiry = None if lifetime is None else now + lifetime / 1000.0
        self.principal = principal
        self.state = State.COMPLETE
        self._server = None
        self._reauthenticating = False
        return lifetime or 0


def _enum_name(api_name: str) -> str:
    """Kafka's ApiKeys enum name of an API ("Metadata" -> METADATA)."""
    out = []
    for i, c in enumerate(api_name):
        if c.isupper() and i and not api_name[i - 1].isupper():
            out.append("_")
        out.append(c.upper())
    return "".join(out)
