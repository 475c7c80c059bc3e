"""``relaymq admin``: shared plumbing, options, and the commands that change topics, groups
and a container's brokers.

Rules:
- Flags are kebab-case and named after mqadmin's options, the same in every admin command:
  ``-n/--namesrv``, ``-c/--cluster``, ``-t/--topic``, ``-g/--group``, ``-b/--broker`` (a
  broker name), ``--broker-id``, ``--json``, ``--timeout-ms``.  In admin commands ``-c`` is
  the cluster, as in mqadmin; ``relaymq container|namesrv|controller -c`` is a config file,
  so an admin ``-c`` that looks like a file is refused with a line saying so.
- Every argument is validated here, before anything is sent: names by RocketMQ's rules
  (``[%|a-zA-Z0-9_-]``, topics up to 127 characters, groups 255), numbers by their range.
  A bad argument exits 2 (argparse).
- Changes to topics and groups resolve the cluster's masters (id 0) through the nameserver
  and call each hosting container's admin endpoint with the broker's name.  A master that
  does not answer does not stop the others: the change is applied where it can be, the
  ones that failed are named, and the exit code is 1.
- Output is an aligned table for people, or one JSON document with ``--json``.
- An unreachable nameserver or container, or a refusal, is one line on stderr and exit 1;
  never a traceback.
- Credentials (``relaymq admin --access-key K --secret-key S``, else ``RELAYMQ_ACCESS_KEY``
  and ``RELAYMQ_SECRET_KEY``) sign every call to a container's admin endpoint
  (:func:`set_caller_credentials`); a container with ``authorizationEnabled`` refuses calls
  without them.  Nameserver queries are not signed (the nameserver authenticates nobody).
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
from pathlib import Path
from typing import Any, Callable

from container.cli import CliError, add_command
from metadata.config import ConfigError
from metadata.names import GROUP_MAX_LENGTH, TOPIC_MAX_LENGTH, is_valid_group_name, is_valid_topic_name
from proto import admin_pb2 as apb
from services.admin.client import (CALLER_CREDENTIALS, AdminClient, AdminError, AdminRejected, AdminUnavailable,
                                   Credentials)
from services.cluster_auth import SECRET_FILE_ENV, ClusterCredential, install, installed, read_secret_file
from services.nameserver.client import ClusterMember, NameserverClient, NameserverError, NameserverUnavailable

DEFAULT_NAMESRV = "127.0.0.1:9876"
DEFAULT_CLUSTER = "DefaultCluster"
TOPIC_TYPES = ("NORMAL", "FIFO", "DELAY", "TRANSACTION", "MIXED")
MAX_BROKER_ID = 2**31 - 1
_HOST_PORT = re.compile(r"^[A-Za-z0-9_.:\[\]-]+:\d{1,5}$")


# ---------------------------------------------------------------- plumbing

def set_caller_credentials(args: Any) -> None:
    """Sign this process's admin calls with the flags' or the environment's credentials."""
    access_key = args.access_key if args.access_key is not None else os.environ.get("RELAYMQ_ACCESS_KEY", "")
    secret_key = args.secret_key if args.secret_key is not None else os.environ.get("RELAYMQ_SECRET_KEY", "")
    if bool(access_key) != bool(secret_key):
        missing = "--secret-key (or RELAYMQ_SECRET_KEY)" if access_key else "--access-key (or RELAYMQ_ACCESS_KEY)"
        raise CliError(f"admin credentials need both keys: {missing} is missing", 2)
    if access_key:
        CALLER_CREDENTIALS.set(Credentials(access_key, secret_key))
    secret_file = getattr(args, "cluster_secret_file", None) or os.environ.get(SECRET_FILE_ENV, "")
    if secret_file:
        try:
            secret = read_secret_file(Path(secret_file), "--cluster-secret-file", "clusterAuthenticationSecretFile")
        except ConfigError as exc:
            raise CliError(str(exc), 2) from None
        install(ClusterCredential(secret))


