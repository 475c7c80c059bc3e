"""RocketMQ ACL 2.0's values: users, resources and their patterns, policy entries, ACLs.

Rules (upstream ``auth/.../authorization/model/{Resource,PolicyEntry,Policy,Acl,Environment}.java``
and ``authentication/enums/{UserType,UserStatus}.java``, checked against apache/rocketmq
develop of 2025-09, commit 8fc57f1):

- Names as RocketMQ spells them, read case-insensitively as upstream's ``getByName`` does:
  resource types ``Cluster``, ``Topic``, ``Group``; actions ``Pub``, ``Sub``, ``Create``,
  ``Update``, ``Delete``, ``Get``, ``List``, ``All``; decisions ``Allow``/``Deny``; policy types
  ``Custom``/``Default``; user types ``Super``/``Normal``; user status ``enable``/``disable``.
- A resource pattern is literal (``Topic:orders``), prefixed (``Topic:orders-*``, the ``*``
  only at the end) or any (``Topic:*``; ``*`` for every type).  A request's resource is always
  literal.  Bare ``Cluster`` means ``Cluster:*``: upstream parses it as the cluster named ""
  and it then matches nothing, which nobody writing it means.
- Group names lose a ``%RETRY%`` or ``%DLQ%`` prefix before matching (upstream
  ``Resource.ofGroup``); a retry or DLQ *topic* is its group's resource, as upstream's remoting
  builders treat retry topics.  RelayMQ's per-topic retry topic ``%RETRY%<group>%<topic>``
  (:func:`metadata.names.retry_topic_for`) is read back to ``<group>``.
- ``Any`` is not an action a policy may hold (upstream refuses it too); ``All`` grants every
  action.
- Source IPs are single addresses or CIDR ranges, IPv4 or IPv6; none means any address.
  Addresses are compared as addresses, not text (upstream compares a single IP as a string,
  so ``::1`` and ``0:0:0:0:0:0:0:1`` differed), and an IPv4-mapped IPv6 peer is its IPv4.
- Input from users (files, admin calls) is checked by the ``parse_*`` functions, which raise
  only :class:`AclInputError` carrying a named :class:`AclRejection`.
"""
from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from enum import Enum
from typing import Iterable

from metadata.names import (DLQ_PREFIX, GROUP_MAX_LENGTH, RETRY_PREFIX, TOPIC_MAX_LENGTH, is_valid_group_name,
                            is_valid_topic_name)

MAX_NAME_CHARS = 256
MAX_SOURCE_IPS = 64
_USERNAME = re.compile(r"[!-~]+")  # printable ASCII, no space: the access key the clients sign with
_CLUSTER_NAME = re.compile(r"[%|a-zA-Z0-9_.-]{1,255}")
_PREFIX = re.compile(r"[%|a-zA-Z0-9_.-]+")


class AclRejection(str, Enum):
    """Why input or a command about users and ACLs is refused."""

    INVALID_USERNAME = "INVALID_USERNAME"
    INVALID_PASSWORD = "INVALID_PASSWORD"
    INVALID_USER_TYPE = "INVALID_USER_TYPE"
    INVALID_USER_STATUS = "INVALID_USER_STATUS"
    INVALID_SUBJECT = "INVALID_SUBJECT"
    INVALID_RESOURCE = "INVALID_RESOURCE"
    INVALID_ACTION = "INVALID_ACTION"
    INVALID_DECISION = "INVALID_DECISION"
    INVALID_POLICY_TYPE = "INVALID_POLICY_TYPE"
    INVALID_SOURCE_IP = "INVALID_SOURCE_IP"
    EMPTY_ACTIONS = "EMPTY_ACTIONS"
    EMPTY_POLICIES = "EMPTY_POLICIES"
    DUPLICATE_RESOURCE = "DUPLICATE_RESOURCE"
    DUPLICATE_POLICY_TYPE = "DUPLICATE_POLICY_TYPE"
    TOO_MANY_SOURCE_IPS = "TOO_MANY_SOURCE_IPS"
    USER_EXISTS = "USER_EXISTS"
    NO_SUCH_USER = "NO_SUCH_USER"
    NO_SUCH_ACL = "NO_SUCH_ACL"
    NO_SUCH_POLICY_ENTRY = "NO_SUCH_POLICY_ENTRY"
    NOTHING_TO_UPDATE = "NOTHING_TO_UPDATE"
    TOO_MANY_USERS = "TOO_MANY_USERS"
    TOO_MANY_ENTRIES = "TOO_MANY_ENTRIES"


class AclInputError(ValueError):
    """A user's text about users or ACLs cannot be read; ``reason`` names what is wrong."""

    def __init__(self, reason: AclRejection, detail: str):
        self.reason, self.detail = reason, detail
        super().__init__(f"{reason.value}: {detail}")


class _Named(str, Enum):
    """An enum whose values are RocketMQ's spellings, parsed case-insensitively."""

    @classmethod
    def parse(cls, text: object, reason: AclRejection):
        if isinstance(text, str):
            for member in cls:
                if member.value.lower() == text.strip().lower():
                    return member
        allowed = ", ".join(member.value for member in cls)
        raise AclInputError(reason, f"{_show(text)} is not one of {allowed}")


