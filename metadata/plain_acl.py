"""RocketMQ 4.x ``plain_acl.yml`` to ACL 2.0 users and ACLs (``relaymq admin migrate-acl``).

Rules (upstream ``auth/.../migration/AuthMigrator.java``, apache/rocketmq develop 8fc57f1):
- Each account becomes a user (``accessKey``/``secretKey``; ``admin: true`` -> Super, else
  Normal) and, when it has permissions, an ACL: ``topicPerms``/``groupPerms`` items
  ``NAME=PERM`` -> Custom entries on ``Topic:NAME``/``Group:NAME``; ``defaultTopicPerm``/
  ``defaultGroupPerm`` -> Default entries on ``Topic:*``/``Group:*``.  PUB, SUB, PUB|SUB
  (SUB|PUB) -> those actions, Allow; DENY or empty -> All, Deny.
- Where upstream's migrator and 4.x disagree, 4.x wins: an unknown permission was DENY in 4.x
  (``Permission.parsePermFromString``) and upstream's migrator makes it All + Allow; here it
  is All + Deny, with a warning.
- Everything that does not carry over is a warning, never silence: white remote addresses
  (4.x let those addresses in without a signature or a permission check; ACL 2.0 has no such
  exemption), unreadable items (skipped), a retry or DLQ topic named in topicPerms (its group
  decides in ACL 2.0), a name given twice (the first account, the last item is kept), and a
  listed resource whose permission the Default policy now widens (4.x: a listed resource's
  permission is final; ACL 2.0: an entry without the requested action does not match).
- Pure: YAML text in (``yaml.safe_load``, so no tags run code), values out.  ConfigError only
  when the text is not YAML or not a mapping with an ``accounts`` list; it names the line.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import yaml

from metadata.acl_model import (Acl, AclInputError, Action, Policy, PolicyDecision, PolicyEntry, PolicyType, Resource,
                                ResourcePattern, ResourceType, User, UserType, parse_password, parse_resource,
                                parse_username, strip_retry_and_dlq)
from metadata.acl_state import AclState
from metadata.config import ConfigError
from metadata.names import DLQ_PREFIX, RETRY_PREFIX

MAX_DOCUMENT_CHARS = 4 << 20

_PLAIN_ACCOUNT_KEYS = {"accessKey", "secretKey", "whiteRemoteAddress", "admin", "defaultTopicPerm",
                       "defaultGroupPerm", "topicPerms", "groupPerms"}
_PERMS = {"PUB": ((Action.PUB,), PolicyDecision.ALLOW), "SUB": ((Action.SUB,), PolicyDecision.ALLOW),
          "PUB|SUB": ((Action.PUB, Action.SUB), PolicyDecision.ALLOW),
          "SUB|PUB": ((Action.PUB, Action.SUB), PolicyDecision.ALLOW), "DENY": ((Action.ALL,), PolicyDecision.DENY),
          "": ((Action.ALL,), PolicyDecision.DENY)}


@dataclass(frozen=True)
class PlainAclMigration:
    """What a 4.x ``plain_acl.yml`` becomes, and what of it does not carry over."""

    users: tuple[User, ...]
    acls: tuple[Acl, ...]
    warnings: tuple[str, ...]

    def state(self, version: int = 1) -> AclState:
        return AclState(version, {user.username: user for user in self.users}, {acl.username: acl for acl in self.acls})


def _perm(text: Any, what: str, warnings: list[str]) -> tuple[frozenset[Action], PolicyDecision]:
    """Upstream AuthMigrator.parseActions/parseDecision, except an unknown permission: 4.x read
    it as DENY (Permission.parsePermFromString); upstream's migrator makes it All + Allow."""
    perm = str(text).strip() if text is not None else ""
    if perm not in _PERMS:
        warnings.append(f"{what}: permission {perm!r} is not PUB, SUB, PUB|SUB or DENY; 4.x read it as DENY, "
                        "so it becomes Deny All")
        return frozenset({Action.ALL}), PolicyDecision.DENY
    actions, decision = _PERMS[perm]
    return frozenset(actions), decision


