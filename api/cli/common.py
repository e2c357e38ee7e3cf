"""What every `kraft` tool shares: the error exit, `--bootstrap-server`, `--version`, KEY=VALUE
and `.properties` option parsing, Kafka's left-aligned tables, and progress on stderr."""

from __future__ import annotations

import functools
import math
import os
import sys
import time
from pathlib import Path
from typing import Any, Callable, Iterable

import click
from click.core import ParameterSource

from kraft.api.client import Admin, KraftError
from kraft.api.client.security import from_kafka_properties
from kraft.api.client.transport import parse_bootstrap
from kraft.api.version import version_option  # noqa: F401 - every tool's --version, imported from here

# Admin calls from the CLI give up sooner than a long-running client would (Kafka: 60 s).
CLI_API_TIMEOUT_MS = 15_000


def parse_broker_list(value: str) -> list[int]:
    """--broker-list's ids (1,2,3): distinct, not negative."""
    try:
        brokers = [int(b) for b in value.split(",") if b.strip()]
    except ValueError:
        raise click.BadParameter(f"expected broker ids like 1,2,3, got {value!r}", param_hint="--broker-list") from None
    if not brokers or len(set(brokers)) != len(brokers) or min(brokers) < 0:
        raise click.BadParameter(f"expected distinct broker ids, got {value!r}", param_hint="--broker-list")
    return brokers


def admin_client(bootstrap_server: str) -> Admin:
    """The admin client every tool uses (CLI_API_TIMEOUT_MS read at call time, so tests can shorten it),
    with the security settings of --command-config."""
    return Admin(bootstrap_server, api_timeout_ms=CLI_API_TIMEOUT_MS, **security_kwargs())


_SECURITY = "kraft.security"  # click context meta: the client keywords --command-config gave


def security_kwargs() -> dict[str, Any]:
    """The client security keywords of this command's --command-config ({} without one)."""
    ctx = click.get_current_context(silent=True)
    while ctx is not None:
        if _SECURITY in ctx.meta:
            return dict(ctx.meta[_SECURITY])
        ctx = ctx.parent
    return {}


def _read_command_config(ctx: click.Context, _param: click.Parameter, value: str | None) -> None:
    if value is None:
        return
    try:
        ctx.meta[_SECURITY] = from_kafka_properties(read_properties_file(value, "--command-config"))
    except KraftError as e:
        raise click.BadParameter(e.message, param_hint="--command-config") from None


command_config_option = click.option(
    "--command-config", type=click.Path(dir_okay=False), expose_value=False, callback=_read_command_config,
    help="A client .properties file with Kafka's security keys (security.protocol, sasl.mechanism, "
         "sasl.jaas.config, ssl.truststore.location, ...).")


