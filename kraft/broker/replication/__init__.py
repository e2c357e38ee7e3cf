"""Partition replication, leader to follower (design §6).

Sans-I/O cores, with time passed in as `now_ms`:
- `partition.py`: one replica's role and every replication decision (make-leader / make-follower,
  epoch checks, both sides of a fetch, ISR changes), returning actions for the shell to perform;
  built on the two below, and what the deterministic simulation in the tests drives.
- `leader.py`: the leader's view of its followers (LEO, last caught-up time), the high watermark
  rule, the divergence check on follower fetches, and ISR shrink / expand proposals.
- `follower.py`: what a follower does with one partition of a fetch response (append, learn the
  high watermark, truncate a divergent suffix).
Thin asyncio shells:
- `fetcher.py`: one long-poll fetcher per (this follower broker, leader broker).
- `alter_partition.py`: the channel to the active controller for AlterPartition.
The replica manager (`kraft/broker/replica_manager.py`) drives the cores from metadata updates and
requests, and performs the actions they return.
"""
