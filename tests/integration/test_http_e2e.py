"""End to end over HTTP against a real `kraft-node` process: the curl tour of the README."""

from __future__ import annotations

import base64
import uuid

import msgpack
import requests

from kraft.api.partitioner import partition_for_key


def topic_name() -> str:
    return f"t-{uuid.uuid4().hex[:10]}"


def create(node, name, partitions=1, **extra):
    r = requests.post(f"{node.url}/v1/topics", json={"name": name, "partitions": partitions, **extra}, timeout=10)
    assert r.status_code == 201, r.text
    return r.json()


def test_health_and_metadata_fields(node):
    assert node.health()["status"] == "ok"
    name = topic_name()
    create(node, name, partitions=3)
    md = requests.get(f"{node.url}/v1/metadata", timeout=10).json()
    assert {"cluster_id", "controller_id", "brokers", "topics"} <= md.keys()
    assert md["brokers"][0]["node_id"] == 1 and md["brokers"][0]["port"] == node.port
    topic = next(t for t in md["topics"] if t["name"] == name)
    assert topic["internal"] is False and len(topic["topic_id"]) >= 16
    assert [p["partition"] for p in topic["partitions"]] == [0, 1, 2]
    for p in topic["partitions"]:
        assert p["leader"] == 1 and p["replicas"] == [1] and p["isr"] == [1] and p["leader_epoch"] >= 0


def test_topic_lifecycle(node):
    name = topic_name()
    body = create(node, name, partitions=2, configs={"retention.ms": "3600000"})
    assert body["name"] == name and body["partitions"] == 2
    dup = requests.post(f"{node.url}/v1/topics", json={"name": name}, timeout=10)
    assert dup.status_code == 409 and dup.json()["error_code"] == "TOPIC_ALREADY_EXISTS"
    names = [t["name"] for t in requests.get(f"{node.url}/v1/topics", timeout=10).json()["topics"]]
    assert name in names
    desc = requests.get(f"{node.url}/v1/topics/{name}", timeout=10).json()
    assert desc["configs"]["retention.ms"] == "3600000" and len(desc["partitions"]) == 2
    r = requests.post(f"{node.url}/v1/topics/{name}/partitions", json={"count": 4}, timeout=10)
    assert r.status_code == 200, r.text
    assert len(requests.get(f"{node.url}/v1/topics/{name}", timeout=10).json()["partitions"]) == 4
    r = requests.post(f"{node.url}/v1/topics/{name}/partitions", json={"count": 3}, timeout=10)
    assert r.status_code == 400 and r.json()["error_code"] == "INVALID_PARTITIONS"
    r = requests.patch(f"{node.url}/v1/topics/{name}/configs",
                       json={"configs": {"retention.ms": None, "cleanup.policy": "compact"}}, timeout=10)
    assert r.status_code == 200, r.text
    configs = requests.get(f"{node.url}/v1/topics/{name}/configs", timeout=10).json()["configs"]
    assert configs.get("cleanup.policy") == "compact" and "retention.ms" not in configs
    assert requests.delete(f"{node.url}/v1/topics/{name}", timeout=10).status_code == 200
    gone = requests.get(f"{node.url}/v1/topics/{name}", timeout=10)
    assert gone.status_code == 404 and gone.json()["error_code"] == "UNKNOWN_TOPIC_OR_PARTITION"


