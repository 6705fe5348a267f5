"""Metadata for a listener the partition leader lacks (brokers configured with
different listeners): Kafka's MetadataCache answers LISTENER_NOT_FOUND from v6 and
LEADER_NOT_AVAILABLE before, with no leader; on a listener the leader has, the
leader as usual."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

from handler_harness import open_broker

from kt.broker.handlers import load_all, resolve
from kt.broker.metadata.cache import Endpoint, LiveBroker
from kt.protocol import ErrorCode, apis, decode_request, decode_response, encode_request
from kt.protocol import encode_response as enc_response


def _metadata(b: Any, version: int, listener: str, topic: str) -> Any:
    load_all()
    body = apis.METADATA.request(topics=[{"name": topic, "topic_id": uuid.UUID(int=0)}],
                                 allow_auto_topic_creation=False)  # fmt: skip
    frame = encode_request(apis.METADATA.key, version, 1, body, "t", size_prefix=False)
    header, request = decode_request(bytearray(frame))

    async def go() -> Any:
        answer = await b.broker.dispatcher.dispatch(header, request, "10.0.0.5", 1,
                                                    listener=listener)  # fmt: skip
        return await resolve(answer)

    data = enc_response(apis.METADATA.key, version, 1, b.run(go()), size_prefix=False)
    return decode_response(apis.METADATA.key, version, data)[1]


def test_a_leader_without_the_clients_listener(tmp_path: Path) -> None:
    b = open_broker(tmp_path)
    try:
        b.create_topic("orders", 1)
        cache = b.broker.services.topics.cache
        node = b.broker.services.node.node_id
        # the leader (this broker) registered PLAINTEXT only; a client on EXTERNAL
        cache.update(controller_id=node, controller_epoch=cache.controller_epoch,
                     brokers=[LiveBroker(node, (Endpoint("PLAINTEXT", "127.0.0.1", 9092),))],
                     partitions=[])  # fmt: skip
        for version, code in ((12, ErrorCode.LISTENER_NOT_FOUND), (6, ErrorCode.LISTENER_NOT_FOUND),
                              (5, ErrorCode.LEADER_NOT_AVAILABLE),
                              (1, ErrorCode.LEADER_NOT_AVAILABLE)):  # fmt: skip
            md = _metadata(b, version, "EXTERNAL", "orders")
            (topic,) = md.topics
            assert topic.error_code == ErrorCode.NONE
            (p,) = topic.partitions
            assert (p.error_code, p.leader_id) == (code, -1), version
            assert list(p.replica_nodes) == [node]
            assert md.brokers == []  # Kafka leaves out brokers without the listener
        md = _metadata(b, 12, "PLAINTEXT", "orders")
        (p,) = md.topics[0].partitions
        assert (p.error_code, p.leader_id) == (ErrorCode.NONE, node)
        assert [x.port for x in md.brokers] == [9092]
    finally:
        b.close()
