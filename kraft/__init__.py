"""kraft: a replicated message broker shaped like Apache Kafka in KRaft mode.

The client is re-exported here, `from kraft import Producer, Consumer, Admin`, and imported only
when first asked for, so the node and the pure cores do not load it.
"""

from __future__ import annotations

from typing import Any


def __getattr__(name: str) -> Any:
    # The client's public names are its classes (capitalised); anything else, a submodule asked
    # for by `from kraft import x` included, must not load the client.
    if name == "__all__" or name[:1].isupper():
        from kraft.api import client

        if name == "__all__":
            return list(client.__all__)
        if name in client.__all__:
            return getattr(client, name)
    raise AttributeError(f"module 'kraft' has no attribute {name!r}")