def test_json_produce_and_fetch_round_trip(node):
    name = topic_name()
    create(node, name, partitions=1)
    binary = bytes(range(256))
    records = [
        {"key": "k1", "value": "hello", "headers": {"h": "v"}},
        {"value": "wörld ✓"},
        {"key_b64": base64.b64encode(b"\xff\x00").decode(), "value_b64": base64.b64encode(binary).decode()},
        {"key": "tomb", "value": None},
    ]
    r = requests.post(f"{node.url}/v1/topics/{name}/records?acks=all", json={"records": records}, timeout=10)
    assert r.status_code == 200, r.text
    assert r.json()["offsets"] == [{"partition": 0, "offset": i} for i in range(4)]
    got = requests.get(f"{node.url}/v1/topics/{name}/partitions/0/records",
                       params={"offset": "earliest"}, timeout=10).json()
    assert got["high_watermark"] == 4 and got["log_start_offset"] == 0 and got["next_offset"] == 4
    recs = got["records"]
    assert [x["offset"] for x in recs] == [0, 1, 2, 3]
    assert recs[0]["key"] == "k1" and recs[0]["value"] == "hello"
    assert recs[0]["headers"] == [{"key": "h", "value": "v"}]
    assert recs[1]["value"] == "wörld ✓" and recs[1]["key"] is None
    assert base64.b64decode(recs[2]["value_b64"]) == binary and recs[2]["value"] is None
    assert recs[3]["value"] is None and "value_b64" not in recs[3]
    # offset in the middle, max_records
    mid = requests.get(f"{node.url}/v1/topics/{name}/partitions/0/records",
                       params={"offset": 1, "max_records": 2}, timeout=10).json()
    assert [x["offset"] for x in mid["records"]] == [1, 2] and mid["next_offset"] == 3
    latest = requests.get(f"{node.url}/v1/topics/{name}/partitions/0/records",
                          params={"offset": "latest", "timeout_ms": 0}, timeout=10).json()
    assert latest["records"] == [] and latest["next_offset"] == 4


def test_keyed_records_land_where_kafka_puts_them(node):
    name = topic_name()
    create(node, name, partitions=6)
    keys = [f"user-{i}" for i in range(40)]
    r = requests.post(f"{node.url}/v1/topics/{name}/records",
                      json={"records": [{"key": k, "value": "x"} for k in keys]}, timeout=10)
    assert r.status_code == 200, r.text
    for k, o in zip(keys, r.json()["offsets"]):
        assert o["partition"] == partition_for_key(k.encode(), 6)


def test_msgpack_convenience_route(node):
    name = topic_name()
    create(node, name)
    body = msgpack.packb({"records": [{"key": b"\x01\x02", "value": b"\x00binary\xff"}], "acks": 1})
    r = requests.post(f"{node.url}/v1/topics/{name}/records", data=body,
                      headers={"Content-Type": "application/msgpack", "Accept": "application/msgpack"}, timeout=10)
    assert r.status_code == 200 and r.headers["Content-Type"].startswith("application/msgpack")
    assert msgpack.unpackb(r.content)["offsets"] == [{"partition": 0, "offset": 0}]
    r = requests.get(f"{node.url}/v1/topics/{name}/partitions/0/records?offset=0",
                     headers={"Accept": "application/msgpack"}, timeout=10)
    rec = msgpack.unpackb(r.content)["records"][0]
    assert rec["key"] == b"\x01\x02" and rec["value"] == b"\x00binary\xff"


def test_long_poll_fetch_wakes_on_produce(node):
    import threading
    name = topic_name()
    create(node, name)
    result = {}

    def poll():
        result["r"] = requests.get(f"{node.url}/v1/topics/{name}/partitions/0/records",
                                   params={"offset": 0, "timeout_ms": 20000}, timeout=30).json()

    t = threading.Thread(target=poll)
    t.start()
    r = requests.post(f"{node.url}/v1/topics/{name}/records", json={"records": [{"value": "late"}]}, timeout=10)
    assert r.status_code == 200
    t.join(25)
    assert not t.is_alive()
    assert [x["value"] for x in result["r"]["records"]] == ["late"]


def test_timestamp_seek_and_offsets(node):
    name = topic_name()
    create(node, name)
    recs = [{"value": f"v{i}", "timestamp": 1_700_000_000_000 + i * 1000} for i in range(5)]
    assert requests.post(f"{node.url}/v1/topics/{name}/records", json={"records": recs}, timeout=10).status_code == 200
    got = requests.get(f"{node.url}/v1/topics/{name}/partitions/0/records",
                       params={"timestamp": 1_700_000_002_500}, timeout=10).json()
    assert got["records"][0]["offset"] == 3 and got["records"][0]["timestamp"] == 1_700_000_003_000
    offs = requests.get(f"{node.url}/v1/topics/{name}/partitions/0/offsets",
                        params={"timestamp": 1_700_000_001_000}, timeout=10).json()
    assert offs["offset"] == 1 and offs["high_watermark"] == 5 and offs["log_start_offset"] == 0
    none = requests.get(f"{node.url}/v1/topics/{name}/partitions/0/offsets",
                        params={"timestamp": 1_800_000_000_000}, timeout=10).json()
    assert none["offset"] is None


