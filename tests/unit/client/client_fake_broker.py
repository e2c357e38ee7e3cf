"""A fake single-node broker for client tests: the internals.md §5 routes the client uses, over
real HTTP on 127.0.0.1, with in-memory partition logs built from the real batch codec. It is a
stand-in for the network peer only; faults are injected per route with `fail_next`."""

from __future__ import annotations

import json
import threading
import uuid
from collections import defaultdict
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable
from urllib.parse import parse_qs, unquote, urlparse

import msgpack

from kraft.api.errors import KraftError, http_status
from kraft.log.batch import iter_batches, stamp, validate_batch


class FakeBroker:
    def __init__(self, node_id: int = 1) -> None:
        self.node_id = node_id
        self.topics: dict[str, dict[str, Any]] = {}
        self.logs: dict[tuple[str, int], list[tuple[int, int, bytes]]] = defaultdict(list)  # (base, next, bytes)
        self.requests: list[tuple[str, str, Any]] = []
        self.queries: list[tuple[str, dict[str, str]]] = []  # (path, query) of every request
        self.auto_create = True  # auto.create.topics.enable, for metadata requests that allow it
        self.produce_gate: Callable[[], None] | None = None  # called by each produce request first
        self._faults: dict[str, list[dict[str, Any]]] = defaultdict(list)
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.02,), daemon=True)

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def __enter__(self) -> FakeBroker:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def create_topic(self, name: str, partitions: int = 1, configs: dict[str, str] | None = None) -> None:
        self.topics[name] = {"topic_id": str(uuid.uuid4()), "partitions": partitions, "configs": dict(configs or {})}

    def fail_next(self, route: str, error_code: str, *, partition_level: bool = False, times: int = 1) -> None:
        """The next `times` requests to `route` ("produce", "fetch", ...) fail with `error_code`,
        as a whole-request error, or inside every partition entry of a 200 answer."""
        for _ in range(times):
            self._faults[route].append({"code": error_code, "partition_level": partition_level})

    def records(self, topic: str, partition: int) -> bytes:
        return b"".join(b for _, _, b in self.logs[(topic, partition)])

    def end_offset(self, topic: str, partition: int) -> int:
        log = self.logs[(topic, partition)]
        return log[-1][1] if log else 0

    # -- route logic -------------------------------------------------------------------------

    def _take_fault(self, route: str) -> dict[str, Any] | None:
        with self._lock:
            faults = self._faults[route]
            return faults.pop(0) if faults else None

    def _partition_wire(self, name: str) -> list[dict[str, Any]]:
        return [
            {"partition": p, "leader": self.node_id, "leader_epoch": 0, "replicas": [self.node_id], "isr": [self.node_id]}
            for p in range(self.topics[name]["partitions"])
        ]

    def _check_partition(self, topic: str, partition: int) -> None:
        if topic not in self.topics or not 0 <= partition < self.topics[topic]["partitions"]:
            raise KraftError("UNKNOWN_TOPIC_OR_PARTITION", f"{topic}-{partition} does not exist")

    def handle(self, method: str, path: str, query: dict[str, str], body: Any) -> tuple[int, Any]:
        self.requests.append((method, path, body))
        self.queries.append((path, query))
        parts = [unquote(p) for p in path.strip("/").split("/")]
        route = {"produce": "produce", "fetch": "fetch", "metadata": "metadata"}.get(parts[1], "admin") if len(parts) > 1 else "admin"
        fault = self._take_fault(route)
        if fault and not fault["partition_level"]:
            raise KraftError(fault["code"], "injected fault")
        if parts == ["v1", "metadata"]:
            names = query["topics"].split(",") if "topics" in query else list(self.topics)
            topic_errors = []
            for n in names:
                if n in self.topics:
                    continue
                if query.get("allow_auto_topic_creation") == "true" and self.auto_create:
                    self.create_topic(n)
                else:
                    reason = " and auto.create.topics.enable is false" if query.get("allow_auto_topic_creation") == "true" else ""
                    topic_errors.append({"name": n, **KraftError("UNKNOWN_TOPIC_OR_PARTITION", f"topic {n!r} does not exist{reason}").to_dict()})
            return 200, {
                "topic_errors": topic_errors,
                "cluster_id": "fake-cluster", "controller_id": self.node_id,
                "brokers": [{"node_id": self.node_id, "host": "127.0.0.1", "port": self.port, "rack": None}],
                "topics": [
                    {"name": n, "topic_id": self.topics[n]["topic_id"], "internal": False, "partitions": self._partition_wire(n)}
                    for n in names if n in self.topics
                ],
            }
        if parts == ["v1", "produce"] and method == "POST":
            if self.produce_gate is not None:
                self.produce_gate()
            out = []
            for p in body["partitions"]:
                tp = (p["topic"], p["partition"])
                if fault:
                    out.append({"topic": tp[0], "partition": tp[1], "error_code": fault["code"], "message": "injected"})
                    continue
                self._check_partition(*tp)
                data = bytearray(p["records"])
                with self._lock:
                    base = self.end_offset(*tp)
                    next_offset = base
                    for pos, header in list(iter_batches(data)):
                        validate_batch(data, pos)
                        stamp(data, pos, next_offset, 0)
                        end = pos + header.size_in_bytes
                        self.logs[tp].append((next_offset, next_offset + header.record_count, bytes(data[pos:end])))
                        next_offset += header.record_count
                out.append({"topic": tp[0], "partition": tp[1], "base_offset": None if body["acks"] == 0 else base, "log_start_offset": 0})
            return 200, {"partitions": out}
        if parts == ["v1", "fetch"] and method == "POST":
            out = []
            for p in body["partitions"]:
                tp = (p["topic"], p["partition"])
                if fault:
                    out.append({"topic": tp[0], "partition": tp[1], "error_code": fault["code"], "message": "injected"})
                    continue
                self._check_partition(*tp)
                end = self.end_offset(*tp)
                entry = {"topic": tp[0], "partition": tp[1], "high_watermark": end, "log_start_offset": 0}
                if not 0 <= p["fetch_offset"] <= end:
                    entry.update(error_code="OFFSET_OUT_OF_RANGE", message="out of range")
                else:
                    chunks = [b for base, nxt, b in self.logs[tp] if nxt > p["fetch_offset"]]
                    entry["records"] = b"".join(chunks)
                out.append(entry)
            return 200, {"partitions": out}
        if parts[:2] == ["v1", "topics"]:
            return self._topics_route(method, parts[2:], query, body)
        raise KraftError("NOT_FOUND", f"no route {method} {path}")

    def _topics_route(self, method: str, rest: list[str], query: dict[str, str], body: Any) -> tuple[int, Any]:
        if not rest:
            if method == "POST":
                name = body["name"]
                if name in self.topics:
                    raise KraftError("TOPIC_ALREADY_EXISTS", f"topic {name!r} already exists")
                self.create_topic(name, body.get("partitions") or 1, body.get("configs"))
                return 201, {"name": name, "topic_id": self.topics[name]["topic_id"], "partitions": self.topics[name]["partitions"],
                             "replication_factor": 1, "configs": self.topics[name]["configs"]}
            return 200, {"topics": [{"name": n, "topic_id": t["topic_id"], "internal": False, "partitions": t["partitions"]} for n, t in self.topics.items()]}
        name = rest[0]
        if name not in self.topics:
            raise KraftError("UNKNOWN_TOPIC_OR_PARTITION", f"topic {name!r} does not exist")
        t = self.topics[name]
        if len(rest) == 1 and method == "DELETE":
            del self.topics[name]
            return 200, {"name": name}
        if len(rest) == 1:
            return 200, {"name": name, "topic_id": t["topic_id"], "internal": False, "configs": t["configs"], "partitions": self._partition_wire(name)}
        if rest[1] == "partitions" and len(rest) == 2:
            if body["count"] <= t["partitions"]:
                raise KraftError("INVALID_PARTITIONS", "can only grow")
            t["partitions"] = body["count"]
            return 200, {"name": name, "partitions": t["partitions"]}
        if rest[1] == "configs":
            if method == "PATCH":
                for k, v in body["configs"].items():
                    if v is None:
                        t["configs"].pop(k, None)
                    else:
                        t["configs"][k] = v
            return 200, {"configs": t["configs"], "defaults": {"retention.ms": "604800000"}}
        if rest[1] == "partitions" and rest[3] == "offsets":
            partition = int(rest[2])
            self._check_partition(name, partition)
            end = self.end_offset(name, partition)
            answer: dict[str, Any] = {"partition": partition, "log_start_offset": 0, "high_watermark": end, "log_end_offset": end}
            if "timestamp" in query:
                from kraft.log.batch import decode_records

                ts = int(query["timestamp"])
                hit = next((r for _, _, b in self.logs[(name, partition)] for r in decode_records(b) if r.timestamp >= ts), None)
                answer.update(offset=hit and hit.offset, timestamp=hit and hit.timestamp)
            return 200, answer
        raise KraftError("NOT_FOUND", "no such route")

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        broker = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # headers and body are separate writes

            def log_message(self, *args: Any) -> None:
                pass

            def _serve(self, method: str) -> None:
                url = urlparse(self.path)
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                body = msgpack.unpackb(raw, raw=False) if raw else None
                query = {k: v[0] for k, v in parse_qs(url.query).items()}
                try:
                    status, answer = broker.handle(method, url.path, query, body)
                except KraftError as e:
                    status, answer = http_status(e), e.to_dict()
                except Exception as e:  # surface codec errors as the server would
                    err = KraftError(getattr(e, "error_code", "UNKNOWN_SERVER_ERROR"), str(e))
                    status, answer = http_status(err), err.to_dict()
                if "msgpack" in (self.headers.get("Accept") or ""):
                    payload, ctype = msgpack.packb(answer, use_bin_type=True), "application/msgpack"
                else:
                    payload, ctype = json.dumps(answer).encode(), "application/json"
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def do_GET(self) -> None:
                self._serve("GET")

            def do_POST(self) -> None:
                self._serve("POST")

            def do_DELETE(self) -> None:
                self._serve("DELETE")

            def do_PATCH(self) -> None:
                self._serve("PATCH")

        return Handler
