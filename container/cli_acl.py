"""``relaymq admin`` users and ACLs (RocketMQ ACL 2.0, mqadmin's names): create-user, update-user,
delete-user, get-user, list-user, create-acl, update-acl, delete-acl, get-acl, list-acl, and
migrate-acl (a RocketMQ 4.x ``plain_acl.yml`` to users and ACLs).

Rules:
- Without a controller each container keeps its users and ACLs in its
  ``authorizationMetadataFile``; a command goes to ``--container HOST:PORT`` (an admin
  address), else to every container hosting a member of the cluster (``-c``, through the
  nameserver ``-n``), as mqadmin's ``-b``/``-c``.  A change is applied where it can be; the
  containers that refused or did not answer are named and the exit code is 1.
- Under a controller (brokers in ``enableControllerMode``) a change goes to the containers
  one at a time until one answers that the controller committed it (``replicated``): every
  container follows.  ``--container`` may also name the controller (the nameserver's port
  when it embeds it).
- The flags are mqadmin's: ``-u`` username, ``-p`` password, ``-t`` user type (Super|Normal),
  ``-s`` user status (enable|disable) for users; ``-s`` subject (``User:NAME``), ``-r``
  resources, ``-a`` actions, ``-d`` decision, ``-i`` source IPs (comma-separated lists) for
  ACLs; ``--policy-type`` Custom (default) or Default.  Values are checked here with the
  server's own parsers (exit 2), and again by the server.
- ``list-acl`` and ``get-acl`` show the version each container enforces and for which
  brokers; asked of the controller, the version each container last reported.
- ``migrate-acl --file plain_acl.yml`` prints the equivalent ``authorizationMetadataFile``
  (TOML, on stdout) and the migration's warnings (stderr); ``--apply`` creates (or updates)
  the users and merges the ACLs on the containers instead.
- Calls are signed with ``relaymq admin --access-key/--secret-key`` (or the environment).
"""
from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path
from typing import Any, Callable

import grpc

from container.cli import CliError
from container.cli_admin import _add, _emit, _members, _run, cluster_option, host_port, refusal_text, table
from metadata.acl_files import dump_acl_toml, migrate_plain_acl
from metadata.acl_model import (AclInputError, AclRejection, PolicyDecision, PolicyType, UserStatus, UserType,
                                parse_actions, parse_resource, parse_source_ips, parse_subject, parse_username)
from metadata.config import ConfigError
from proto import acl_admin_pb2 as pb
from services.access.acl_admin import acl_to_proto
from services.admin.client import AdminClient, AdminRejected, AdminUnavailable

MAX_PLAIN_ACL_BYTES = 4 << 20


def _checked(parse: Callable[[str], Any], name: str) -> Callable[[str], str]:
    """The text as given, once ``parse`` accepts it (the server parses it again)."""
    def check(text: str) -> str:
        try:
            parse(text)
        except AclInputError as exc:
            raise argparse.ArgumentTypeError(exc.detail) from None
        return text.strip()
    check.__name__ = name
    return check


def _named(kind, reason: AclRejection) -> Callable[[str], str]:
    def check(text: str) -> str:
        try:
            return kind.parse(text, reason).value
        except AclInputError as exc:
            raise argparse.ArgumentTypeError(exc.detail) from None
    check.__name__ = kind.__name__
    return check


def _comma_list(parse: Callable[[str], Any], name: str) -> Callable[[str], list[str]]:
    def check(text: str) -> list[str]:
        items = [item.strip() for item in text.split(",") if item.strip()]
        if not items:
            raise argparse.ArgumentTypeError("an empty list")
        for item in items:
            _checked(parse, name)(item)
        return items
    check.__name__ = name
    return check


# ---------------------------------------------------------------- calls

async def _targets(args: Any) -> list[str]:
    if args.container:
        return [args.container]
    addresses = sorted({member.address for member in await _members(args, args.cluster)})
    if not addresses:
        raise CliError(f"cluster {args.cluster} has no member registered at the nameserver", 1)
    return addresses


