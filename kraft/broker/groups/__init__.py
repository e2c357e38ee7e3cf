"""Consumer groups (design §8, KIP-848): the pure membership state machine and assignors, the
`__consumer_offsets` record codec, the state machine of one `__consumer_offsets` partition with
its handlers (`shard`), and the asyncio coordinator shell that serves the HTTP routes on the
coordinator runtime (`kraft.coordinator`).

Pure: `hashing`, `assignors`, `membership`, `records`, `expiration`, `topic_counts`, `shard`.
Shells: `coordinator`, `leader_offsets`, `regex_resolver`.
"""