def _run(coroutine: Any) -> Any:
    try:
        return asyncio.run(coroutine)
    except NameserverUnavailable as exc:
        raise CliError(f"cannot reach {exc}", 1) from None
    except NameserverError as exc:
        raise CliError(f"nameserver refused: {refusal_text(exc)}", 1) from None
    except AdminUnavailable as exc:
        raise CliError(str(exc), 1) from None
    except AdminError as exc:
        raise CliError(f"admin refused: {refusal_text(exc)}", 1) from None


def refusal_text(exc: Exception) -> str:
    """A refusal's details, with a hint when it is for want of credentials the caller did not give."""
    if "cluster authentication failed" in str(exc) and installed() is None:
        return (f"{exc} (the cluster checks its secret: give relaymq admin --cluster-secret-file FILE, "
                f"or {SECRET_FILE_ENV})")
    if isinstance(exc, AdminRejected) and exc.code.name == "UNAUTHENTICATED" and CALLER_CREDENTIALS.get() is None:
        return (f"{exc} (the container has authorization on: sign with relaymq admin --access-key K --secret-key S, "
                "or RELAYMQ_ACCESS_KEY and RELAYMQ_SECRET_KEY)")
    return str(exc)


def _nameserver(args: Any) -> NameserverClient:
    return NameserverClient(args.namesrv, timeout_ms=args.timeout_ms)


def namesrv_text(args: Any) -> str:
    return ";".join(args.namesrv)