async def _acl_call(address: str, method: str, request: Any, timeout_ms: int) -> Any:
    client = AdminClient(address, timeout_ms, service="AclAdmin")
    try:
        return await client.call(method, request)
    finally:
        await client.close()


async def _on_each(args: Any, method: str, request: Any) -> tuple[dict[str, Any], dict[str, str]]:
    """(address -> reply, address -> why it failed) over the targets."""
    addresses = await _targets(args)

    async def one(address: str) -> Any:
        try:
            return await _acl_call(address, method, request, args.timeout_ms)
        except (AdminUnavailable, AdminRejected) as exc:
            return refusal_text(exc)
    replies = await asyncio.gather(*(one(address) for address in addresses))
    done = {a: r for a, r in zip(addresses, replies) if not isinstance(r, str)}
    return done, {a: r for a, r in zip(addresses, replies) if isinstance(r, str)}


def _outcome(args: Any, done: dict[str, Any], failed: dict[str, str], what: str) -> int:
    document = {"done": {address: {"version": reply.version, "detail": reply.detail, "replicated": reply.replicated,
                                   "source": reply.source} for address, reply in done.items()},
                "failed": failed}
    lines = [f"{what} on {address} (version {reply.version}" + (f", committed through the {reply.source}: every "
                                                                  f"container follows)" if reply.replicated else ")")
             for address, reply in done.items()]
    lines += [f"NOT applied on {address}: {why}" for address, why in failed.items()]
    return _emit(args, document, lambda d: "\n".join(lines), 1 if failed or not done else 0)


async def _change_once_replicated(args: Any, method: str, request: Any) -> tuple[dict[str, Any], dict[str, str]]:
    """Each container in turn, until one answers that the change was committed through the
    controller (every container then follows: sending it again would be refused as done);
    without a controller every container applies it."""
    done: dict[str, Any] = {}
    failed: dict[str, str] = {}
    for address in await _targets(args):
        try:
            reply = await _acl_call(address, method, request, args.timeout_ms)
        except (AdminUnavailable, AdminRejected) as exc:
            failed[address] = refusal_text(exc)
            continue
        done[address] = reply
        if reply.replicated:
            return done, {}  # others that failed before will follow the controller too
    return done, failed


def _change(args: Any, method: str, request: Any, what: str) -> int:
    done, failed = _run(_change_once_replicated(args, method, request))
    return _outcome(args, done, failed, what)


# ---------------------------------------------------------------- users

def create_user(args: Any) -> int:
    user = pb.AclUser(username=args.username, password=args.password, user_type=args.user_type)
    return _change(args, "CreateUser", pb.AclCreateUserRequest(user=user), f"user {args.username} created")


def update_user(args: Any) -> int:
    request = pb.AclUpdateUserRequest(username=args.username)
    for field in ("password", "user_type", "user_status"):
        if getattr(args, field) is not None:
            setattr(request, field, getattr(args, field))
    return _change(args, "UpdateUser", request, f"user {args.username} updated")


def delete_user(args: Any) -> int:
    return _change(args, "DeleteUser", pb.AclUsernameRequest(username=args.username), f"user {args.username} deleted")


def _users(args: Any, method: str, request: Any) -> int:
    done, failed = _run(_on_each(args, method, request))
    rows = [[address, reply.version, user.username, user.user_type, user.user_status]
            for address, reply in done.items() for user in reply.users]
    document = {"containers": {address: {"version": reply.version,
                                         "users": [{"username": u.username, "userType": u.user_type,
                                                    "userStatus": u.user_status} for u in reply.users]}
                               for address, reply in done.items()}, "failed": failed}
    text = table(["CONTAINER", "VERSION", "USERNAME", "TYPE", "STATUS"], rows)
    text += "".join(f"\nFAILED {address}: {why}" for address, why in failed.items())
    return _emit(args, document, lambda d: text, 1 if failed else 0)


