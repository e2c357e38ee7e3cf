"""The follower's side of replication for one partition, sans-I/O: what to put in the next fetch,
and what to do with one partition of the leader's answer.

A follower fetches from its log end offset with the epoch of its last batch (`last_fetched_epoch`,
the latest entry of its leader-epoch cache). The leader answers with batches and its high
watermark, or with a diverging epoch {epoch, end_offset} when the follower's log has a suffix the
leader never had (KIP-320/595 fold KIP-101/279's OffsetsForLeaderEpoch into the fetch). The
truncation rule is Kafka's AbstractFetcherThread.getOffsetTruncationState:
- the follower knows the leader's epoch: truncate to min(its own end offset for that epoch, the
  leader's end offset);
- it does not: truncate to the end of the largest epoch below it that it knows ("we truncate to
  the end offset of the largest epoch that is smaller than the epoch the leader replied with, and
  send another" request), so the next fetch checks again one epoch lower;
- the leader knows none of the follower's epochs (-1, -1; only after an unclean election): drop
  the follower's whole latest epoch.
Every truncation lowers the log end offset or the latest epoch, so the exchange ends.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from kraft.broker.replication.leader import UNDEFINED_EPOCH, EpochEndOffset


@dataclass(frozen=True)
class PartitionFetchResponse:
    high_watermark: int
    log_start_offset: int
    log_end_offset: int
    records: bytes
    diverging_epoch: EpochEndOffset | None = None
    error_code: str | None = None


@dataclass(frozen=True)
class Append:
    """Append `records` (possibly none), then raise the HW to min(leader's HW, own LEO) and the
    log start to the leader's (as far as the HW)."""

    records: bytes
    leader_high_watermark: int
    leader_log_start_offset: int


@dataclass(frozen=True)
class Truncate:
    offset: int


@dataclass(frozen=True)
class TruncateFully:
    """The leader no longer has our offsets: restart the log empty at its log start."""

    offset: int


@dataclass(frozen=True)
class Backoff:
    """Nothing to do until the metadata or the leader changes; retry after a pause."""

    error_code: str


FollowerAction = Append | Truncate | TruncateFully | Backoff


def truncation_offset(
    diverging: EpochEndOffset,
    local_end_offset_for_epoch: Callable[[int], tuple[int, int]],
    latest_epoch_start_offset: int | None,
    log_end_offset: int,
) -> int:
    """Where to truncate when the leader answered a diverging epoch (see the module docstring)."""
    if diverging.epoch == UNDEFINED_EPOCH or diverging.end_offset < 0:
        start = latest_epoch_start_offset if latest_epoch_start_offset is not None else log_end_offset
        return min(start, log_end_offset)
    epoch, end_offset = local_end_offset_for_epoch(diverging.epoch)
    if epoch == UNDEFINED_EPOCH:
        return min(diverging.end_offset, log_end_offset)
    if epoch != diverging.epoch:
        return min(end_offset, log_end_offset)
    return min(end_offset, diverging.end_offset, log_end_offset)


def on_fetch_response(
    response: PartitionFetchResponse,
    log_end_offset: int,
    local_end_offset_for_epoch: Callable[[int], tuple[int, int]],
    latest_epoch_start_offset: int | None,
) -> FollowerAction:
    if response.error_code == "OFFSET_OUT_OF_RANGE":
        if log_end_offset > response.log_end_offset >= 0:
            return Truncate(response.log_end_offset)  # longer than the leader (unclean election)
        if log_end_offset < response.log_start_offset:
            return TruncateFully(response.log_start_offset)  # retention passed us by
        return Backoff("OFFSET_OUT_OF_RANGE")
    if response.error_code is not None:
        return Backoff(response.error_code)
    if response.diverging_epoch is not None:
        return Truncate(truncation_offset(
            response.diverging_epoch, local_end_offset_for_epoch, latest_epoch_start_offset,
            log_end_offset,
        ))
    return Append(response.records, response.high_watermark, response.log_start_offset)
