"""The asyncio transport of the client library: connections, metadata, routing, retries.

`BrokerConnection` drives one sans-IO `ClientConnection` over an asyncio stream:
requests are pipelined (many in flight, matched by correlation id, which Kafka
answers in order), each connection negotiates API versions with ApiVersions when
it opens, and every request has a timeout.

`ClientCore` owns the connections of one client: it bootstraps from a list of
host:port, keeps a metadata cache (brokers, topics, partitions, leaders, topic
ids) refreshed on demand and after NOT_LEADER / UNKNOWN_TOPIC errors, routes
partition requests to leaders and group requests to coordinators, and retries
retriable errors with exponential backoff. The API helpers built on it live in
`records.py`, `admin.py` and `groups.py`; `__init__.py` assembles them into
`KafkaClient`.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import random
import re
import socket
import ssl
import time
import uuid
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from kt.client.security import SecurityConfig, SecurityConfigError
from kt.client.tls_errors import explain_ssl_error, explain_verification, peer_certificate
from kt.protocol import apis
from kt.protocol.codec import Api
from kt.protocol.connection import RAW_TOKEN, ClientConnection
from kt.protocol.errors import ErrorCode, ProtocolError, error_for_code
from kt.protocol.sasl import SaslError, SaslExchange
from kt.protocol.schema import Struct

T = TypeVar("T")

DEFAULT_PORT = 9092
#: the ApiVersions version we ask first; brokers that do not know it answer in v0
_API_VERSIONS_FIRST = 3

#: The highest versions of the group membership APIs kt sends, whatever a broker
#: advertises: the versions librdkafka sends. Their flexible versions (JoinGroup
#: v6, SyncGroup v4, Heartbeat v4) and LeaveGroup's batch form (v3) add no
#: behaviour a consumer needs, and Kafka-compatible implementations advertise them
#: while parsing only the older layouts: librdkafka's mock cluster offers JoinGroup
#: v6 but reads its protocol count as a plain int32, so kt's v6 JoinGroup made it
#: close the connection. Capping here is what keeps kt on the versions such
#: implementations are tested with (by librdkafka itself).
_CLIENT_MAX_VERSION: dict[int, int] = {
    apis.JOIN_GROUP.key: 5,
    apis.SYNC_GROUP.key: 3,
    apis.HEARTBEAT.key: 3,
    apis.LEAVE_GROUP.key: 2,
}


class KafkaError(Exception):
    """An error code returned by a broker, with what it was about."""

    def __init__(self, code: int, context: str = "", message: str | None = None) -> None:
        self.code = error_for_code(code)
        self.context = context
        self.detail = message
        text = message or self.code.message
        prefix = f"{context}: " if context else ""
        super().__init__(f"{prefix}{text} ({self.code.name})")

    @property
    def retriable(self) -> bool:
        """True when retrying the same request may succeed."""
        return self.code.retriable


class UnsupportedApiError(KafkaError):
    """A broker offers no version of an API that kt speaks (an older Kafka, or a
    Kafka-compatible implementation that lacks it, such as librdkafka's mock
    cluster, which has no admin APIs). Not retriable: asking again changes nothing."""

    def __init__(self, api_name: str, broker: str, detail: str | None = None) -> None:
        self.api_name = api_name
        self.broker = broker
        super().__init__(
            ErrorCode.UNSUPPORTED_VERSION,
            "",
            detail or f"{broker} does not support the {api_name} API",
        )


class ControllerUnknownError(KafkaError):
    """The cluster's metadata names a controller that is not among its brokers, so a
    request that must go to the controller has nowhere to go. Retriable: during a
    controller change the metadata names the new controller a moment later."""

    def __init__(self, controller_id: int, brokers: Iterable[int]) -> None:
        self.controller_id = controller_id
        known = ", ".join(str(b) for b in sorted(brokers)) or "none"
        super().__init__(
            ErrorCode.BROKER_NOT_AVAILABLE,
            "",
            f"the cluster's metadata names broker {controller_id} as the controller, "
            f"which is not one of its brokers ({known})",
        )

    @property
    def retriable(self) -> bool:
        return True


class KafkaConnectionError(Exception):
    """A broker could not be reached, or the connection broke.

    `refused` is True when the broker's host answered that nothing listens on the
    port (on every address the name resolves to): retrying soon rarely helps.
    `fatal` is True when retrying cannot help at all (a certificate refused, a
    TLS/plaintext mismatch, credentials refused): callers stop at once.
    """

    def __init__(self, message: str, *, refused: bool = False, fatal: bool = False) -> None:
        super().__init__(message)
        self.refused = refused
        self.fatal = fatal


class KafkaAuthenticationError(KafkaConnectionError):
    """SASL authentication failed, or TLS refused a certificate (always fatal)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, fatal=True)


# asyncio.open_connection joins the errors of a name with several addresses
# (localhost: ::1 and 127.0.0.1) into one OSError without errno, "Multiple
# exceptions: [Errno 111] ..., [Errno 111] ...".
_ERRNO_IN_MESSAGE = re.compile(r"\[Errno (\d+)\]")


def _connection_refused(exc: OSError) -> bool:
    """True when `exc` says every address refused the connection."""
    if isinstance(exc, ConnectionRefusedError):
        return True
    if exc.errno is not None:
        return False
    codes = _ERRNO_IN_MESSAGE.findall(str(exc))
    return bool(codes) and all(int(c) == errno.ECONNREFUSED for c in codes)


class KafkaTimeoutError(Exception):
    """A request or an operation did not complete in time."""


