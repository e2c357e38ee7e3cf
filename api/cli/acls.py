"""`kraft acls`: kafka-acls. `--add`, `--remove` and `--list` ACL bindings on topics, groups, the
cluster and transactional ids, with Kafka's flags (--allow-principal, --deny-principal,
--allow-host, --deny-host, --operation, --resource-pattern-type, --producer, --consumer,
--idempotent, --principal, --force) and printed as Kafka's AclCommand prints them (its
ResourcePattern and AccessControlEntry forms), in a stable order where Kafka's follows a hash set.
"""

from __future__ import annotations

from typing import Any, Iterable

import click

from kraft.api.cli.common import KraftCommand, admin_client, bootstrap_option, version_option
from kraft.metadata.acl import (
    CLUSTER, CLUSTER_NAME, GROUP, RESOURCE_TYPES, SUPPORTED_OPERATIONS, TOPIC, TRANSACTIONAL_ID, parse_operation,
)

PATTERN_CHOICES = ("literal", "prefixed", "any", "match")
Resource = tuple[str, str, str]  # (resource type, name, pattern type)
Entry = tuple[str, str, str, str]  # (principal, host, operation, permission type)


def resource_text(resource: Resource) -> str:
    rtype, name, pattern = resource
    return f"ResourcePattern(resourceType={rtype}, name={name}, patternType={pattern})"


def entry_text(entry: Entry) -> str:
    principal, host, operation, permission = entry
    return f"(principal={principal}, host={host}, operation={operation}, permissionType={permission})"


def binding_text(resource: Resource, entry: Entry) -> str:
    return f"(pattern={resource_text(resource)}, entry={entry_text(entry)})"


def _order(resource: Resource) -> tuple[int, str, str]:
    return RESOURCE_TYPES.index(resource[0]), resource[1], resource[2]


def resource_lines(heading: str, resource: Resource, entries: Iterable[Entry]) -> list[str]:
    """Kafka's block: the heading line, one tab-indented entry per line, then an empty line."""
    return [f"{heading} `{resource_text(resource)}`:", *(f"\t{entry_text(e)}" for e in sorted(entries)), ""]


def _as_binding(resource: Resource, entry: Entry) -> dict[str, str]:
    return {"resource_type": resource[0], "resource_name": resource[1], "pattern_type": resource[2],
            "principal": entry[0], "host": entry[1], "operation": entry[2], "permission_type": entry[3]}


def _grouped(bindings: Iterable[dict[str, Any]]) -> dict[Resource, set[Entry]]:
    out: dict[Resource, set[Entry]] = {}
    for b in bindings:
        resource = (b["resource_type"], b["resource_name"], b["pattern_type"])
        out.setdefault(resource, set()).add((b["principal"], b["host"], b["operation"], b["permission_type"]))
    return out


def _entries(principals: Iterable[str], hosts: Iterable[str], operations: Iterable[str], permission: str) -> set[Entry]:
    return {(p, h, op, permission) for p in principals for h in hosts for op in operations}


@click.command("acls", cls=KraftCommand)
@bootstrap_option
@version_option
@click.option("--add", is_flag=True, help="Indicates you are trying to add ACLs.")
@click.option("--remove", is_flag=True, help="Indicates you are trying to remove ACLs.")
@click.option("--list", "list_", is_flag=True, help="List ACLs for the specified resource.")
@click.option("--topic", "topics", multiple=True, help="Topic to which ACLs should be added or removed ('*': all).")
@click.option("--group", "groups", multiple=True, help="Consumer group to which ACLs apply ('*': all).")
@click.option("--cluster", is_flag=True, help="Add/Remove cluster ACLs.")
@click.option("--transactional-id", "transactional_ids", multiple=True, help="Transactional id ('*': all).")
@click.option("--resource-pattern-type", "pattern_type", type=click.Choice(PATTERN_CHOICES, case_sensitive=False),
              default="literal", show_default=True,
              help="literal or prefixed to add; any or match also when listing or removing.")