class Action(_Named):
    PUB = "Pub"
    SUB = "Sub"
    CREATE = "Create"
    UPDATE = "Update"
    DELETE = "Delete"
    GET = "Get"
    LIST = "List"
    ALL = "All"


class PolicyDecision(_Named):
    ALLOW = "Allow"
    DENY = "Deny"


class PolicyType(_Named):
    CUSTOM = "Custom"
    DEFAULT = "Default"


class UserType(_Named):
    SUPER = "Super"
    NORMAL = "Normal"


class UserStatus(_Named):
    ENABLED = "enable"
    DISABLED = "disable"


class ResourceType(_Named):
    CLUSTER = "Cluster"
    TOPIC = "Topic"
    GROUP = "Group"
    ANY = "Any"  # only in the pattern ``*``


class ResourcePattern(str, Enum):
    LITERAL = "LITERAL"
    PREFIXED = "PREFIXED"
    ANY = "ANY"


def _show(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def strip_retry_and_dlq(name: str) -> str:
    """A group's name without ``%RETRY%``/``%DLQ%``; RelayMQ's ``%RETRY%<group>%<topic>`` gives ``<group>``."""
    if name.startswith(DLQ_PREFIX):
        return name[len(DLQ_PREFIX):]
    if not name.startswith(RETRY_PREFIX):
        return name
    rest = name[len(RETRY_PREFIX):]
    group, separator, topic = rest.partition("%")
    if separator and group and topic and "%" not in topic:
        return group
    return rest


@dataclass(frozen=True)
class Resource:
    """A resource or a pattern of resources; ``name`` is the prefix for PREFIXED, "" for ANY."""

    type: ResourceType
    name: str = ""
    pattern: ResourcePattern = ResourcePattern.LITERAL

    @staticmethod
    def topic(name: str) -> "Resource":
        """A request's topic; a retry or DLQ topic is its group's resource."""
        if name.startswith((RETRY_PREFIX, DLQ_PREFIX)):
            return Resource(ResourceType.GROUP, strip_retry_and_dlq(name))
        return Resource(ResourceType.TOPIC, name)

    @staticmethod
    def group(name: str) -> "Resource":
        return Resource(ResourceType.GROUP, strip_retry_and_dlq(name))

    @staticmethod
    def cluster(name: str) -> "Resource":
        return Resource(ResourceType.CLUSTER, name)

    @property
    def key(self) -> str:
        """RocketMQ's resource key: ``*``, ``Topic:*``, ``Topic:orders-*``, ``Topic:orders``."""
        if self.type is ResourceType.ANY:
            return "*"
        if self.pattern is ResourcePattern.ANY:
            return f"{self.type.value}:*"
        if self.pattern is ResourcePattern.PREFIXED:
            return f"{self.type.value}:{self.name}*"
        return f"{self.type.value}:{self.name}"

    def matches(self, request: "Resource") -> bool:
        """Whether this pattern covers a request's (literal) resource (upstream ``Resource.isMatch``)."""
        if self.type is ResourceType.ANY:
            return True
        if self.type is not request.type:
            return False
        if self.pattern is ResourcePattern.ANY:
            return True
        if self.pattern is ResourcePattern.PREFIXED:
            return request.name.startswith(self.name)
        return request.name == self.name

    def __str__(self) -> str:
        return self.key


def _check_name(kind: ResourceType, name: str, text: str) -> None:
    valid = {ResourceType.TOPIC: is_valid_topic_name, ResourceType.GROUP: is_valid_group_name,
             ResourceType.CLUSTER: lambda n: _CLUSTER_NAME.fullmatch(n) is not None}[kind]
    if not valid(name):
        raise AclInputError(AclRejection.INVALID_RESOURCE, f"{_show(text)}: {_show(name)} is not a valid "
                                                           f"{kind.value.lower()} name")
    if kind is ResourceType.GROUP and name.startswith((RETRY_PREFIX, DLQ_PREFIX)):
        raise AclInputError(AclRejection.INVALID_RESOURCE, f"{_show(text)}: name the group without "
                                                           f"{RETRY_PREFIX} or {DLQ_PREFIX} (requests are matched without them)")


def parse_resource(text: object) -> Resource:
    """A policy's resource pattern from RocketMQ's key syntax; AclInputError when unreadable."""
    if not isinstance(text, str) or not text.strip():
        raise AclInputError(AclRejection.INVALID_RESOURCE, f"{_show(text)} is not a resource (Cluster, Topic:NAME, "
                                                           "Group:NAME, a NAME-* prefix, Topic:*, *)")
    stripped = text.strip()
    if stripped == "*":
        return Resource(ResourceType.ANY, "", ResourcePattern.ANY)
    type_text, colon, name = stripped.partition(":")
    kind = ResourceType.parse(type_text, AclRejection.INVALID_RESOURCE)
    if kind is ResourceType.ANY:
        raise AclInputError(AclRejection.INVALID_RESOURCE, f"{_show(text)}: write * for every resource")
    if kind is ResourceType.CLUSTER and not colon:
        return Resource(kind, "", ResourcePattern.ANY)
    if name == "*":
        return Resource(kind, "", ResourcePattern.ANY)
    if name.endswith("*"):
        prefix = name[:-1]
        limit = {ResourceType.TOPIC: TOPIC_MAX_LENGTH, ResourceType.GROUP: GROUP_MAX_LENGTH}.get(kind, 255)
        if not _PREFIX.fullmatch(prefix) or len(prefix) > limit:
            raise AclInputError(AclRejection.INVALID_RESOURCE, f"{_show(text)}: {_show(prefix)} is not a valid prefix")
        return Resource(kind, prefix, ResourcePattern.PREFIXED)
    _check_name(kind, name, text)
    return Resource(kind, name, ResourcePattern.LITERAL)


def parse_actions(items: object) -> frozenset[Action]:
    """A policy's actions: a list of names, or one ``Pub,Sub`` / ``Pub|Sub`` string."""
    if isinstance(items, str):
        items = [part for part in re.split(r"[,|]", items) if part.strip()]
    if not isinstance(items, (list, tuple, frozenset, set)):
        raise AclInputError(AclRejection.INVALID_ACTION, f"{_show(items)} is not a list of actions")
    actions = frozenset(Action.parse(item, AclRejection.INVALID_ACTION) for item in items)
    if not actions:
        raise AclInputError(AclRejection.EMPTY_ACTIONS, "a policy entry needs at least one action")
    return actions


def parse_source_ip(text: object) -> str:
    """One source address or CIDR range, as written (trimmed); AclInputError when unreadable."""
    if isinstance(text, str):
        try:
            if "/" in text:
                ipaddress.ip_network(text.strip(), strict=False)
            else:
                ipaddress.ip_address(text.strip())
            return text.strip()
        except ValueError:
            pass
    raise AclInputError(AclRejection.INVALID_SOURCE_IP, f"{_show(text)} is not an IP address or CIDR range")


def parse_source_ips(items: object) -> tuple[str, ...]:
    if items is None:
        return ()
    if isinstance(items, str):
        items = [part for part in items.split(",") if part.strip()]
    if not isinstance(items, (list, tuple)):
        raise AclInputError(AclRejection.INVALID_SOURCE_IP, f"{_show(items)} is not a list of addresses")
    if len(items) > MAX_SOURCE_IPS:
        raise AclInputError(AclRejection.TOO_MANY_SOURCE_IPS, f"more than {MAX_SOURCE_IPS} source IPs in one entry")
    return tuple(dict.fromkeys(parse_source_ip(item) for item in items))


def parse_username(text: object) -> str:
    if (not isinstance(text, str) or not 0 < len(text) <= MAX_NAME_CHARS or not _USERNAME.fullmatch(text)
            or "," in text or "/" in text):
        raise AclInputError(AclRejection.INVALID_USERNAME, f"{_show(text)}: a username is 1..{MAX_NAME_CHARS} printable "
                                                           "ASCII characters without space, ',' or '/'")
    return text


def parse_password(text: object) -> str:
    if not isinstance(text, str) or not 0 < len(text) <= MAX_NAME_CHARS:
        raise AclInputError(AclRejection.INVALID_PASSWORD, f"a password is 1..{MAX_NAME_CHARS} characters")
    return text


def parse_subject(text: object) -> str:
    """``User:NAME`` -> NAME (the only subject type RocketMQ has)."""
    if isinstance(text, str):
        kind, colon, name = text.strip().partition(":")
        if colon and kind.lower() == "user":
            return parse_username(name)
    raise AclInputError(AclRejection.INVALID_SUBJECT, f"{_show(text)} is not a subject (User:NAME)")


def subject_of(username: str) -> str:
    return f"User:{username}"


@dataclass(frozen=True)
class User:
    username: str
    password: str
    user_type: UserType = UserType.NORMAL
    status: UserStatus = UserStatus.ENABLED


@dataclass(frozen=True)
class PolicyEntry:
    """One resource's actions, source ranges (empty: any address) and decision."""

    resource: Resource
    actions: frozenset[Action]
    decision: PolicyDecision = PolicyDecision.ALLOW
    source_ips: tuple[str, ...] = ()

    def covers(self, actions: Iterable[Action]) -> bool:
        """Any of the requested actions is granted or refused here (upstream ``isMatchAction``)."""
        return Action.ALL in self.actions or not self.actions.isdisjoint(actions)


@dataclass(frozen=True)
class Policy:
    policy_type: PolicyType
    entries: tuple[PolicyEntry, ...]

    def entry(self, resource: Resource) -> PolicyEntry | None:
        return next((entry for entry in self.entries if entry.resource == resource), None)


@dataclass(frozen=True)
class Acl:
    """One subject's policies: at most one Custom and one Default, each resource once per policy."""

    username: str
    policies: tuple[Policy, ...]

    @property
    def subject(self) -> str:
        return subject_of(self.username)

    def policy(self, policy_type: PolicyType) -> Policy | None:
        return next((policy for policy in self.policies if policy.policy_type is policy_type), None)

    @property
    def entry_count(self) -> int:
        return sum(len(policy.entries) for policy in self.policies)
