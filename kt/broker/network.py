"""The broker's network layer: asyncio connections speaking the Kafka protocol.

Per connection, one reader task frames and decodes requests (the sans-IO
`ServerConnection`) and one processor task handles them strictly in order, so
responses leave in request order even when a client pipelines; a long-polling
fetch holds back the requests behind it, as in Kafka (which mutes the channel).
A frame larger than `socket.request.max.bytes` or one that does not decode closes
that connection only. Connections idle for `connections.max.idle.ms` are closed.
Fetched records go from the segment file to the socket with sendfile.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
from typing import Any

from kt.broker import handlers
from kt.broker.handlers import HANDLERS, RequestContext
from kt.protocol import DecodeError, ErrorCode, Request, ServerConnection, apis, encode_response

log = logging.getLogger("kt.broker.network")

_conn_ids = itertools.count(1)


class CloseConnection(Exception):
    """Raised by a handler to close the connection instead of answering: Kafka does
    so when a Produce with acks=0 fails, since that is the only way the producer can
    learn of the failure (it then refreshes its metadata)."""


class _FdFile:
    """The minimal file object loop.sendfile needs, over a borrowed descriptor."""

    def __init__(self, fd: int) -> None:
        self._fd = fd

    def fileno(self) -> int:
        return self._fd

    def seek(self, offset: int, whence: int = 0) -> int:
        # sendfile passes explicit offsets; the shared descriptor's position is unused.
        return offset


class NetworkServer:
    """Listens on the configured listeners and serves connections."""

    def __init__(self, broker: Any, max_request_size: int, idle_ms: int) -> None:
        self.broker = broker
        self.max_request_size = max_request_size
        self.idle_s = idle_ms / 1000
        self.servers: list[asyncio.base_events.Server] = []
        self.connections: set[asyncio.Task[None]] = set()
        handlers.load_all()

    async def start(self, host: str, port: int) -> int:
        """Listen on host:port; return the bound port (useful with port 0)."""
        server = await asyncio.start_server(self._serve, host or None, port, reuse_address=True)
        self.servers.append(server)
        sock = server.sockets[0]
        bound: int = sock.getsockname()[1]
        return bound

    async def stop(self) -> None:
        """Stop listening and close every connection."""
        for s in self.servers:
            s.close()
        for task in list(self.connections):
            task.cancel()
        for s in self.servers:
            await s.wait_closed()
        if self.connections:
            await asyncio.gather(*self.connections, return_exceptions=True)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self.connections.add(task)
        conn_id = next(_conn_ids)
        peer = writer.get_extra_info("peername")
        host = peer[0] if isinstance(peer, tuple) else "unknown"
        queue: asyncio.Queue[Request | None] = asyncio.Queue()
        processor = asyncio.create_task(self._process(queue, writer, host, conn_id))
        proto = ServerConnection(max_frame_size=self.max_request_size)
        try:
            while not processor.done():
                try:
                    data = await asyncio.wait_for(reader.read(256 * 1024), self.idle_s)
                except TimeoutError:
                    log.debug("connection %d from %s idle, closing", conn_id, host)
                    break
                if not data:
                    break
                try:
                    requests = proto.receive_data(data)
                except DecodeError as exc:
                    log.warning("closing connection %d from %s: %s", conn_id, host, exc)
                    break
                for req in requests:
                    queue.put_nowait(req)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        except asyncio.CancelledError:
            # Only stop() cancels a connection. Ending normally keeps asyncio's stream
            # callback from logging the cancellation as an error at every shutdown.
            pass
        finally:
            queue.put_nowait(None)
            try:
                await asyncio.wait_for(processor, 30)
            except (TimeoutError, asyncio.CancelledError, Exception):
                processor.cancel()
            writer.close()
            try:
                await writer.wait_closed()
            except Exception:
                pass
            self.connections.discard(task)

    async def _process(
        self,
        queue: asyncio.Queue[Request | None],
        writer: asyncio.StreamWriter,
        host: str,
        conn_id: int,
    ) -> None:
        try:
            await self._process_requests(queue, writer, host, conn_id)
        finally:
            # The processor also stops on a request it will not serve (unknown API
            # or version, a failing handler): closing the transport ends the reader's
            # pending read as well, so the connection closes now, not at the idle timeout.
            writer.close()

    async def _process_requests(
        self,
        queue: asyncio.Queue[Request | None],
        writer: asyncio.StreamWriter,
        host: str,
        conn_id: int,
    ) -> None:
        while True:
            req = await queue.get()
            if req is None:
                return
            header = req.header
            if req.body is None:
                if header.api_key == apis.API_VERSIONS.key:
                    # An ApiVersions version we do not know: answer in v0 with the error
                    # and our ranges, so the client retries with a version we serve.
                    writer.write(
                        encode_response(18, 0, header.correlation_id, _api_versions_v0_error())
                    )
                    await writer.drain()
                    continue
                log.warning(
                    "closing connection %d from %s: unsupported API %s v%s",
                    conn_id, host, header.api_key, header.api_version,
                )  # fmt: skip
                return
            handler = HANDLERS.get(header.api_key)
            if handler is None:
                log.warning("closing connection %d: no handler for API %d", conn_id, header.api_key)
                return
            ctx = RequestContext(self.broker, header, host, conn_id)
            try:
                body = await handler(ctx, req.body)
            except CloseConnection as exc:
                log.info("closing connection %d from %s: %s", conn_id, host, exc)
                return
            except Exception:
                log.exception("error handling %s v%d", header.api_key, header.api_version)
                return
            if body is None:  # e.g. Produce with acks=0: no response at all
                continue
            try:
                await self._send(writer, req, body)
            except ConnectionError:
                return
            except Exception:
                log.exception(
                    "cannot send the response to %s v%d", header.api_key, header.api_version
                )
                return

    async def _send(self, writer: asyncio.StreamWriter, req: Request, body: Any) -> None:
        from kt.protocol.headers import encode_response_parts
        from kt.protocol.regions import ExternalRecords

        h = req.header
        parts = encode_response_parts(h.api_key, h.api_version, h.correlation_id, body)
        if len(parts) == 1 and isinstance(parts[0], bytes | bytearray):
            writer.write(parts[0])
            await writer.drain()
            return
        loop = asyncio.get_running_loop()
        for part in parts:
            if isinstance(part, ExternalRecords):
                if part.length == 0:
                    continue  # loop.sendfile would read a count of 0 as "to the end"
                fd, position = part.source
                await writer.drain()
                try:
                    await loop.sendfile(writer.transport, _FdFile(fd), position, part.length)
                except (NotImplementedError, RuntimeError):
                    writer.write(os.pread(fd, part.length, position))
            else:
                writer.write(part)
        await writer.drain()


def _api_versions_v0_error() -> Any:
    return apis.API_VERSIONS.response(
        error_code=ErrorCode.UNSUPPORTED_VERSION,
        api_keys=[
            {"api_key": k, "min_version": lo, "max_version": hi}
            for k, (lo, hi) in sorted(handlers.SERVED.items())
        ],
    )