def check(code: int, context: str = "", message: str | None = None) -> None:
    """Raise KafkaError unless `code` is NONE."""
    if code != 0:
        raise KafkaError(code, context, message)


def parse_bootstrap(servers: str | Sequence[str]) -> list[tuple[str, int]]:
    """Split "h1:9092,h2" (or a list of such strings) into (host, port) pairs.

    Raises ValueError on an empty list or a bad port. IPv6 literals go in
    brackets: "[::1]:9092".
    """
    items = [servers] if isinstance(servers, str) else list(servers)
    out: list[tuple[str, int]] = []
    for item in items:
        for part in item.split(","):
            part = part.strip()
            if not part:
                continue
            if part.startswith("["):
                host, _, rest = part[1:].partition("]")
                port_text = rest[1:] if rest.startswith(":") else ""
            elif part.count(":") == 1:
                host, port_text = part.split(":")
            else:
                host, port_text = part, ""
            try:
                port = int(port_text) if port_text else DEFAULT_PORT
            except ValueError:
                raise ValueError(f"bad port in bootstrap server {part!r}") from None
            if not host or not 0 < port < 65536:
                raise ValueError(f"bad bootstrap server {part!r}")
            out.append((host, port))
    if not out:
        raise ValueError("no bootstrap servers given")
    return out


@dataclass
class BrokerInfo:
    """A broker as Metadata describes it."""

    node_id: int
    host: str
    port: int
    rack: str | None = None


@dataclass
class PartitionInfo:
    """One partition's leadership and replicas."""

    topic: str
    partition: int
    leader: int
    leader_epoch: int
    replicas: list[int]
    isr: list[int]
    offline_replicas: list[int] = field(default_factory=list)
    error: ErrorCode = ErrorCode.NONE


@dataclass
class TopicInfo:
    """A topic, its id and its partitions."""

    name: str
    topic_id: uuid.UUID
    is_internal: bool
    partitions: dict[int, PartitionInfo]
    error: ErrorCode = ErrorCode.NONE


@dataclass
class ClusterMetadata:
    """The metadata cache: what the last Metadata responses said."""

    cluster_id: str | None = None
    controller_id: int = -1
    brokers: dict[int, BrokerInfo] = field(default_factory=dict)
    topics: dict[str, TopicInfo] = field(default_factory=dict)

    def topic_by_id(self, topic_id: uuid.UUID) -> TopicInfo | None:
        """The cached topic with this id."""
        for t in self.topics.values():
            if t.topic_id == topic_id:
                return t
        return None


