"""`kraft-node`: the node's command line (and the one place that picks the node's listeners).
Flags < config file < `--override key=value`.

With no flags it starts the embedded single node: node 1, controller and broker, serving
http://127.0.0.1:9092 with data in ./kraft-data. Configuration errors print the key at fault to
stderr and exit 2; SIGTERM/SIGINT shut down cleanly and exit 0. A node that cannot start or go on
(its data directory in use by another process, a listener taken, another cluster's data) exits 1.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import sys
from typing import TYPE_CHECKING, Any

import click

from kraft.api.version import version_option
from kraft.config import ConfigError, KraftConfig, describe_keys, load_config
from kraft.cluster_identity import InconsistentClusterIdError
from kraft.controller.errors import MetadataLogCorruptError
from kraft.dir_lock import DirectoryInUseError
from kraft.logging import setup_logging

if TYPE_CHECKING:
    from kraft.server.listener import Listener

log = logging.getLogger("kraft")

EXIT_CONFIG_ERROR = 2
EXIT_STARTUP_FAILED = 1


def _flags(**given: Any) -> dict[str, Any]:
    """CLI flags as config keys; flags not given stay out so the config file may set them."""
    names = {
        "node_id": "node.id", "role": "process.roles", "listen": "listeners",
        "controller_listen": "controller.listeners", "controller_quorum": "controller.quorum.voters",
        "data_dir": "log.dirs", "metadata_mode": "metadata.mode",
        "zookeeper_connect": "zookeeper.connect",
    }
    return {names[k]: v for k, v in given.items() if v is not None}


def listeners(config: KraftConfig) -> list[Listener]:
    """The node's listeners: the HTTP API on the client listener (`listeners`), which carries the
    Kafka protocol too unless kafka.enable=false, and the Kafka-only listeners (`kafka.listen`)."""
    from kraft.api.server import HttpListener
    from kraft.kafka.node_listeners import KafkaListeners

    host, port = config.listener
    kafka = KafkaListeners(config)
    return [HttpListener(host, port, kafka, config.listener_name or config.security_protocol, config.security_protocol),
            kafka]


async def _serve(config: KraftConfig, add_scram: tuple[str, ...] = ()) -> int:
    from kraft.node import Node, ScramBootstrap

    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        node = Node(config, [ScramBootstrap.parse(text) for text in add_scram], on_fatal=stop.set,
                    listeners=listeners(config))
    except ConfigError as e:
        log.error("configuration error: %s", e)
        return EXIT_CONFIG_ERROR
    except DirectoryInUseError as e:
        log.error("node %d cannot start: %s", config.node_id, e)
        return EXIT_STARTUP_FAILED
    try:
        await node.start()
    except MetadataLogCorruptError as e:
        log.critical("node %d cannot start: %s", config.node_id, e)
        await node.stop()
        return EXIT_STARTUP_FAILED
    except OSError as e:
        # a Raft listener's failure names its own address; the client listener's carries an errno
        log.error("node %d cannot listen: %s (listeners=%s); free the port or choose another",
                  config.node_id, e.strerror or e, config["listeners"])
        await node.stop()
        return EXIT_STARTUP_FAILED
    except InconsistentClusterIdError:  # ZooKeeper's /cluster/id is another cluster's: node.fail said so
        await node.stop()
        return EXIT_STARTUP_FAILED
    except Exception:
        log.exception("node %d failed to start", config.node_id)
        await node.stop()
        return EXIT_STARTUP_FAILED
    await stop.wait()  # a signal, or the node cannot go on (node.fatal_error)
    log.info("shutting down")
    await node.stop()
    log.info("stopped")
    return 0 if node.fatal_error is None else EXIT_STARTUP_FAILED


def _install_uvloop() -> None:
    try:
        import uvloop
    except ImportError:
        return
    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--node-id", type=int, help="This node's id (node.id). Default 1.")
@click.option("--role", help="controller, broker or controller,broker (process.roles).")
@click.option("--listen", help="Client HTTP listener HOST:PORT (listeners). Default 127.0.0.1:9092.")
@click.option("--controller-listen", help="Controller (Raft) listener HOST:PORT.")
@click.option("--controller-quorum", help="Controller voters ID@HOST:PORT,... .")
@click.option("--data-dir", help="Data directory (log.dirs). Default ./kraft-data.")
@click.option("--metadata-mode", help="kraft (default) or zookeeper.")
@click.option("--zookeeper-connect", help="ZooKeeper HOST:PORT for --metadata-mode zookeeper.")
@click.option("--config", "config_file", type=click.Path(dir_okay=False),
              help="A TOML or server.properties file.")
@click.option("--override", "overrides", multiple=True, metavar="KEY=VALUE",
              help="Set any config key; repeatable; wins over the file.")
@click.option("--add-scram", "add_scram", multiple=True, metavar="'SCRAM-SHA-256=[name=U,password=P]'",
              help="A first SCRAM credential, created once the cluster runs unless the user has one "
                   "(as kafka-storage format --add-scram); repeatable.")
@click.option("--help-config", is_flag=True, help="List every config key and exit.")
@version_option
def cli(config_file: str | None, overrides: tuple[str, ...], help_config: bool, add_scram: tuple[str, ...],
        **flags: Any) -> None:
    """Run a kraft node."""
    if help_config:
        click.echo(describe_keys())
        return
    try:
        config = load_config(_flags(**flags), config_file, overrides)
    except ConfigError as e:
        click.echo(f"kraft-node: configuration error: {e}", err=True)
        sys.exit(EXIT_CONFIG_ERROR)
    setup_logging(config.node_id)
    if config.ignored:
        log.warning("ignoring Kafka configuration keys that this broker does not use: %s", ", ".join(config.ignored))
    _install_uvloop()
    sys.exit(asyncio.run(_serve(config, add_scram)))


def _import_kio_without_hypothesis() -> None:
    """kio registers hypothesis strategies for its types whenever hypothesis can be imported (a test
    dependency, installed beside the node in a development environment): 0.1-0.2 s of every start
    spent importing a test library the node never uses. None in sys.modules makes that import
    raise ImportError, which kio expects; the entry is removed again at once."""
    if "hypothesis" in sys.modules or "kio.static._phantom" in sys.modules:
        return
    sys.modules["hypothesis"] = None  # type: ignore[assignment]
    try:
        import kio.static._phantom  # noqa: F401
    finally:
        del sys.modules["hypothesis"]


def main() -> None:
    _import_kio_without_hypothesis()
    cli()


if __name__ == "__main__":
    main()
