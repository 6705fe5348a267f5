"""SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802 / RFC 7677) as Kafka's brokers do them:
the server exchange, the credential a broker stores, and its ZooKeeper codec.

The exchange is Kafka's ScramSaslServer, with the client-final nonce check of Kafka
3.8.1 (CVE-2024-56128: the final message must carry the nonce the server sent; like
Kafka it only has to end with it, which old librdkafka's doubled nonce satisfies).
It is written here from the RFC (hashlib/hmac primitives, checked against the RFC
7677 test vector) rather than with a SCRAM library, because Kafka's wire behaviour
differs from a strict RFC server in ways clients rely on: extensions such as
`tokenauth` in the first message, that nonce rule, and which failures are told to
the client.

A credential is stored as Kafka stores it: `/config/users/<sanitized user>` holds
`{"version":1,"config":{"SCRAM-SHA-256":"salt=<b64>,stored_key=<b64>,
server_key=<b64>,iterations=<n>"}}`, with a change notification
`/config/changes/config_change_<seq>` = `{"version":2,"entity_path":"users/<user>"}`.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import secrets
from collections.abc import Callable

from kt.broker.security.sasl import IllegalSaslStateError, SaslAuthenticationError, SaslError

# The credential and its ZooKeeper codec live in kt.cluster (the tools write them too);
# re-exported here, where the broker's code has always found them.
from kt.cluster.scram_credentials import (
    BY_CODE,
    MECHANISMS,
    ScramCredential,
    ScramMechanism,
    _b64,
    _hmac,
    change_notification,
    credential_from_salted,
    credential_from_string,
    credential_to_string,
    credentials_of,
    decode_user_config,
    desanitize,
    encode_user_config,
    make_credential,
    salted_password,
    sanitize,
    user_config_path,
)

__all__ = [
    "BY_CODE",
    "MECHANISMS",
    "ScramCredential",
    "ScramMechanism",
    "ScramServer",
    "change_notification",
    "credential_from_salted",
    "credential_from_string",
    "credential_to_string",
    "credentials_of",
    "decode_user_config",
    "desanitize",
    "encode_user_config",
    "make_credential",
    "salted_password",
    "sanitize",
    "server_nonce",
    "user_config_path",
    "username_of",
]


# --- the server exchange ---------------------------------------------------------------

# Kafka's ScramMessages grammar (ASCII only, as Kafka's Java regexes)
_SASLNAME = r"(?:[\x01-\x2B\x2D-\x3C\x3E-\x7F]|=2C|=3D)+"
_PRINTABLE = r"[\x21-\x2B\x2D-\x7E]+"
_VALUE = r"[\x01-\x2B\x2D-\x7F]+"
_B64 = r"(?:[a-zA-Z0-9/+]{4})*(?:[a-zA-Z0-9/+]{3}=|[a-zA-Z0-9/+]{2}==)?"
_EXTENSIONS = rf"(?:,[A-Za-z]+={_VALUE})*"
_CLIENT_FIRST = re.compile(
    rf"n,(?:a=(?P<authzid>{_SASLNAME}))?,(?:m={_VALUE},)?"
    rf"(?P<bare>n=(?P<name>{_SASLNAME}),r=(?P<nonce>{_PRINTABLE})(?P<ext>{_EXTENSIONS}))"
)
_CLIENT_FINAL = re.compile(
    rf"(?P<without>c=(?P<channel>{_B64}),r=(?P<nonce>{_PRINTABLE}){_EXTENSIONS}),p=(?P<proof>{_B64})"
)


def username_of(saslname: str) -> str:
    """A SCRAM saslname unescaped (`=2C` is `,`, `=3D` is `=`)."""
    return saslname.replace("=2C", ",").replace("=3D", "=")


def server_nonce() -> str:
    """Kafka's server nonce: 130 random bits in base 36."""
    n = secrets.randbits(130)
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = ""
    while n:
        n, r = divmod(n, 36)
        out = digits[r] + out
    return out or "0"


