"""`kraft consumer-groups`: kafka-consumer-groups (list with states, describe, delete, reset
offsets with every Kafka strategy and --export, delete offsets)."""

from __future__ import annotations

import re
import time
from datetime import datetime
from typing import Any

import click

from kraft.api.cli.common import KraftCommand, Progress, admin_client, bootstrap_option, format_table, version_option
from kraft.api.client import Admin

# Kafka's ConsumerGroupState names, as --list --state accepts and prints them.
GROUP_STATES = ("PreparingRebalance", "CompletingRebalance", "Stable", "Dead", "Empty", "Assigning", "Reconciling")

DRY_RUN_WARNING = (
    "WARN: No action will be performed as the --execute option is missing. In a future major release, the default "
    "behavior of this command will be to prompt the user before executing the reset rather than doing a dry run. "
    "You should add the --dry-run option explicitly if you are scripting this command and want to keep the current "
    "default behavior without prompting."
)

# java.time.Duration.parse: PnDTnHnMn.nS (Kafka's --by-duration).
_DURATION = re.compile(r"([-+]?)P(?:([-+]?[0-9]+)D)?(?:T(?:([-+]?[0-9]+)H)?(?:([-+]?[0-9]+)M)?"
                       r"(?:([-+]?[0-9]+)(?:[.,]([0-9]{0,9}))?S)?)?", re.IGNORECASE)


def parse_duration_ms(value: str) -> int:
    """--by-duration: an ISO-8601 duration as Java parses it, e.g. PT15M, P1DT2H, PT0.5S."""
    m = _DURATION.fullmatch(value.strip())
    if not m or value.strip().upper().endswith("T") or not any(m.group(i) for i in (2, 3, 4, 5)):
        raise click.BadParameter(f"expected a duration like PT15M or P1DT2H, got {value!r}", param_hint="--by-duration")
    sign, days, hours, minutes, seconds, fraction = m.groups()
    ms = (int(days or 0) * 86_400_000 + int(hours or 0) * 3_600_000 + int(minutes or 0) * 60_000
          + int(seconds or 0) * 1000)
    if fraction:
        frac_ms = int((fraction + "000")[:3])
        ms += -frac_ms if (seconds or "").startswith("-") else frac_ms
    return -ms if sign == "-" else ms


def list_state_lines(groups: list[dict[str, Any]]) -> list[str]:
    """kafka-consumer-groups --list --state: GROUP padded to the longest name (at least 15) + 10,
    STATE padded to 20, as Kafka's printf formats them."""
    width = max([15, *(len(g["group_id"]) for g in groups)]) + 10
    return [f"{'GROUP':<{width}} {'STATE':<20}"] + [f"{g['group_id']:<{width}} {g['state']:<20}" for g in groups]


def parse_state_filter(value: str) -> set[str]:
    wanted = {s.strip() for s in value.split(",") if s.strip()}
    by_lower = {s.lower(): s for s in GROUP_STATES}
    unknown = [s for s in wanted if s.lower() not in by_lower]
    if unknown:
        raise click.BadParameter(f"Invalid state list '{value}'. Valid states are: {', '.join(GROUP_STATES)}",
                                 param_hint="--state")
    return {by_lower[s.lower()] for s in wanted}


def delete_offsets_lines(group: str, topics: list[str], results: list[dict[str, Any]]) -> list[str]:
    """kafka-consumer-groups --delete-offsets: a summary line, then TOPIC/PARTITION/STATUS rows
    in Kafka's fixed-width columns."""
    failed = [r for r in results if r.get("error_code")]
    if failed:
        head = "\nError: Encounter some partition level error, see the follow-up details:"
    else:
        head = f"Request succeed for deleting offsets with topic {', '.join(topics)} group {group}"
    lines = [head, "", f"{'TOPIC':<30} {'PARTITION':<15} {'STATUS':<15}"]
    for r in results:
        status = f"Error: {r.get('message') or r['error_code']}" if r.get("error_code") else "Successful"
        lines.append(f"{r['topic']:<30} {str(r['partition']):<15} {status:<15}")
    return lines


def export_csv(rows: list[list[Any]], with_group: bool) -> str:
    """--export: Kafka's CSV reset plan, `topic,partition,offset`, with the group first under
    --all-groups (Kafka drops it only when one --group is given)."""
    return "".join(",".join(map(str, row if with_group else row[1:])) + "\n" for row in rows)


