"""Who may do what: RocketMQ ACL 2.0's decision, pure, over a precompiled index of the ACLs.

Rules, in the order they apply (upstream ``auth/.../authorization/chain/UserAuthorizationHandler``
and ``AclAuthorizationHandler``, apache/rocketmq develop 8fc57f1, 2025-09):

1. No authenticated user: refused (``ANONYMOUS``).  Unknown user: refused (``NO_SUCH_USER``).
   A disabled user: refused (``USER_DISABLED``).  A super user: allowed without looking at
   ACLs (``SUPER_USER``).
2. The user's entries that match the request: the resource pattern covers the resource, the
   entry's actions hold one of the requested actions (or ``All``), and its source ranges hold
   the caller's address (no ranges: any address; ranges but no address: no match).
3. Custom before default: the Default policy is consulted only when no Custom entry matches.
4. Among the matching entries of that policy the most specific wins: literal, then prefixed
   (longer prefix first), then ``Type:*``, then ``*``.  Equal specificity is broken by the
   decision, deny first.  The winner's decision is the answer (``ALLOWED`` or
   ``DENIED_BY_POLICY``).
5. Nothing matches (or no ACL at all): refused (``NO_MATCHING_POLICY``).

Rule 4 is the comparator after upstream #9540 (July 2025, after 5.3.3).  Up to 5.3.3 the
comparator was broken: a shorter prefix sorted first and a literal against a prefix was
decided by list order.  The deny tie-break: upstream's comment says deny wins but its
comparator sorts deny last; with one entry per resource per policy (upstream replaces an entry
of the same resource; :mod:`metadata.acl_state` refuses duplicates) two matching entries can
never be equally specific, so the tie-break never decides anything in either implementation.

Speed: :class:`AclIndex` compiles every ACL once (a state's version builds it once): literal
entries in a dict by (type, name), prefixes grouped by length so a request probes one dict per
distinct length, source ranges parsed to networks.  A decision costs a few dict lookups
whatever the number of entries.
"""
from __future__ import annotations

import functools
import ipaddress
from dataclasses import dataclass, field
from enum import Enum
from types import MappingProxyType
from typing import Iterable, Mapping

from metadata.acl_model import (Acl, Action, PolicyDecision, PolicyEntry, PolicyType, Resource, ResourcePattern,
                                ResourceType, User, UserStatus, UserType, subject_of)

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


class AccessReason(str, Enum):
    ALLOWED = "ALLOWED"
    SUPER_USER = "SUPER_USER"
    ANONYMOUS = "ANONYMOUS"
    NO_SUCH_USER = "NO_SUCH_USER"
    USER_DISABLED = "USER_DISABLED"
    DENIED_BY_POLICY = "DENIED_BY_POLICY"
    NO_MATCHING_POLICY = "NO_MATCHING_POLICY"


_ALLOWING = frozenset({AccessReason.ALLOWED, AccessReason.SUPER_USER})


@dataclass(frozen=True)
class Requirement:
    """A request needs one of ``actions`` on ``resource`` (a literal resource)."""

    actions: frozenset[Action]
    resource: Resource

    def __str__(self) -> str:
        return f"{'|'.join(sorted(action.value for action in self.actions))} on {self.resource.key}"


@dataclass(frozen=True)
class AccessDecision:
    reason: AccessReason
    username: str
    requirement: Requirement
    source_ip: str
    entry: PolicyEntry | None = None  # the deciding entry, when a policy decided
    policy_type: PolicyType | None = None

    @property
    def allowed(self) -> bool:
        return self.reason in _ALLOWING

    def message(self) -> str:
        """What a refused caller is told: user, action, resource, address and why."""
        who = subject_of(self.username) if self.username else "an anonymous caller"
        verdict = "may" if self.allowed else "may not"
        why = self.reason.value
        if self.entry is not None:
            why += f" ({self.policy_type.value if self.policy_type else ''} entry {self.entry.resource.key})"
        return f"{who} {verdict} {self.requirement} from {self.source_ip or 'an unknown address'}: {why}"


@dataclass(frozen=True)
class _Compiled:
    entry: PolicyEntry
    networks: tuple[Network, ...]

    def matches(self, actions: frozenset[Action], address: ipaddress.IPv4Address | ipaddress.IPv6Address | None) -> bool:
        if not self.entry.covers(actions):
            return False
        if not self.networks:
            return True
        return address is not None and any(address.version == net.version and address in net for net in self.networks)


def _network(text: str) -> Network:
    network = ipaddress.ip_network(text, strict=False)
    if isinstance(network, ipaddress.IPv6Network) and network.prefixlen >= 96 and network.network_address.ipv4_mapped:
        mapped = network.network_address.ipv4_mapped
        return ipaddress.ip_network(f"{mapped}/{network.prefixlen - 96}", strict=False)
    return network


