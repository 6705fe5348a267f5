"""SASL server mechanisms as sans-IO state machines, and what a client is told when
one fails.

A mechanism server takes the client's tokens one at a time (`evaluate`) and returns
the server's token; when `complete` it names the authenticated user. A failure is
either a `SaslAuthenticationError`, whose message Kafka passes to the client
verbatim (PLAIN's "Authentication failed: Invalid username or password"), or a
`SaslError`, whose message is only logged: the client gets Kafka's fixed text, so it
cannot learn whether a user exists (`client_message`).

This module has the common part and PLAIN (RFC 4616; users from the JAAS option
`user_<name>="<password>"` of PlainLoginModule). SCRAM and OAUTHBEARER are in their
own modules.
"""

from __future__ import annotations

import hmac
from collections.abc import Mapping
from typing import Protocol

PLAIN = "PLAIN"
PLAIN_LOGIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"


class SaslError(Exception):
    """A failed exchange whose message is for the broker's log only."""


class SaslAuthenticationError(SaslError):
    """A failed exchange whose message Kafka sends to the client as is."""


class IllegalSaslStateError(SaslError):
    """A token after the exchange completed or failed."""


class SaslServer(Protocol):
    """One authentication exchange on one connection."""

    @property
    def mechanism(self) -> str:
        """The SASL mechanism name (e.g. SCRAM-SHA-512)."""
        ...

    @property
    def complete(self) -> bool:
        """Whether the exchange succeeded."""
        ...

    @property
    def authorization_id(self) -> str:
        """The authenticated user (only once complete): the principal is `User:<it>`."""
        ...

    @property
    def credential_expiry_ms(self) -> int | None:
        """When the credential expires (epoch ms; an OAUTHBEARER token's `exp`), if
        it does: the session lifetime of KIP-368 is bounded by it."""
        ...

    def evaluate(self, token: bytes) -> bytes:
        """The server's answer to the client's next token (raises SaslError)."""
        ...


def client_message(exc: SaslError, mechanism: str, reauthenticating: bool = False) -> str:
    """The ErrorMessage of a failed SaslAuthenticate: the mechanism's own message when
    it is meant for the client, else Kafka's fixed text that hides why."""
    if isinstance(exc, SaslAuthenticationError):
        return str(exc)
    what = "re-authentication" if reauthenticating else "authentication"
    return (
        f"Authentication failed during {what} due to invalid credentials with SASL "
        f"mechanism {mechanism}"
    )


def plain_users(options: Mapping[str, str]) -> dict[str, str]:
    """The accepted users of a PlainLoginModule entry: `user_<name>` options."""
    return {k[len("user_") :]: v for k, v in options.items() if k.startswith("user_")}


class PlainServer:
    """SASL/PLAIN as Kafka's PlainSaslServer: one message, `[authzid] NUL authcid NUL
    passwd`, checked against the configured users in constant time."""

    mechanism = PLAIN
    credential_expiry_ms: int | None = None

    def __init__(self, users: Mapping[str, str]) -> None:
        self._users = users
        self._user: str | None = None
        self._done = False

    @property
    def complete(self) -> bool:
        """Whether the client authenticated."""
        return self._user is not None

    @property
    def authorization_id(self) -> str:
        """The authenticated user name."""
        if self._user is None:
            raise IllegalSaslStateError("Authentication exchange has not completed")
        return self._user

    def evaluate(self, token: bytes) -> bytes:
        """Check the one PLAIN message; an empty answer when it is good."""
        if self._done:
            raise IllegalSaslStateError("Unexpected challenge in Sasl server state")
        self._done = True
        text = token.decode("utf-8", errors="replace")
        # Kafka splits into at most 4 pieces and wants exactly 3
        tokens = text.split("\0", 3)
        if len(tokens) != 3:
            raise SaslAuthenticationError(
                f"Invalid SASL/PLAIN response: expected 3 tokens, got {len(tokens)}"
            )
        authzid, username, password = tokens
        if not username:
            raise SaslAuthenticationError("Authentication failed: username not specified")
        if not password:
            raise SaslAuthenticationError("Authentication failed: password not specified")
        expected = self._users.get(username)
        # compare even for unknown users, so the timing does not tell them apart
        ok = hmac.compare_digest(
            (expected if expected is not None else "\0" + password).encode("utf-8"),
            password.encode("utf-8"),
        )
        if expected is None or not ok:
            raise SaslAuthenticationError("Authentication failed: Invalid username or password")
        if authzid and authzid != username:
            raise SaslAuthenticationError(
                "Authentication failed: Client requested an authorization id that is "
                "different from username"
            )
        self._user = username
        return b""
