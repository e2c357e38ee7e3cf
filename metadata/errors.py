"""The one exception type of `metadata/`: a rejected request, named by a Kafka error code.

`metadata/` imports nothing of `api/`; the HTTP layer maps `error_code` with
`api.errors.from_exception`.
"""

from __future__ import annotations


class MetadataError(Exception):
    """A request the metadata rules reject; `error_code` is Kafka's name (e.g. TOPIC_ALREADY_EXISTS)."""

    def __init__(self, error_code: str, message: str) -> None:
        super().__init__(f"{error_code}: {message}")
        self.error_code = error_code
        self.message = message
