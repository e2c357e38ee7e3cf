"""Apache Kafka's broker and controller configuration keys that this broker has no use for.

A Kafka `server.properties` sets many of them (thread pools, socket buffers, listener plumbing,
transactions, SASL/SSL); `kraft.config.build_config` accepts them with one warning naming them,
while a key that neither kraft nor Kafka knows still stops the node. Keys with a meaning here
are in `kraft.config.CONFIG_KEYS` instead.
"""

from __future__ import annotations

KAFKA_BROKER_KEYS: frozenset[str] = frozenset({
    # threads and sockets
    "num.network.threads", "num.io.threads", "num.replica.fetchers", "num.recovery.threads.per.data.dir",
    "background.threads", "queued.max.requests", "queued.max.request.bytes", "socket.send.buffer.bytes",
    "socket.receive.buffer.bytes", "socket.listen.backlog.size", "socket.connection.setup.timeout.ms",
    "socket.connection.setup.timeout.max.ms", "connections.max.idle.ms", "connections.max.reauth.ms",
    "max.connections", "max.connections.per.ip", "max.connections.per.ip.overrides",
    "max.connection.creation.rate", "num.replica.alter.log.dirs.threads", "replica.socket.timeout.ms",
    "replica.socket.receive.buffer.bytes", "request.timeout.ms", "fetch.purgatory.purge.interval.requests",
    "producer.purgatory.purge.interval.requests", "delete.records.purgatory.purge.interval.requests",
    # listeners and security
    # (security.protocol, the ssl.* keystore/truststore/client-auth keys, sasl.enabled.mechanisms and
    # the listener protocol keys are kraft's own: kraft/config.py)
    "inter.broker.protocol.version", "early.start.listeners", "control.plane.listener.name",
    "sasl.mechanism.inter.broker.protocol", "sasl.mechanism.controller.protocol",
    "sasl.kerberos.service.name", "sasl.jaas.config", "ssl.keystore.password", "ssl.truststore.password",
    "ssl.protocol", "ssl.cipher.suites", "principal.builder.class",
    # controller and metadata
    "controller.quorum.election.timeout.ms", "controller.quorum.fetch.timeout.ms",
    "controller.quorum.election.backoff.max.ms", "controller.quorum.append.linger.ms",
    "controller.quorum.request.timeout.ms", "controller.quorum.retry.backoff.ms",
    "controller.socket.timeout.ms", "metadata.log.dir", "metadata.log.segment.bytes", "metadata.log.segment.ms",
    "metadata.max.retention.bytes", "metadata.max.retention.ms", "metadata.max.idle.interval.ms",
    "metadata.log.max.snapshot.interval.ms", "initial.broker.registration.timeout.ms",
    "broker.id", "broker.id.generation.enable", "reserved.broker.max.id", "auto.leader.rebalance.enable",
    "leader.imbalance.check.interval.seconds", "leader.imbalance.per.broker.percentage",
    "controlled.shutdown.max.retries", "controlled.shutdown.retry.backoff.ms",
    "zookeeper.set.acl", "zookeeper.max.in.flight.requests", "zookeeper.metadata.migration.enable",
    # logs
    "log.dir", "log.flush.scheduler.interval.ms", "log.flush.start.offset.checkpoint.interval.ms",
    "log.cleaner.enable", "log.cleaner.threads", "log.cleaner.io.max.bytes.per.second",
    "log.cleaner.dedupe.buffer.size", "log.cleaner.io.buffer.size", "log.cleaner.io.buffer.load.factor",
    "log.cleaner.backoff.ms", "log.cleaner.min.cleanable.ratio", "log.cleaner.max.compaction.lag.ms",
    "log.segment.delete.delay.ms", "log.preallocate", "log.message.downconversion.enable",
    "log.message.timestamp.before.max.ms", "log.message.timestamp.after.max.ms",
    "log.message.timestamp.difference.max.ms", "log.message.format.version", "log.roll.jitter.ms",
    "log.roll.jitter.hours", "log.local.retention.ms", "log.local.retention.bytes", "compression.type",
    "remote.log.storage.system.enable", "replica.high.watermark.checkpoint.interval.ms",
    "replica.fetch.min.bytes", "replica.fetch.backoff.ms", "replica.fetch.response.max.bytes",
    "replica.selector.class",
    # groups, offsets and transactions
    "group.initial.rebalance.delay.ms", "group.min.session.timeout.ms", "group.max.session.timeout.ms",
    "group.max.size", "group.coordinator.rebalance.protocols", "group.coordinator.threads",
    "group.consumer.max.size", "group.consumer.min.session.timeout.ms", "group.consumer.max.session.timeout.ms",
    "group.consumer.min.heartbeat.interval.ms", "group.consumer.max.heartbeat.interval.ms",
    "group.consumer.assignors",
    "offsets.commit.timeout.ms", "offsets.load.buffer.size", "offsets.topic.segment.bytes",
    "offsets.topic.compression.codec", "offset.metadata.max.bytes", "transaction.state.log.replication.factor",
    "transaction.state.log.min.isr", "transaction.state.log.num.partitions", "transaction.state.log.segment.bytes",
    "transaction.state.log.load.buffer.size", "transaction.max.timeout.ms",
    "transactional.id.expiration.ms", "transaction.abort.timed.out.transaction.cleanup.interval.ms",
    "transaction.remove.expired.transaction.cleanup.interval.ms", "producer.id.expiration.ms",
    "producer.id.expiration.check.interval.ms", "max.incremental.fetch.session.cache.slots",
    # quotas and metrics
    "replication.quota.window.num",
    "replication.quota.window.size.seconds", "client.quota.callback.class", "metric.reporters",
    "metrics.num.samples", "metrics.sample.window.ms", "metrics.recording.level", "kafka.metrics.reporters",
    "kafka.metrics.polling.interval.secs", "auto.include.jmx.reporter",
    "create.topic.policy.class.name", "alter.config.policy.class.name",
})