def _perm_entries(items: Any, kind: ResourceType, who: str, warnings: list[str]) -> list[PolicyEntry]:
    key = "topicPerms" if kind is ResourceType.TOPIC else "groupPerms"
    if items is None:
        return []
    if not isinstance(items, list):
        warnings.append(f"{who}: {key} is not a list; skipped")
        return []
    entries: dict[Resource, PolicyEntry] = {}
    for item in items:
        name, equals, perm = str(item).partition("=")
        name = name.strip()
        if not equals or "=" in perm or not name:
            warnings.append(f"{who}: {key} item {str(item)!r} is not NAME=PERM; skipped")
            continue
        if kind is ResourceType.TOPIC and name.startswith((RETRY_PREFIX, DLQ_PREFIX)):
            warnings.append(f"{who}: {key} item {name!r}: a retry or DLQ topic is decided by its group's permission "
                            "in ACL 2.0; skipped")
            continue
        try:
            resource = parse_resource(f"{kind.value}:{strip_retry_and_dlq(name) if kind is ResourceType.GROUP else name}")
        except AclInputError as exc:
            warnings.append(f"{who}: {key} item {name!r}: {exc.detail}; skipped")
            continue
        if resource.pattern is not ResourcePattern.LITERAL:
            warnings.append(f"{who}: {key} item {name!r}: 4.x names were literal; kept as the pattern {resource.key}")
        if resource in entries:
            warnings.append(f"{who}: {key} names {resource.key} twice; the last one is kept")
        actions, decision = _perm(perm, f"{who}: {key} item {name!r}", warnings)
        entries[resource] = PolicyEntry(resource, actions, decision)
    return list(entries.values())


def _default_entry(value: Any, kind: ResourceType, who: str, warnings: list[str]) -> PolicyEntry | None:
    if value is None or not str(value).strip():
        return None
    key = "defaultTopicPerm" if kind is ResourceType.TOPIC else "defaultGroupPerm"
    actions, decision = _perm(value, f"{who}: {key}", warnings)
    return PolicyEntry(Resource(kind, "", ResourcePattern.ANY), actions, decision)


def _fallback_warnings(custom: list[PolicyEntry], default: PolicyEntry | None, who: str, warnings: list[str]) -> None:
    """4.x: a listed resource's permission is final.  ACL 2.0: an entry that does not hold the
    requested action does not match, and the Default policy decides instead."""
    if default is None or default.decision is not PolicyDecision.ALLOW:
        return
    granted = {Action.PUB, Action.SUB} if Action.ALL in default.actions else set(default.actions)
    for entry in custom:
        if entry.decision is PolicyDecision.ALLOW and Action.ALL not in entry.actions:
            extra = granted - set(entry.actions)
            if extra:
                names = "|".join(sorted(action.value for action in extra))
                warnings.append(f"{who}: 4.x refused {names} on {entry.resource.key} (its own permission is final); "
                                f"ACL 2.0 lets the Default policy ({default.resource.key}) allow it")


