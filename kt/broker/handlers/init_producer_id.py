"""InitProducerId: producer ids and epochs for idempotent (and, later, transactional) producers.

Ids come from the broker's ProducerIdManager (`kt.broker.producer_ids`), which
reserves them from the cluster metadata in blocks, so a restart never hands out
an id twice. An idempotent producer that asks with its current id
and epoch (v3+, KIP-360) gets the same id with the epoch bumped; an unknown or
stale id/epoch pair is fenced.
"""

from __future__ import annotations

from typing import Any

from kt.broker.handlers import RequestContext, handles
from kt.protocol import ErrorCode, Struct, apis

MAX_EPOCH = 32767


@handles(apis.INIT_PRODUCER_ID.key, (0, 4))
async def init_producer_id(ctx: RequestContext, request: Struct) -> Any:
    """A new producer id (epoch 0), or the caller's id with its epoch bumped."""
    mgr = ctx.broker.producer_ids
    if request.transactional_id is not None:
        return apis.INIT_PRODUCER_ID.response(
            throttle_time_ms=0,
            error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE,
            producer_id=-1,
            producer_epoch=-1,
        )
    pid = request.producer_id if ctx.version >= 3 else -1
    epoch = request.producer_epoch if ctx.version >= 3 else -1
    if pid >= 0:
        current = mgr.epochs.get(pid)
        if current is None or current != epoch:
            return apis.INIT_PRODUCER_ID.response(
                throttle_time_ms=0,
                error_code=ErrorCode.INVALID_PRODUCER_EPOCH,
                producer_id=-1,
                producer_epoch=-1,
            )
        if epoch < MAX_EPOCH:
            mgr.epochs[pid] = epoch + 1
            return apis.INIT_PRODUCER_ID.response(
                throttle_time_ms=0, error_code=ErrorCode.NONE, producer_id=pid,
                producer_epoch=epoch + 1,
            )  # fmt: skip
        # Epoch exhausted: a new id, as Kafka does.
    new_pid = await mgr.allocate()
    mgr.epochs[new_pid] = 0
    return apis.INIT_PRODUCER_ID.response(
        throttle_time_ms=0, error_code=ErrorCode.NONE, producer_id=new_pid, producer_epoch=0
    )
