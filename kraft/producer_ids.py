"""Producer ids for idempotent producers (pure; shared by the broker, the client and the Spark sink).

Kafka hands out producer ids from blocks the controller allocates; kraft does too, and those ids
stay below 2**62 (a block counter would need 2**62 allocations to get there). A producer that names
a *transactional id* instead gets a DERIVED id, computed without any state:
`TRANSACTIONAL_ID_BASE + (a stable 62-bit hash of the transactional id)`, so the same name always
maps to the same producer id on every broker and across restarts, and never to an allocated id.
Limits (docs/idempotence.md): two different names collide with odds of about n**2 / 2**63 for n
names; and nothing fences a zombie writer of the same name except the producer epoch it sends.
"""

from __future__ import annotations

import hashlib

TRANSACTIONAL_ID_BASE = 2**62
MAX_PRODUCER_EPOCH = 2**15 - 1  # Kafka's epoch is an int16


def derived_producer_id(transactional_id: str) -> int:
    """The producer id of `transactional_id`: in [2**62, 2**63), stable forever (blake2b)."""
    digest = hashlib.blake2b(transactional_id.encode("utf-8"), digest_size=8).digest()
    return TRANSACTIONAL_ID_BASE + (int.from_bytes(digest, "big") & (TRANSACTIONAL_ID_BASE - 1))
