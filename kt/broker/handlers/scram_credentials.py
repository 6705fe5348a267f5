"""DescribeUserScramCredentials (50) and AlterUserScramCredentials (51).

Credentials live where Kafka keeps them (`/config/users/<user>`, with a change
notification per user; kt.broker.security.credentials), so every broker's cache
follows and `kafka-configs.sh` sees them. Describe never returns secrets: only the
mechanism and iteration count. Alter carries salted passwords (clients never send
the password) and must reach the active controller (else NOT_CONTROLLER), as in
Kafka's ZooKeeper mode; per-user errors are Kafka's (see `alter_results`).
"""

from __future__ import annotations

from typing import Any

from kt.broker.authorization import require_cluster
from kt.broker.handlers import RequestContext, handles
from kt.broker.security import scram
from kt.broker.security.acl import AclOperation
from kt.broker.security.credentials import (
    Deletion,
    ScramCredentialStore,
    Upsertion,
    alter_results,
    describe_results,
)
from kt.protocol import ErrorCode, Struct, apis


def _store(ctx: RequestContext) -> ScramCredentialStore:
    return ScramCredentialStore(ctx.services.cluster.cluster_store.store)


@handles(apis.DESCRIBE_USER_SCRAM_CREDENTIALS.key, (0, 0))
async def describe_user_scram_credentials(ctx: RequestContext, request: Struct) -> Any:
    """Mechanisms and iterations of the users asked for (all when none are)."""
    require_cluster(ctx, AclOperation.DESCRIBE)
    store = _store(ctx)
    users = None if request.users is None else [u.name for u in request.users]
    names = await store.users() if not users else sorted(set(users))
    known = {u: await store.credentials(u) for u in names}
    results = describe_results(users, known)
    return apis.DESCRIBE_USER_SCRAM_CREDENTIALS.response(
        throttle_time_ms=0,
        error_code=ErrorCode.NONE,
        error_message=None,
        results=[
            {"user": r.user, "error_code": r.error_code, "error_message": r.error_message,
             "credential_infos": [{"mechanism": m, "iterations": i} for m, i in r.credentials]}
            for r in results
        ],
    )  # fmt: skip


@handles(apis.ALTER_USER_SCRAM_CREDENTIALS.key, (0, 0))
async def alter_user_scram_credentials(ctx: RequestContext, request: Struct) -> Any:
    """Delete and upsert credentials; one result per user named."""
    deletions = [Deletion(d.name, d.mechanism) for d in request.deletions]
    upsertions = [
        Upsertion(u.name, u.mechanism, u.iterations, bytes(u.salt), bytes(u.salted_password))
        for u in request.upsertions
    ]
    if ctx.services.cluster.active_controller() is None:
        named = [d.user for d in deletions] + [u.user for u in upsertions]
        users = dict.fromkeys(named)
        return apis.ALTER_USER_SCRAM_CREDENTIALS.response(
            throttle_time_ms=0,
            results=[{"user": u, "error_code": ErrorCode.NOT_CONTROLLER,
                      "error_message": None} for u in users],
        )  # fmt: skip
    require_cluster(ctx, AclOperation.ALTER)
    store = _store(ctx)
    existing = {}
    for user in {d.user for d in deletions}:
        existing[user] = set(await store.credentials(user))
    results, to_delete, to_upsert = alter_results(deletions, upsertions, existing)
    for d in to_delete:
        await store.delete_credential(d.user, scram.BY_CODE[d.mechanism].name)
    for u in to_upsert:
        mech = scram.BY_CODE[u.mechanism]
        cred = scram.credential_from_salted(mech, u.salted_password, u.salt, u.iterations)
        await store.set_credential(u.user, mech.name, cred)
    return apis.ALTER_USER_SCRAM_CREDENTIALS.response(
        throttle_time_ms=0,
        results=[{"user": r.user, "error_code": r.error_code, "error_message": r.error_message}
                 for r in results],
    )  # fmt: skip
