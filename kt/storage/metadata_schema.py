"""The schemas of KRaft's metadata records, control records and `quorum-state`, as data.

These are kt's own statement of the formats Apache Kafka writes into
`__cluster_metadata-0` (the metadata records, framed as
`frame_version | apiKey | version | message`), into its control batches
(LeaderChange, SnapshotHeader/Footer, KRaftVersion, Voters: the bare message at
version 0) and into the `quorum-state` file (JSON). `kt.storage.metadata_codec`
reads and writes messages from these tables; the conformance tests check every
field (name, type, versions, tags, defaults, order) against Kafka's JSON specs.

Every schema here is "flexible" from version 0: compact strings/arrays/bytes and a
tagged-field section after each struct.
"""

from __future__ import annotations

from dataclasses import dataclass, field

#: Version ranges are (low, high) inclusive; high None means "and later".
Versions = tuple[int, int | None]
NONE: Versions = (0, -1)  # an empty range (e.g. not nullable in any version)


def parse_versions(spec: str | None) -> Versions:
    """Kafka's version-range notation ("0+", "1-3", "2", "none") as a range."""
    if spec is None or spec == "none" or spec == "":
        return NONE
    if spec.endswith("+"):
        return (int(spec[:-1]), None)
    if "-" in spec:
        lo, hi = spec.split("-", 1)
        return (int(lo), int(hi))
    return (int(spec), int(spec))


def in_range(v: int, r: Versions) -> bool:
    """Whether version v lies in range r."""
    lo, hi = r
    return v >= lo and (hi is None or v <= hi)


@dataclass(frozen=True, slots=True)
class Field:
    """One field of a message or struct."""

    name: str
    type: str  # int8 int16 int32 int64 uint16 float64 bool string bytes uuid,
    # "[]T" for arrays (T a primitive or a struct name), or a struct name
    versions: Versions
    nullable: Versions = NONE
    tagged: Versions = NONE
    tag: int | None = None
    default: str | None = None  # Kafka's default text; None means the type's zero
    fields: tuple[Field, ...] = ()  # a struct's (or struct array's) fields

    @property
    def json_name(self) -> str:
        """The name Kafka's JSON converters write: lowerCaseFirst of the field name."""
        return self.name[:1].lower() + self.name[1:]

    @property
    def is_array(self) -> bool:
        """Whether the field is an array."""
        return self.type.startswith("[]")

    @property
    def element(self) -> str:
        """An array's element type (the field's type for a non-array)."""
        return self.type[2:] if self.is_array else self.type

    @property
    def is_struct(self) -> bool:
        """Whether the field (or an array's element) is a struct."""
        return bool(self.fields)


@dataclass(frozen=True, slots=True)
class MessageSchema:
    """A message: its name, apiKey (metadata records only) and versions."""

    name: str
    api_key: int | None
    valid: Versions
    fields: tuple[Field, ...]
    extra: dict[str, str] = field(default_factory=dict)

    @property
    def type_name(self) -> str:
        """Kafka's MetadataRecordType constant: toSnakeCase(name).upper()."""
        return snake_upper(self.name)


def snake_upper(name: str) -> str:
    """Kafka's MessageGenerator.toSnakeCase, upper-cased (TopicRecord -> TOPIC_RECORD)."""
    out: list[str] = []
    prev_capital = True
    for c in name:
        if c.isupper():
            if not prev_capital:
                out.append("_")
            out.append(c.lower())
            prev_capital = True
        else:
            out.append(c)
            prev_capital = False
    return "".join(out).upper()


def _f(
    name: str,
    type_: str,
    versions: str = "0+",
    *,
    nullable: str | None = None,
    tagged: str | None = None,
    tag: int | None = None,
    default: str | None = None,
    fields: tuple[Field, ...] = (),
) -> Field:
    return Field(
        name,
        type_,
        parse_versions(versions),
        parse_versions(nullable),
        parse_versions(tagged),
        tag,
        default,
        fields,
    )


def _m(name: str, api_key: int | None, valid: str, *fields: Field) -> MessageSchema:
    return MessageSchema(name, api_key, parse_versions(valid), tuple(fields))


def _endpoint_fields() -> tuple[Field, ...]:
    return (
        _f("Name", "string"),
        _f("Host", "string"),
        _f("Port", "uint16"),
        _f("SecurityProtocol", "int16"),
    )


def _feature_fields() -> tuple[Field, ...]:
    return (
        _f("Name", "string"),
        _f("MinSupportedVersion", "int16"),
        _f("MaxSupportedVersion", "int16"),
    )


