"""The users-and-ACLs file (``conf/secure/acl.toml``): read into an :class:`AclState`, written back.

The document, in RocketMQ's key names (``mqadmin createUser``/``createAcl``, ACL 2.0's JSON)::

    [[users]]
    username = "producer1"
    password = "producer1-secret"
    userType = "Normal"          # Super | Normal (default Normal)
    userStatus = "enable"        # enable | disable (default enable)

    [[acls]]
    subject = "User:producer1"

    [[acls.policies]]
    resources = ["Topic:orders"] # one entry per resource, all with the keys below
    actions = ["Pub"]
    decision = "Allow"           # Allow | Deny: required
    sourceIps = ["10.0.0.0/8"]   # optional: any address when absent or empty
    policyType = "Custom"        # Custom | Default (default Custom)

Rules:
- Text in, value out: the caller reads the file (``container/``); this module does no I/O.
- Every problem is one :class:`metadata.config.ConfigError` naming the file, the line (of the
  key where it can be found, else of its ``[[table]]``) and the key path, e.g.
  ``acl.toml line 14: acls[2].policies[1].actions: 'Publish' is not one of Pub, ...``.
  Nothing else escapes, whatever the text (a hypothesis test holds it to that), so a watched
  file that turns bad can keep the last good state and log one line.
- The whole file is checked as :mod:`metadata.acl_state`'s commands check their input: users
  once each, an ACL only for a user of the file, one ACL per subject, a resource once per
  policy type.
- :func:`dump_acl_toml` writes a state back in the same shape; reading it gives the same users
  and ACLs (``relaymq admin migrate-acl`` prints this).
- A RocketMQ 4.x ``plain_acl.yml`` is converted by :func:`migrate_plain_acl`
  (:mod:`metadata.plain_acl`, re-exported here).
"""
from __future__ import annotations

import re
import tomllib
from typing import Any, Mapping

import tomli_w

from metadata.acl_model import (Acl, AclInputError, AclRejection, Policy, PolicyDecision, PolicyEntry, PolicyType, User,
                                UserStatus, UserType, parse_actions, parse_password, parse_resource, parse_source_ips,
                                parse_subject, parse_username)
from metadata.acl_state import MAX_ENTRIES_PER_ACL, MAX_USERS, AclState, check_policies
from metadata.config import ConfigError
from metadata.plain_acl import PlainAclMigration, migrate_plain_acl  # the 4.x file, here for one import

MAX_DOCUMENT_CHARS = 4 << 20
__all__ = ["PlainAclMigration", "dump_acl_toml", "migrate_plain_acl", "parse_acl_toml"]
_USER_KEYS = {"username", "password", "userType", "userStatus"}
_ACL_KEYS = {"subject", "policies"}
_POLICY_KEYS = {"resources", "actions", "decision", "sourceIps", "policyType"}
_HEADER = re.compile(r"\s*\[\[\s*(users|acls|acls\.policies)\s*\]\]")
_TABLE = re.compile(r"\s*\[")
_TOML_LINE = re.compile(r"at line (\d+)")


class _Locator:
    """Best-effort line numbers: of each ``[[table]]`` header and of ``key =`` lines below it."""

    def __init__(self, text: str):
        self.lines = text.splitlines()
        self.headers: dict[tuple, int] = {(): -1}  # ("users", i) / ("acls", i) / ("acls", i, j) -> 0-based line;
        # () is the top level, before any header
        counts = {"users": 0, "acls": 0}
        policies = 0
        for number, line in enumerate(self.lines):
            match = _HEADER.match(line)
            if not match:
                continue
            name = match.group(1)
            if name == "acls.policies":
                if counts["acls"]:
                    policies += 1
                    self.headers[("acls", counts["acls"], policies)] = number
                continue
            counts[name] += 1
            policies = 0
            self.headers[(name, counts[name])] = number

    def line(self, table: tuple, key: str | None) -> int | None:
        """1-based line of ``key`` in ``table`` (or of the table's header), None when not found."""
        start = self.headers.get(table)
        if start is None:  # an inline table: the line of the top-level key holding it
            return self.line((), table[0]) if table else None
        if key:
            pattern = re.compile(rf"\s*(\"{re.escape(key)}\"|{re.escape(key)})\s*=")
            for number in range(start + 1, len(self.lines)):
                if _TABLE.match(self.lines[number]):
                    break
                if pattern.match(self.lines[number]):
                    return number + 1
        return start + 1 if start >= 0 else None