class BrokerConnection:
    """One TCP connection to a broker: pipelined requests over a sans-IO codec."""

    def __init__(
        self,
        host: str,
        port: int,
        *,
        node_id: int = -1,
        client_id: str = "kt",
        connect_timeout: float = 10.0,
        request_timeout: float = 30.0,
        read_size: int = 1 << 16,
        security: SecurityConfig | None = None,
    ) -> None:
        self.host = host
        self.security = security or SecurityConfig()
        # Bytes read from the socket at a time (and the stream's buffer limit): a
        # replica fetcher receiving 1 MiB responses reads them in a few calls.
        self.read_size = read_size
        self.port = port
        self.node_id = node_id
        self.connect_timeout = connect_timeout
        self.request_timeout = request_timeout
        self._client_id = client_id
        self._conn = ClientConnection(client_id)
        self._protocol_failed = False
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._pending: dict[int, asyncio.Future[Struct]] = {}
        self._read_task: asyncio.Task[None] | None = None
        self._closed_reason: str | None = None
        #: api key -> (min, max) the broker advertises
        self.broker_versions: dict[int, tuple[int, int]] = {}
        #: monotonic time to re-authenticate at (KIP-368), None when not needed
        self._reauth_at: float | None = None
        self._reauth_lock = asyncio.Lock()
        #: the SASL session lifetime the broker announced, ms (0: none)
        self.session_lifetime_ms = 0
        #: KIP-368 re-authentications done on this connection
        self.reauthentications = 0
        #: bytes received on this connection so far (to recognise a TLS answer)
        self._received = 0
        self._first_bytes = b""
        #: responses received on this connection
        self._answered = 0

    @property
    def address(self) -> str:
        """host:port."""
        return f"{self.host}:{self.port}"

    @property
    def connected(self) -> bool:
        """True while the connection is open and usable."""
        return self._writer is not None and self._closed_reason is None

    @property
    def in_flight(self) -> int:
        """Requests awaiting their response."""
        return len(self._pending)

    async def connect(self) -> None:
        """Open the socket and negotiate versions; KafkaConnectionError on failure."""
        await self._open()
        try:
            try:
                resp = await self._api_versions(_API_VERSIONS_FIRST)
            except KafkaConnectionError:
                if not self._protocol_failed:
                    raise
                # A broker that does not know our ApiVersions version answers in v0,
                # which does not parse as the version we asked: ask again in v0.
                await self.close()
                await self._open()
                resp = await self._api_versions(0)
            if resp.error_code == ErrorCode.UNSUPPORTED_VERSION:
                # The error body is in v0, so what followed the error code is not
                # to be trusted as read in our version: ask in v0, which all speak.
                resp = await self._api_versions(0)
            check(resp.error_code, f"{self.address}: ApiVersions")
            self.broker_versions = {
                k.api_key: (k.min_version, k.max_version) for k in resp.api_keys
            }
            if self.security.uses_sasl:
                await self._authenticate(reauth=False)
        except KafkaConnectionError as exc:
            await self.close()
            if self._tls_closed_without_client_certificate(exc):
                raise KafkaConnectionError(
                    f"{self.address}: TLS: the broker closed the connection after the handshake "
                    "without answering: it requires a client certificate (mutual TLS): set "
                    "ssl.certificate.location and ssl.key.location, or ssl.keystore.location",
                    fatal=True,
                ) from None
            if exc.fatal or self._received or not self._plaintext_eof():
                raise
            # Closed before any answer: a TLS listener does that to a plaintext
            # client's first request. A broker going down does too, so look: a TLS
            # handshake that succeeds settles it.
            if await peer_certificate(self.host, self.port, self.connect_timeout) is None:
                raise
            raise KafkaConnectionError(
                f"{self.address}: the broker speaks TLS on this port but the client does "
                "not (use security.protocol=SSL or SASL_SSL)",
                fatal=True,
            ) from None
        except BaseException:
            await self.close()
            raise

    def _tls_closed_without_client_certificate(self, exc: KafkaConnectionError) -> bool:
        # With TLS 1.3 the client's handshake ends before the broker checks for a
        # client certificate; a broker that requires one then drops the connection,
        # with an alert (reported as such) or a bare reset/close (this case).
        reason = self._closed_reason or ""
        return (
            self.security.uses_tls
            and not self.security.client_certificate
            and not exc.fatal
            and not self._received
            and reason.startswith(("connection lost", "connection closed by the broker"))
        )

    def _plaintext_eof(self) -> bool:
        # closed or reset before any byte came back, on a plaintext connection
        reason = self._closed_reason or ""
        return not self.security.uses_tls and reason.startswith(
            ("connection closed by the broker", "connection lost")
        )

    async def _authenticate(self, *, reauth: bool) -> None:
        """Run the SASL exchange (SaslHandshake, then the mechanism's tokens)."""
        try:
            mechanism = await self.security.mechanism_for_connection(self.host)
            exchange = SaslExchange(
                mechanism,
                self.broker_versions.get(apis.SASL_HANDSHAKE.key),
                self.broker_versions.get(apis.SASL_AUTHENTICATE.key),
                reauth=reauth,
            )
            while not exchange.done:
                step = exchange.step()
                assert step is not None
                if step.api is None:
                    try:
                        body = await self._send_raw(step.raw)
                    except KafkaConnectionError:
                        exchange.raw_closed()
                        raise
                    exchange.raw_response(bytes(body.auth_bytes or b""))
                elif step.api is apis.SASL_HANDSHAKE:
                    body = await self._send(step.api, step.version, step.body,
                                            timeout=self.connect_timeout, sasl=True)  # fmt: skip
                    exchange.handshake_response(body)
                else:
                    body = await self._send(step.api, step.version, step.body,
                                            timeout=self.connect_timeout, sasl=True)  # fmt: skip
                    exchange.authenticate_response(body)
        except SaslError as exc:
            self._fail_all(str(exc))
            raise KafkaAuthenticationError(f"{self.address}: {exc}") from None
        except SecurityConfigError as exc:
            self._fail_all(str(exc))
            raise KafkaAuthenticationError(f"{self.address}: {exc}") from None
        except KafkaConnectionError as exc:
            if reauth or exc.fatal:
                raise
            # Closed in the middle of the exchange: the broker refused without saying.
            raise KafkaAuthenticationError(
                f"{exc} (during SASL {self.security.mechanism} authentication)"
            ) from None
        self.session_lifetime_ms = exchange.session_lifetime_ms
        if exchange.session_lifetime_ms > 0:
            # As Kafka's client: at 85-95% of the lifetime, so that many connections
            # opened together do not all re-authenticate at once.
            share = 0.85 + random.random() * 0.10
            self._reauth_at = time.monotonic() + exchange.session_lifetime_ms * share / 1000
        else:
            self._reauth_at = None

    async def _maybe_reauthenticate(self) -> None:
        """Re-authenticate (KIP-368) when the session is near its end; other senders
        wait meanwhile, since the broker takes nothing else during the exchange."""
        async with self._reauth_lock:
            if self._reauth_at is not None and time.monotonic() >= self._reauth_at:
                try:
                    # sets the next _reauth_at from the new session's lifetime
                    await self._authenticate(reauth=True)
                except KafkaConnectionError as exc:
                    self._reauth_at = None
                    self._fail_all(str(exc).split(": ", 1)[-1])
                    raise
                self.reauthentications += 1

    async def reauthenticate(self) -> None:
        """Re-authenticate now (what happens by itself before the session ends)."""
        self._reauth_at = time.monotonic()
        await self._maybe_reauthenticate()

    async def _open(self) -> None:
        self._conn = ClientConnection(self._client_id)
        self._closed_reason = None
        self._protocol_failed = False
        self._received = 0
        self._first_bytes = b""
        self._answered = 0
        ctx = self.security.ssl_context if self.security.uses_tls else None
        tls: dict[str, Any] = {}
        if ctx is not None:
            tls = {
                "ssl": ctx,
                "server_hostname": self.host,
                "ssl_handshake_timeout": self.connect_timeout,
            }
        try:
            self._reader, self._writer = await asyncio.wait_for(
                asyncio.open_connection(self.host, self.port, limit=self.read_size, **tls),
                self.connect_timeout,
            )
        except TimeoutError:
            if ctx is not None:
                raise KafkaConnectionError(
                    f"{self.address}: TLS handshake got no answer in "
                    f"{self.connect_timeout:g}s (a plaintext listener? then use "
                    "security.protocol=PLAINTEXT or SASL_PLAINTEXT)",
                    fatal=True,
                ) from None
            raise KafkaConnectionError(
                f"{self.address}: connection timed out after {self.connect_timeout:g}s"
            ) from None
        except ssl.SSLCertVerificationError as exc:
            der = await peer_certificate(self.host, self.port, self.connect_timeout)
            message = explain_verification(exc, self.host, der, self.security.trust_source)
            raise KafkaAuthenticationError(f"{self.address}: {message}") from None
        except ssl.SSLError as exc:
            raise KafkaConnectionError(
                f"{self.address}: {explain_ssl_error(exc, during_handshake=True)}", fatal=True
            ) from None
        except (ConnectionResetError, BrokenPipeError) as exc:
            if ctx is None:
                raise KafkaConnectionError(
                    f"{self.address}: {os.strerror(exc.errno or 104).lower()}"
                ) from None
            raise KafkaConnectionError(
                f"{self.address}: TLS handshake failed: the broker reset the connection "
                "(a plaintext listener? then use security.protocol=PLAINTEXT or SASL_PLAINTEXT)",
                fatal=True,
            ) from None
        except socket.gaierror:
            raise KafkaConnectionError(f"{self.address}: cannot resolve host {self.host}") from None
        except OSError as exc:
            refused = _connection_refused(exc)
            if exc.errno:
                reason = os.strerror(exc.errno)
            elif refused:
                reason = os.strerror(errno.ECONNREFUSED)
            else:
                reason = exc.strerror or str(exc) or type(exc).__name__
            raise KafkaConnectionError(
                f"{self.address}: {reason.lower()}", refused=refused
            ) from None
        self._read_task = asyncio.create_task(self._read_loop())

    async def _api_versions(self, version: int) -> Struct:
        body = apis.API_VERSIONS.request(client_software_name="kt", client_software_version="0.1.0")
        resp: Struct = await self._send(
            apis.API_VERSIONS, version, body, timeout=self.connect_timeout
        )
        return resp

    @property
    def label(self) -> str:
        """The broker as errors name it: broker N (host:port), or the broker at
        host:port while its id is not known."""
        if self.node_id >= 0:
            return f"broker {self.node_id} ({self.address})"
        return f"the broker at {self.address}"

    def version_for(self, api: Api) -> int:
        """The highest version of `api` both sides speak; UnsupportedApiError when none."""
        theirs = self.broker_versions.get(api.key)
        if theirs is None:
            raise UnsupportedApiError(api.name, self.label)
        ours = min(api.max_version, _CLIENT_MAX_VERSION.get(api.key, api.max_version))
        hi = min(theirs[1], ours)
        lo = max(theirs[0], api.min_version)
        if hi < lo:
            raise UnsupportedApiError(
                api.name,
                self.label,
                f"{self.label} offers {api.name} v{theirs[0]}-{theirs[1]}, "
                f"kt speaks v{api.min_version}-{ours}: no version in common",
            )
        return hi

    def supports(self, api: Api) -> bool:
        """Whether the broker offers a version of `api` we speak."""
        try:
            self.version_for(api)
        except KafkaError:
            return False
        return True

    async def request(
        self,
        api: Api,
        body: Any,
        *,
        version: int | None = None,
        timeout: float | None = None,
    ) -> Struct:
        """Send a request (negotiated version unless given) and await its response."""
        v = self.version_for(api) if version is None else version
        try:
            resp: Struct | None = await self._send(api, v, body, timeout=timeout)
        except KafkaConnectionError:
            if not self._answered_only_versions():
                raise
            # A SASL listener closes, without a word, on the first request that is
            # not ApiVersions from a client that skipped authentication: ask it.
            offered = await self._sasl_mechanisms_offered()
            if offered is None:
                raise
            wanted = "SASL_SSL" if self.security.uses_tls else "SASL_PLAINTEXT"
            raise KafkaConnectionError(
                f"{self.address}: the broker requires SASL authentication (a SASL listener; "
                f"it offers {', '.join(offered) or 'no mechanism'}): set "
                f"security.protocol={wanted} and sasl.mechanism",
                fatal=True,
            ) from None
        if resp is None:
            raise ValueError("request() needs a request that is answered; use send_only()")
        return resp

    def _answered_only_versions(self) -> bool:
        return (
            not self.security.uses_sasl
            and self._answered == 1
            and (self._closed_reason or "").startswith("connection closed by the broker")
        )

    async def _sasl_mechanisms_offered(self) -> list[str] | None:
        """The mechanisms a SaslHandshake on a new connection lists, or None when the
        listener is not a SASL one (Kafka answers ILLEGAL_SASL_STATE there)."""
        probe = BrokerConnection(self.host, self.port, client_id=self._client_id,
                                 connect_timeout=self.connect_timeout,
                                 security=self.security)  # fmt: skip
        try:
            await probe._open()
            body = apis.SASL_HANDSHAKE.request(mechanism="PLAIN")
            resp = await probe._send(apis.SASL_HANDSHAKE, 1, body,
                                     timeout=self.connect_timeout, sasl=True)  # fmt: skip
        except (KafkaConnectionError, KafkaTimeoutError):
            return None
        finally:
            await probe.close()
        if resp.error_code not in (0, ErrorCode.UNSUPPORTED_SASL_MECHANISM):
            return None
        return list(resp.mechanisms or [])

    async def send_only(self, api: Api, body: Any, *, version: int | None = None) -> None:
        """Send a request the broker does not answer (Produce with acks=0)."""
        v = self.version_for(api) if version is None else version
        await self._send(api, v, body, expect_response=False)

    async def _send(
        self,
        api: Api,
        version: int,
        body: Any,
        *,
        timeout: float | None = None,
        expect_response: bool = True,
        sasl: bool = False,
    ) -> Any:
        # While a re-authentication runs, other requests wait: the broker takes
        # nothing but its SASL requests until it ends (it would close the connection).
        if not sasl and (
            self._reauth_lock.locked()
            or (self._reauth_at is not None and time.monotonic() >= self._reauth_at)
        ):
            await self._maybe_reauthenticate()
        if self._closed_reason is not None or self._writer is None:
            raise KafkaConnectionError(f"{self.address}: {self._closed_reason or 'not connected'}")
        correlation_id, data = self._conn.send_request(
            api.key, version, body, expect_response=expect_response
        )
        fut: asyncio.Future[Struct] | None = None
        if expect_response:
            fut = asyncio.get_running_loop().create_future()
            self._pending[correlation_id] = fut
        try:
            self._writer.write(data)
            try:
                await self._writer.drain()
            except OSError as exc:
                self._fail_all(f"write failed: {exc.strerror or exc}")
            if fut is None:
                return None
            wait = self.request_timeout if timeout is None else timeout
            try:
                # The future is this call's alone, so no shield: the caller resumes
                # in the loop turn after the response is read (a replica fetcher's
                # round trip is on acks=all produces' path).
                async with asyncio.timeout(wait):
                    return await fut
            except TimeoutError:
                # The late response will still arrive in order; it is then dropped.
                self._pending.pop(correlation_id, None)
                raise KafkaTimeoutError(
                    f"{self.address}: {api.name} got no response in {wait:g}s"
                ) from None
        except asyncio.CancelledError:
            if fut is not None:
                self._abandon(correlation_id, fut)
            raise

    async def _send_raw(self, token: bytes) -> Struct:
        """Send a raw SASL token (v0 handshake) and await the broker's raw answer."""
        if self._closed_reason is not None or self._writer is None:
            raise KafkaConnectionError(f"{self.address}: {self._closed_reason or 'not connected'}")
        fut: asyncio.Future[Struct] = asyncio.get_running_loop().create_future()
        self._pending[RAW_TOKEN] = fut
        self._writer.write(self._conn.send_raw(token))
        try:
            async with asyncio.timeout(self.connect_timeout):
                return await fut
        except TimeoutError:
            self._pending.pop(RAW_TOKEN, None)
            raise KafkaTimeoutError(f"{self.address}: SASL got no answer") from None

    def _abandon(self, correlation_id: int, fut: asyncio.Future[Struct]) -> None:
        # The caller was cancelled (e.g. `kt tui` quit while a screen tailed): nobody
        # will await this future again. Failed later, when the connection closes, it
        # would make asyncio log "Future exception was never retrieved"; so forget it
        # now (its late response is dropped, as after a timeout) and cancel it.
        self._pending.pop(correlation_id, None)
        if not fut.cancel() and not fut.cancelled():
            fut.exception()  # already failed: mark the error as seen

    async def _read_loop(self) -> None:
        assert self._reader is not None
        reason = "connection closed by the broker"
        try:
            while True:
                data = await self._reader.read(self.read_size)
                if not data:
                    break
                if self._received < 2:
                    self._first_bytes += data[:2]
                self._received += len(data)
                for resp in self._conn.receive_data(data):
                    self._answered += 1
                    fut = self._pending.pop(resp.correlation_id, None)
                    if fut is not None and not fut.done():
                        fut.set_result(resp.body)
        except asyncio.CancelledError:
            reason = "connection closed"
        except ssl.SSLError as exc:
            reason = explain_ssl_error(exc, during_handshake=False)
        except OSError as exc:
            reason = f"connection lost: {exc.strerror or exc}"
        except ProtocolError as exc:
            if self._first_bytes[:1] in (b"\x15", b"\x16") and self._first_bytes[1:2] == b"\x03":
                # a TLS record (alert or handshake) where a Kafka response should be
                reason = (
                    "the broker answered with TLS: it is a TLS listener "
                    "(use security.protocol=SSL or SASL_SSL)"
                )
                self._fail_all(reason, fatal=True)
                return
            self._protocol_failed = True
            reason = f"protocol error: {exc}"
        self._fail_all(reason)

    def _fail_all(self, reason: str, *, fatal: bool = False) -> None:
        if self._closed_reason is None:
            self._closed_reason = reason
        pending, self._pending = self._pending, {}
        for fut in pending.values():
            if not fut.done():
                fut.set_exception(KafkaConnectionError(f"{self.address}: {reason}", fatal=fatal))
        if self._writer is not None:
            self._writer.close()

    async def close(self) -> None:
        """Close the socket; requests still in flight fail with KafkaConnectionError."""
        task, self._read_task = self._read_task, None
        try:
            if task is not None and not task.done():
                task.cancel()
                # asyncio.wait, not `await task` under suppress(CancelledError): that
                # would also swallow a cancellation of the caller arriving meanwhile (a
                # sender being stopped would then carry on as if never cancelled).
                await asyncio.wait([task])
        finally:
            self._fail_all("connection closed")
        if self._writer is not None:
            with contextlib.suppress(Exception):
                await self._writer.wait_closed()


