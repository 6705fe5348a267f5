"""SCRAM credentials as Kafka keeps them, pure (no I/O): the mechanisms, the stored
credential (salt, stored key, server key, iterations) computed from a password or a
salted password, its string form (Kafka's ScramCredentialUtils), and the ZooKeeper
codec of `/config/users/<sanitized user>` (`{"version":1,"config":{"SCRAM-SHA-256":
"salt=<b64>,stored_key=<b64>,server_key=<b64>,iterations=<n>"}}`) with its change
notification `/config/changes/config_change_<seq>` =
`{"version":2,"entity_path":"users/<user>"}`.

Shared by the broker (kt.broker.security.scram, which authenticates from it) and the
tools (`kt user scram add --zookeeper`, which writes credentials before any broker
runs), so both write byte-for-byte the same thing.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ScramMechanism:
    """One SCRAM mechanism: its hash, iteration bounds and admin-API code."""

    name: str
    hash_name: str
    code: int
    min_iterations: int = 4096
    max_iterations: int = 16384

    @property
    def enum_name(self) -> str:
        """Kafka's enum constant (printed in some messages): SCRAM_SHA_256."""
        return self.name.replace("-", "_")


MECHANISMS: dict[str, ScramMechanism] = {
    "SCRAM-SHA-256": ScramMechanism("SCRAM-SHA-256", "sha256", 1),
    "SCRAM-SHA-512": ScramMechanism("SCRAM-SHA-512", "sha512", 2),
}
BY_CODE: dict[int, ScramMechanism] = {m.code: m for m in MECHANISMS.values()}


@dataclass(frozen=True, slots=True)
class ScramCredential:
    """What the broker keeps per user and mechanism (never the password)."""

    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def __repr__(self) -> str:
        return f"ScramCredential(iterations={self.iterations})"


def _hmac(mech: ScramMechanism, key: bytes, msg: bytes) -> bytes:
    return hmac.new(key, msg, mech.hash_name).digest()


def salted_password(mech: ScramMechanism, password: str, salt: bytes, iterations: int) -> bytes:
    """Hi(password, salt, i) of RFC 5802: PBKDF2 with the mechanism's HMAC."""
    return hashlib.pbkdf2_hmac(mech.hash_name, password.encode("utf-8"), salt, iterations)


def credential_from_salted(
    mech: ScramMechanism, salted: bytes, salt: bytes, iterations: int
) -> ScramCredential:
    """The stored credential for a salted password (what AlterUserScramCredentials
    carries: clients send the salted password, never the password)."""
    client_key = _hmac(mech, salted, b"Client Key")
    stored_key = hashlib.new(mech.hash_name, client_key).digest()
    server_key = _hmac(mech, salted, b"Server Key")
    return ScramCredential(salt, stored_key, server_key, iterations)


def make_credential(
    mech: ScramMechanism, password: str, iterations: int = 4096, salt: bytes | None = None
) -> ScramCredential:
    """A new credential for `password` (a random 32-byte salt unless given)."""
    salt = secrets.token_bytes(32) if salt is None else salt
    return credential_from_salted(
        mech, salted_password(mech, password, salt, iterations), salt, iterations
    )


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def credential_to_string(cred: ScramCredential) -> str:
    """Kafka's ScramCredentialUtils.credentialToString."""
    return (
        f"salt={_b64(cred.salt)},stored_key={_b64(cred.stored_key)},"
        f"server_key={_b64(cred.server_key)},iterations={cred.iterations}"
    )


def credential_from_string(text: str) -> ScramCredential:
    """Kafka's ScramCredentialUtils.credentialFromString (ValueError "Credentials not
    valid: ..." unless exactly salt, stored_key, server_key and iterations)."""
    fields: dict[str, str] = {}
    for part in text.split(","):
        key, sep, value = part.partition("=")
        if not sep:
            raise ValueError(f"Credentials not valid: {_redact(text)}")
        fields[key] = value
    if (
        set(fields) != {"salt", "stored_key", "server_key", "iterations"}
        or len(text.split(",")) != 4
    ):
        raise ValueError(f"Credentials not valid: {_redact(text)}")
    try:
        return ScramCredential(
            base64.b64decode(fields["salt"], validate=True),
            base64.b64decode(fields["stored_key"], validate=True),
            base64.b64decode(fields["server_key"], validate=True),
            int(fields["iterations"]),
        )
    except ValueError:
        raise ValueError(f"Credentials not valid: {_redact(text)}") from None


def _redact(text: str) -> str:
    # keys only: the values are derived secrets
    return ",".join(p.partition("=")[0] + "=..." for p in text.split(","))


# --- ZooKeeper: /config/users/<user> ---------------------------------------------------


def sanitize(user: str) -> str:
    """Kafka's Sanitizer.sanitize: URL-encoded UTF-8 as java.net.URLEncoder does it,
    with `*` as %2A and space as %20 (so the name is a safe znode)."""
    return urllib.parse.quote(user, safe="").replace("~", "%7E")


def desanitize(name: str) -> str:
    """The user name of a sanitized znode name."""
    return urllib.parse.unquote(name)


def user_config_path(user: str) -> str:
    """The znode of a user's config (SCRAM credentials and quotas)."""
    return f"/config/users/{sanitize(user)}"


def decode_user_config(data: bytes | None) -> dict[str, str]:
    """The config map of a `/config/users/<user>` znode (empty when absent/empty)."""
    if not data:
        return {}
    doc = json.loads(data)
    config = doc.get("config") if isinstance(doc, dict) else None
    if not isinstance(config, dict):
        raise ValueError("user config znode has no config object")
    return {str(k): str(v) for k, v in config.items()}


def encode_user_config(config: Mapping[str, str]) -> bytes:
    """A `/config/users/<user>` znode's content."""
    return json.dumps({"version": 1, "config": dict(config)}, separators=(",", ":")).encode()


def credentials_of(config: Mapping[str, str]) -> dict[str, ScramCredential]:
    """The SCRAM credentials in a user's config map, by mechanism name."""
    return {k: credential_from_string(v) for k, v in config.items() if k in MECHANISMS}


def change_notification(user: str) -> bytes:
    """The `/config/changes/config_change_<seq>` payload announcing a user's change."""
    return json.dumps(
        {"version": 2, "entity_path": f"users/{sanitize(user)}"}, separators=(",", ":")
    ).encode()