@click.option("--allow-principal", "allow_principals", multiple=True, help="principalType:name, e.g. User:alice.")
@click.option("--deny-principal", "deny_principals", multiple=True, help="principalType:name to deny.")
@click.option("--allow-host", "allow_hosts", multiple=True, help="Host of --allow-principal (default *).")
@click.option("--deny-host", "deny_hosts", multiple=True, help="Host of --deny-principal (default *).")
@click.option("--operation", "operations", multiple=True, help="Operation allowed or denied (default All).")
@click.option("--principal", "list_principals", multiple=True, help="With --list: the ACLs of this principal.")
@click.option("--producer", is_flag=True, help="Write, Describe and Create on the topics.")
@click.option("--consumer", is_flag=True, help="Read and Describe on the topics, Read on the group.")
@click.option("--idempotent", is_flag=True, help="With --producer: IdempotentWrite on the cluster.")
@click.option("--force", is_flag=True, help="Assume Yes to all queries and do not prompt.")
def acls(
    bootstrap_server: str, add: bool, remove: bool, list_: bool, topics: tuple[str, ...], groups: tuple[str, ...],
    cluster: bool, transactional_ids: tuple[str, ...], pattern_type: str, allow_principals: tuple[str, ...],
    deny_principals: tuple[str, ...], allow_hosts: tuple[str, ...], deny_hosts: tuple[str, ...],
    operations: tuple[str, ...], list_principals: tuple[str, ...], producer: bool, consumer: bool,
    idempotent: bool, force: bool,
) -> None:
    """Add, remove and list ACLs (kafka-acls)."""
    if add + remove + list_ != 1:
        raise click.UsageError("Command must include exactly one action: --list, --add, --remove. ")
    if list_ and (producer or consumer or allow_hosts or allow_principals or deny_hosts or deny_principals):
        raise click.UsageError("Option \"[list]\" can't be used with option \"[producer, consumer, allow-host, "
                               "allow-principal, deny-host, deny-principal]\"")
    if (producer or consumer) and (operations or deny_principals or deny_hosts):
        raise click.UsageError("--producer and --consumer take no --operation, --deny-principal or --deny-host")
    if list_principals and not list_:
        raise click.UsageError("The --principal option is only available if --list is set")
    if producer and not topics:
        raise click.UsageError("With --producer you must specify a --topic")
    if idempotent and not producer:
        raise click.UsageError("The --idempotent option is only available if --producer is set")
    if consumer and (not topics or not groups or (not producer and (cluster or transactional_ids))):
        raise click.UsageError("With --consumer you must specify a --topic and a --group and no --cluster or "
                               "--transactional-id option should be specified.")
    pattern = pattern_type.upper()
    if add and pattern not in ("LITERAL", "PREFIXED"):
        raise click.UsageError(f"A '--resource-pattern-type' value of '{pattern}' is not valid when adding acls.")
    for principal in (*allow_principals, *deny_principals, *list_principals):
        if ":" not in principal.strip() or not all(principal.strip().split(":", 1)):
            raise click.UsageError(f"{principal!r} is not a valid principal: expected principalType:name")

    resources: list[Resource] = [(TOPIC, t.strip(), pattern) for t in topics]
    if pattern == "LITERAL" and (cluster or idempotent):
        resources.append((CLUSTER, CLUSTER_NAME, pattern))
    resources += [(GROUP, g.strip(), pattern) for g in groups]
    resources += [(TRANSACTIONAL_ID, t, pattern) for t in transactional_ids]
    resources = sorted(set(resources), key=_order)
    if not resources and not list_:
        raise click.UsageError("You must provide at least one resource: --topic <topic> or --cluster or "
                               "--group <group> or --delegation-token <Delegation Token ID>")

    allow_p = [p.strip() for p in allow_principals]
    deny_p = [p.strip() for p in deny_principals]
    allow_h = [h.strip() for h in allow_hosts] or (["*"] if allow_p else [])
    deny_h = [h.strip() for h in deny_hosts] or (["*"] if deny_p else [])

    def acl_set(ops: Iterable[str]) -> set[Entry]:
        return _entries(allow_p, allow_h, ops, "ALLOW") | _entries(deny_p, deny_h, ops, "DENY")

    to_acls: dict[Resource, set[Entry]] = {}
    if producer or consumer:
        for r in resources:
            ops: set[str] = set()
            if producer and r[0] == TOPIC:
                ops |= {"WRITE", "DESCRIBE", "CREATE"}
            if producer and r[0] == TRANSACTIONAL_ID:
                ops |= {"WRITE", "DESCRIBE"}
            if producer and r[0] == CLUSTER and idempotent:
                ops |= {"IDEMPOTENT_WRITE"}
            if consumer and r[0] == TOPIC:
                ops |= {"READ", "DESCRIBE"}
            if consumer and r[0] == GROUP:
                ops |= {"READ"}
            if ops:
                to_acls[r] = acl_set(ops)
    else:
        try:
            ops_wanted = {parse_operation(op) for op in (operations or ("All",))}
        except ValueError as e:
            raise click.UsageError(str(e)) from None
        for r in resources:
            unsupported = ops_wanted - {"ALL", *SUPPORTED_OPERATIONS[r[0]]}
            if unsupported:
                valid = ", ".join(["ALL", *SUPPORTED_OPERATIONS[r[0]]])
                raise click.UsageError(f"ResourceType {r[0]} only supports operations {valid}")
            to_acls[r] = acl_set(ops_wanted)

    with admin_client(bootstrap_server) as admin:
        if add:
            _add(admin, to_acls)
        elif remove:
            _remove(admin, to_acls, force)
        else:
            _list(admin, resources, [p.strip() for p in list_principals])