class KraftErrorsMixin:
    """Turns KraftError into click's error exit: `Error: CODE: message`, status 1."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)  # type: ignore[misc]
        except KraftError as e:
            raise click.ClickException(str(e)) from e


class KraftGroup(KraftErrorsMixin, click.Group):
    pass


class KraftCommand(KraftErrorsMixin, click.Command):
    pass


def _check_bootstrap(_ctx: click.Context, _param: click.Parameter, value: str | None) -> str | None:
    if value is None:
        return None
    try:
        parse_bootstrap(value)
    except ValueError as e:
        raise click.BadParameter(str(e)) from e
    return value


DEFAULT_BOOTSTRAP = "127.0.0.1:9092"

_bootstrap_option = click.option(
    "--bootstrap-server",
    default=DEFAULT_BOOTSTRAP,
    show_default=True,
    envvar="KRAFT_BOOTSTRAP_SERVER",
    callback=_check_bootstrap,
    help="Comma-separated host:port of brokers to connect to.",
)



def bootstrap_option(f: Callable[..., Any]) -> Callable[..., Any]:
    """--bootstrap-server and --command-config (the connection's security settings)."""
    return command_config_option(_bootstrap_option(f))


BROKER_LIST_DEPRECATED = "Option --broker-list is deprecated, use --bootstrap-server instead."


def broker_list_option(f: Callable[..., Any]) -> Callable[..., Any]:
    """Kafka's deprecated `--broker-list`, on the tools that took it (kafka-console-producer,
    kafka-get-offsets): ignored when --bootstrap-server is given, as there; above the default and
    KRAFT_BOOTSTRAP_SERVER otherwise. Goes below @bootstrap_option."""

    @click.option("--broker-list", metavar="HOST:PORT,...", callback=_check_bootstrap,
                  help="DEPRECATED, use --bootstrap-server instead; ignored if --bootstrap-server is specified.")
    @functools.wraps(f)
    def command(*args: Any, broker_list: str | None, bootstrap_server: str, **kwargs: Any) -> Any:
        if broker_list is not None:
            click.echo(BROKER_LIST_DEPRECATED, err=True)
            given = click.get_current_context().get_parameter_source("bootstrap_server")
            if given is not ParameterSource.COMMANDLINE:
                bootstrap_server = broker_list
        return f(*args, bootstrap_server=bootstrap_server, **kwargs)

    return command


# On a group whose subcommands also take --bootstrap-server: either place works
# (`kraft metadata-quorum --bootstrap-server B describe` and `... describe --bootstrap-server B`).
_group_bootstrap_option = click.option(
    "--bootstrap-server",
    default=None,
    envvar="KRAFT_BOOTSTRAP_SERVER",
    callback=_check_bootstrap,
    help="Comma-separated host:port of brokers to connect to (here or after the subcommand).",
)


def group_bootstrap_option(f: Callable[..., Any]) -> Callable[..., Any]:
    return command_config_option(_group_bootstrap_option(f))


def subcommand_bootstrap_option(f: Callable[..., Any]) -> Callable[..., Any]:
    """--bootstrap-server on a subcommand, falling back to the one given to its group."""

    def resolve(ctx: click.Context, param: click.Parameter, value: str | None) -> str:
        value = _check_bootstrap(ctx, param, value)
        if value is not None:
            return value
        parent = ctx.parent.params.get("bootstrap_server") if ctx.parent else None
        return parent or DEFAULT_BOOTSTRAP

    return command_config_option(click.option(
        "--bootstrap-server", default=None, envvar="KRAFT_BOOTSTRAP_SERVER", callback=resolve,
        help=f"Comma-separated host:port of brokers to connect to [default: {DEFAULT_BOOTSTRAP}].")(f))


def parse_properties(values: Iterable[str], option: str) -> dict[str, str]:
    """KEY=VALUE pairs (Kafka's --property / --config syntax)."""
    out = {}
    for item in values:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise click.BadParameter(f"expected KEY=VALUE, got {item!r}", param_hint=option)
        out[key.strip()] = value
    return out


def parse_bool(value: str, name: str) -> bool:
    text = value.strip().lower()
    if text not in ("true", "false"):
        raise click.BadParameter(f"{name} must be true or false, got {value!r}", param_hint="--property")
    return text == "true"


def read_properties_file(path: str, option: str) -> dict[str, str]:
    """A client `.properties` file (--producer.config, --consumer.config, --command-config)."""
    from kraft.config import ConfigError, parse_properties as parse_properties_text

    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as e:
        raise click.BadParameter(f"cannot read {path}: {e.strerror}", param_hint=option) from None
    try:
        return parse_properties_text(text)
    except ConfigError as e:
        raise click.BadParameter(f"{path}: {e}", param_hint=option) from None


def format_table(headers: list[str], rows: list[list[Any]]) -> list[str]:
    """Left-aligned columns as kafka-consumer-groups prints them; None prints as "-"."""
    cells = [headers] + [["-" if v is None else str(v) for v in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    return [" ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in cells]


def ignore_errors(codes: set[str], call: Callable[[], Any]) -> Any:
    """`call()`, or None when it fails with one of `codes`."""
    try:
        return call()
    except KraftError as e:
        if e.error_code not in codes:
            raise
        return None


class Progress:
    """Progress of a long operation, on stderr so stdout stays what Kafka's tool prints: the
    first step and then a line at most every `interval_s`, when stderr is a terminal (or
    KRAFT_PROGRESS=1 asks for it)."""

    def __init__(self, what: str, total: int | None = None, interval_s: float = 1.0) -> None:
        self.what, self.total, self.interval_s = what, total, interval_s
        self.enabled = sys.stderr.isatty() or os.environ.get("KRAFT_PROGRESS") == "1"
        self.done = 0
        self._last = -math.inf

    def step(self, n: int = 1) -> None:
        self.done += n
        now = time.monotonic()
        if self.enabled and now - self._last >= self.interval_s:
            self._last = now
            of = f"/{self.total}" if self.total is not None else ""
            click.echo(f"{self.what}: {self.done}{of}", err=True)
