"""An in-process stand-in for one kraft broker, speaking the routes of docs/internals.md §5 that the
connector uses (health, metadata, topics, offsets, msgpack fetch/produce), over real HTTP.

The Spark tests run against a real `kraft-node` whenever the node code is present; this fake lets
them run when it is not. It has no idempotent produce (no "idempotence" feature in its health).
"""

from __future__ import annotations

import json
import re
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse

import msgpack

from kraft.log.batch import iter_batches, stamp, validate_batch


@dataclass
class _Partition:
    log: bytearray = field(default_factory=bytearray)
    batches: list[tuple[int, int, int, int]] = field(default_factory=list)  # base, next, pos, max_ts
    log_start_offset: int = 0

    @property
    def high_watermark(self) -> int:
        return self.batches[-1][1] if self.batches else self.log_start_offset

    def append(self, records: bytes) -> int:
        base = self.high_watermark
        for pos, header in list(iter_batches(records)):
            validate_batch(records, pos)
            buf = bytearray(records[pos:pos + header.size_in_bytes])
            offset = self.high_watermark
            stamp(buf, 0, offset, 0)
            self.batches.append((offset, offset + header.record_count, len(self.log), header.max_timestamp))
            self.log += buf
        return base

    def read(self, offset: int, max_bytes: int) -> bytes:
        out = bytearray()
        for base, nxt, pos, _ in self.batches:
            if nxt <= offset:
                continue
            size = int.from_bytes(self.log[pos + 8:pos + 12], "big") + 12
            if out and len(out) + size > max_bytes:
                break
            out += self.log[pos:pos + size]
        return bytes(out)


class FakeBroker:
    def __init__(self) -> None:
        self.topics: dict[str, list[_Partition]] = {}
        self.lock = threading.Condition()
        broker = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def _answer(self, status: int, body: Any) -> None:
                data = msgpack.packb(body, use_bin_type=True)
                self.send_response(status)
                self.send_header("Content-Type", "application/msgpack")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _body(self) -> Any:
                raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                if self.headers.get("Content-Type", "").startswith("application/json"):
                    return json.loads(raw or b"{}")
                return msgpack.unpackb(raw, raw=False) if raw else {}

            def do_GET(self) -> None:
                self._dispatch("GET")

            def do_POST(self) -> None:
                self._dispatch("POST")

            def do_DELETE(self) -> None:
                self._dispatch("DELETE")

            def _dispatch(self, method: str) -> None:
                url = urlparse(self.path)
                query = {k: v[0] for k, v in parse_qs(url.query).items()}
                body = self._body() if method == "POST" else None
                try:
                    status, answer = broker.handle(method, url.path, query, body, self.server.server_port)
                except KeyError as e:
                    status, answer = 404, {"error_code": "UNKNOWN_TOPIC_OR_PARTITION", "message": str(e),
                                           "retriable": True}
                self._answer(status, answer)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.server.server_port}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def delete_records_before(self, topic: str, partition: int, offset: int) -> None:
        """What retention does: whole batches below `offset` go, the log start offset moves."""
        with self.lock:
            p = self.topics[topic][partition]
            p.batches = [b for b in p.batches if b[1] > offset]
            p.log_start_offset = p.batches[0][0] if p.batches else p.high_watermark

    def handle(self, method: str, path: str, query: dict[str, str], body: Any, port: int) -> tuple[int, Any]:
        with self.lock:
            if path == "/v1/health":
                return 200, {"status": "ok", "node_id": 1, "roles": ["broker", "controller"], "features": []}
            if path == "/v1/metadata":
                return 200, {"cluster_id": "fake", "controller_id": 1,
                             "brokers": [{"node_id": 1, "host": "127.0.0.1", "port": port, "rack": None}],
                             "topics": [{"name": t, "topic_id": t, "internal": False, "partitions": [
                                 {"partition": i, "leader": 1, "leader_epoch": 0, "replicas": [1], "isr": [1]}
                                 for i in range(len(ps))]} for t, ps in self.topics.items()]}
            if path == "/v1/topics" and method == "POST":
                if body["name"] in self.topics:
                    return 409, {"error_code": "TOPIC_ALREADY_EXISTS", "message": body["name"], "retriable": False}
                self.topics[body["name"]] = [_Partition() for _ in range(body.get("partitions", 1))]
                return 201, {"name": body["name"], "partitions": body.get("partitions", 1)}
            m = re.fullmatch(r"/v1/topics/([^/]+)(/partitions(?:/(\d+)/offsets)?)?", path)
            if m and m.group(2) == "/partitions" and method == "POST":
                ps = self.topics[m.group(1)]
                ps.extend(_Partition() for _ in range(body["count"] - len(ps)))
                return 200, {"name": m.group(1), "partitions": len(ps)}
            if m and m.group(3) is not None:
                p = self.topics[m.group(1)][int(m.group(3))]
                answer: dict[str, Any] = {"partition": int(m.group(3)), "log_start_offset": p.log_start_offset,
                                          "high_watermark": p.high_watermark, "log_end_offset": p.high_watermark}
                if "timestamp" in query:
                    ts = int(query["timestamp"])
                    hit = next((b for b in p.batches if b[3] >= ts), None)
                    answer.update(offset=hit[0] if hit else None, timestamp=hit[3] if hit else None)
                return 200, answer
            if m and m.group(2) is None and method == "DELETE":
                del self.topics[m.group(1)]
                return 200, {"name": m.group(1)}
            if path == "/v1/produce":
                return 200, {"partitions": [self._produce(e) for e in body["partitions"]]}
            if path == "/v1/fetch":
                return 200, {"partitions": [self._fetch(e) for e in body["partitions"]]}
        return 404, {"error_code": "NOT_FOUND", "message": path, "retriable": False}

    def _produce(self, entry: dict[str, Any]) -> dict[str, Any]:
        p = self.topics[entry["topic"]][entry["partition"]]
        answer = {"topic": entry["topic"], "partition": entry["partition"], "log_start_offset": p.log_start_offset}
        return {**answer, "base_offset": p.append(entry["records"])}

    def _fetch(self, entry: dict[str, Any]) -> dict[str, Any]:
        p = self.topics[entry["topic"]][entry["partition"]]
        answer = {"topic": entry["topic"], "partition": entry["partition"], "high_watermark": p.high_watermark,
                  "log_start_offset": p.log_start_offset}
        offset = entry["fetch_offset"]
        if not p.log_start_offset <= offset <= p.high_watermark:
            return {**answer, "records": b"", "error_code": "OFFSET_OUT_OF_RANGE",
                    "message": f"{offset} not in [{p.log_start_offset}, {p.high_watermark}]"}
        return {**answer, "records": p.read(offset, entry.get("partition_max_bytes", 1 << 20))}