def describe_offsets_rows(d: dict[str, Any]) -> list[list[Any]]:
    members = {m["member_id"]: m for m in d.get("members", ())}
    rows = []
    for o in d.get("offsets", ()):
        m = members.get(o.get("member_id") or "")
        rows.append([d["group_id"], o["topic"], o["partition"], o["current_offset"], o["log_end_offset"],
                     o["lag"], m and m["member_id"], m and m["host"], m and (m["client_id"] or None)])
    return rows


def _assignment_text(items: list[dict[str, Any]]) -> str:
    return ",".join(f"{a['topic']}({','.join(map(str, a['partitions']))})" for a in items) or "-"


def describe_group_lines(d: dict[str, Any], view: str, verbose: bool) -> list[str]:
    if view == "state":
        # Kafka's printStates: "host:port  (id)", and the first column as wide as that (at least 25).
        c = d.get("coordinator")
        coordinator = f"{c['host']}:{c['port']}  ({c['node_id']})" if c else "-"
        width = max(25, len(coordinator))
        return [f"{a:<{width}} {b:<25} {e:<20} {f:<15} {g}" for a, b, e, f, g in (
            ("GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"),
            (d["group_id"], coordinator, d["assignor"], d["state"], len(d["members"])))]
    if view == "members" and not verbose:
        # Kafka's printMembers: group, consumer id, host and client id at least 15 wide, #PARTITIONS 15.
        rows = [[d["group_id"], m["member_id"], m["host"], m["client_id"] or "-",
                 str(sum(len(a["partitions"]) for a in m["assignment"]))] for m in d["members"]]
        header = ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS"]
        widths = [max([15, *(len(r[i]) for r in rows)]) for i in range(4)] + [15]
        return [" ".join(f"{c:<{w}}" for c, w in zip(r, widths)) + " " for r in [header, *rows]]
    if view == "members":
        headers = ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS"]
        if verbose:
            headers[2:2] = ["EPOCH"]
            headers.append("ASSIGNMENT")
        rows = []
        for m in d["members"]:
            count = sum(len(a["partitions"]) for a in m["assignment"])
            row = [d["group_id"], m["member_id"], m["host"], m["client_id"] or None, count]
            if verbose:
                row[2:2] = [m["member_epoch"]]
                row.append(_assignment_text(m["assignment"]))
            rows.append(row)
        return format_table(headers, rows)
    return offsets_lines(describe_offsets_rows(d))


def offsets_lines(rows: list[list[Any]]) -> list[str]:
    """kafka-consumer-groups --describe --offsets in Kafka's printf columns: group, topic, consumer
    id and host at least 15 wide (wider for longer values), partition 10, offsets and lag 15."""
    cells = [["-" if v is None else str(v) for v in row] for row in rows]
    width = {i: max([15, *(len(r[i]) for r in cells)]) for i in (0, 1, 6, 7)}
    widths = [width[0], width[1], 10, 15, 15, 15, width[6], width[7]]
    header = ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST",
              "CLIENT-ID"]
    return [" ".join(f"{c:<{w}}" for c, w in zip(r, widths)) + " " + r[8] for r in [header, *cells]]


def reset_lines(rows: list[list[Any]]) -> list[str]:
    """The reset plan as kafka-consumer-groups prints it: %-30s %-30s %-10s %-15s."""
    return [f"{g:<30} {t:<30} {str(p):<10} {str(o):<15}" for g, t, p, o in [["GROUP", "TOPIC", "PARTITION",
                                                                             "NEW-OFFSET"], *rows]]


def parse_reset_topic(value: str) -> tuple[str, list[int] | None]:
    """Kafka's --topic for --reset-offsets: `topic` or `topic:0,1,2`."""
    topic, sep, parts = value.partition(":")
    if not sep:
        return topic, None
    try:
        return topic, [int(p) for p in parts.split(",") if p.strip()]
    except ValueError:
        raise click.BadParameter(f"expected topic or topic:0,1,... got {value!r}", param_hint="--topic") from None


def parse_datetime_ms(value: str) -> int:
    """--to-datetime: ISO 8601 (YYYY-MM-DDTHH:mm:SS.sss, optional zone; none means local time)."""
    try:
        return int(datetime.fromisoformat(value).timestamp() * 1000)
    except ValueError:
        raise click.BadParameter(f"expected YYYY-MM-DDTHH:mm:SS.sss, got {value!r}", param_hint="--to-datetime") from None


