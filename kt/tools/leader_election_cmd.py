"""`kt leader-election`: preferred or unclean leader elections, like
kafka-leader-election.sh (KIP-460), with its output lines and exit status."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click

from kt.client import ELECTION_PREFERRED, ELECTION_UNCLEAN, KafkaClient, KafkaError
from kt.protocol import ErrorCode
from kt.tools.console import emit_json, fail, handle_errors, usage_error
from kt.tools.wire import Wire, wire_options

TopicPartition = tuple[str, int]

ELECTION_TYPES = {"preferred": ELECTION_PREFERRED, "unclean": ELECTION_UNCLEAN}

# Kafka's exception class for the error codes whose class name is not simply the
# code's name in CamelCase (with "Exception" appended).
_EXCEPTION_NAMES = {
    ErrorCode.UNKNOWN_SERVER_ERROR: "UnknownServerException",
    ErrorCode.REQUEST_TIMED_OUT: "TimeoutException",
    ErrorCode.INVALID_TOPIC_EXCEPTION: "InvalidTopicException",
    ErrorCode.CLUSTER_AUTHORIZATION_FAILED: "ClusterAuthorizationException",
    ErrorCode.TOPIC_AUTHORIZATION_FAILED: "TopicAuthorizationException",
}


class ElectionFileError(ValueError):
    """A --path-to-json-file that is not valid election data."""


def parse_election_json(text: str) -> list[TopicPartition]:
    """The partitions of `{"partitions":[{"topic":"foo","partition":1}, ...]}` in
    file order; ElectionFileError (Kafka's wording where it has one) when the JSON is
    malformed, a field is missing or of the wrong type, or a partition is repeated."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ElectionFileError(f"not valid JSON: {exc}") from None
    if doc is None:
        raise ElectionFileError("Replica election data is empty")
    if not isinstance(doc, dict) or "partitions" not in doc:
        raise ElectionFileError('Replica election data is missing "partitions" field')
    entries = doc["partitions"]
    if not isinstance(entries, list):
        raise ElectionFileError('"partitions" must be an array')
    out: list[TopicPartition] = []
    for i, entry in enumerate(entries):
        if not isinstance(entry, dict):
            raise ElectionFileError(f"partitions[{i}] must be an object")
        topic, partition = entry.get("topic"), entry.get("partition")
        if not isinstance(topic, str) or not topic:
            raise ElectionFileError(f'partitions[{i}]: "topic" must be a non-empty string')
        if isinstance(partition, bool) or not isinstance(partition, int) or partition < 0:
            raise ElectionFileError(f'partitions[{i}]: "partition" must be an integer >= 0')
        out.append((topic, partition))
    duplicates = sorted({tp for tp in out if out.count(tp) > 1})
    if duplicates:
        listed = ",".join(_tp(tp) for tp in duplicates)
        raise ElectionFileError(f"Replica election data contains duplicate partitions: {listed}")
    return out


def _tp(tp: TopicPartition) -> str:
    """Kafka's TopicPartition.toString."""
    return f"{tp[0]}-{tp[1]}"


def exception_text(err: KafkaError) -> str:
    """A failure as Kafka's tool prints it: the Java exception's toString."""
    name = _EXCEPTION_NAMES.get(err.code)
    if name is None:
        name = "".join(w.capitalize() for w in err.code.name.split("_")) + "Exception"
    return f"org.apache.kafka.common.errors.{name}: {err.detail or err.code.message}"


@dataclass
class ElectionOutcome:
    """The election's results sorted into Kafka's three groups."""

    election_type: str  # PREFERRED | UNCLEAN
    succeeded: list[TopicPartition] = field(default_factory=list)
    not_needed: list[TopicPartition] = field(default_factory=list)
    failed: dict[TopicPartition, KafkaError] = field(default_factory=dict)

    @classmethod
    def of(
        cls, election_type: str, results: dict[TopicPartition, KafkaError | None]
    ) -> ElectionOutcome:
        """Group per-partition results (None: elected)."""
        out = cls(election_type.upper())
        for tp in sorted(results):
            err = results[tp]
            if err is None:
                out.succeeded.append(tp)
            elif err.code == ErrorCode.ELECTION_NOT_NEEDED:
                out.not_needed.append(tp)
            else:
                out.failed[tp] = err
        return out

    def lines(self) -> list[str]:
        """kafka-leader-election.sh's stdout lines."""
        out = []
        if self.succeeded:
            out.append(
                f"Successfully completed leader election ({self.election_type}) for partitions "
                + ", ".join(_tp(tp) for tp in self.succeeded)
            )
        if self.not_needed:
            out.append(
                "Valid replica already elected for partitions "
                + ", ".join(_tp(tp) for tp in self.not_needed)
            )
        for tp, err in self.failed.items():
            out.append(
                f"Error completing leader election ({self.election_type}) for partition: "
                f"{_tp(tp)}: {exception_text(err)}"
            )
        return out

    def to_json(self) -> dict[str, Any]:
        """The --json document."""

        def tps(items: list[TopicPartition]) -> list[dict[str, Any]]:
            return [{"topic": t, "partition": p} for t, p in items]

        return {
            "election_type": self.election_type,
            "succeeded": tps(self.succeeded),
            "not_needed": tps(self.not_needed),
            "failed": [
                {
                    "topic": t,
                    "partition": p,
                    "error": err.code.name,
                    "message": err.detail or err.code.message,
                }
                for (t, p), err in self.failed.items()
            ],
        }


def _read_election_file(path: Path) -> list[TopicPartition]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        usage_error(f"--path-to-json-file: {path}: no such file")
    except (OSError, UnicodeDecodeError) as exc:
        usage_error(f"--path-to-json-file: {path}: {exc}")
    try:
        return parse_election_json(text)
    except ElectionFileError as exc:
        usage_error(f"--path-to-json-file: {path}: {exc}")


@click.command("leader-election")
@wire_options
@click.option(
    "--election-type",
    required=True,
    type=click.Choice(sorted(ELECTION_TYPES), case_sensitive=False),
    help="preferred: move leadership back to the preferred replica; unclean: elect a leader "
    "for partitions without one, out-of-sync replicas included.",
)
@click.option("--topic", help="The topic of the one partition to elect (with --partition).")
@click.option("--partition", type=click.IntRange(min=0), help="Its partition (with --topic).")
@click.option("--all-topic-partitions", is_flag=True, help="Every partition that needs it.")
@click.option(
    "--path-to-json-file",
    type=click.Path(dir_okay=False, path_type=Path),
    help='Partitions from a file: {"partitions":[{"topic":"foo","partition":1}]}.',
)
@click.option("--json", "as_json", is_flag=True, help="One JSON object with the results.")
@handle_errors
def leader_election(
    wire: Wire,
    election_type: str,
    topic: str | None,
    partition: int | None,
    all_topic_partitions: bool,
    path_to_json_file: Path | None,
    as_json: bool,
) -> None:
    """Run preferred or unclean leader elections through the controller, like
    kafka-leader-election.sh. Exactly one of --topic/--partition,
    --all-topic-partitions or --path-to-json-file says which partitions.

    Prints Kafka's lines, partitions as TOPIC-N:

    \b
      Successfully completed leader election (PREFERRED) for partitions foo-0, foo-1
      Valid replica already elected for partitions foo-2
      Error completing leader election (PREFERRED) for partition: foo-3: <exception>

    With --all-topic-partitions, partitions that need no election are not listed.
    An unclean election may lose acknowledged records: the new leader was out of sync.

    \b
    Examples:
      kt leader-election -b localhost:9092 --election-type preferred --all-topic-partitions
      kt leader-election --election-type preferred --topic orders --partition 3
      kt leader-election --election-type unclean --path-to-json-file partitions.json

    Exit codes: 0 every election succeeded or was not needed, 1 some partition could
    not be elected ("N replica(s) could not be elected") or the cluster is
    unreachable, 2 usage error (options, a missing or malformed JSON file).
    """
    chosen = [topic is not None, all_topic_partitions, path_to_json_file is not None]
    if sum(chosen) != 1:
        usage_error(
            "exactly one of --topic (with --partition), --all-topic-partitions or "
            "--path-to-json-file is required"
        )
    if (topic is None) != (partition is None):
        usage_error("--topic and --partition go together")
    partitions: list[TopicPartition] | None = None
    if topic is not None and partition is not None:
        partitions = [(topic, partition)]
    elif path_to_json_file is not None:
        partitions = _read_election_file(path_to_json_file)

    async def go(c: KafkaClient) -> dict[TopicPartition, KafkaError | None]:
        return await c.elect_leaders(ELECTION_TYPES[election_type.lower()], partitions)

    outcome = ElectionOutcome.of(election_type, wire.run(go))
    if as_json:
        emit_json(outcome.to_json())
    else:
        for line in outcome.lines():
            click.echo(line)
    if outcome.failed:
        fail(f"{len(outcome.failed)} replica(s) could not be elected")
