"""`kraft-bench convert`: what converting a batch to the reader's format costs (issue 23).

Kafka's v2 batches and kraft's are stored as written; a reader of the other format gets a
converted copy (`log/kafka_batch.py`). This measures that conversion on one core, in memory, with
no broker: `--direction to-kraft` (a JSON/msgpack reader of a batch a Kafka client wrote) or
`from-kraft` (a Kafka client reading a batch written over HTTP), per codec and batch size.
"""

from __future__ import annotations

import random
import time

import click

from kraft.bench.common import BenchResult, Progress, main, make_payload, report
from kraft.log import kafka_batch
from kraft.log.batch import COMPRESSIONS, build_batch


@main.command()
@click.option("--direction", type=click.Choice(["to-kraft", "from-kraft"]), default="to-kraft", show_default=True)
@click.option("--compression", type=click.Choice(COMPRESSIONS), default="none", show_default=True)
@click.option("--num-records", type=click.IntRange(min=1), default=200_000, show_default=True)
@click.option("--record-size", type=click.IntRange(min=1), default=100, show_default=True)
@click.option("--batch-records", type=click.IntRange(min=1), default=500, show_default=True,
              help="Records per batch (a 64 KiB producer batch holds ~500 of 100 B).")
@click.option("--json", "json_path", type=click.Path(dir_okay=False, writable=True), help="Write the summary as JSON here.")
def convert(direction: str, compression: str, num_records: int, record_size: int, batch_records: int,
            json_path: str | None) -> None:
    """Batch conversion between Kafka's v2 format and kraft's, records/s on one core."""
    rng = random.Random(0)
    rows = [(b"key-%d" % i, make_payload(record_size, rng), None, 1_700_000_000_000 + i) for i in range(batch_records)]
    build = kafka_batch.build_batch if direction == "to-kraft" else build_batch
    convert_one = kafka_batch.to_kraft if direction == "to-kraft" else kafka_batch.from_kraft
    batch = build(rows, compression=compression)
    progress = Progress(f"convert {direction}")
    records = nbytes = 0
    start = time.perf_counter()
    while records < num_records:
        convert_one(batch)
        records += batch_records
        nbytes += batch_records * record_size
        progress.update(records, nbytes)
    elapsed = time.perf_counter() - start
    result = BenchResult("convert", dict(direction=direction, compression=compression, record_size=record_size,
                                         batch_records=batch_records, batch_bytes=len(batch)),
                         records, nbytes, elapsed)
    summary = report(result, json_path)
    click.echo(f"{summary['elapsed_s'] * 1e6 / (records / batch_records):.0f} us per batch", err=True)
