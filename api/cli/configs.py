"""`kraft configs`: kafka-configs. Describe and alter (--add-config / --delete-config) topic
configs; brokers have no dynamic configs here (describe lists none, alter is refused); users take
SCRAM credentials and quotas, clients quotas (producer_byte_rate, consumer_byte_rate,
request_percentage; --entity-default for the default), one entity type at a time."""

from __future__ import annotations

import click

from kraft.api.cli.common import KraftCommand, Progress, admin_client, bootstrap_option, read_properties_file, version_option
from kraft.api.client import Admin, KraftError

ENTITY_TYPES = ("topics", "brokers", "users", "clients")
BROKER_DEFAULT = "<default>"

# A topic config's broker-level synonym (Kafka's DEFAULT_CONFIG / STATIC_BROKER_CONFIG source).
BROKER_SYNONYMS = {
    "cleanup.policy": "log.cleanup.policy",
    "compression.type": "compression.type",
    "delete.retention.ms": "log.cleaner.delete.retention.ms",
    "flush.messages": "log.flush.interval.messages",
    "flush.ms": "log.flush.interval.ms",
    "index.interval.bytes": "log.index.interval.bytes",
    "max.message.bytes": "message.max.bytes",
    "message.timestamp.type": "log.message.timestamp.type",
    "min.compaction.lag.ms": "log.cleaner.min.compaction.lag.ms",
    "min.insync.replicas": "min.insync.replicas",
    "retention.bytes": "log.retention.bytes",
    "retention.ms": "log.retention.ms",
    "segment.bytes": "log.segment.bytes",
    "segment.index.bytes": "log.index.size.max.bytes",
    "segment.ms": "log.roll.ms",
    "unclean.leader.election.enable": "unclean.leader.election.enable",
}


def parse_add_config(text: str) -> dict[str, str]:
    """Kafka's --add-config: `k1=v1,k2=[v1,v2],k3=v3` (square brackets keep commas in a value)."""
    parts, depth, current = [], 0, ""
    for ch in text:
        depth += {"[": 1, "]": -1}.get(ch, 0)
        if ch == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += ch
    parts.append(current)
    out: dict[str, str] = {}
    for part in parts:
        key, sep, value = part.partition("=")
        if not sep or not key.strip() or depth != 0:
            raise click.BadParameter(f"expected k1=v1,k2=[v1,v2],k3=v3, got {text!r}", param_hint="--add-config")
        value = value.strip()
        out[key.strip()] = value[1:-1] if value.startswith("[") and value.endswith("]") else value
    return out


def config_line(name: str, value: str, synonyms: list[tuple[str, str, str]]) -> str:
    """One entry as kafka-configs --describe prints it."""
    text = ", ".join(f"{source}:{key}={val}" for source, key, val in synonyms)
    return f"  {name}={value} sensitive=false synonyms={{{text}}}"


def topic_config_lines(name: str, overrides: dict[str, str], defaults: dict[str, str], describe_all: bool) -> list[str]:
    lines = [f"{'All' if describe_all else 'Dynamic'} configs for topic {name} are:"]
    keys = sorted(set(overrides) | set(defaults)) if describe_all else sorted(overrides)
    for key in keys:
        synonyms = []
        if key in overrides:
            synonyms.append(("DYNAMIC_TOPIC_CONFIG", key, overrides[key]))
        if key in defaults:
            synonyms.append(("DEFAULT_CONFIG", BROKER_SYNONYMS.get(key, key), defaults[key]))
        lines.append(config_line(key, overrides.get(key, defaults.get(key, "")), synonyms))
    return lines


SCRAM_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")


def _scram_settings(mechanism: str, text: str) -> tuple[str, int]:
    """`iterations=8192,password=alice-secret` -> (password, iterations)."""
    fields = dict(part.split("=", 1) for part in text.split(",") if "=" in part)
    if "password" not in fields:
        raise click.BadParameter(f"{mechanism}=[iterations=N,password=P] needs password", param_hint="--add-config")
    try:
        iterations = int(fields.get("iterations", 4096))
    except ValueError:
        raise click.BadParameter(f"{mechanism}: iterations must be a number", param_hint="--add-config") from None
    return fields["password"], iterations