@click.command("consumer-groups", cls=KraftCommand)
@bootstrap_option
@version_option
@click.option("--list", "list_", is_flag=True, help="List all consumer groups.")
@click.option("--describe", is_flag=True, help="Describe a group: offsets and lag (default), --members or --state.")
@click.option("--delete", is_flag=True, help="Delete a group without active members.")
@click.option("--reset-offsets", is_flag=True, help="Reset the offsets of a group without active members.")
@click.option("--delete-offsets", is_flag=True, help="Delete the committed offsets of --topic for a group.")
@click.option("--group", help="The consumer group.")
@click.option("--all-groups", is_flag=True, help="Every group (describe, delete, reset-offsets).")
@click.option("--members", is_flag=True, help="With --describe: the members.")
@click.option("--verbose", is_flag=True, help="With --members: epochs and assignments too.")
@click.option("--state", is_flag=False, flag_value="", default=None, metavar="[STATES]",
              help="With --describe: coordinator, strategy, state and member count. With --list: each group's "
                   "state, optionally only groups in these comma-separated states.")
@click.option("--offsets", is_flag=True, help="With --describe: committed offsets and lag (the default).")
@click.option("--topic", "topics", multiple=True, help="With --reset-offsets: topic or topic:0,1; repeatable.")
@click.option("--all-topics", is_flag=True, help="With --reset-offsets: every topic the group has offsets for.")
@click.option("--to-earliest", is_flag=True, help="Reset to the log start offset.")
@click.option("--to-latest", is_flag=True, help="Reset to the log end offset.")
@click.option("--to-current", is_flag=True, help="Reset to the committed offsets (keeps them).")
@click.option("--to-offset", type=click.IntRange(min=0), help="Reset to this offset.")
@click.option("--to-datetime", help="Reset to the first offset at or after this time (YYYY-MM-DDTHH:mm:SS.sss).")
@click.option("--by-duration", help="Reset to the first offset at or after now minus this duration (PnDTnHnMnS).")
@click.option("--shift-by", type=int, help="Move the committed offsets by this many (negative: back).")
@click.option("--dry-run", is_flag=True, help="Show the new offsets without committing them (the default).")
@click.option("--execute", is_flag=True, help="Commit the new offsets.")
@click.option("--export", is_flag=True, help="With --reset-offsets: print the plan as CSV.")
def consumer_groups(
    bootstrap_server: str, list_: bool, describe: bool, delete: bool, reset_offsets: bool, delete_offsets: bool,
    group: str | None, all_groups: bool, members: bool, verbose: bool, state: str | None, offsets: bool,
    topics: tuple[str, ...], all_topics: bool, to_earliest: bool, to_latest: bool, to_current: bool,
    to_offset: int | None, to_datetime: str | None, by_duration: str | None, shift_by: int | None,
    dry_run: bool, execute: bool, export: bool,
) -> None:
    """List, describe, delete consumer groups, reset and delete their offsets (kafka-consumer-groups)."""
    actions = [n for n, on in (("list", list_), ("describe", describe), ("delete", delete),
                                ("reset-offsets", reset_offsets), ("delete-offsets", delete_offsets)) if on]
    if len(actions) != 1:
        raise click.UsageError("Command must include exactly one action: --list, --describe, --delete, "
                               "--reset-offsets, --delete-offsets")
    action = actions[0]
    if group and all_groups:
        raise click.UsageError("--group and --all-groups cannot be used together")
    if all_groups and action not in ("describe", "delete", "reset-offsets"):
        raise click.UsageError("--all-groups applies to --describe, --delete and --reset-offsets")
    if action != "list" and not group and not all_groups:
        raise click.UsageError(f"--{action} needs --group" + ("" if action == "delete-offsets" else " or --all-groups"))
    if state is not None and action not in ("list", "describe"):
        raise click.UsageError("--state applies to --list and --describe only")
    if state and action == "describe":
        raise click.UsageError("Option --describe does not take a value for --state")
    views = [n for n, on in (("members", members), ("state", state is not None and action == "describe"),
                             ("offsets", offsets)) if on]
    if len(views) > 1 or (views and action != "describe"):
        raise click.UsageError("--members, --state and --offsets are exclusive options of --describe")
    if verbose and not members:
        raise click.UsageError("--verbose applies to --describe --members only")
    strategies = [n for n, on in (("earliest", to_earliest), ("latest", to_latest), ("current", to_current),
                                  ("offset", to_offset is not None), ("datetime", to_datetime is not None),
                                  ("duration", by_duration is not None), ("shift", shift_by is not None)) if on]
    if action == "reset-offsets":
        if len(strategies) != 1:
            raise click.UsageError("--reset-offsets needs exactly one of --to-earliest, --to-latest, --to-current, "
                                   "--to-offset, --to-datetime, --by-duration, --shift-by")
        if dry_run and execute:
            raise click.UsageError("Option --reset-offsets only accepts one of --execute and --dry-run")
        if bool(topics) == all_topics:
            raise click.UsageError("--reset-offsets needs one of --topic and --all-topics")
    elif strategies or all_topics or dry_run or execute or export:
        raise click.UsageError("--all-topics, --to-*, --by-duration, --shift-by, --dry-run, --execute and --export "
                               "apply to --reset-offsets only")
    elif topics and action != "delete-offsets":
        raise click.UsageError("--topic applies to --reset-offsets and --delete-offsets only")
    if action == "delete-offsets" and not topics:
        raise click.UsageError("--delete-offsets needs --topic")
    if action == "reset-offsets" and not dry_run and not execute:
        click.echo(DRY_RUN_WARNING, err=True)  # Kafka's default is a dry run, with this warning

    with admin_client(bootstrap_server) as admin:
        if action == "list":
            listed, unreachable = admin.list_groups_with_errors()
            if state is None:
                for g in listed:
                    click.echo(g["group_id"])
            else:
                wanted = parse_state_filter(state) if state else None
                click.echo("\n".join(list_state_lines([g for g in listed if wanted is None or g["state"] in wanted])))
            for node_id, e in sorted(unreachable.items()):
                click.echo(f"Warning: broker {node_id} did not answer ({e.error_code}); its groups are missing",
                           err=True)
            return
        groups = [group] if group else [g["group_id"] for g in admin.list_groups()]
        if action == "describe":
            view = (views or ["offsets"])[0]
            for name in groups:
                d = admin.describe_group(name)
                if not d["members"]:  # on stderr, as Kafka prints it
                    click.echo(f"\nConsumer group '{name}' has no active members.", err=True)
                lines = describe_group_lines(d, view, verbose)
                if view == "state" or len(lines) > 1:  # Kafka prints no table without rows
                    click.echo("\n".join(["", *lines]))
        elif action == "delete":
            for name in groups:
                admin.delete_group(name)
            click.echo("Deletion of requested consumer groups (" + ", ".join(f"'{n}'" for n in groups)
                       + ") was successful.")
        elif action == "delete-offsets":
            assert group is not None
            specs = [parse_reset_topic(spec) for spec in topics]
            results = admin.delete_group_offsets(group, specs)
            lines = delete_offsets_lines(group, list(topics), results)
            click.echo("\n".join(lines))
            if any(r.get("error_code") for r in results):
                raise SystemExit(1)
        else:
            rows = _reset(admin, groups, topics, strategies[0], to_offset, shift_by, to_datetime, by_duration,
                          dry_run=not execute)
            if export:
                click.echo(export_csv(rows, with_group=all_groups))
            else:
                click.echo("\n".join(["", *reset_lines(rows)]))