_RECORDS: tuple[MessageSchema, ...] = (
    _m(
        "RegisterBrokerRecord",
        0,
        "0-3",
        _f("BrokerId", "int32"),
        _f("IsMigratingZkBroker", "bool", "2+", default="false"),
        _f("IncarnationId", "uuid"),
        _f("BrokerEpoch", "int64"),
        _f("EndPoints", "[]BrokerEndpoint", fields=_endpoint_fields()),
        _f("Features", "[]BrokerFeature", fields=_feature_fields()),
        _f("Rack", "string", nullable="0+"),
        _f("Fenced", "bool", default="true"),
        _f("InControlledShutdown", "bool", "1+", default="false"),
        _f("LogDirs", "[]uuid", "3+", tagged="3+", tag=0),
    ),
    _m("UnregisterBrokerRecord", 1, "0", _f("BrokerId", "int32"), _f("BrokerEpoch", "int64")),
    _m("TopicRecord", 2, "0", _f("Name", "string"), _f("TopicId", "uuid")),
    _m(
        "PartitionRecord",
        3,
        "0-2",
        _f("PartitionId", "int32", default="-1"),
        _f("TopicId", "uuid"),
        _f("Replicas", "[]int32"),
        _f("Isr", "[]int32"),
        _f("RemovingReplicas", "[]int32"),
        _f("AddingReplicas", "[]int32"),
        _f("Leader", "int32", default="-1"),
        _f("LeaderRecoveryState", "int8", tagged="0+", tag=0, default="0"),
        _f("LeaderEpoch", "int32", default="-1"),
        _f("PartitionEpoch", "int32", default="-1"),
        _f("Directories", "[]uuid", "1+"),
        _f(
            "EligibleLeaderReplicas",
            "[]int32",
            "2+",
            nullable="2+",
            tagged="2+",
            tag=1,
            default="null",
        ),
        _f("LastKnownElr", "[]int32", "2+", nullable="2+", tagged="2+", tag=2, default="null"),
    ),
    _m(
        "ConfigRecord",
        4,
        "0",
        _f("ResourceType", "int8"),
        _f("ResourceName", "string"),
        _f("Name", "string"),
        _f("Value", "string", nullable="0+"),
    ),
    _m(
        "PartitionChangeRecord",
        5,
        "0-2",
        _f("PartitionId", "int32", default="-1"),
        _f("TopicId", "uuid"),
        _f("Isr", "[]int32", nullable="0+", tagged="0+", tag=0, default="null"),
        _f("Leader", "int32", tagged="0+", tag=1, default="-2"),
        _f("Replicas", "[]int32", nullable="0+", tagged="0+", tag=2, default="null"),
        _f("RemovingReplicas", "[]int32", nullable="0+", tagged="0+", tag=3, default="null"),
        _f("AddingReplicas", "[]int32", nullable="0+", tagged="0+", tag=4, default="null"),
        _f("LeaderRecoveryState", "int8", tagged="0+", tag=5, default="-1"),
        _f("Directories", "[]uuid", "1+", nullable="1+", tagged="1+", tag=8, default="null"),
        _f(
            "EligibleLeaderReplicas",
            "[]int32",
            "2+",
            nullable="2+",
            tagged="2+",
            tag=6,
            default="null",
        ),
        _f("LastKnownElr", "[]int32", "2+", nullable="2+", tagged="2+", tag=7, default="null"),
    ),
    _m("FenceBrokerRecord", 7, "0", _f("Id", "int32"), _f("Epoch", "int64")),
    _m("UnfenceBrokerRecord", 8, "0", _f("Id", "int32"), _f("Epoch", "int64")),
    _m("RemoveTopicRecord", 9, "0", _f("TopicId", "uuid")),
    _m(
        "DelegationTokenRecord",
        10,
        "0",
        _f("Owner", "string"),
        _f("Requester", "string"),
        _f("Renewers", "[]string"),
        _f("IssueTimestamp", "int64"),
        _f("MaxTimestamp", "int64"),
        _f("ExpirationTimestamp", "int64"),
        _f("TokenId", "string"),
    ),
    _m(
        "UserScramCredentialRecord",
        11,
        "0",
        _f("Name", "string"),
        _f("Mechanism", "int8"),
        _f("Salt", "bytes"),
        _f("StoredKey", "bytes"),
        _f("ServerKey", "bytes"),
        _f("Iterations", "int32"),
    ),
    _m("FeatureLevelRecord", 12, "0", _f("Name", "string"), _f("FeatureLevel", "int16")),
    _m(
        "ClientQuotaRecord",
        14,
        "0",
        _f(
            "Entity",
            "[]EntityData",
            fields=(_f("EntityType", "string"), _f("EntityName", "string", nullable="0+")),
        ),
        _f("Key", "string"),
        _f("Value", "float64"),
        _f("Remove", "bool"),
    ),
    _m(
        "ProducerIdsRecord",
        15,
        "0",
        _f("BrokerId", "int32"),
        _f("BrokerEpoch", "int64", default="-1"),
        _f("NextProducerId", "int64"),
    ),
    _m(
        "BrokerRegistrationChangeRecord",
        17,
        "0-2",
        _f("BrokerId", "int32"),
        _f("BrokerEpoch", "int64"),
        _f("Fenced", "int8", tagged="0+", tag=0),
        _f("InControlledShutdown", "int8", "1+", tagged="1+", tag=1),
        _f("LogDirs", "[]uuid", "2+", tagged="2+", tag=2),
    ),
    _m(
        "AccessControlEntryRecord",
        18,
        "0",
        _f("Id", "uuid"),
        _f("ResourceType", "int8"),
        _f("ResourceName", "string"),
        _f("PatternType", "int8"),
        _f("Principal", "string"),
        _f("Host", "string"),
        _f("Operation", "int8"),
        _f("PermissionType", "int8"),
    ),
    _m("RemoveAccessControlEntryRecord", 19, "0", _f("Id", "uuid")),
    _m("NoOpRecord", 20, "0"),
    _m("ZkMigrationStateRecord", 21, "0", _f("ZkMigrationState", "int8")),
    _m(
        "RemoveUserScramCredentialRecord",
        22,
        "0",
        _f("Name", "string"),
        _f("Mechanism", "int8"),
    ),
    _m(
        "BeginTransactionRecord",
        23,
        "0",
        _f("Name", "string", nullable="0+", tagged="0+", tag=0, default="null"),
    ),
    _m("EndTransactionRecord", 24, "0"),
    _m(
        "AbortTransactionRecord",
        25,
        "0",
        _f("Reason", "string", nullable="0+", tagged="0+", tag=0, default="null"),
    ),
    _m("RemoveDelegationTokenRecord", 26, "0", _f("TokenId", "string")),
    _m(
        "RegisterControllerRecord",
        27,
        "0",
        _f("ControllerId", "int32"),
        _f("IncarnationId", "uuid"),
        _f("ZkMigrationReady", "bool"),
        _f(
            "EndPoints",
            "[]ControllerEndpoint",
            fields=_endpoint_fields(),
        ),
        _f("Features", "[]ControllerFeature", fields=_feature_fields()),
    ),
    _m("ClearElrRecord", 28, "0", _f("TopicName", "string")),
    _m("UnregisterControllerRecord", 29, "0", _f("ControllerId", "int32")),
)

