"""The error response of each request kind: what a request is answered when its
handler raised (Kafka's `AbstractRequest.getErrorResponse`).

One function, `error_response(api_key, version, request, code, message)`, builds it
from the response schema: every `error_code` is `code`, every `error_message` is
`message`, and each response array that answers a request array (topics,
partitions, groups, resources, ...) gets one element per requested item, carrying
the item's identifying fields (name, topic id, partition index, group id...), so a
client learns the error for each thing it asked about. Where a response array is
named differently from the request array it answers, `ANSWERS` says which one it
is, and for requests that list bare values (partition numbers, group ids) which
field of the response element holds the value.
"""

from __future__ import annotations

from typing import Any

from kt.protocol import ErrorCode, Struct, apis
from kt.protocol.schema import StructSchema

#: (api key, response array) -> (request array it answers, the response element's
#: field for a request array of bare values, or None)
ANSWERS: dict[tuple[int, str], tuple[str, str | None]] = {
    (apis.PRODUCE.key, "responses"): ("topic_data", None),
    (apis.PRODUCE.key, "partition_responses"): ("partition_data", None),
    (apis.FETCH.key, "responses"): ("topics", None),
    (apis.OFFSET_FETCH.key, "partitions"): ("partition_indexes", "partition_index"),
    (apis.FIND_COORDINATOR.key, "coordinators"): ("coordinator_keys", "key"),
    (apis.DESCRIBE_GROUPS.key, "groups"): ("groups", "group_id"),
    (apis.DELETE_TOPICS.key, "responses"): ("topics", None),
    (apis.CREATE_PARTITIONS.key, "results"): ("topics", None),
    (apis.DESCRIBE_CONFIGS.key, "results"): ("resources", None),
    (apis.ALTER_CONFIGS.key, "responses"): ("resources", None),
    (apis.INCREMENTAL_ALTER_CONFIGS.key, "responses"): ("resources", None),
    (apis.WRITE_TXN_MARKERS.key, "partitions"): ("partition_indexes", "partition_index"),
    (apis.ELECT_LEADERS.key, "replica_election_results"): ("topic_partitions", None),
    (apis.ELECT_LEADERS.key, "partition_result"): ("partitions", "partition_id"),
    (apis.DELETE_GROUPS.key, "results"): ("groups_names", "group_id"),
    (apis.DESCRIBE_PRODUCERS.key, "partitions"): ("partition_indexes", "partition_index"),
    (apis.CREATE_ACLS.key, "results"): ("creations", None),
    (apis.DELETE_ACLS.key, "filter_results"): ("filters", None),
    (apis.DESCRIBE_TRANSACTIONS.key, "transaction_states"): (
        "transactional_ids",
        "transactional_id",
    ),
}

#: (api key, response field) -> the request field that holds its value
SAME_VALUE: dict[tuple[int, str], str] = {
    (apis.FETCH.key, "partition_index"): "partition",
}

#: (api key, response field) -> its value in an error response, where Kafka's
#: getErrorResponse sets one other than the schema's default (or than the request's
#: field of the same name): Produce's base offset and Fetch's high watermark are
#: INVALID_OFFSET / INVALID_HIGH_WATERMARK (-1), a failed Fetch partition has empty
#: records, not null ones, and a refused InitProducerId no producer id and epoch.
ERROR_VALUES: dict[tuple[int, str], Any] = {
    (apis.PRODUCE.key, "base_offset"): -1,
    (apis.FETCH.key, "high_watermark"): -1,
    (apis.FETCH.key, "records"): b"",
    (apis.INIT_PRODUCER_ID.key, "producer_id"): -1,
    (apis.INIT_PRODUCER_ID.key, "producer_epoch"): -1,
}


def error_response(
    api_key: int, version: int, request: Struct, code: ErrorCode, message: str | None
) -> Struct:
    """The response to `request` (of API `api_key`, in `version`) that reports
    `code` (and `message` where the response has an error message) for the whole
    request and for each item it names."""
    api = apis.APIS_BY_KEY[api_key]
    return _answer(api_key, version, api.response.struct, request, code, message)


def _answer(
    api_key: int,
    version: int,
    schema: StructSchema,
    request: Any,
    code: ErrorCode,
    message: str | None,
) -> Struct:
    fields: dict[str, Any] = {}
    for spec in schema.fields:
        if version not in spec.versions:
            continue
        name = spec.name
        if name == "error_code":
            fields[name] = int(code)
        elif name == "error_message":
            fields[name] = message
        elif (api_key, name) in ERROR_VALUES:
            fields[name] = ERROR_VALUES[(api_key, name)]
        elif spec.type == "array" and spec.struct is not None:
            fields[name] = _answer_array(
                api_key, version, spec.struct, name, request, code, message
            )
        elif spec.type not in ("array", "struct"):
            source = SAME_VALUE.get((api_key, name), name)
            value = getattr(request, source, None) if isinstance(request, Struct) else None
            if value is not None and not isinstance(value, (list, Struct)):
                fields[name] = value
    return schema.cls(**fields)


def _answer_array(
    api_key: int,
    version: int,
    element: StructSchema,
    name: str,
    request: Any,
    code: ErrorCode,
    message: str | None,
) -> list[Struct]:
    """One answer per item of the request array this response array answers (none
    when the request has no such array)."""
    source, value_field = ANSWERS.get((api_key, name), (name, None))
    items = getattr(request, source, None) if isinstance(request, Struct) else None
    if not isinstance(items, list):
        return []
    out: list[Struct] = []
    for item in items:
        if isinstance(item, Struct):
            out.append(_answer(api_key, version, element, item, code, message))
        elif value_field is not None:
            answer = _answer(api_key, version, element, None, code, message)
            setattr(answer, value_field, item)
            out.append(answer)
    return out