def table(headers: list[str], rows: list[list[Any]]) -> str:
    cells = [headers] + [[str(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in cells)


def _emit(args: Any, document: Any, render: Callable[[Any], str], code: int = 0) -> int:
    print(json.dumps(document, indent=2, sort_keys=True) if args.json else render(document))
    return code


async def _members(args: Any, cluster: str | None = None) -> list[ClusterMember]:
    client = _nameserver(args)
    try:
        members = list(await client.cluster_info())
    finally:
        await client.close()
    return [m for m in members if cluster is None or m.cluster == cluster]


async def _masters(args: Any) -> list[ClusterMember]:
    members = await _members(args, args.cluster)
    masters = [m for m in members if m.broker_id == 0 and (not args.broker or m.broker_name == args.broker)]
    if not masters:
        which = f"broker {args.broker} in cluster {args.cluster}" if args.broker else f"cluster {args.cluster}"
        raise CliError(f"{which} has no master registered at nameserver {namesrv_text(args)}", 1)
    return masters


async def _admin_call(address: str, method: str, request: Any, timeout_ms: int) -> Any:
    client = AdminClient(address, timeout_ms)
    try:
        return await client.call(method, request)
    finally:
        await client.close()


async def _on_masters(args: Any, method: str, make_request: Callable[[str], Any]) -> tuple[list[str], list[str]]:
    """(brokers that applied the change, "name: why" for masters that did not answer)."""
    masters = await _masters(args)

    async def one(master: ClusterMember) -> list[str] | str:
        try:
            reply = await _admin_call(master.address, method, make_request(master.broker_name), args.timeout_ms)
        except AdminUnavailable as exc:
            return f"{master.broker_name}: {exc}"
        return list(reply.broker_names)
    done, failed = [], []
    for result in await asyncio.gather(*(one(m) for m in masters)):
        (failed.append if isinstance(result, str) else done.extend)(result)
    return done, failed


def _changed(args: Any, document: dict, what: str, failed: list[str]) -> int:
    document = dict(document, failed=failed)
    text = f"{what} on {', '.join(document['brokers']) or 'no broker'}" + "".join(f"\nNOT applied: {f}" for f in failed)
    return _emit(args, document, lambda d: text, 1 if failed else 0)


# ---------------------------------------------------------------- argument types (the edge)

def _name(kind: str, valid: Callable[[str], bool], longest: int) -> Callable[[str], str]:
    def parse(text: str) -> str:
        if not valid(text):
            raise argparse.ArgumentTypeError(f"{text!r} is not a {kind} name: [%|a-zA-Z0-9_-], 1 to {longest} characters")
        return text
    parse.__name__ = f"{kind} name"
    return parse


topic_name = _name("topic", is_valid_topic_name, TOPIC_MAX_LENGTH)
group_name = _name("group", is_valid_group_name, GROUP_MAX_LENGTH)
broker_name = _name("broker", is_valid_topic_name, TOPIC_MAX_LENGTH)


def cluster_name(text: str) -> str:
    if text.endswith((".toml", ".properties", ".conf")) or "/" in text:
        raise argparse.ArgumentTypeError(f"{text!r} looks like a file: in admin commands -c is --cluster, a cluster name "
                                          f"(as in mqadmin); config files go to relaymq container|namesrv|controller -c FILE")
    return _name("cluster", is_valid_topic_name, TOPIC_MAX_LENGTH)(text)


def non_negative(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{value} must not be negative")
    return value


def in_range(low: int, high: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        value = non_negative(text) if low >= 0 else int(text)
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{value} must be between {low} and {high}")
        return value
    parse.__name__ = "integer"
    return parse


def host_port(text: str) -> str:
    if not _HOST_PORT.match(text) or not 0 < int(text.rsplit(":", 1)[1]) <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not HOST:PORT with a port in 1..65535")
    return text


def host_ports(text: str) -> list[str]:
    addresses = [a.strip() for a in text.replace(",", ";").split(";") if a.strip()]
    if not addresses:
        raise argparse.ArgumentTypeError("no address given")
    return [host_port(a) for a in addresses]


# ---------------------------------------------------------------- options shared by every admin command

def _common(parser: Any) -> None:
    parser.add_argument("-n", "--namesrv", type=host_ports, default=[DEFAULT_NAMESRV], metavar="HOST:PORT",
                        help=f"nameserver address(es), ';'-separated (default {DEFAULT_NAMESRV})")
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    parser.add_argument("--timeout-ms", type=in_range(1, 600_000), default=10_000, help="per-call deadline in ms (default 10000)")


def cluster_option(parser: Any, default: str | None = DEFAULT_CLUSTER, help_text: str | None = None) -> None:
    parser.add_argument("-c", "--cluster", type=cluster_name, default=default,
                        help=help_text or f"cluster name (default {default})")


def broker_option(parser: Any, required: bool = False, help_text: str = "broker name") -> None:
    # --broker-name: the controller commands' old spelling, accepted everywhere, not shown in help
    parser.add_argument("-b", "--broker", "--broker-name", type=broker_name, required=required, help=help_text)


def broker_id_option(parser: Any, required: bool = False, default: int | None = 0) -> None:
    parser.add_argument("--broker-id", type=in_range(0, MAX_BROKER_ID), required=required,
                        default=None if required else default, help="broker id (0: the master)")


def name_option(parser: Any, short: str, long: str, required: bool = False, help_text: str | None = None) -> None:
    kind = {"--topic": topic_name, "--group": group_name}[long]
    parser.add_argument(short, long, type=kind, required=required, help=help_text)


def _add(admin: Any, name: str, handler: Callable[[Any], int], help_text: str, aliases: tuple[str, ...] = (),
         hidden_aliases: tuple[str, ...] = ()) -> Any:
    parser = add_command(admin, name, help_text, aliases, hidden_aliases)
    _common(parser)
    parser.set_defaults(handler=handler)
    return parser


# ---------------------------------------------------------------- topics and groups

def update_topic(args: Any) -> int:
    topic = apb.AdminTopic(topic=args.topic, read_queue_nums=args.queues, write_queue_nums=args.queues,
                           perm=args.perm, message_type=args.type)
    done, failed = _run(_on_masters(args, "CreateOrUpdateTopic",
                                    lambda name: apb.AdminCreateOrUpdateTopicRequest(broker_name=name, topic=topic)))
    document = {"topic": args.topic, "type": args.type, "queues": args.queues, "perm": args.perm, "brokers": done}
    return _changed(args, document, f"topic {args.topic} ({args.type}, {args.queues} queues) updated", failed)


def delete_topic(args: Any) -> int:
    done, failed = _run(_on_masters(args, "DeleteTopic",
                                    lambda name: apb.AdminDeleteTopicRequest(broker_name=name, topic=args.topic)))
    return _changed(args, {"topic": args.topic, "brokers": done}, f"topic {args.topic} deleted", failed)


def update_group(args: Any) -> int:
    group = apb.AdminGroup(group=args.group, consume_message_orderly=args.fifo)
    if args.max_attempts is not None:
        group.retry_max_times = args.max_attempts - 1
    done, failed = _run(_on_masters(args, "CreateOrUpdateGroup",
                                    lambda name: apb.AdminCreateOrUpdateGroupRequest(broker_name=name, group=group)))
    document = {"group": args.group, "fifo": args.fifo, "maxAttempts": args.max_attempts, "brokers": done}
    return _changed(args, document, f"group {args.group} updated", failed)


def delete_group(args: Any) -> int:
    done, failed = _run(_on_masters(args, "DeleteGroup",
                                    lambda name: apb.AdminDeleteGroupRequest(broker_name=name, group=args.group)))
    return _changed(args, {"group": args.group, "brokers": done}, f"group {args.group} deleted", failed)


# ---------------------------------------------------------------- brokers in a container

def add_broker(args: Any) -> int:
    reply = _run(_admin_call(args.container, "AddBroker", apb.AdminAddBrokerRequest(config_path=args.config_path), args.timeout_ms))
    return _emit(args, {"container": args.container, "canonicalName": reply.canonical_name},
                 lambda d: f"added broker {d['canonicalName']} to container {d['container']}")


def remove_broker(args: Any) -> int:
    request = apb.AdminRemoveBrokerRequest(cluster=args.cluster, broker_name=args.broker, broker_id=args.broker_id)
    _run(_admin_call(args.container, "RemoveBroker", request, args.timeout_ms))
    return _emit(args, {"container": args.container, "cluster": args.cluster, "brokerName": args.broker, "brokerId": args.broker_id},
                 lambda d: f"removed broker {d['cluster']}:{d['brokerName']}:{d['brokerId']} from container {d['container']}")


# ---------------------------------------------------------------- registration

def register(subparsers: Any, admin_subparsers: Any) -> None:
    a = admin_subparsers
    p = _add(a, "update-topic", update_topic, "create or update a topic on the cluster's masters", hidden_aliases=("updateTopic",))
    cluster_option(p)
    name_option(p, "-t", "--topic", required=True)
    p.add_argument("--type", default="NORMAL", choices=TOPIC_TYPES, help="message type (default NORMAL)")
    p.add_argument("--queues", type=in_range(1, 1024), default=8, help="read and write queue numbers, 1 to 1024 (default 8)")
    p.add_argument("--perm", type=int, default=6, choices=(2, 4, 6), help="2 write, 4 read, 6 read+write (default 6)")
    broker_option(p, help_text="only this broker group")
    p = _add(a, "delete-topic", delete_topic, "delete a topic from the cluster's masters", hidden_aliases=("deleteTopic",))
    cluster_option(p)
    name_option(p, "-t", "--topic", required=True)
    broker_option(p, help_text="only this broker group")
    p = _add(a, "update-group", update_group, "create or update a consumer group on the cluster's masters",
             hidden_aliases=("updateSubGroup",))
    cluster_option(p)
    name_option(p, "-g", "--group", required=True)
    p.add_argument("--fifo", action="store_true", help="deliver in order (consumeMessageOrderly); FIFO topics need it")
    p.add_argument("--max-attempts", type=in_range(1, 65), help="delivery attempts before the DLQ, 1 to 65 (retryMaxTimes + 1)")
    broker_option(p, help_text="only this broker group")
    p = _add(a, "delete-group", delete_group, "delete a consumer group from the cluster's masters",
             hidden_aliases=("deleteSubGroup",))
    cluster_option(p)
    name_option(p, "-g", "--group", required=True)
    broker_option(p, help_text="only this broker group")
    p = _add(a, "add-broker", add_broker, "add a broker to a running container", hidden_aliases=("addBroker",))
    p.add_argument("--container", type=host_port, required=True, metavar="HOST:PORT", help="the container's internal (admin) address")
    p.add_argument("--config-path", required=True, help="broker config file, on the container's host")
    p = _add(a, "remove-broker", remove_broker, "remove a broker from a running container", hidden_aliases=("removeBroker",))
    cluster_option(p)
    p.add_argument("--container", type=host_port, required=True, metavar="HOST:PORT", help="the container's internal (admin) address")
    broker_option(p, required=True)
    broker_id_option(p, required=True)
