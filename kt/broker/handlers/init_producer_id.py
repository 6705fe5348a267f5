"""InitProducerId: producer ids for idempotent and transactional producers.

Ids come from the broker's ProducerIdManager (`kt.broker.producer_ids`), which
reserves them from the cluster metadata in blocks, so a restart never hands out
an id twice and no two brokers hand out the same one.

An idempotent producer (no transactional id) always gets a fresh id at epoch 0,
whatever id and epoch it sends: that is Kafka's TransactionCoordinator for a null
transactional id, and what a KIP-360 client asking for an "epoch bump" after
UNKNOWN_PRODUCER_ID or OUT_OF_ORDER_SEQUENCE accepts (Kafka's own Java producer
and kafka-python both take the new id). Any broker may answer, so nothing here
may depend on which broker handed out the previous id.

A transactional producer is answered by its transaction coordinator
(`kt.broker.transactions.coordinator`): its own producer id with the epoch
bumped, fencing the previous producer of the same transactional id.

Every refusal is raised: the dispatcher answers it with no producer id and epoch
(-1), as Kafka's InitProducerIdRequest.getErrorResponse.
"""

from __future__ import annotations

import logging
from typing import Any

from kt.broker.authorization import (
    AuthorizationError,
    authorize,
    authorize_by_resource_type,
    authorize_cluster,
)
from kt.broker.errors import (
    CoordinatorError,
    InvalidRequestError,
    TransactionalIdAuthorizationFailedError,
)
from kt.broker.handlers import RequestContext, handles
from kt.broker.metadata.store import StoreError
from kt.broker.security.acl import AclOperation, ResourceType
from kt.protocol import ErrorCode, Struct, apis

log = logging.getLogger(__name__)


@handles(apis.INIT_PRODUCER_ID.key, (0, 4))
async def init_producer_id(ctx: RequestContext, request: Struct) -> Any:
    """A new producer id at epoch 0 for an idempotent producer; the coordinator's
    answer for a transactional one."""
    if request.transactional_id is not None:
        if not authorize(ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID,
                         request.transactional_id):  # fmt: skip
            raise TransactionalIdAuthorizationFailedError()
        return await _transactional(ctx, request)
    # idempotence (KIP-679): IDEMPOTENT_WRITE on the cluster, or WRITE on any topic
    if not authorize_cluster(
        ctx, AclOperation.IDEMPOTENT_WRITE, log_if_denied=False
    ) and not authorize_by_resource_type(ctx, AclOperation.WRITE, ResourceType.TOPIC):
        raise AuthorizationError(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, None)
    try:
        pid = await ctx.services.allocate_producer_id()
    except (StoreError, RuntimeError) as exc:
        # No block could be claimed (the metadata store is unreachable, or the broker
        # has not joined yet): retriable, the client asks again.
        log.warning("cannot hand out a producer id: %s", exc)
        raise CoordinatorError(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS) from exc
    return apis.INIT_PRODUCER_ID.response(
        throttle_time_ms=0, error_code=ErrorCode.NONE, producer_id=pid, producer_epoch=0
    )


async def _transactional(ctx: RequestContext, request: Struct) -> Any:
    expected: tuple[int, int] | None = None
    if ctx.version >= 3:
        pid, epoch = request.producer_id, request.producer_epoch
        if (pid == -1) != (epoch == -1):
            # Kafka: both or neither.
            raise InvalidRequestError("the producer id and epoch are both set or neither")
        if pid != -1:
            expected = (pid, epoch)
    result = await ctx.services.transactions.coordinator.init_producer_id(
        request.transactional_id, request.transaction_timeout_ms, expected
    )
    error = result.error
    if error == ErrorCode.PRODUCER_FENCED and ctx.version < 4:
        error = ErrorCode.INVALID_PRODUCER_EPOCH  # KIP-588: older clients know only this
    if error != ErrorCode.NONE:
        # The coordinator's refusal: answered as any error, with no id and epoch.
        raise CoordinatorError(ErrorCode(error))
    return apis.INIT_PRODUCER_ID.response(
        throttle_time_ms=0,
        error_code=ErrorCode.NONE,
        producer_id=result.producer_id,
        producer_epoch=result.producer_epoch,
    )
