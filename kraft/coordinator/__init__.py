"""The coordinator runtime (Kafka's coordinator-common `CoordinatorRuntime`), shared by the group
coordinator and, next, the transaction coordinator; nothing here knows what a group is.

A coordinator owns the partitions of an internal topic (`__consumer_offsets`,
`__transaction_state`) that this broker leads. For each one the runtime keeps a *shard*: a state
machine whose state changes only by `replay(record)`. A request is a handler, a pure function of
(shard, now_ms) that returns a `CoordinatorResult` (records, response, timer changes); the runtime
runs the handlers of one partition one at a time from a bounded queue, appends their records
(acks=all), replays them once committed, and only then answers. Loading a partition replays it
from its log start, the same replay. Timers (session timeouts, offset expiry) run their operations
as handlers too.

Modules: `result` (what a handler returns), `timer` (a shard's keyed timers), `partition_writer`
(what the runtime asks of the replica manager, and the errors a coordinator answers), `loader`
(replaying a partition), `runtime` (the per-partition queues, elections and resignations).
See docs/internals.md, "The coordinator runtime".
"""