def _users(admin: Admin, entity_name: str | None, describe: bool, to_add: dict[str, str],
           to_delete: list[str]) -> None:
    """SCRAM credentials and quotas of users (kafka-configs --entity-type users)."""
    if describe:
        if entity_name != BROKER_DEFAULT:
            users = admin.describe_user_scram_credentials([entity_name] if entity_name else None)
            for user, mechanisms in sorted(users.items()):
                listed = ", ".join(f"{m}=iterations={i}" for m, i in sorted(mechanisms.items()))
                click.echo(f"SCRAM credential configs for user-principal '{user}' are {listed}")
        _describe_quotas(admin, "users", entity_name)
        return
    other = sorted(k for k in [*to_add, *to_delete] if k not in SCRAM_MECHANISMS and k not in QUOTA_KEYS)
    if other:
        raise KraftError("INVALID_CONFIG", f"Invalid config(s): {', '.join(other)} (users take "
                                           f"{', '.join([*SCRAM_MECHANISMS, *QUOTA_KEYS])})")
    assert entity_name is not None
    scram_add = {m: v for m, v in to_add.items() if m in SCRAM_MECHANISMS}
    scram_delete = [m for m in to_delete if m in SCRAM_MECHANISMS]
    if scram_add or scram_delete:
        if entity_name == BROKER_DEFAULT:
            raise click.UsageError("SCRAM credentials are per user, not for --entity-default")
        upsertions = [(entity_name, m, *_scram_settings(m, v)) for m, v in scram_add.items()]
        admin.alter_user_scram_credentials(upsertions=upsertions, deletions=[(entity_name, m) for m in scram_delete])
    quotas = _quota_changes(to_add, to_delete)
    if quotas:
        admin.alter_client_quotas(entity_name, None, quotas)
    click.echo(f"Completed updating config for user {entity_name}.")


QUOTA_KEYS = ("producer_byte_rate", "consumer_byte_rate", "request_percentage")


def _quota_changes(to_add: dict[str, str], to_delete: list[str]) -> dict[str, float | None]:
    changes: dict[str, float | None] = {k: None for k in to_delete if k in QUOTA_KEYS}
    for key, value in to_add.items():
        if key in QUOTA_KEYS:
            try:
                changes[key] = float(value)
            except ValueError:
                raise KraftError("INVALID_CONFIG", f"{key} must be a number, got {value!r}") from None
    return changes


def _entity_text(user: str | None, client_id: str | None) -> str:
    """Kafka's ClientQuotaEntity wording in kafka-configs --describe."""
    parts = []
    if user is not None:
        parts.append("the default user-principal" if user == BROKER_DEFAULT else f"user-principal '{user}'")
    if client_id is not None:
        parts.append("the default client-id" if client_id == BROKER_DEFAULT else f"client-id '{client_id}'")
    return ", ".join(parts)


def _describe_quotas(admin: Admin, entity_type: str, entity_name: str | None) -> None:
    for entry in admin.describe_client_quotas():
        user, client_id = entry["user"], entry["client_id"]
        mine = (client_id is None and user is not None and entity_name in (None, user)) if entity_type == "users" \
            else (user is None and client_id is not None and entity_name in (None, client_id))
        if mine:
            listed = ", ".join(f"{k}={float(v)}" for k, v in sorted(entry["quotas"].items()))
            click.echo(f"Quota configs for {_entity_text(user, client_id)} are {listed}")


def _clients(admin: Admin, entity_name: str | None, describe: bool, to_add: dict[str, str],
             to_delete: list[str]) -> None:
    """Quotas of client ids (kafka-configs --entity-type clients)."""
    if describe:
        _describe_quotas(admin, "clients", entity_name)
        return
    other = sorted(k for k in [*to_add, *to_delete] if k not in QUOTA_KEYS)
    if other:
        raise KraftError("INVALID_CONFIG", f"Invalid config(s): {', '.join(other)} (clients take "
                                           f"{', '.join(QUOTA_KEYS)})")
    assert entity_name is not None
    admin.alter_client_quotas(None, entity_name, _quota_changes(to_add, to_delete))
    click.echo(f"Completed updating config for client {entity_name}.")