def get_user(args: Any) -> int:
    return _users(args, "GetUser", pb.AclUsernameRequest(username=args.username))


def list_user(args: Any) -> int:
    return _users(args, "ListUser", pb.AclListUserRequest(filter=args.filter or ""))


# ---------------------------------------------------------------- ACLs

def _put_request(args: Any) -> pb.AclPutRequest:
    entries = [pb.AclPolicyEntry(resource=resource, actions=args.actions, decision=args.decision,
                                 source_ips=args.source_ip or []) for resource in args.resources]
    return pb.AclPutRequest(acl=pb.AclRecord(subject=args.subject, policies=[
        pb.AclPolicy(policy_type=args.policy_type, entries=entries)]))


def create_acl(args: Any) -> int:
    return _change(args, "CreateAcl", _put_request(args), f"ACL of {args.subject} created")


def update_acl(args: Any) -> int:
    return _change(args, "UpdateAcl", _put_request(args), f"ACL of {args.subject} updated")


def delete_acl(args: Any) -> int:
    request = pb.AclDeleteRequest(subject=args.subject, resource=args.resource or "", policy_type=args.policy_type)
    what = f"{args.resource} removed from the ACL of {args.subject}" if args.resource else f"ACL of {args.subject} deleted"
    return _change(args, "DeleteAcl", request, what)


def _entry_document(record: pb.AclRecord) -> list[dict[str, Any]]:
    return [{"resource": entry.resource, "actions": list(entry.actions), "decision": entry.decision,
             "sourceIps": list(entry.source_ips), "policyType": policy.policy_type}
            for policy in record.policies for entry in policy.entries]


def _enforcer_document(enforcer: pb.AclEnforcer) -> dict[str, Any]:
    return {"container": enforcer.container, "brokers": list(enforcer.brokers), "version": enforcer.version,
            "origin": enforcer.origin, "reportedMsAgo": enforcer.reported_ms_ago}


def _enforcer_line(enforcer: pb.AclEnforcer) -> str:
    """``broker-a, broker-b on HOST:PORT enforce version 3`` (with the report's age, from a controller)."""
    brokers = ", ".join(enforcer.brokers) or "no broker"
    line = f"{brokers} on {enforcer.container} enforce version {enforcer.version}"
    if not enforcer.origin:
        line += " (its own file, not confirmed by the controller)"
    if enforcer.reported_ms_ago:
        line += f" (reported {enforcer.reported_ms_ago / 1000:.1f} s ago)"
    return line


def _acls(args: Any, method: str, request: Any) -> int:
    done, failed = _run(_on_each(args, method, request))
    rows = [[address, reply.version, record.subject, policy.policy_type, entry.resource, ",".join(entry.actions),
             entry.decision, ",".join(entry.source_ips) or "*"]
            for address, reply in done.items() for record in reply.acls
            for policy in record.policies for entry in policy.entries]
    document = {"containers": {address: {"version": reply.version, "source": reply.source, "entries": reply.entries,
                                         "origin": reply.origin,
                                         "enforcers": [_enforcer_document(e) for e in reply.enforcers],
                                         "acls": {r.subject: _entry_document(r) for r in reply.acls}}
                               for address, reply in done.items()}, "failed": failed}
    text = "\n".join(f"{address}: version {reply.version} enforced ({reply.entries} entries, from {reply.source})"
                     + "".join(f"\n  {_enforcer_line(e)}" for e in reply.enforcers)
                     for address, reply in done.items())
    text += "\n" + table(["CONTAINER", "VERSION", "SUBJECT", "POLICY", "RESOURCE", "ACTIONS", "DECISION", "SOURCE IPS"],
                         rows)
    text += "".join(f"\nFAILED {address}: {why}" for address, why in failed.items())
    return _emit(args, document, lambda d: text, 1 if failed else 0)


def get_acl(args: Any) -> int:
    return _acls(args, "GetAcl", pb.AclSubjectRequest(subject=args.subject))


