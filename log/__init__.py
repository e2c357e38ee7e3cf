"""kraft's storage engine (pure of network and asyncio): the record batch codec shared with
clients (`kraft.log.batch`), segments and their indexes, the partition log, crash recovery, retention,
compaction, the leader-epoch cache and checkpoints. Modules are imported directly
(`from kraft.log.batch import build_batch`); this package imports nothing so clients stay light."""