def _reset(admin: Admin, groups: list[str], topics: tuple[str, ...], strategy: str, to_offset: int | None,
           shift_by: int | None, to_datetime: str | None, by_duration: str | None, dry_run: bool) -> list[list[Any]]:
    """The new offsets of every group, committed unless `dry_run`; rows of (group, topic, partition, offset)."""
    value: int | None = None
    if strategy == "offset":
        value = to_offset
    elif strategy == "shift":
        value = shift_by
    elif strategy == "current":  # the committed offsets, clamped to the log as every reset is
        strategy, value = "shift", 0
    elif strategy == "datetime":
        assert to_datetime is not None
        value = parse_datetime_ms(to_datetime)
    elif strategy == "duration":
        assert by_duration is not None
        strategy, value = "datetime", int(time.time() * 1000) - parse_duration_ms(by_duration)
    rows: list[list[Any]] = []
    progress = Progress("Reset groups", len(groups))
    for name in groups:
        specs = ([parse_reset_topic(spec) for spec in topics] if topics
                 else [(t, None) for t in sorted({tp.topic for tp in admin.list_group_offsets(name)})])
        for topic, partitions in specs:
            for o in admin.reset_group_offsets(name, [topic], strategy, value, partitions, dry_run=dry_run):
                rows.append([name, o["topic"], o["partition"], o["new_offset"]])
        progress.step()
    return rows