@click.command("configs", cls=KraftCommand)
@bootstrap_option
@version_option
@click.option("--describe", is_flag=True, help="List the configs of the entity.")
@click.option("--alter", is_flag=True, help="Change the configs of the entity.")
@click.option("--entity-type", type=click.Choice(ENTITY_TYPES), help="topics, brokers, users or clients.")
@click.option("--entity-name", help="The topic name, broker id, user or client id (all when omitted on describe).")
@click.option("--entity-default", is_flag=True, help="The cluster-wide default (brokers, users, clients).")
@click.option("--topic", help="Same as --entity-type topics --entity-name TOPIC.")
@click.option("--broker", help="Same as --entity-type brokers --entity-name BROKER.")
@click.option("--broker-defaults", is_flag=True, help="Same as --entity-type brokers --entity-default.")
@click.option("--user", help="Same as --entity-type users --entity-name USER.")
@click.option("--client", help="Same as --entity-type clients --entity-name CLIENT.")
@click.option("--add-config", help="Configs to set: k1=v1,k2=[v1,v2,v2],k3=v3.")
@click.option("--add-config-file", type=click.Path(dir_okay=False), help="A .properties file of configs to set.")
@click.option("--delete-config", help="Configs to remove: k1,k2.")
@click.option("--all", "describe_all", is_flag=True, help="With --describe: every config, not only overrides.")
def configs(
    bootstrap_server: str, describe: bool, alter: bool, entity_type: str | None, entity_name: str | None,
    entity_default: bool, topic: str | None, broker: str | None, broker_defaults: bool, user: str | None,
    client: str | None, add_config: str | None, add_config_file: str | None, delete_config: str | None,
    describe_all: bool,
) -> None:
    """Describe and alter configs of topics, brokers, users and clients (kafka-configs)."""
    if describe == alter:
        raise click.UsageError("Command must include exactly one action: --describe, --alter")
    shorthands = [(t, n) for t, n in (("topics", topic), ("brokers", broker), ("users", user), ("clients", client))
                  if n is not None]
    if broker_defaults:
        shorthands.append(("brokers", BROKER_DEFAULT))
    if shorthands and (entity_type or entity_name or entity_default):
        raise click.UsageError("--topic, --broker, --broker-defaults, --user and --client replace "
                               "--entity-type/--entity-name")
    if len(shorthands) > 1:
        raise click.UsageError("give one entity")
    if shorthands:
        entity_type, entity_name = shorthands[0]
    elif entity_default:
        if entity_name is not None:
            raise click.UsageError("--entity-name and --entity-default cannot be used together")
        entity_name = BROKER_DEFAULT
    if entity_type is None:
        raise click.UsageError("--entity-type is required (topics, brokers, users or clients)")
    if entity_type == "topics" and entity_name == BROKER_DEFAULT:
        raise click.UsageError("--entity-default applies to brokers, users and clients")
    if alter and entity_name is None:
        raise click.UsageError("--alter needs --entity-name or --entity-default")
    if alter and not (add_config or add_config_file or delete_config):
        raise click.UsageError("--alter needs --add-config, --add-config-file or --delete-config")
    if describe and (add_config or add_config_file or delete_config):
        raise click.UsageError("--add-config, --add-config-file and --delete-config apply to --alter only")
    if describe_all and not describe:
        raise click.UsageError("--all applies to --describe only")
    to_add = parse_add_config(add_config) if add_config else {}
    if add_config_file:
        to_add.update(read_properties_file(add_config_file, "--add-config-file"))
    to_delete = [k.strip() for k in (delete_config or "").split(",") if k.strip()]
    both = sorted(set(to_add) & set(to_delete))
    if both:
        raise click.UsageError(f"configs both added and deleted: {', '.join(both)}")

    with admin_client(bootstrap_server) as admin:
        if entity_type == "users":
            _users(admin, entity_name, describe, to_add, to_delete)
        elif entity_type == "clients":
            _clients(admin, entity_name, describe, to_add, to_delete)
        elif entity_type == "brokers":
            _brokers(admin, entity_name, describe, describe_all)
        elif describe:
            names = [entity_name] if entity_name else [t.name for t in admin.list_topics()]
            if entity_name and entity_name not in {t.name for t in admin.list_topics()}:
                click.echo(f"The topic '{entity_name}' doesn't exist and doesn't have dynamic config.")
                return
            progress = Progress("Described topics", len(names))
            for name in names:
                c = admin.describe_configs(name)
                progress.step()
                click.echo("\n".join(topic_config_lines(name, c.configs, c.defaults, describe_all)))
        else:
            assert entity_name is not None
            current = admin.describe_configs(entity_name).configs
            missing = [k for k in to_delete if k not in current]
            if missing:
                raise KraftError("INVALID_CONFIG", f"Invalid config(s): {','.join(missing)}")
            admin.alter_configs(entity_name, {**to_add, **{k: None for k in to_delete}})
            click.echo(f"Completed updating config for topic {entity_name}.")


def _brokers(admin: Admin, entity_name: str | None, describe: bool, describe_all: bool) -> None:
    """Brokers take their configuration from their config file at start; none is dynamic."""
    ids = [str(b.node_id) for b in admin.describe_cluster().brokers]
    if entity_name is not None and entity_name != BROKER_DEFAULT and entity_name not in ids:
        if describe:
            click.echo(f"The broker '{entity_name}' doesn't exist and doesn't have dynamic config.")
            return
        raise KraftError("INVALID_REQUEST", f"broker {entity_name} does not exist")
    if not describe:
        raise KraftError("INVALID_REQUEST", "dynamic broker configs are not supported: set the key in each node's "
                                            "config file (kraft-node --config) and restart the node")
    for name in [entity_name] if entity_name else [*ids, BROKER_DEFAULT]:
        if name == BROKER_DEFAULT:
            click.echo("Default configs for brokers in the cluster are:")
        else:
            click.echo(f"{'All' if describe_all else 'Dynamic'} configs for broker {name} are:")
