"""`GroupError`: what the pure group code (membership, subscription regexes) raises, with Kafka's
error name in `error_code`; the coordinator answers it as a `KraftError`."""

from __future__ import annotations


class GroupError(Exception):
    def __init__(self, error_code: str, message: str) -> None:
        super().__init__(message)
        self.error_code = error_code
        self.message = message