class ClientCore:
    """Connections, metadata cache, routing and retries shared by every API helper."""

    def __init__(
        self,
        bootstrap_servers: str | Sequence[str] = "localhost:9092",
        *,
        client_id: str = "kt",
        request_timeout: float = 30.0,
        connect_timeout: float = 10.0,
        retries: int = 8,
        retry_backoff: float = 0.1,
        max_retry_backoff: float = 1.0,
        metadata_max_age: float = 300.0,
        security: SecurityConfig | None = None,
    ) -> None:
        self.bootstrap = parse_bootstrap(bootstrap_servers)
        #: TLS and SASL for every connection (PLAINTEXT when None)
        self.security = security or SecurityConfig()
        self.client_id = client_id
        self.request_timeout = request_timeout
        self.connect_timeout = connect_timeout
        self.retries = retries
        self.retry_backoff = retry_backoff
        self.max_retry_backoff = max_retry_backoff
        self.metadata_max_age = metadata_max_age
        self.metadata = ClusterMetadata()
        self._metadata_at = 0.0
        self._conns: dict[int, BrokerConnection] = {}
        self._bootstrap_conn: BrokerConnection | None = None
        self._connecting: dict[int, asyncio.Lock] = {}
        self._coordinators: dict[tuple[int, str], int] = {}
        self._closed = False

    async def __aenter__(self) -> Any:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # --- connections -----------------------------------------------------------------

    def _new_connection(self, host: str, port: int, node_id: int = -1) -> BrokerConnection:
        return BrokerConnection(
            host,
            port,
            node_id=node_id,
            client_id=self.client_id,
            connect_timeout=self.connect_timeout,
            request_timeout=self.request_timeout,
            security=self.security,
        )

    async def start(self) -> None:
        """Connect to a bootstrap server and load the cluster's metadata.

        Tries each bootstrap server in turn, in rounds with backoff, until one
        answers or `connect_timeout` has passed; then raises KafkaConnectionError
        naming every server and why it failed. When every server refused the
        connection in a round, it fails at once: nothing listens there, and
        waiting out the timeout only delays the error (timeouts and other errors,
        which may pass, keep the bounded wait).
        """
        deadline = time.monotonic() + self.connect_timeout
        backoff = self.retry_backoff
        errors: dict[str, str] = {}
        while True:
            refused = 0
            for host, port in self.bootstrap:
                conn = self._new_connection(host, port)
                remaining = deadline - time.monotonic()
                conn.connect_timeout = max(0.1, min(self.connect_timeout, remaining))
                try:
                    await conn.connect()
                except (KafkaConnectionError, KafkaTimeoutError) as exc:
                    if isinstance(exc, KafkaConnectionError) and exc.fatal:
                        raise  # certificates, credentials, TLS on one side only
                    errors[conn.address] = str(exc).split(": ", 1)[-1]
                    refused += isinstance(exc, KafkaConnectionError) and exc.refused
                    continue
                self._bootstrap_conn = conn
                await self.refresh_metadata()
                # Name the broker in errors by its id once the metadata gives it.
                for b in self.metadata.brokers.values():
                    if (b.host, b.port) == (conn.host, conn.port) and conn.node_id < 0:
                        conn.node_id = b.node_id
                return
            if refused == len(self.bootstrap) or time.monotonic() + backoff >= deadline:
                detail = "; ".join(f"{a}: {r}" for a, r in errors.items())
                raise KafkaConnectionError(f"cannot connect to any bootstrap server ({detail})")
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, self.max_retry_backoff)

    async def close(self) -> None:
        """Close every connection."""
        self._closed = True
        conns = list(self._conns.values())
        if self._bootstrap_conn is not None:
            conns.append(self._bootstrap_conn)
        self._conns.clear()
        self._bootstrap_conn = None
        for c in conns:
            await c.close()

    async def connection(self, node_id: int) -> BrokerConnection:
        """The (shared) connection to broker `node_id`, opened on first use."""
        conn = self._conns.get(node_id)
        if conn is not None and conn.connected:
            return conn
        lock = self._connecting.setdefault(node_id, asyncio.Lock())
        async with lock:
            conn = self._conns.get(node_id)
            if conn is not None and conn.connected:
                return conn
            broker = self.metadata.brokers.get(node_id)
            if broker is None:
                await self.refresh_metadata()
                broker = self.metadata.brokers.get(node_id)
                if broker is None:
                    raise KafkaError(ErrorCode.BROKER_NOT_AVAILABLE, f"broker {node_id}")
            boot = self._bootstrap_conn
            if (
                boot is not None
                and boot.connected
                and (boot.host, boot.port) == (broker.host, broker.port)
            ):
                # Reuse the bootstrap connection when it is this very broker.
                boot.node_id = node_id
                self._conns[node_id] = boot
                self._bootstrap_conn = None
                return boot
            conn = self._new_connection(broker.host, broker.port, node_id)
            await conn.connect()
            self._conns[node_id] = conn
            return conn

    async def any_connection(self) -> BrokerConnection:
        """A connection to some live broker (preferring open, least-loaded ones)."""
        live = [c for c in self._conns.values() if c.connected]
        if self._bootstrap_conn is not None and self._bootstrap_conn.connected:
            live.append(self._bootstrap_conn)
        if live:
            return min(live, key=lambda c: c.in_flight)
        errors = []
        for node_id in sorted(self.metadata.brokers):
            try:
                return await self.connection(node_id)
            except KafkaConnectionError as exc:
                errors.append(str(exc))
        for host, port in self.bootstrap:
            conn = self._new_connection(host, port)
            try:
                await conn.connect()
            except KafkaConnectionError as exc:
                errors.append(str(exc))
                continue
            self._bootstrap_conn = conn
            return conn
        raise KafkaConnectionError("no broker reachable (" + "; ".join(errors) + ")")

    async def send(
        self,
        api: Api,
        body: Any,
        node_id: int | None = None,
        *,
        version: int | None = None,
        timeout: float | None = None,
    ) -> Struct:
        """One request to `node_id` (any broker when None), no retries."""
        conn = await (self.any_connection() if node_id is None else self.connection(node_id))
        return await conn.request(api, body, version=version, timeout=timeout)

    async def api_version(self, api: Api, node_id: int | None = None) -> int:
        """The version of `api` a request to `node_id` (or any broker) would use."""
        conn = await (self.any_connection() if node_id is None else self.connection(node_id))
        return conn.version_for(api)

    async def supports(self, api: Api, node_id: int | None = None) -> bool:
        """Whether the broker (any when None) offers a version of `api` we speak."""
        conn = await (self.any_connection() if node_id is None else self.connection(node_id))
        return conn.supports(api)

    # --- retries -------------------------------------------------------------------

    async def retrying(
        self,
        op: Callable[[], Awaitable[T]],
        *,
        on_retry: Callable[[BaseException], Awaitable[None]] | None = None,
        retries: int | None = None,
    ) -> T:
        """Run `op`, retrying retriable KafkaErrors, broken connections and timeouts
        with exponential backoff; `on_retry` runs before each retry (by default the
        metadata is refreshed when the error says it is stale)."""
        attempts = self.retries if retries is None else retries
        backoff = self.retry_backoff
        for attempt in range(attempts + 1):
            try:
                return await op()
            except (KafkaError, KafkaConnectionError, KafkaTimeoutError) as exc:
                if isinstance(exc, KafkaError) and not exc.retriable:
                    raise
                if isinstance(exc, KafkaConnectionError) and exc.fatal:
                    raise
                if attempt >= attempts or self._closed:
                    raise
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, self.max_retry_backoff)
                if on_retry is not None:
                    await on_retry(exc)
                elif _stale_metadata(exc):
                    await self.refresh_metadata()
        raise AssertionError("unreachable")  # pragma: no cover

    # --- metadata ------------------------------------------------------------------

    async def refresh_metadata(
        self, topics: Iterable[str] | None = None, *, allow_auto_create: bool = False
    ) -> ClusterMetadata:
        """Ask for brokers and `topics` (every topic when None) and update the cache.

        Unknown topics are dropped from the cache; their errors are kept on the
        returned TopicInfo entries of `fetch_topic_metadata`.
        """
        names = None if topics is None else sorted(set(topics))
        await self._metadata_request(names, allow_auto_create)
        return self.metadata

    async def fetch_topic_metadata(
        self, topics: Iterable[str] | None = None, *, allow_auto_create: bool = False
    ) -> dict[str, TopicInfo]:
        """Metadata for `topics` (every topic when None), errors included."""
        names = None if topics is None else sorted(set(topics))
        return await self._metadata_request(names, allow_auto_create)

    async def _metadata_request(
        self, names: list[str] | None, allow_auto_create: bool
    ) -> dict[str, TopicInfo]:
        body = apis.METADATA.request(
            topics=None if names is None else [{"name": n} for n in names],
            allow_auto_topic_creation=allow_auto_create,
        )

        async def attempt() -> Struct:
            resp = await self.send(apis.METADATA, body)
            if not resp.brokers:
                # A broker that has no view of the cluster yet (one just started)
                # names no brokers: ask again rather than believe the cluster empty
                # and its topics gone (Java's NetworkClient ignores such answers too).
                raise KafkaError(
                    ErrorCode.LEADER_NOT_AVAILABLE, "metadata",
                    "the broker has no view of the cluster yet (no brokers in its answer)",
                )  # fmt: skip
            return resp

        async def reconnect(exc: BaseException) -> None:
            return None

        resp = await self.retrying(attempt, on_retry=reconnect)
        md = self.metadata
        md.cluster_id = resp.cluster_id
        md.controller_id = resp.controller_id
        md.brokers = {
            b.node_id: BrokerInfo(b.node_id, b.host, b.port, b.rack) for b in resp.brokers
        }
        got: dict[str, TopicInfo] = {}
        for t in resp.topics:
            err = error_for_code(t.error_code)
            parts = {
                p.partition_index: PartitionInfo(
                    t.name,
                    p.partition_index,
                    p.leader_id,
                    p.leader_epoch,
                    list(p.replica_nodes),
                    list(p.isr_nodes),
                    list(p.offline_replicas),
                    error_for_code(p.error_code),
                )
                for p in t.partitions
            }
            info = TopicInfo(t.name, t.topic_id, t.is_internal, parts, err)
            got[t.name] = info
            if err in (ErrorCode.NONE, ErrorCode.LEADER_NOT_AVAILABLE) and parts:
                md.topics[t.name] = info
            else:
                md.topics.pop(t.name, None)
        if names is None:
            # A full listing: forget deleted topics.
            for gone in set(md.topics) - set(got):
                del md.topics[gone]
            self._metadata_at = time.monotonic()
        return got

    async def topic(
        self, name: str, *, refresh: bool = False, auto_create: bool = False
    ) -> TopicInfo:
        """The topic's metadata (from the cache unless absent or `refresh`);
        KafkaError UNKNOWN_TOPIC_OR_PARTITION when the cluster does not have it
        (with `auto_create`, a broker that auto-creates topics creates it)."""
        info = None if refresh else self.metadata.topics.get(name)
        if info is None:
            got = await self.fetch_topic_metadata([name], allow_auto_create=auto_create)
            info = got.get(name)
            if info is None:
                raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {name!r}")
            if info.error not in (ErrorCode.NONE, ErrorCode.LEADER_NOT_AVAILABLE):
                raise KafkaError(info.error, f"topic {name!r}")
        return info

    async def partitions_for(self, topic: str) -> list[int]:
        """The topic's partition numbers, sorted."""
        return sorted((await self.topic(topic)).partitions)

    async def leader_for(self, topic: str, partition: int) -> int:
        """The node id leading `topic`-`partition`; retriable KafkaError when none."""
        info = await self.topic(topic)
        p = info.partitions.get(partition)
        if p is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"partition {topic}-{partition}")
        if p.leader < 0:
            raise KafkaError(ErrorCode.LEADER_NOT_AVAILABLE, f"partition {topic}-{partition}")
        return p.leader

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        """The cached name of the topic with this id."""
        info = self.metadata.topic_by_id(topic_id)
        return None if info is None else info.name

    async def controller(self, api: Api | None = None) -> int:
        """The controller's node id (any broker when the cluster does not say).

        When the metadata names a controller that is not among its brokers (after
        one refresh), raises ControllerUnknownError (retriable) — unless `api`, the
        request meant for the controller, is one the broker we talk to does not
        offer at all: then UnsupportedApiError, the more useful of the two (e.g.
        librdkafka's mock cluster names controller 0, which it does not have, and
        has no admin APIs)."""
        md = self.metadata
        if md.controller_id < 0 or md.controller_id not in md.brokers:
            await self.refresh_metadata([])
        if md.controller_id < 0:
            return min(md.brokers) if md.brokers else -1
        if md.controller_id not in md.brokers:
            if api is not None:
                (await self.any_connection()).version_for(api)
            raise ControllerUnknownError(md.controller_id, md.brokers)
        return md.controller_id

    # --- coordinators --------------------------------------------------------------

    async def coordinator(self, key: str, key_type: int = 0, *, refresh: bool = False) -> int:
        """The node id of the coordinator for a group (key_type 0) or a transactional
        id (1), found with FindCoordinator and cached."""
        cached = None if refresh else self._coordinators.get((key_type, key))
        if cached is not None:
            return cached

        async def attempt() -> int:
            body = apis.FIND_COORDINATOR.request(key=key, key_type=key_type, coordinator_keys=[key])
            resp = await self.send(apis.FIND_COORDINATOR, body)
            if resp.coordinators:
                c = resp.coordinators[0]
                check(c.error_code, f"coordinator for {key!r}", c.error_message)
                node, host, port = c.node_id, c.host, c.port
            else:
                check(resp.error_code, f"coordinator for {key!r}", resp.error_message)
                node, host, port = resp.node_id, resp.host, resp.port
            if node not in self.metadata.brokers:
                self.metadata.brokers[node] = BrokerInfo(node, host, port)
            return int(node)

        node = await self.retrying(attempt, on_retry=_no_refresh)
        self._coordinators[(key_type, key)] = node
        return node

    async def send_to_coordinator(
        self,
        key: str,
        api: Api,
        body: Any,
        error_of: Callable[[Struct], int],
        *,
        key_type: int = 0,
        timeout: float | None = None,
        retry: bool = True,
    ) -> Struct:
        """Send to the coordinator of `key`, finding it again on NOT_COORDINATOR /
        COORDINATOR_NOT_AVAILABLE and retrying retriable errors. `error_of` picks
        the response's top-level error code."""

        async def attempt() -> Struct:
            node = await self.coordinator(key, key_type)
            try:
                resp = await self.send(api, body, node, timeout=timeout)
            except KafkaConnectionError:
                self._coordinators.pop((key_type, key), None)
                raise
            code = error_of(resp)
            if code in (ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE):
                self._coordinators.pop((key_type, key), None)
            if code != 0 and error_for_code(code).retriable:
                raise KafkaError(code, f"{api.name} for {key!r}")
            return resp

        if not retry:
            return await attempt()
        return await self.retrying(attempt, on_retry=_no_refresh)