class ScramServer:
    """The server side of one SCRAM exchange: client-first, server-first,
    client-final, server-final. `lookup(user)` gives the stored credential or None."""

    def __init__(
        self,
        mechanism: ScramMechanism,
        lookup: Callable[[str], ScramCredential | None],
        nonce: Callable[[], str] = server_nonce,
    ) -> None:
        self._mech = mechanism
        self._lookup = lookup
        self._nonce = nonce
        self._state = "first"
        self._user: str | None = None
        self._cred: ScramCredential | None = None
        self._client_first_bare = ""
        self._server_first = ""
        self._combined_nonce = ""
        self.extensions: dict[str, str] = {}

    @property
    def mechanism(self) -> str:
        """The mechanism name."""
        return self._mech.name

    @property
    def complete(self) -> bool:
        """Whether the client proved its password."""
        return self._state == "complete"

    @property
    def authorization_id(self) -> str:
        """The authenticated user."""
        if self._state != "complete" or self._user is None:
            raise IllegalSaslStateError("Authentication exchange has not completed")
        return self._user

    @property
    def credential_expiry_ms(self) -> int | None:
        """SCRAM passwords do not expire (delegation tokens would)."""
        return None

    def evaluate(self, token: bytes) -> bytes:
        """The next server message (SaslError on failure; the exchange is then over)."""
        try:
            if self._state == "first":
                return self._first(token)
            if self._state == "final":
                return self._final(token)
            raise IllegalSaslStateError(f"Unexpected challenge in Sasl server state {self._state}")
        except SaslError:
            self._state = "failed"
            self._cred = None
            raise

    def _first(self, token: bytes) -> bytes:
        text = token.decode("utf-8", errors="replace")
        m = _CLIENT_FIRST.fullmatch(text)
        if m is None:
            # Kafka puts the message in its log line; it holds no secret
            raise SaslError(f"Invalid SCRAM client first message format: {text!r}")
        self.extensions = dict(part.split("=", 1) for part in m.group("ext").split(",") if part)
        username = username_of(m.group("name"))
        if self.extensions.get("tokenauth", "").lower() == "true":
            # delegation tokens are not issued by kt: no token id can be valid
            raise SaslError(f"Token Authentication failed: Invalid tokenId : {username}")
        cred = self._lookup(username)
        if cred is None:
            raise SaslError("Authentication failed: Invalid user credentials")
        authzid = m.group("authzid")
        if authzid and username_of(authzid) != username:
            raise SaslAuthenticationError(
                "Authentication failed: Client requested an authorization id that is "
                "different from username"
            )
        if cred.iterations < self._mech.min_iterations:
            raise SaslError(
                f"Iterations {cred.iterations} is less than the minimum "
                f"{self._mech.min_iterations} for {self._mech.enum_name}"
            )
        self._user, self._cred = username, cred
        self._combined_nonce = m.group("nonce") + self._nonce()
        self._client_first_bare = m.group("bare")
        self._server_first = f"r={self._combined_nonce},s={_b64(cred.salt)},i={cred.iterations}"
        self._state = "final"
        return self._server_first.encode("ascii")

    def _final(self, token: bytes) -> bytes:
        text = token.decode("utf-8", errors="replace")
        m = _CLIENT_FINAL.fullmatch(text)
        if m is None:
            raise SaslError(f"Invalid SCRAM client final message format: {text!r}")
        # CVE-2024-56128 (Kafka 3.8.1): the final nonce must be the one we sent
        if not m.group("nonce").endswith(self._combined_nonce):
            raise SaslError("Invalid client nonce in the final client message.")
        cred = self._cred
        assert cred is not None
        auth_message = (
            f"{self._client_first_bare},{self._server_first},{m.group('without')}"
        ).encode()
        client_signature = _hmac(self._mech, cred.stored_key, auth_message)
        proof = base64.b64decode(m.group("proof"))
        if len(proof) != len(client_signature):
            raise SaslError("Invalid client credentials")
        client_key = bytes(a ^ b for a, b in zip(proof, client_signature, strict=True))
        computed = hashlib.new(self._mech.hash_name, client_key).digest()
        if not hmac.compare_digest(computed, cred.stored_key):
            raise SaslError("Invalid client credentials")
        signature = _hmac(self._mech, cred.server_key, auth_message)
        self._cred = None
        self._state = "complete"
        return f"v={_b64(signature)}".encode("ascii")