class _Reader:
    def __init__(self, text: str, where: str):
        self.where, self.locator = where, _Locator(text)

    def error(self, table: tuple, path: str, key: str | None, reason: str) -> ConfigError:
        line = self.locator.line(table, key)
        where = f"{self.where} line {line}" if line else self.where
        return ConfigError(where, ".".join(part for part in (path, key) if part) or None, reason)

    def table(self, value: Any, table: tuple, path: str, allowed: set[str]) -> Mapping[str, Any]:
        if not isinstance(value, Mapping):
            raise self.error(table, path, None, "must be a table")
        unknown = sorted(set(value) - allowed)
        if unknown:
            raise self.error(table, path, unknown[0], f"unknown key (expected {', '.join(sorted(allowed))})")
        return value

    def parsed(self, table: tuple, path: str, key: str, parse, value: Any):
        try:
            return parse(value)
        except AclInputError as exc:
            raise self.error(table, path, key, exc.detail) from None

    def list_of(self, document: Mapping[str, Any], name: str, limit: int) -> list:
        value = document.get(name, [])
        if not isinstance(value, list):
            raise self.error((), "", name, f"must be a list of [[{name}]] tables")
        if len(value) > limit:
            raise self.error((), "", name, f"more than {limit} tables")
        return value

    def user(self, value: Any, index: int) -> User:
        table, path = ("users", index), f"users[{index}]"
        entry = self.table(value, table, path, _USER_KEYS)
        for required in ("username", "password"):
            if required not in entry:
                raise self.error(table, path, required, "is required")
        return User(self.parsed(table, path, "username", parse_username, entry["username"]),
                    self.parsed(table, path, "password", parse_password, entry["password"]),
                    self.parsed(table, path, "userType", lambda v: UserType.parse(v, AclRejection.INVALID_USER_TYPE),
                                entry.get("userType", "Normal")),
                    self.parsed(table, path, "userStatus",
                                lambda v: UserStatus.parse(v, AclRejection.INVALID_USER_STATUS),
                                entry.get("userStatus", "enable")))

    def policy_entries(self, value: Any, table: tuple, path: str) -> tuple[PolicyType, list[PolicyEntry]]:
        entry = self.table(value, table, path, _POLICY_KEYS)
        for required in ("resources", "actions", "decision"):
            if required not in entry:
                raise self.error(table, path, required, "is required")
        resources = entry["resources"]
        if not isinstance(resources, list) or not resources:
            raise self.error(table, path, "resources", "must be a non-empty list of resources")
        parsed = [self.parsed(table, path, "resources", parse_resource, item) for item in resources]
        actions = self.parsed(table, path, "actions", parse_actions, entry["actions"])
        decision = self.parsed(table, path, "decision", lambda v: PolicyDecision.parse(v, AclRejection.INVALID_DECISION),
                               entry["decision"])
        source_ips = self.parsed(table, path, "sourceIps", parse_source_ips, entry.get("sourceIps", []))
        kind = self.parsed(table, path, "policyType", lambda v: PolicyType.parse(v, AclRejection.INVALID_POLICY_TYPE),
                           entry.get("policyType", "Custom"))
        return kind, [PolicyEntry(resource, actions, decision, source_ips) for resource in parsed]

    def acl(self, value: Any, index: int, users: Mapping[str, User]) -> Acl:
        table, path = ("acls", index), f"acls[{index}]"
        entry = self.table(value, table, path, _ACL_KEYS)
        if "subject" not in entry:
            raise self.error(table, path, "subject", "is required")
        username = self.parsed(table, path, "subject", parse_subject, entry["subject"])
        if username not in users:
            raise self.error(table, path, "subject", f"{entry['subject']!r}: no such user in [[users]]")
        policies = entry.get("policies")
        if not isinstance(policies, list) or not policies:
            raise self.error(table, path, "policies", "must be a non-empty list of [[acls.policies]] tables")
        merged: dict[PolicyType, list[PolicyEntry]] = {}
        for number, policy in enumerate(policies, start=1):
            kind, entries = self.policy_entries(policy, ("acls", index, number), f"{path}.policies[{number}]")
            merged.setdefault(kind, []).extend(entries)
        order = [kind for kind in (PolicyType.CUSTOM, PolicyType.DEFAULT) if kind in merged]
        acl = Acl(username, tuple(Policy(kind, tuple(merged[kind])) for kind in order))
        if acl.entry_count > MAX_ENTRIES_PER_ACL:
            raise self.error(table, path, "policies", f"more than {MAX_ENTRIES_PER_ACL} entries")
        problem = check_policies(acl.policies)
        if problem is not None:
            raise self.error(table, path, "policies", problem.detail)
        return acl


