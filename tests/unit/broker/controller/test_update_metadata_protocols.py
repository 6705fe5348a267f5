"""UpdateMetadata's endpoints carry each listener's security protocol from the
broker's registration (its listener_security_protocol_map), not the listener's
name: INTERNAL mapped to SASL_SSL is sent as SASL_SSL (3), as Kafka's controller
sends it."""

from __future__ import annotations

import json

from kt.broker.controller.requests import update_metadata
from kt.broker.controller.zk import to_endpoint_info
from kt.broker.metadata import cluster_store as cs
from kt.broker.metadata.znodes import decode_broker
from kt.protocol import apis, decode_request, encode_request


def test_endpoint_protocols_come_from_the_protocol_map() -> None:
    znode = json.dumps({
        "version": 5, "host": None, "port": -1, "jmx_port": -1, "timestamp": "1",
        "endpoints": ["INTERNAL://10.0.0.1:9093", "EXTERNAL://10.0.0.1:9094",
                      "PLAINTEXT://10.0.0.1:9092"],
        "listener_security_protocol_map": {"INTERNAL": "SASL_SSL", "EXTERNAL": "SSL",
                                           "PLAINTEXT": "PLAINTEXT"},
    }).encode()  # fmt: skip
    info = to_endpoint_info(cs.LiveBroker(decode_broker(1, znode), 10))
    body = update_metadata(controller_id=1, controller_epoch=1, broker_epoch=10,
                           partitions=[], live_brokers=[info])  # fmt: skip
    (broker,) = body["live_brokers"]
    protocols = {e["listener"]: e["security_protocol"] for e in broker["endpoints"]}
    assert protocols == {"INTERNAL": 3, "EXTERNAL": 1, "PLAINTEXT": 0}
    # and it encodes as a real UpdateMetadata v7 request
    frame = encode_request(apis.UPDATE_METADATA.key, 7, 1, body, "c", size_prefix=False)
    _, decoded = decode_request(bytearray(frame))
    assert decoded is not None
    got = {e.listener: e.security_protocol for e in decoded.live_brokers[0].endpoints}
    assert got == {"INTERNAL": 3, "EXTERNAL": 1, "PLAINTEXT": 0}