def list_acl(args: Any) -> int:
    return _acls(args, "ListAcl", pb.AclListRequest(subject_filter=args.subject or "", resource_filter=args.resource or ""))


# ---------------------------------------------------------------- migrate-acl

def _read_plain_acl(path: str):
    try:
        data = Path(path).read_bytes()[:MAX_PLAIN_ACL_BYTES + 1]
    except OSError as exc:
        raise CliError(f"{path}: cannot be read ({exc.strerror})", 2) from None
    if len(data) > MAX_PLAIN_ACL_BYTES:
        raise CliError(f"{path}: larger than {MAX_PLAIN_ACL_BYTES} bytes", 2)
    try:
        return migrate_plain_acl(data.decode("utf-8", errors="replace"), path)
    except ConfigError as exc:
        raise CliError(str(exc), 2) from None


async def _apply_migration(args: Any, migration) -> tuple[dict[str, Any], dict[str, str]]:
    done: dict[str, Any] = {}
    failed: dict[str, str] = {}
    for address in await _targets(args):
        try:
            reply = None
            for user in migration.users:
                try:
                    reply = await _acl_call(address, "CreateUser", pb.AclCreateUserRequest(user=pb.AclUser(
                        username=user.username, password=user.password, user_type=user.user_type.value)), args.timeout_ms)
                except AdminRejected as exc:
                    if exc.code is not grpc.StatusCode.ALREADY_EXISTS:
                        raise
                    update = pb.AclUpdateUserRequest(username=user.username, password=user.password,
                                                     user_type=user.user_type.value)
                    try:
                        reply = await _acl_call(address, "UpdateUser", update, args.timeout_ms)
                    except AdminRejected as again:
                        if not again.details.startswith(AclRejection.NOTHING_TO_UPDATE.value):
                            raise
            for acl in migration.acls:
                try:
                    reply = await _acl_call(address, "CreateAcl", pb.AclPutRequest(acl=acl_to_proto(acl)), args.timeout_ms)
                except AdminRejected as exc:
                    if not exc.details.startswith(AclRejection.NOTHING_TO_UPDATE.value):
                        raise
            done[address] = reply
        except (AdminUnavailable, AdminRejected) as exc:
            failed[address] = refusal_text(exc)
    return done, failed


def migrate_acl(args: Any) -> int:
    migration = _read_plain_acl(args.file)
    for warning in migration.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    if not args.apply:
        text = dump_acl_toml(migration.state())
        document = {"toml": text, "warnings": list(migration.warnings)}
        return _emit(args, document, lambda d: text.rstrip("\n"))
    done, failed = _run(_apply_migration(args, migration))
    lines = [f"{len(migration.users)} users and {len(migration.acls)} ACLs applied on {address}"
             + (f" (version {reply.version})" if reply is not None else "") for address, reply in done.items()]
    lines += [f"NOT applied on {address}: {why}" for address, why in failed.items()]
    document = {"applied": sorted(done), "failed": failed, "warnings": list(migration.warnings)}
    return _emit(args, document, lambda d: "\n".join(lines), 1 if failed else 0)


# ---------------------------------------------------------------- registration

def _target_options(parser: Any) -> None:
    cluster_option(parser, help_text="every container hosting a member of this cluster (default DefaultCluster)")
    parser.add_argument("--container", type=host_port, metavar="HOST:PORT",
                        help="only this container (its internal admin address)")


def _acl_options(parser: Any) -> None:
    parser.add_argument("-s", "--subject", required=True, type=_checked(parse_subject, "subject"), help="User:NAME")
    parser.add_argument("-r", "--resources", required=True, type=_comma_list(parse_resource, "resources"),
                        help="comma-separated: Cluster, Topic:NAME, Group:NAME, NAME-* prefixes, Topic:*, *")
    parser.add_argument("-a", "--actions", required=True, type=_comma_list(lambda t: parse_actions([t]), "actions"),
                        help="comma-separated: Pub, Sub, Create, Update, Delete, Get, List, All")
    parser.add_argument("-d", "--decision", required=True, type=_named(PolicyDecision, AclRejection.INVALID_DECISION),
                        help="Allow or Deny")
    parser.add_argument("-i", "--source-ip", type=_comma_list(lambda t: parse_source_ips([t]), "source IPs"),
                        help="comma-separated addresses or CIDR ranges (default: any address)")
    parser.add_argument("--policy-type", default="Custom", type=_named(PolicyType, AclRejection.INVALID_POLICY_TYPE),
                        help="Custom (default) or Default")