#: apiKey -> schema of every metadata record kt knows.
METADATA_RECORDS: dict[int, MessageSchema] = {
    s.api_key: s for s in _RECORDS if s.api_key is not None
}
#: apiKeys Kafka retired, with what they were (reported by name when met).
RETIRED_API_KEYS = {
    6: "the old AccessControlRecord (removed in Kafka 3.3)",
    13: "an apiKey no Kafka release since 2.8 defines",
    16: "RemoveFeatureLevelRecord (removed in Kafka 3.3)",
}

_VOTER_FIELDS = (
    _f("VoterId", "int32"),
    _f("VoterDirectoryId", "uuid", "1+"),
)

#: The control records of the metadata log, by control type id (2..6).
LEADER_CHANGE = _m(
    "LeaderChangeMessage",
    None,
    "0-1",
    _f("Version", "int16"),
    _f("LeaderId", "int32"),
    _f("Voters", "[]Voter", fields=_VOTER_FIELDS),
    _f("GrantingVoters", "[]Voter", fields=_VOTER_FIELDS),
)
SNAPSHOT_HEADER = _m(
    "SnapshotHeaderRecord",
    None,
    "0",
    _f("Version", "int16"),
    _f("LastContainedLogTimestamp", "int64"),
)
SNAPSHOT_FOOTER = _m("SnapshotFooterRecord", None, "0", _f("Version", "int16"))
KRAFT_VERSION = _m(
    "KRaftVersionRecord", None, "0", _f("Version", "int16"), _f("KRaftVersion", "int16")
)
VOTERS = _m(
    "VotersRecord",
    None,
    "0",
    _f("Version", "int16"),
    _f(
        "Voters",
        "[]Voter",
        fields=(
            _f("VoterId", "int32"),
            _f("VoterDirectoryId", "uuid"),
            _f(
                "Endpoints",
                "[]Endpoint",
                fields=(_f("Name", "string"), _f("Host", "string"), _f("Port", "uint16")),
            ),
            _f(
                "KRaftVersionFeature",
                "KRaftVersionFeature",
                fields=(_f("MinSupportedVersion", "int16"), _f("MaxSupportedVersion", "int16")),
            ),
        ),
    ),
)
#: control type id -> (schema, the label Kafka's dump tool prints before its JSON)
CONTROL_RECORDS: dict[int, tuple[MessageSchema, str]] = {
    2: (LEADER_CHANGE, "LeaderChange:"),
    3: (SNAPSHOT_HEADER, "SnapshotHeader"),
    4: (SNAPSHOT_FOOTER, "SnapshotFooter"),
    5: (KRAFT_VERSION, "KRaftVersion"),
    6: (VOTERS, "KRaftVoters"),
}

#: The `quorum-state` file's data (JSON, plus "data_version").
QUORUM_STATE = _m(
    "QuorumStateData",
    None,
    "0-1",
    _f("ClusterId", "string", "0"),
    _f("LeaderId", "int32", default="-1"),
    _f("LeaderEpoch", "int32", default="-1"),
    _f("VotedId", "int32", default="-1"),
    _f("VotedDirectoryId", "uuid", "1+"),
    _f("AppliedOffset", "int64", "0"),
    _f("CurrentVoters", "[]Voter", "0", nullable="0", fields=(_f("VoterId", "int32", "0"),)),
)
