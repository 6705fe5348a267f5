"""A broker-side SASL peer for client tests: a real TCP server speaking Kafka's
framing with kt's protocol codec (ServerConnection), answering ApiVersions,
SaslHandshake (v0 and v1), SaslAuthenticate and Metadata, and checking PLAIN,
SCRAM-SHA-256/512 and OAUTHBEARER credentials as RFC 4616/5802/7628 describe.

It is written from the RFCs and Kafka's documented behaviour (failure messages,
raw tokens after a v0 handshake, SessionLifetimeMs), independently of the client
under test, and records what it saw (handshakes, tokens) for assertions.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kt.protocol import apis
from kt.protocol.connection import ServerConnection
from kt.protocol.framing import FrameDecoder, frame

_HASH = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}


@dataclass
class PeerConfig:
    """What the peer accepts."""

    mechanisms: list[str] = field(default_factory=lambda: ["PLAIN", "SCRAM-SHA-256"])
    users: dict[str, str] = field(default_factory=lambda: {"alice": "alice-secret"})
    #: tokens OAUTHBEARER accepts -> principal (a callable decides when set)
    token_check: Callable[[str], str | None] | None = None
    #: announced session lifetime in ms (0: none)
    session_lifetime_ms: int = 0
    #: offer SaslAuthenticate (False: an old broker, raw tokens after handshake v0)
    authenticate_api: bool = True
    #: GSSAPI: the acceptor's keytab (the service principal's keys)
    keytab: str | None = None


class _Scram:
    def __init__(self, mech: str, password: str) -> None:
        self.h = _HASH[mech]
        self.salt = b"peer-salt"
        self.iters = 4096
        salted = hashlib.pbkdf2_hmac(self.h, password.encode(), self.salt, self.iters)
        client_key = hmac.digest(salted, b"Client Key", self.h)
        self.stored = hashlib.new(self.h, client_key).digest()
        self.server_key = hmac.digest(salted, b"Server Key", self.h)

    def first(self, msg: bytes) -> bytes:
        self.bare = msg.decode()[3:]
        attrs = dict(p.split("=", 1) for p in self.bare.split(",") if "=" in p)
        self.nonce = attrs["r"] + "PeerNonce"
        self.sfirst = f"r={self.nonce},s={base64.b64encode(self.salt).decode()},i={self.iters}"
        return self.sfirst.encode()

    def final(self, msg: bytes) -> bytes | None:
        text = msg.decode()
        without, _, proof = text.rpartition(",p=")
        if f"r={self.nonce}" not in without.split(","):
            return None
        auth = f"{self.bare},{self.sfirst},{without}".encode()
        sig = hmac.digest(self.stored, auth, self.h)
        client_key = bytes(a ^ b for a, b in zip(base64.b64decode(proof), sig))
        if hashlib.new(self.h, client_key).digest() != self.stored:
            return None
        return b"v=" + base64.b64encode(hmac.digest(self.server_key, auth, self.h))


class SaslPeer:
    """The server; `start()` in a thread of its own, `stop()` at the end."""

    def __init__(self, config: PeerConfig | None = None) -> None:
        self.config = config or PeerConfig()
        self.port = 0
        self.handshakes: list[str] = []
        self.authenticated: list[str] = []
        self.tokens: list[str] = []
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._server: asyncio.base_events.Server | None = None

    def start(self) -> SaslPeer:
        self._thread.start()
        fut = asyncio.run_coroutine_threadsafe(self._start(), self._loop)
        fut.result(10)
        return self

    async def _start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    def stop(self) -> None:
        async def close() -> None:
            assert self._server is not None
            self._server.close()

        asyncio.run_coroutine_threadsafe(close(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _versions(self) -> Any:
        keys = [(apis.API_VERSIONS.key, 0, 3), (apis.METADATA.key, 0, 12),
                (apis.SASL_HANDSHAKE.key, 0, 1 if self.config.authenticate_api else 0)]  # fmt: skip
        if self.config.authenticate_api:
            keys.append((apis.SASL_AUTHENTICATE.key, 0, 2))
        return [{"api_key": k, "min_version": lo, "max_version": hi} for k, lo, hi in keys]

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = ServerConnection()
        mech: str | None = None
        state: Any = None
        done = False
        raw = False
        try:
            while True:
                data = await reader.read(65536)
                if not data:
                    return
                if raw:
                    # tokens without headers after a v0 handshake
                    for token in self._raw_frames.feed(data):
                        answer, ok, fail = self._step(mech or "", state, token)
                        if fail:
                            return  # Kafka closes on failure after v0
                        if answer is not None:
                            writer.write(frame(answer))
                        if ok:
                            raw, done = False, True
                            state = None
                    continue
                for req in conn.receive_data(data):
                    key, v = req.header.api_key, req.header.api_version
                    body = req.body
                    if key == apis.API_VERSIONS.key:
                        resp = apis.API_VERSIONS.response(error_code=0, api_keys=self._versions())
                    elif key == apis.SASL_HANDSHAKE.key:
                        assert body is not None
                        self.handshakes.append(body.mechanism)
                        if body.mechanism not in self.config.mechanisms:
                            writer.write(conn.send_response(req, apis.SASL_HANDSHAKE.response(
                                error_code=33, mechanisms=self.config.mechanisms)))  # fmt: skip
                            await writer.drain()
                            return
                        mech, state = body.mechanism, {}
                        resp = apis.SASL_HANDSHAKE.response(
                            error_code=0, mechanisms=self.config.mechanisms)  # fmt: skip
                        if v == 0:
                            writer.write(conn.send_response(req, resp))
                            raw = True
                            self._raw_frames = FrameDecoder()
                            continue
                    elif key == apis.SASL_AUTHENTICATE.key:
                        assert body is not None and mech is not None
                        answer, ok, fail = self._step(mech, state, bytes(body.auth_bytes))
                        if fail:
                            resp = apis.SASL_AUTHENTICATE.response(
                                error_code=58, error_message=fail, auth_bytes=b""
                            )
                            writer.write(conn.send_response(req, resp))
                            await writer.drain()
                            return
                        resp = apis.SASL_AUTHENTICATE.response(
                            error_code=0,
                            auth_bytes=answer or b"",
                            session_lifetime_ms=self.config.session_lifetime_ms if ok else 0,
                        )
                        if ok:
                            done = True
                    elif not done:
                        return  # Kafka: no response, close (request before authentication)
                    elif key == apis.METADATA.key:
                        resp = apis.METADATA.response(
                            brokers=[{"node_id": 1, "host": "127.0.0.1", "port": self.port}],
                            cluster_id="peer", controller_id=1, topics=[])  # fmt: skip
                    else:
                        return
                    writer.write(conn.send_response(req, resp))
                await writer.drain()
        finally:
            writer.close()

    def _step(
        self, mech: str, state: dict[str, Any], token: bytes
    ) -> tuple[bytes | None, bool, str | None]:
        """(answer, authenticated, failure message) for one client token."""
        if mech == "PLAIN":
            parts = token.split(b"\0")
            if len(parts) != 3:
                return (
                    None,
                    False,
                    f"Invalid SASL/PLAIN response: expected 3 tokens, got {len(parts)}",
                )
            user, pw = parts[1].decode(), parts[2].decode()
            if self.config.users.get(user) != pw:
                return None, False, "Authentication failed: Invalid username or password"
            self.authenticated.append(user)
            return b"", True, None
        if mech in _HASH:
            if "scram" not in state:
                attrs = dict(p.split("=", 1) for p in token.decode()[3:].split(",") if "=" in p)
                user = attrs.get("n", "")
                pw = self.config.users.get(user)
                state["user"] = user
                state["scram"] = _Scram(mech, pw if pw is not None else "\0no such user")
                return state["scram"].first(token), False, None
            answer = state["scram"].final(token)
            if answer is None:
                return (
                    None,
                    False,
                    (
                        "Authentication failed during authentication due to invalid credentials "
                        f"with SASL mechanism {mech}"
                    ),
                )
            self.authenticated.append(state["user"])
            return answer, True, None
        if mech == "GSSAPI":
            return self._gssapi(state, token)
        if mech == "OAUTHBEARER":
            if state.get("error_sent"):
                return None, False, state["error_sent"]
            text = token.decode()
            auth = [p for p in text.split("\x01") if p.startswith("auth=")]
            bearer = auth[0][len("auth=Bearer ") :] if auth else ""
            self.tokens.append(bearer)
            check = self.config.token_check
            principal = check(bearer) if check else None
            if principal is None:
                state["error_sent"] = '{"status":"invalid_token"}'
                return b'{"status":"invalid_token"}', False, None
            self.authenticated.append(principal)
            return b"", True, None
        return None, False, "unknown mechanism"

    def _gssapi(self, state: dict[str, Any], token: bytes) -> tuple[bytes | None, bool, str | None]:
        """RFC 4752's acceptor: the context, then offer "no security layer" and read
        the client's choice and authorization id."""
        import gssapi

        try:
            if "ctx" not in state:
                creds = gssapi.Credentials(usage="accept", store={"keytab": self.config.keytab})
                state["ctx"] = gssapi.SecurityContext(creds=creds, usage="accept")
            ctx = state["ctx"]
            if not ctx.complete:
                out = ctx.step(token)
                return bytes(out or b""), False, None
            if not state.get("offered"):
                state["offered"] = True
                return bytes(ctx.wrap(b"\x01\x00\x10\x00", False).message), False, None
            choice = bytes(ctx.unwrap(token).message)
            authzid = choice[4:].decode()
            initiator = str(ctx.initiator_name)
            if choice[0] != 1 or (authzid and authzid != initiator):
                return None, False, "Authentication failed: bad GSSAPI layer choice"
            self.authenticated.append(initiator)
            return b"", True, None
        except gssapi.exceptions.GSSError as exc:
            return None, False, f"GSSAPI failed: {exc}"
