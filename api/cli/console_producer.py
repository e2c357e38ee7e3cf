"""`kraft console-producer`: kafka-console-producer. Each stdin line is a record, split by
Kafka's LineMessageReader rules (parse.headers, parse.key, their separators, null.marker)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import click

from kraft.api.cli.common import (
    CLI_API_TIMEOUT_MS,
    KraftCommand,
    Progress,
    bootstrap_option,
    broker_list_option,
    parse_bool,
    parse_properties,
    read_properties_file,
    security_kwargs,
    version_option,
)
from kraft.api.client import KraftError, Producer
from kraft.log.batch import COMPRESSIONS

# Kafka producer property -> Producer keyword (int-valued unless listed in _STR_PRODUCER_PROPS).
PRODUCER_PROPERTIES = {
    "acks": "acks",
    "linger.ms": "linger_ms",
    "batch.size": "batch_size",
    "compression.type": "compression_type",
    "retries": "retries",
    "retry.backoff.ms": "retry_backoff_ms",
    "max.request.size": "max_request_size",
    "delivery.timeout.ms": "delivery_timeout_ms",
    "request.timeout.ms": "request_timeout_ms",
    "buffer.memory": "buffer_memory",
    "max.block.ms": "max_block_ms",
}
_STR_PRODUCER_PROPS = {"acks", "compression.type"}


def producer_kwargs(properties: dict[str, str], option: str = "--producer-property") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, value in properties.items():
        if name not in PRODUCER_PROPERTIES:
            raise click.BadParameter(f"unknown producer property {name!r}; known: {', '.join(sorted(PRODUCER_PROPERTIES))}", param_hint=option)
        if name in _STR_PRODUCER_PROPS:
            out[PRODUCER_PROPERTIES[name]] = value
        else:
            try:
                out[PRODUCER_PROPERTIES[name]] = int(value)
            except ValueError:
                raise click.BadParameter(f"{name} must be an integer, got {value!r}", param_hint=option) from None
    return out


READER_PROPERTIES = ("parse.key", "key.separator", "parse.headers", "headers.delimiter", "headers.separator",
                     "headers.key.separator", "ignore.error", "null.marker")


@dataclass(frozen=True)
class LineReader:
    """Turns console lines into (headers, key, value), as Kafka's LineMessageReader does:
    `headers<headers.delimiter>key<key.separator>value`, headers as `k:v,k:v`."""

    parse_key: bool = False
    key_separator: str = "\t"
    parse_headers: bool = False
    headers_delimiter: str = "\t"
    headers_separator: str = ","
    headers_key_separator: str = ":"
    ignore_error: bool = False
    null_marker: str | None = None

    @classmethod
    def from_properties(cls, props: dict[str, str]) -> LineReader:
        unknown = set(props) - set(READER_PROPERTIES)
        if unknown:
            raise click.BadParameter(f"unknown reader properties {sorted(unknown)}; known: {', '.join(READER_PROPERTIES)}",
                                     param_hint="--property")
        reader = cls(
            parse_key=parse_bool(props.get("parse.key", "false"), "parse.key"),
            key_separator=props.get("key.separator", "\t"),
            parse_headers=parse_bool(props.get("parse.headers", "false"), "parse.headers"),
            headers_delimiter=props.get("headers.delimiter", "\t"),
            headers_separator=props.get("headers.separator", ","),
            headers_key_separator=props.get("headers.key.separator", ":"),
            ignore_error=parse_bool(props.get("ignore.error", "false"), "ignore.error"),
            null_marker=props.get("null.marker"),
        )
        separators = {"headers.delimiter": reader.headers_delimiter, "headers.separator": reader.headers_separator,
                      "headers.key.separator": reader.headers_key_separator}
        names = list(separators)
        for i, a in enumerate(names):
            for b in names[i + 1:]:
                if separators[a] == separators[b]:
                    raise click.BadParameter(f"{a} and {b} may not be equal", param_hint="--property")
        if reader.null_marker is not None:
            for name, value in {"key.separator": reader.key_separator, **separators}.items():
                if value == reader.null_marker:
                    raise click.BadParameter(f"null.marker and {name} may not be equal", param_hint="--property")
        return reader

    def _cut(self, line: str, start: int, separator: str, what: str, line_number: int) -> str | None:
        index = line.find(separator, start)
        if index == -1:
            if self.ignore_error:
                return None
            raise KraftError("INVALID_RECORD", f"No {what} found on line number {line_number}: '{line}'")
        return line[start:index]

    def parse(self, line: str, line_number: int) -> tuple[str | None, str]:
        """(key, value) of a line without headers."""
        key = self._cut(line, 0, self.key_separator, "key separator", line_number) if self.parse_key else None
        return key, line[0 if key is None else len(key) + len(self.key_separator):]

    def read(self, line: str, line_number: int) -> tuple[list[tuple[str, str | None]], str | None, str | None]:
        """(headers, key, value); null.marker stands for a null key, value or header value."""
        headers_text = None
        if self.parse_headers:
            headers_text = self._cut(line, 0, self.headers_delimiter, "headers delimiter", line_number)
        offset = 0 if headers_text is None else len(headers_text) + len(self.headers_delimiter)
        key, value = self.parse(line[offset:], line_number)
        headers = []
        if headers_text is not None and headers_text != self.null_marker:
            headers = [self._header(pair, line_number) for pair in re.split(self.headers_separator, headers_text)]
        return (headers, None if key == self.null_marker else key,
                None if value == self.null_marker else value)

    def _header(self, pair: str, line_number: int) -> tuple[str, str | None]:
        name, sep, value = pair.partition(self.headers_key_separator)
        if not sep:
            if self.ignore_error:
                return pair, None
            raise KraftError("INVALID_RECORD",
                             f"No header key separator found in pair '{pair}' on line number {line_number}")
        if name == self.null_marker:
            raise KraftError("INVALID_RECORD", f"Header keys should not be equal to the null marker "
                                               f"'{self.null_marker}' as they can't be null")
        return name, None if value == self.null_marker else value


@click.command("console-producer", cls=KraftCommand)
@bootstrap_option
@broker_list_option
@version_option
@click.option("--topic", required=True, help="The topic to produce to.")
@click.option("--property", "properties", multiple=True, metavar="KEY=VALUE",
              help=f"Line reader property: {', '.join(READER_PROPERTIES)}.")
@click.option("--producer-property", "producer_properties", multiple=True, metavar="KEY=VALUE",
              help="Producer config, Kafka names (acks, linger.ms, ...); wins over --producer.config.")
@click.option("--producer.config", "producer_config", type=click.Path(dir_okay=False),
              help="A .properties file of producer configs.")
@click.option("--request-required-acks", help="acks: 0, 1, -1/all (default all).")
@click.option("--compression-codec", type=click.Choice(COMPRESSIONS), help="Batch compression.")
@click.option("--sync", is_flag=True, help="Send each record and wait for its acknowledgement before the next.")
def console_producer(
    bootstrap_server: str,
    topic: str,
    properties: tuple[str, ...],
    producer_properties: tuple[str, ...],
    producer_config: str | None,
    request_required_acks: str | None,
    compression_codec: str | None,
    sync: bool,
) -> None:
    """Send each line of stdin as a record (kafka-console-producer)."""
    reader = LineReader.from_properties(parse_properties(properties, "--property"))
    config = read_properties_file(producer_config, "--producer.config") if producer_config else {}
    # The file may name the brokers as a Kafka client's config does; the flag or env var wins.
    file_bootstrap = config.pop("bootstrap.servers", None)
    if file_bootstrap and click.get_current_context().get_parameter_source("bootstrap_server") == \
            click.core.ParameterSource.DEFAULT:
        bootstrap_server = file_bootstrap
    kwargs: dict[str, Any] = {"acks": "all", "max_block_ms": CLI_API_TIMEOUT_MS, **security_kwargs()}
    kwargs.update(producer_kwargs(config, "--producer.config"))
    kwargs.update(producer_kwargs(parse_properties(producer_properties, "--producer-property")))
    if request_required_acks is not None:
        kwargs["acks"] = request_required_acks
    if compression_codec is not None:
        kwargs["compression_type"] = compression_codec
    errors: list[KraftError] = []

    def on_done(future: Any) -> None:
        error = future.exception()
        if error is not None:
            errors.append(error)

    progress = Progress("Sent records")
    with Producer(bootstrap_server, **kwargs) as producer:
        # Lines are decoded one by one: bytes that are not UTF-8 name their line, not a traceback.
        for number, raw in enumerate(click.get_binary_stream("stdin"), start=1):
            try:
                line = raw.rstrip(b"\r\n").decode("utf-8")
            except UnicodeDecodeError as e:
                raise KraftError("INVALID_RECORD", f"line number {number} is not UTF-8 text ({e.reason} at byte "
                                                   f"{e.start}); send binary data with a client") from None
            headers, key, value = reader.read(line, number)
            future = producer.send(topic, value=value, key=key, headers=headers or None)
            if sync:
                future.result()  # raises the record's error at once, as Kafka's --sync does
            else:
                future.add_done_callback(on_done)
            progress.step()
        producer.flush()
    if errors:
        raise KraftError(errors[0].error_code, f"{len(errors)} record(s) not delivered: {errors[0].message}")