def _add(admin: Any, to_acls: dict[Resource, set[Entry]]) -> None:
    for resource, entries in to_acls.items():
        if not entries:
            raise click.UsageError("You must specify one of: --allow-principal, --deny-principal when trying to "
                                   "add ACLs.")
    for resource, entries in to_acls.items():
        existing = _grouped(admin.describe_acls(resource_type=resource[0], resource_name=resource[1],
                                                pattern_type=resource[2])).get(resource, set())
        new = sorted(entries - existing)
        for entry in sorted(entries & existing):
            click.echo(f"Acl {binding_text(resource, entry)} already exists.")
        if new:
            click.echo(f"Adding ACLs for resource `{resource_text(resource)}`: \n "
                       + "\n".join(f"\t{entry_text(e)}" for e in new) + "\n")
            admin.create_acls([_as_binding(resource, e) for e in new])


def _remove(admin: Any, to_acls: dict[Resource, set[Entry]], force: bool) -> None:
    for resource, entries in to_acls.items():
        if entries:
            question = ("Are you sure you want to remove ACLs: \n "
                        + "\n".join(f"\t{entry_text(e)}" for e in sorted(entries))
                        + f"\n from resource filter `{resource_text(resource)}`? (y/n)")
        else:
            question = f"Are you sure you want to delete all ACLs for resource filter `{resource_text(resource)}`? (y/n)"
        if not force:
            click.echo(question)
            if click.get_text_stream("stdin").readline().strip().lower() != "y":
                continue
        base = {"resource_type": resource[0], "resource_name": resource[1], "pattern_type": resource[2]}
        filters = [{**base, "principal": e[0], "host": e[1], "operation": e[2], "permission_type": e[3]}
                   for e in sorted(entries)] or [base]
        admin.delete_acls(filters)


def _list(admin: Any, resources: list[Resource], principals: list[str]) -> None:
    if resources:
        bindings = [b for r in resources
                    for b in admin.describe_acls(resource_type=r[0], resource_name=r[1], pattern_type=r[2])]
    else:
        bindings = admin.describe_acls()
    grouped = _grouped(bindings)
    if not principals:
        for resource in sorted(grouped, key=_order):
            click.echo("\n".join(resource_lines("Current ACLs for resource", resource, grouped[resource])))
        return
    for principal in principals:
        click.echo(f"ACLs for principal `{principal}`")
        for resource in sorted(grouped, key=_order):
            mine = {e for e in grouped[resource] if e[0] == principal}
            if mine:
                click.echo("\n".join(resource_lines("Current ACLs for resource", resource, mine)))