async def gather_or_cancel(*aws: Awaitable[T]) -> list[T]:
    """Run `aws` concurrently and return their results in order, like
    asyncio.gather; but when one fails, cancel the others and wait for them before
    raising its error, so no request is left running after the caller has given up
    (its connections would be opened after the client closed, and asyncio would
    report the tasks as destroyed while pending)."""
    tasks = [asyncio.ensure_future(a) for a in aws]
    try:
        return list(await asyncio.gather(*tasks))
    except BaseException:
        for t in tasks:
            t.cancel()
        await asyncio.wait(tasks)
        for t in tasks:
            # the others' errors (besides the one raised) count as seen
            if not t.cancelled():
                t.exception()
        raise


async def _no_refresh(exc: BaseException) -> None:
    return None


def _stale_metadata(exc: BaseException) -> bool:
    if isinstance(exc, KafkaConnectionError):
        return True
    return isinstance(exc, KafkaError) and exc.code in (
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.LEADER_NOT_AVAILABLE,
        ErrorCode.UNKNOWN_TOPIC_ID,
        ErrorCode.FENCED_LEADER_EPOCH,
        ErrorCode.UNKNOWN_LEADER_EPOCH,
        ErrorCode.NOT_CONTROLLER,
        ErrorCode.REPLICA_NOT_AVAILABLE,
        ErrorCode.BROKER_NOT_AVAILABLE,
    )