def _account(value: Any, number: int, warnings: list[str]) -> tuple[User, Acl | None] | None:
    who = f"accounts[{number}]"
    if not isinstance(value, Mapping):
        warnings.append(f"{who}: not a mapping; skipped")
        return None
    for key in sorted(set(map(str, value)) - _PLAIN_ACCOUNT_KEYS):
        warnings.append(f"{who}: unknown key {key!r} ignored")
    try:
        access_key = value.get("accessKey")
        username = parse_username("" if access_key is None else str(access_key).strip())
        password = parse_password(str(value["secretKey"]) if value.get("secretKey") is not None else "")
    except AclInputError as exc:
        warnings.append(f"{who}: {exc.detail}; account skipped")
        return None
    who = f"{who} ({username})"
    admin = value.get("admin") is True or str(value.get("admin")).strip().lower() == "true"
    if value.get("whiteRemoteAddress") not in (None, ""):
        warnings.append(f"{who}: whiteRemoteAddress {str(value['whiteRemoteAddress'])!r} let this account in without "
                        "a signature or permission check; ACL 2.0 has no such exemption: it is dropped")
    custom = (_perm_entries(value.get("topicPerms"), ResourceType.TOPIC, who, warnings)
              + _perm_entries(value.get("groupPerms"), ResourceType.GROUP, who, warnings))
    topic_default = _default_entry(value.get("defaultTopicPerm"), ResourceType.TOPIC, who, warnings)
    group_default = _default_entry(value.get("defaultGroupPerm"), ResourceType.GROUP, who, warnings)
    _fallback_warnings([e for e in custom if e.resource.type is ResourceType.TOPIC], topic_default, who, warnings)
    _fallback_warnings([e for e in custom if e.resource.type is ResourceType.GROUP], group_default, who, warnings)
    policies = []
    if custom:
        policies.append(Policy(PolicyType.CUSTOM, tuple(custom)))
    defaults = tuple(entry for entry in (topic_default, group_default) if entry is not None)
    if defaults:
        policies.append(Policy(PolicyType.DEFAULT, defaults))
    user = User(username, password, UserType.SUPER if admin else UserType.NORMAL)
    return user, Acl(username, tuple(policies)) if policies else None


def _load_yaml(yaml_text: str, where: str) -> Any:
    if not isinstance(yaml_text, str):
        raise ConfigError(where, None, "is not text")
    if len(yaml_text) > MAX_DOCUMENT_CHARS:
        raise ConfigError(where, None, f"longer than {MAX_DOCUMENT_CHARS} characters")
    try:
        return yaml.safe_load(yaml_text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line_where = f"{where} line {mark.line + 1}" if mark is not None else where
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ConfigError(line_where, None, f"not valid YAML: {problem}") from None
    except RecursionError:
        raise ConfigError(where, None, "not valid YAML: nested too deeply") from None


def migrate_plain_acl(yaml_text: str, where: str = "plain_acl.yml") -> PlainAclMigration:
    """Users and ACLs equivalent to a RocketMQ 4.x ``plain_acl.yml`` (upstream ``AuthMigrator``).

    admin -> a Super user; topicPerms/groupPerms -> Custom entries on ``Topic:NAME``/``Group:NAME``;
    defaultTopicPerm/defaultGroupPerm -> Default entries on ``Topic:*``/``Group:*``; PUB, SUB,
    PUB|SUB -> those actions allowed; DENY -> All denied.  What does not carry over is a warning:
    white remote addresses, unreadable items, and the places where 4.x and ACL 2.0 decide apart.
    ConfigError only when the text is not YAML or not a mapping with an accounts list.
    """
    document = _load_yaml(yaml_text, where)
    if document is None:  # an empty file
        document = {}
    if not isinstance(document, Mapping):
        raise ConfigError(where, None, "must be a mapping with an accounts list")
    accounts = document.get("accounts") or []
    if not isinstance(accounts, list):
        raise ConfigError(where, "accounts", "must be a list of accounts")
    warnings: list[str] = []
    for key in sorted(set(map(str, document)) - {"accounts", "globalWhiteRemoteAddresses", "dataVersion"}):
        warnings.append(f"unknown top-level key {key!r} ignored")
    if document.get("globalWhiteRemoteAddresses"):
        warnings.append(f"globalWhiteRemoteAddresses {document['globalWhiteRemoteAddresses']!r} let anyone from those "
                        "addresses in without credentials; ACL 2.0 has no such exemption: they are dropped")
    users: dict[str, User] = {}
    acls: dict[str, Acl] = {}
    for number, value in enumerate(accounts, start=1):
        migrated = _account(value, number, warnings)
        if migrated is None:
            continue
        user, acl = migrated
        if user.username in users:
            warnings.append(f"accounts[{number}]: accessKey {user.username!r} is given again; the first one is kept")
            continue
        users[user.username] = user
        if acl is not None:
            acls[user.username] = acl
    return PlainAclMigration(tuple(users.values()), tuple(acls.values()), tuple(warnings))