def _load(text: str, where: str) -> dict[str, Any]:
    if not isinstance(text, str):
        raise ConfigError(where, None, "is not text")
    if len(text) > MAX_DOCUMENT_CHARS:
        raise ConfigError(where, None, f"longer than {MAX_DOCUMENT_CHARS} characters")
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        line = _TOML_LINE.search(str(exc))
        number = line.group(1) if line else max(1, len(text.splitlines()))  # "at end of document"
        raise ConfigError(f"{where} line {number}", None, f"not valid TOML: {exc}") from None
    except RecursionError:
        raise ConfigError(where, None, "not valid TOML: nested too deeply") from None


def parse_acl_toml(text: str, where: str = "acl.toml", version: int = 1) -> AclState:
    """The users and ACLs of an ACL document, as the state of ``version``; ConfigError otherwise."""
    document = _load(text, where)
    reader = _Reader(text, where)
    unknown = sorted(set(document) - {"users", "acls"})
    if unknown:
        raise reader.error((), "", unknown[0], "unknown key (expected [[users]] and [[acls]] tables)")
    users: dict[str, User] = {}
    for index, value in enumerate(reader.list_of(document, "users", MAX_USERS), start=1):
        user = reader.user(value, index)
        if user.username in users:
            raise reader.error(("users", index), f"users[{index}]", "username", f"{user.username!r} is given twice")
        users[user.username] = user
    acls: dict[str, Acl] = {}
    for index, value in enumerate(reader.list_of(document, "acls", MAX_USERS), start=1):
        acl = reader.acl(value, index, users)
        if acl.username in acls:
            raise reader.error(("acls", index), f"acls[{index}]", "subject", f"{acl.subject} has another [[acls]] table")
        acls[acl.username] = acl
    return AclState(version, users, acls)


def _entry_table(kind: PolicyType, entry: PolicyEntry) -> dict[str, Any]:
    table: dict[str, Any] = {"resources": [entry.resource.key],
                             "actions": sorted(action.value for action in entry.actions),
                             "decision": entry.decision.value}
    if entry.source_ips:
        table["sourceIps"] = list(entry.source_ips)
    if kind is not PolicyType.CUSTOM:
        table["policyType"] = kind.value
    return table


def dump_acl_toml(state: AclState) -> str:
    """The state's users and ACLs as an ACL document (users and subjects in name order)."""
    users = [{"username": user.username, "password": user.password, "userType": user.user_type.value,
              "userStatus": user.status.value} for _, user in sorted(state.users.items())]
    acls = [{"subject": acl.subject,
             "policies": [_entry_table(policy.policy_type, entry) for policy in acl.policies for entry in policy.entries]}
            for _, acl in sorted(state.acls.items())]
    document: dict[str, Any] = {}
    if users:
        document["users"] = users
    if acls:
        document["acls"] = acls
    return tomli_w.dumps(document)

