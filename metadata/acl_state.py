"""Users and ACLs as one versioned value, changed by "decide, then apply".

Rules:
- :class:`AclState` is immutable: ``version``, users by name, ACLs by username, and the
  :class:`metadata.authorization.AclIndex` compiled once for that version.  Every broker that
  enforces version N decides exactly as every other one (the issue's "stored once, enforced
  everywhere"); the version is what ``list-acl`` reports.
- A command (``create_user`` ... ``delete_acl``) never changes the state: it returns an
  :class:`AclCommandDecision` holding the one event to replicate and apply, or a
  :class:`Rejected` reply with a named :class:`AclRejection`.  Only :func:`apply` changes state,
  and every applied event adds one to the version.  Events carry resulting values (the whole
  user, the whole merged ACL), so applying is a plain replacement and replays identically.
- Semantics follow upstream's metadata managers (``AuthenticationMetadataManagerImpl``,
  ``AuthorizationMetadataManagerImpl``, ``Acl.updatePolicy``): a new user is Normal and
  enabled unless told; update changes only the fields given; deleting a user deletes its ACL;
  an ACL needs an existing user; create-acl and update-acl both merge by policy type and then
  by resource (an entry for a resource already there replaces it); delete-acl with a resource
  removes that entry of the named policy type (Custom by default) and the ACL when it empties,
  without a resource the whole ACL.  Unlike upstream, deleting an entry or an ACL that is not
  there is refused (``NO_SUCH_POLICY_ENTRY``/``NO_SUCH_ACL``) rather than a silent no-op, and a
  command that names one resource twice in a policy is refused (``DUPLICATE_RESOURCE``).
- Limits: ``MAX_USERS`` users, ``MAX_ENTRIES_PER_ACL`` entries per subject.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Iterable, Mapping, Union

from metadata.acl_model import (Acl, AclInputError, AclRejection, Action, Policy, PolicyType, Resource, User,
                                UserStatus, UserType, parse_password, parse_source_ip, parse_username)
from metadata.authorization import AccessDecision, AclIndex, authorize

MAX_USERS = 10_000
MAX_ENTRIES_PER_ACL = 10_000


@dataclass(frozen=True)
class AclState:
    version: int = 0
    users: Mapping[str, User] = field(default_factory=dict)
    acls: Mapping[str, Acl] = field(default_factory=dict)
    index: AclIndex = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "users", MappingProxyType(dict(self.users)))
        object.__setattr__(self, "acls", MappingProxyType(dict(self.acls)))
        object.__setattr__(self, "index", AclIndex.of(self.acls.values()))

    def authorize(self, username: str, action: Action | Iterable[Action], resource: Resource,
                  source_ip: str) -> AccessDecision:
        return authorize(self.users, self.index, username, action, resource, source_ip)

    @property
    def entry_count(self) -> int:
        return sum(acl.entry_count for acl in self.acls.values())


# ---- events: the only inputs of apply ----

@dataclass(frozen=True)
class UserPut:
    user: User


@dataclass(frozen=True)
class UserDeleted:
    username: str  # its ACL goes with it


@dataclass(frozen=True)
class AclPut:
    acl: Acl


@dataclass(frozen=True)
class AclDeleted:
    username: str


AclEvent = Union[UserPut, UserDeleted, AclPut, AclDeleted]


@dataclass(frozen=True)
class Accepted:
    detail: str = ""


@dataclass(frozen=True)
class Rejected:
    reason: AclRejection
    detail: str


@dataclass(frozen=True)
class AclCommandDecision:
    events: tuple[AclEvent, ...]
    reply: Accepted | Rejected

    @property
    def rejected(self) -> bool:
        return isinstance(self.reply, Rejected)


def _reject(reason: AclRejection, detail: str) -> AclCommandDecision:
    return AclCommandDecision((), Rejected(reason, detail))


def _accept(event: AclEvent, detail: str) -> AclCommandDecision:
    return AclCommandDecision((event,), Accepted(detail))


def apply(state: AclState, event: AclEvent) -> AclState:
    """The state after one event: version + 1."""
    users, acls = dict(state.users), dict(state.acls)
    if isinstance(event, UserPut):
        users[event.user.username] = event.user
    elif isinstance(event, UserDeleted):
        assert event.username in users, f"UserDeleted for unknown user {event.username!r}"
        del users[event.username]
        acls.pop(event.username, None)
    elif isinstance(event, AclPut):
        assert event.acl.username in users, f"AclPut for unknown user {event.acl.username!r}"
        assert event.acl.policies, "AclPut of an empty ACL"
        acls[event.acl.username] = event.acl
    elif isinstance(event, AclDeleted):
        assert event.username in acls, f"AclDeleted for absent ACL {event.username!r}"
        del acls[event.username]
    else:
        raise AssertionError(f"not an ACL event: {event!r}")
    return AclState(state.version + 1, users, acls)


def apply_all(state: AclState, events: Iterable[AclEvent]) -> AclState:
    for event in events:
        state = apply(state, event)
    return state


# ---- users ----

def _checked(check, value) -> Rejected | None:
    try:
        check(value)
    except AclInputError as exc:
        return Rejected(exc.reason, exc.detail)
    return None


def create_user(state: AclState, username: str, password: str, user_type: UserType = UserType.NORMAL,
                status: UserStatus = UserStatus.ENABLED) -> AclCommandDecision:
    problem = _checked(parse_username, username) or _checked(parse_password, password)
    if problem:
        return AclCommandDecision((), problem)
    if username in state.users:
        return _reject(AclRejection.USER_EXISTS, f"user {username!r} exists")
    if len(state.users) >= MAX_USERS:
        return _reject(AclRejection.TOO_MANY_USERS, f"at most {MAX_USERS} users")
    return _accept(UserPut(User(username, password, user_type, status)), f"user {username!r} created")


def update_user(state: AclState, username: str, password: str | None = None, user_type: UserType | None = None,
                status: UserStatus | None = None) -> AclCommandDecision:
    old = state.users.get(username)
    if old is None:
        return _reject(AclRejection.NO_SUCH_USER, f"no user {username!r}")
    if password is not None and (problem := _checked(parse_password, password)):
        return AclCommandDecision((), problem)
    new = User(username, old.password if password is None else password, user_type or old.user_type,
               status or old.status)
    if new == old:
        return _reject(AclRejection.NOTHING_TO_UPDATE, f"user {username!r} already is so")
    return _accept(UserPut(new), f"user {username!r} updated")


def delete_user(state: AclState, username: str) -> AclCommandDecision:
    if username not in state.users:
        return _reject(AclRejection.NO_SUCH_USER, f"no user {username!r}")
    return _accept(UserDeleted(username), f"user {username!r} and its ACL deleted")


# ---- ACLs ----

def check_policies(policies: tuple[Policy, ...]) -> Rejected | None:
    if not policies or any(not policy.entries for policy in policies):
        return Rejected(AclRejection.EMPTY_POLICIES, "an ACL needs at least one policy entry")
    if len({policy.policy_type for policy in policies}) != len(policies):
        return Rejected(AclRejection.DUPLICATE_POLICY_TYPE, "a policy type is given twice")
    for policy in policies:
        seen: set[Resource] = set()
        for entry in policy.entries:
            if entry.resource in seen:
                return Rejected(AclRejection.DUPLICATE_RESOURCE,
                                f"{entry.resource.key} is given twice in the {policy.policy_type.value} policy")
            seen.add(entry.resource)
            if not entry.actions:
                return Rejected(AclRejection.EMPTY_ACTIONS, f"{entry.resource.key}: no actions")
            for text in entry.source_ips:
                if problem := _checked(parse_source_ip, text):
                    return problem
    return None


def _merged(old: Acl | None, username: str, policies: tuple[Policy, ...]) -> Acl:
    """Upstream ``Acl.updatePolicy``: by policy type, then by resource, new entries replace old ones."""
    merged = {policy.policy_type: list(policy.entries) for policy in (old.policies if old else ())}
    for policy in policies:
        entries = merged.setdefault(policy.policy_type, [])
        for entry in policy.entries:
            position = next((i for i, have in enumerate(entries) if have.resource == entry.resource), None)
            if position is None:
                entries.append(entry)
            else:
                entries[position] = entry
    order = [kind for kind in (PolicyType.CUSTOM, PolicyType.DEFAULT) if kind in merged]
    return Acl(username, tuple(Policy(kind, tuple(merged[kind])) for kind in order))


def _put_acl(state: AclState, username: str, policies: Iterable[Policy], verb: str) -> AclCommandDecision:
    policies = tuple(policies)
    if username not in state.users:
        return _reject(AclRejection.NO_SUCH_USER, f"no user {username!r}")
    if problem := check_policies(policies):
        return AclCommandDecision((), problem)
    acl = _merged(state.acls.get(username), username, policies)
    if acl.entry_count > MAX_ENTRIES_PER_ACL:
        return _reject(AclRejection.TOO_MANY_ENTRIES, f"at most {MAX_ENTRIES_PER_ACL} entries per subject")
    if acl == state.acls.get(username):
        return _reject(AclRejection.NOTHING_TO_UPDATE, f"the ACL of User:{username} already is so")
    return _accept(AclPut(acl), f"ACL of User:{username} {verb}")


def create_acl(state: AclState, username: str, policies: Iterable[Policy]) -> AclCommandDecision:
    """Upstream createAcl: merges into an existing ACL of the subject."""
    return _put_acl(state, username, policies, "created" if username not in state.acls else "updated")


def update_acl(state: AclState, username: str, policies: Iterable[Policy]) -> AclCommandDecision:
    """Upstream updateAcl: the same merge as create."""
    return _put_acl(state, username, policies, "updated")


def delete_acl(state: AclState, username: str, resource: Resource | None = None,
               policy_type: PolicyType = PolicyType.CUSTOM) -> AclCommandDecision:
    if username not in state.users:
        return _reject(AclRejection.NO_SUCH_USER, f"no user {username!r}")
    old = state.acls.get(username)
    if old is None:
        return _reject(AclRejection.NO_SUCH_ACL, f"User:{username} has no ACL")
    if resource is None:
        return _accept(AclDeleted(username), f"ACL of User:{username} deleted")
    policy = old.policy(policy_type)
    if policy is None or policy.entry(resource) is None:
        return _reject(AclRejection.NO_SUCH_POLICY_ENTRY,
                       f"User:{username} has no {policy_type.value} entry for {resource.key}")
    entries = tuple(entry for entry in policy.entries if entry.resource != resource)
    policies = tuple(dataclasses.replace(p, entries=entries) if p is policy else p for p in old.policies)
    policies = tuple(p for p in policies if p.entries)
    if not policies:
        return _accept(AclDeleted(username), f"ACL of User:{username} deleted (its last entry went)")
    return _accept(AclPut(Acl(username, policies)), f"{resource.key} removed from the ACL of User:{username}")

