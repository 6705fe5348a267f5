"""Kafka's client configuration names, for the tools' properties files and options.

Kafka's tools hand `--command-config`, `--producer.config`, `--consumer.config` and
`--producer-property`/`--consumer-property` to a Java client, whose AbstractConfig
logs each name it does not know:

    [2024-05-01 10:00:00,123] WARN The configuration 'x' was supplied but isn't a
    known config. (org.apache.kafka.clients.admin.AdminClientConfig)

(one line), and otherwise ignores it. The shims do the same on stderr, so a typo in a runbook's
properties file is as visible as with Kafka. A name kt's own client honours (its
librdkafka-style names such as sasl.username) is not warned about.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping

import click

from kt.client.security import SECURITY_KEYS
from kt.tools.connect_settings import GENERAL_KEYS

# CommonClientConfigs, SslConfigs and SaslConfigs (Kafka 3.x): every client knows them.


def _names(text: str) -> list[str]:
    return text.split()


_COMMON = _names("""bootstrap.servers client.dns.lookup client.id connections.max.idle.ms
receive.buffer.bytes send.buffer.bytes reconnect.backoff.ms reconnect.backoff.max.ms
retry.backoff.ms retry.backoff.max.ms request.timeout.ms socket.connection.setup.timeout.ms
socket.connection.setup.timeout.max.ms metadata.max.age.ms metric.reporters
metrics.num.samples metrics.sample.window.ms metrics.recording.level auto.include.jmx.reporter
enable.metrics.push metadata.recovery.strategy metadata.recovery.rebootstrap.trigger.ms
security.protocol security.providers
ssl.protocol ssl.provider ssl.cipher.suites ssl.enabled.protocols ssl.keystore.type
ssl.keystore.location ssl.keystore.password ssl.key.password ssl.keystore.key
ssl.keystore.certificate.chain ssl.truststore.certificates ssl.truststore.type
ssl.truststore.location ssl.truststore.password ssl.keymanager.algorithm
ssl.trustmanager.algorithm ssl.endpoint.identification.algorithm
ssl.secure.random.implementation ssl.engine.factory.class
sasl.kerberos.service.name sasl.kerberos.kinit.cmd sasl.kerberos.ticket.renew.window.factor
sasl.kerberos.ticket.renew.jitter sasl.kerberos.min.time.before.relogin
sasl.login.refresh.window.factor sasl.login.refresh.window.jitter
sasl.login.refresh.min.period.seconds sasl.login.refresh.buffer.seconds sasl.mechanism
sasl.jaas.config sasl.client.callback.handler.class sasl.login.callback.handler.class
sasl.login.class sasl.login.connect.timeout.ms sasl.login.read.timeout.ms
sasl.login.retry.backoff.max.ms sasl.login.retry.backoff.ms
sasl.oauthbearer.scope.claim.name sasl.oauthbearer.sub.claim.name
sasl.oauthbearer.token.endpoint.url sasl.oauthbearer.jwks.endpoint.url
sasl.oauthbearer.jwks.endpoint.refresh.ms sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms
sasl.oauthbearer.jwks.endpoint.retry.backoff.ms sasl.oauthbearer.clock.skew.seconds
sasl.oauthbearer.expected.audience sasl.oauthbearer.expected.issuer
sasl.oauthbearer.header.urlencode""")

# AdminClientConfig, ProducerConfig and ConsumerConfig's own names.
KNOWN: dict[str, frozenset[str]] = {
    "admin": frozenset([*_COMMON, "default.api.timeout.ms", "retries"]),
    "producer": frozenset(
        [
            *_COMMON,
            *_names("""acks batch.size buffer.memory compression.type compression.gzip.level
        compression.lz4.level compression.zstd.level delivery.timeout.ms enable.idempotence
        interceptor.classes key.serializer value.serializer linger.ms max.block.ms
        max.in.flight.requests.per.connection max.request.size metadata.max.idle.ms
        partitioner.class partitioner.ignore.keys partitioner.adaptive.partitioning.enable
        partitioner.availability.timeout.ms transaction.timeout.ms transactional.id
        retries"""),
        ]
    ),
    "consumer": frozenset(
        [
            *_COMMON,
            *_names("""group.id group.instance.id group.protocol group.remote.assignor
        session.timeout.ms heartbeat.interval.ms partition.assignment.strategy
        enable.auto.commit auto.commit.interval.ms client.rack max.partition.fetch.bytes
        fetch.min.bytes fetch.max.bytes fetch.max.wait.ms auto.offset.reset check.crcs
        key.deserializer value.deserializer interceptor.classes max.poll.records
        max.poll.interval.ms exclude.internal.topics isolation.level
        allow.auto.create.topics default.api.timeout.ms"""),
        ]
    ),
}
# The config class whose logger names the warning.
LOGGER = {
    "admin": "org.apache.kafka.clients.admin.AdminClientConfig",
    "producer": "org.apache.kafka.clients.producer.ProducerConfig",
    "consumer": "org.apache.kafka.clients.consumer.ConsumerConfig",
}


def unknown(props: Mapping[str, str], kind: str) -> list[str]:
    """The names neither Kafka's `kind` client ("admin", "producer", "consumer") nor
    kt's client knows, in the order given."""
    known = KNOWN[kind]
    return [k for k in props if k not in known and k not in SECURITY_KEYS and k not in GENERAL_KEYS]


def warn_unknown(props: Mapping[str, str], kind: str) -> None:
    """Kafka's WARN line on stderr (log4j's tools layout) for each unknown name."""
    for key in unknown(props, kind):
        now = datetime.datetime.now()
        stamp = now.strftime("%Y-%m-%d %H:%M:%S,") + f"{now.microsecond // 1000:03d}"
        click.echo(
            f"[{stamp}] WARN The configuration '{key}' was supplied but isn't a known config. "
            f"({LOGGER[kind]})",
            err=True,
        )
