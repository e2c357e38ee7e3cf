"""The records of `__transaction_state` (pure): one record per transactional id, keyed by it (the
compaction key: the last record wins), msgpack like `__consumer_offsets`'s.

- key `[0, transactional_id]` (Kafka's TransactionLogKey)
- value `{"v": 1, "producer_id", "producer_epoch", "timeout_ms", "state", "partitions":
  [[topic, partition], ...], "start", "last_update"}` (Kafka's TransactionLogValue)

`TransactionsReplay` folds a partition's records, in offset order, into the metadata of each id.
See docs/transactions.md.
"""

from __future__ import annotations

from typing import Any

import msgpack

from kraft.broker.transactions.state import TransactionMetadata, TxnState

TRANSACTION_KEY = 0
VERSION = 1
TRANSACTION_STATE_TOPIC = "__transaction_state"

_packb = msgpack.Packer(use_bin_type=True).pack


def transaction_key(transactional_id: str) -> bytes:
    return _packb([TRANSACTION_KEY, transactional_id])


def transaction_value(meta: TransactionMetadata) -> bytes:
    return _packb({
        "v": VERSION, "producer_id": meta.producer_id, "producer_epoch": meta.producer_epoch,
        "timeout_ms": meta.timeout_ms, "state": meta.state.value,
        "partitions": [[t, p] for t, p in sorted(meta.partitions)],
        "start": meta.txn_start_timestamp, "last_update": meta.txn_last_update_timestamp,
    })


def record(meta: TransactionMetadata) -> tuple[bytes, bytes]:
    return transaction_key(meta.transactional_id), transaction_value(meta)


def metadata_from(transactional_id: str, value: dict[str, Any]) -> TransactionMetadata:
    return TransactionMetadata(
        transactional_id, int(value["producer_id"]), int(value["producer_epoch"]),
        int(value["timeout_ms"]), TxnState(value["state"]),
        frozenset((str(t), int(p)) for t, p in value["partitions"]),
        int(value["start"]), int(value["last_update"]),
    )


class TransactionsReplay:
    """Folds the records of one `__transaction_state` partition into the metadata of each
    transactional id. A record that does not decode is skipped and counted (it never stops a
    load); a tombstone forgets the id."""

    def __init__(self) -> None:
        self.transactions: dict[str, TransactionMetadata] = {}
        self.ongoing: dict[str, TransactionMetadata] = {}  # the Ongoing ones among them
        self.skipped = 0

    def replay(self, key: bytes | None, value: bytes | None) -> TransactionMetadata | None:
        """Returns the id's metadata as the record leaves it (None: skipped or deleted)."""
        try:
            k = msgpack.unpackb(key, raw=False) if key is not None else None
            if not (isinstance(k, list) and len(k) == 2 and k[0] == TRANSACTION_KEY and isinstance(k[1], str)):
                raise ValueError(f"bad key {k!r}")
            if value is None:
                self.transactions.pop(k[1], None)
                self.ongoing.pop(k[1], None)
                return None
            v = msgpack.unpackb(value, raw=False)
            meta = metadata_from(k[1], v)
        except (ValueError, TypeError, KeyError, AssertionError, msgpack.UnpackException):
            self.skipped += 1
            return None
        self.transactions[meta.transactional_id] = meta
        if meta.state is TxnState.ONGOING:
            self.ongoing[meta.transactional_id] = meta
        else:
            self.ongoing.pop(meta.transactional_id, None)
        return meta