@functools.lru_cache(maxsize=4096)  # peers repeat; parsing is most of a decision's cost
def _address(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        address = ipaddress.ip_address(text.strip().strip("[]"))
    except (ValueError, AttributeError):
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


Level = tuple[_Compiled, ...]


@dataclass(frozen=True)
class CompiledPolicy:
    """One policy's entries by specificity level, ready for a request."""

    literal: Mapping[tuple[ResourceType, str], Level]
    prefixed: Mapping[ResourceType, tuple[tuple[int, Mapping[str, Level]], ...]]  # longest prefix first
    type_any: Mapping[ResourceType, Level]
    any: Level

    @staticmethod
    def of(entries: Iterable[PolicyEntry]) -> "CompiledPolicy":
        literal: dict[tuple[ResourceType, str], list[_Compiled]] = {}
        prefixed: dict[ResourceType, dict[int, dict[str, list[_Compiled]]]] = {}
        type_any: dict[ResourceType, list[_Compiled]] = {}
        any_type: list[_Compiled] = []
        for entry in entries:
            compiled = _Compiled(entry, tuple(_network(text) for text in entry.source_ips))
            resource = entry.resource
            if resource.type is ResourceType.ANY:
                any_type.append(compiled)
            elif resource.pattern is ResourcePattern.ANY:
                type_any.setdefault(resource.type, []).append(compiled)
            elif resource.pattern is ResourcePattern.PREFIXED:
                by_length = prefixed.setdefault(resource.type, {})
                by_length.setdefault(len(resource.name), {}).setdefault(resource.name, []).append(compiled)
            else:
                literal.setdefault((resource.type, resource.name), []).append(compiled)
        return CompiledPolicy(
            MappingProxyType({key: tuple(level) for key, level in literal.items()}),
            MappingProxyType({kind: tuple((length, MappingProxyType({p: tuple(v) for p, v in names.items()}))
                                          for length, names in sorted(lengths.items(), reverse=True))
                              for kind, lengths in prefixed.items()}),
            MappingProxyType({kind: tuple(level) for kind, level in type_any.items()}),
            tuple(any_type))

    def levels(self, resource: Resource):
        """The candidate entries, most specific level first (a generator: stops when one decides)."""
        yield self.literal.get((resource.type, resource.name), ())
        for length, names in self.prefixed.get(resource.type, ()):
            if length <= len(resource.name):
                yield names.get(resource.name[:length], ())
        yield self.type_any.get(resource.type, ())
        yield self.any

    def decide(self, actions: frozenset[Action], resource: Resource, address) -> PolicyEntry | None:
        """The winning entry, or None when no entry of this policy matches."""
        for level in self.levels(resource):
            matched = [compiled.entry for compiled in level if compiled.matches(actions, address)]
            if matched:
                return next((entry for entry in matched if entry.decision is PolicyDecision.DENY), matched[0])
        return None


@dataclass(frozen=True)
class CompiledAcl:
    custom: CompiledPolicy
    default: CompiledPolicy

    @staticmethod
    def of(acl: Acl) -> "CompiledAcl":
        custom, default = acl.policy(PolicyType.CUSTOM), acl.policy(PolicyType.DEFAULT)
        return CompiledAcl(CompiledPolicy.of(custom.entries if custom else ()),
                           CompiledPolicy.of(default.entries if default else ()))


@dataclass(frozen=True)
class AclIndex:
    """Every subject's compiled ACL, by username."""

    by_username: Mapping[str, CompiledAcl] = field(default_factory=lambda: MappingProxyType({}))

    @staticmethod
    def of(acls: Iterable[Acl]) -> "AclIndex":
        return AclIndex(MappingProxyType({acl.username: CompiledAcl.of(acl) for acl in acls}))


def _actions(action: Action | Iterable[Action]) -> frozenset[Action]:
    return frozenset((action,)) if isinstance(action, Action) else frozenset(action)


def authorize(users: Mapping[str, User], index: AclIndex, username: str, action: Action | Iterable[Action],
              resource: Resource, source_ip: str) -> AccessDecision:
    """May ``username``, calling from ``source_ip``, do ``action`` (or any of several) on ``resource``?"""
    requirement = Requirement(_actions(action), resource)

    def decided(reason: AccessReason, entry: PolicyEntry | None = None, kind: PolicyType | None = None) -> AccessDecision:
        return AccessDecision(reason, username, requirement, source_ip, entry, kind)

    if not username:
        return decided(AccessReason.ANONYMOUS)
    user = users.get(username)
    if user is None:
        return decided(AccessReason.NO_SUCH_USER)
    if user.status is UserStatus.DISABLED:
        return decided(AccessReason.USER_DISABLED)
    if user.user_type is UserType.SUPER:
        return decided(AccessReason.SUPER_USER)
    compiled = index.by_username.get(username)
    if compiled is None:
        return decided(AccessReason.NO_MATCHING_POLICY)
    address = _address(source_ip)
    for kind, policy in ((PolicyType.CUSTOM, compiled.custom), (PolicyType.DEFAULT, compiled.default)):
        entry = policy.decide(requirement.actions, resource, address)
        if entry is not None:
            reason = AccessReason.ALLOWED if entry.decision is PolicyDecision.ALLOW else AccessReason.DENIED_BY_POLICY
            return decided(reason, entry, kind)
    return decided(AccessReason.NO_MATCHING_POLICY)


def authorize_all(users: Mapping[str, User], index: AclIndex, username: str, requirements: Iterable[Requirement],
                  source_ip: str) -> AccessDecision | None:
    """The first refusal among a request's requirements, else the last approval (None if it needs nothing)."""
    last = None
    for requirement in requirements:
        last = authorize(users, index, username, requirement.actions, requirement.resource, source_ip)
        if not last.allowed:
            return last
    return last