def register(subparsers: Any, admin_subparsers: Any) -> None:
    a = admin_subparsers
    username = _checked(parse_username, "username")
    user_type = _named(UserType, AclRejection.INVALID_USER_TYPE)
    user_status = _named(UserStatus, AclRejection.INVALID_USER_STATUS)
    p = _add(a, "create-user", create_user, "create a user", hidden_aliases=("createUser",))
    _target_options(p)
    p.add_argument("-u", "--username", required=True, type=username)
    p.add_argument("-p", "--password", required=True)
    p.add_argument("-t", "--user-type", default="Normal", type=user_type, help="Super or Normal (default Normal)")
    p = _add(a, "update-user", update_user, "change a user's password, type or status", hidden_aliases=("updateUser",))
    _target_options(p)
    p.add_argument("-u", "--username", required=True, type=username)
    p.add_argument("-p", "--password")
    p.add_argument("-t", "--user-type", type=user_type, help="Super or Normal")
    p.add_argument("-s", "--user-status", type=user_status, help="enable or disable")
    p = _add(a, "delete-user", delete_user, "delete a user and its ACL", hidden_aliases=("deleteUser",))
    _target_options(p)
    p.add_argument("-u", "--username", required=True, type=username)
    p = _add(a, "get-user", get_user, "show a user (never its password)", hidden_aliases=("getUser",))
    _target_options(p)
    p.add_argument("-u", "--username", required=True, type=username)
    p = _add(a, "list-user", list_user, "list users", hidden_aliases=("listUser",))
    _target_options(p)
    p.add_argument("-f", "--filter", help="only usernames containing this")
    p = _add(a, "create-acl", create_acl, "grant or deny a subject actions on resources (merged into its ACL)",
             hidden_aliases=("createAcl",))
    _target_options(p)
    _acl_options(p)
    p = _add(a, "update-acl", update_acl, "change a subject's entries (merged by resource)", hidden_aliases=("updateAcl",))
    _target_options(p)
    _acl_options(p)
    p = _add(a, "delete-acl", delete_acl, "remove one resource's entry, or a subject's whole ACL",
             hidden_aliases=("deleteAcl",))
    _target_options(p)
    p.add_argument("-s", "--subject", required=True, type=_checked(parse_subject, "subject"), help="User:NAME")
    p.add_argument("-r", "--resource", type=_checked(parse_resource, "resource"), help="only this resource's entry")
    p.add_argument("--policy-type", default="Custom", type=_named(PolicyType, AclRejection.INVALID_POLICY_TYPE))
    p = _add(a, "get-acl", get_acl, "show a subject's ACL and the version enforced", hidden_aliases=("getAcl",))
    _target_options(p)
    p.add_argument("-s", "--subject", required=True, type=_checked(parse_subject, "subject"), help="User:NAME")
    p = _add(a, "list-acl", list_acl, "list ACLs and the version each container enforces", hidden_aliases=("listAcl",))
    _target_options(p)
    p.add_argument("-s", "--subject", help="only subjects containing this")
    p.add_argument("-r", "--resource", help="only ACLs with a resource containing this")
    p = _add(a, "migrate-acl", migrate_acl, "convert a RocketMQ 4.x plain_acl.yml: print it as an "
             "authorizationMetadataFile, or --apply it", hidden_aliases=("migrateAcl",))
    _target_options(p)
    p.add_argument("--file", required=True, help="the plain_acl.yml to read")
    p.add_argument("--apply", action="store_true", help="create the users and ACLs on the containers")
