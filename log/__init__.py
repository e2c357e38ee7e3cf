"""kraft's storage engine (pure of network and asyncio): the record batch codecs shared with
clients (kraft's `kraft.log.batch`, Kafka's v2 `kraft.log.kafka_batch`, and `kraft.log.records`,
the one decoder of either), segments and their indexes, the partition log, crash recovery, retention,
compaction, the leader-epoch cache and checkpoints. Modules are imported directly
(`from kraft.log.batch import build_batch`); this package imports nothing so clients stay light."""
