"""InitProducerId: producer ids for idempotent (and, later, transactional) producers.

Ids come from the broker's ProducerIdManager (`kt.broker.producer_ids`), which
reserves them from the cluster metadata in blocks, so a restart never hands out
an id twice and no two brokers hand out the same one.

An idempotent producer (no transactional id) always gets a fresh id at epoch 0,
whatever id and epoch it sends: that is Kafka's TransactionCoordinator for a null
transactional id, and what a KIP-360 client asking for an "epoch bump" after
UNKNOWN_PRODUCER_ID or OUT_OF_ORDER_SEQUENCE accepts (Kafka's own Java producer
and kafka-python both take the new id). Any broker may answer, so nothing here
may depend on which broker handed out the previous id.
"""

from __future__ import annotations

import logging
from typing import Any

from kt.broker.handlers import RequestContext, handles
from kt.broker.metadata.store import StoreError
from kt.protocol import ErrorCode, Struct, apis

log = logging.getLogger(__name__)


def _refused(error: int) -> Any:
    return apis.INIT_PRODUCER_ID.response(
        throttle_time_ms=0, error_code=error, producer_id=-1, producer_epoch=-1
    )


@handles(apis.INIT_PRODUCER_ID.key, (0, 4))
async def init_producer_id(ctx: RequestContext, request: Struct) -> Any:
    """A new producer id at epoch 0 for an idempotent producer."""
    if request.transactional_id is not None:
        return _refused(ErrorCode.COORDINATOR_NOT_AVAILABLE)
    try:
        pid = await ctx.broker.producer_ids.allocate()
    except (StoreError, RuntimeError) as exc:
        # No block could be claimed (the metadata store is unreachable, or the broker
        # has not joined yet): retriable, the client asks again.
        log.warning("cannot hand out a producer id: %s", exc)
        return _refused(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
    return apis.INIT_PRODUCER_ID.response(
        throttle_time_ms=0, error_code=ErrorCode.NONE, producer_id=pid, producer_epoch=0
    )
