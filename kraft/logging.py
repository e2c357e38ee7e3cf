"""The node's one log format on stderr: `2026-11-23T03:30:00.123Z INFO node=1 broker: message`.

The component is the logger name after `kraft.` (loggers are `kraft.broker`, `kraft.api`, ...).
"""

from __future__ import annotations

import logging
import sys
import time


class NodeFormatter(logging.Formatter):
    def __init__(self, node_id: int) -> None:
        super().__init__()
        self.node_id = node_id

    def format(self, record: logging.LogRecord) -> str:
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
        component = record.name.removeprefix("kraft.") if record.name != "kraft" else "node"
        line = (
            f"{stamp}.{int(record.msecs):03d}Z {record.levelname} node={self.node_id} "
            f"{component}: {record.getMessage()}"
        )
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


def setup_logging(node_id: int, level: int = logging.INFO) -> None:
    """Routes every logger (ours and the libraries') to stderr in the node format."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(NodeFormatter(node_id))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)