def test_batch_routes_msgpack(node):
    from kraft.log.batch import build_batch, decode_records, iter_batches

    name = topic_name()
    create(node, name, partitions=2)
    batch0 = build_batch([(None, f"a{i}".encode(), (), 1_700_000_000_000) for i in range(100)], compression="zstd")
    batch1 = build_batch([(b"k", b"b", (("h", b"1"),), 1_700_000_000_000)])
    body = {"acks": -1, "timeout_ms": 10000, "partitions": [
        {"topic": name, "partition": 0, "records": batch0 + batch0},
        {"topic": name, "partition": 1, "records": batch1},
        {"topic": name, "partition": 9, "records": batch1},
    ]}
    hdr = {"Content-Type": "application/msgpack", "Accept": "application/msgpack"}
    r = requests.post(f"{node.url}/v1/produce", data=msgpack.packb(body), headers=hdr, timeout=10)
    assert r.status_code == 200, r.content
    parts = msgpack.unpackb(r.content)["partitions"]
    assert parts[0]["base_offset"] == 0 and not parts[0].get("error_code")
    assert parts[1]["base_offset"] == 0
    assert parts[2]["error_code"] == "UNKNOWN_TOPIC_OR_PARTITION"
    fetch = {"max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20, "partitions": [
        {"topic": name, "partition": 0, "fetch_offset": 150, "partition_max_bytes": 1 << 20},
        {"topic": name, "partition": 1, "fetch_offset": 0, "partition_max_bytes": 1 << 20},
    ]}
    r = requests.post(f"{node.url}/v1/fetch", data=msgpack.packb(fetch), headers=hdr, timeout=10)
    parts = msgpack.unpackb(r.content)["partitions"]
    assert parts[0]["high_watermark"] == 200
    offsets = [rec.offset for pos, _ in iter_batches(parts[0]["records"]) for rec in decode_records(parts[0]["records"], pos)]
    assert offsets[-1] == 199 and 150 in offsets
    rec = decode_records(parts[1]["records"], 0)[0]
    assert rec.key == b"k" and rec.value == b"b" and tuple(rec.headers) == (("h", b"1"),)


def test_openapi_lists_every_route(node):
    doc = requests.get(f"{node.url}/v1/openapi.json", timeout=10).json()
    assert doc["openapi"].startswith("3.")
    for path in ["/v1/health", "/v1/metadata", "/v1/topics", "/v1/topics/{topic}", "/v1/topics/{topic}/partitions",
                 "/v1/topics/{topic}/configs", "/v1/topics/{topic}/records",
                 "/v1/topics/{topic}/partitions/{partition}/records",
                 "/v1/topics/{topic}/partitions/{partition}/offsets", "/v1/produce", "/v1/fetch"]:
        assert path in doc["paths"], path


def test_json_read_is_bounded_by_max_bytes_on_the_decoded_size(node):
    """Issue 21: the JSON read decoded whole batches into the answer whatever their decoded size;
    now it stops adding records once the answer would pass max_bytes (the broker's
    fetch.max.bytes at most), always answering at least one record, as Kafka's fetch."""
    from kraft.log.batch import build_batch

    name = topic_name()
    create(node, name, configs={"max.message.bytes": str(10 << 20)})
    value = b"z" * 100_000
    batch = build_batch([(None, value, (), 1_700_000_000_000) for _ in range(50)], compression="zstd")
    assert len(batch) < 100_000  # 5 MB of records in one small batch
    body = {"acks": -1, "partitions": [{"topic": name, "partition": 0, "records": batch}]}
    hdr = {"Content-Type": "application/msgpack", "Accept": "application/msgpack"}
    r = requests.post(f"{node.url}/v1/produce", data=msgpack.packb(body), headers=hdr, timeout=30)
    assert not msgpack.unpackb(r.content)["partitions"][0].get("error_code"), r.content
    url = f"{node.url}/v1/topics/{name}/partitions/0/records"
    read = requests.get(url, params={"offset": 0, "max_bytes": 250_000}, timeout=30).json()
    assert [rec["offset"] for rec in read["records"]] == [0, 1] and read["next_offset"] == 2
    one = requests.get(url, params={"offset": 3, "max_bytes": 1}, timeout=30).json()
    assert [rec["offset"] for rec in one["records"]] == [3]  # at least one record
    assert len(requests.get(url, params={"offset": 0}, timeout=30).json()["records"]) == 10  # 1 MiB default
