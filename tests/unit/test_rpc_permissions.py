"""Every client RPC and admin command: what it needs, and how allow, deny, no policy, a disabled
user and an anonymous caller come out for it."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from metadata.acl_model import (Acl, Action, Policy, PolicyDecision, PolicyEntry, PolicyType, User, UserStatus,
                                UserType, parse_resource)
from metadata.acl_state import AclState
from metadata.authorization import AccessReason, authorize_all
from metadata.rpc_permissions import (ADMIN_RULES, CLIENT_RULES, TELEMETRY, Missing, Needs, admin_requirements,
                                      client_requirements, telemetry_requirements)

ROOT = Path(__file__).resolve().parents[2]
CLUSTER = "DefaultCluster"
IP = "127.0.0.1"


def rpcs(proto: str, service: str) -> set[str]:
    text = (ROOT / "proto" / proto).read_text(encoding="utf-8")
    body = text[text.index(f"service {service}"):]
    body = body[:body.index("\n}")]
    return set(re.findall(r"rpc (\w+)\(", body))


def keys(needs: Needs) -> list[tuple[str, str]]:
    return [("|".join(sorted(a.value for a in r.actions)), r.resource.key) for r in needs.requirements]


def test_every_client_rpc_has_a_rule():
    assert rpcs("messaging_service.proto", "MessagingService") == set(CLIENT_RULES) | {TELEMETRY}


def test_every_admin_rpc_has_a_rule_and_the_acl_commands_too():
    acl_commands = {f"{verb}{noun}" for verb in ("Create", "Update", "Delete", "Get", "List") for noun in ("User", "Acl")}
    assert set(ADMIN_RULES) == rpcs("admin.proto", "BrokerAdmin") | acl_commands


CLIENT_CASES = [
    ("SendMessage", dict(topics=["orders", "orders", "audit"]), [("Pub", "Topic:orders"), ("Pub", "Topic:audit")]),
    ("EndTransaction", dict(topics=["orders"]), [("Pub", "Topic:orders")]),
    ("RecallMessage", dict(topics=["orders"]), [("Pub", "Topic:orders")]),
    ("QueryRoute", dict(topics=["orders"]), [("Pub|Sub", "Topic:orders")]),
    ("QueryRoute", dict(topics=["%RETRY%billing"]), [("Pub|Sub", "Group:billing")]),
    ("ReceiveMessage", dict(topics=["orders"], group="billing"), [("Sub", "Group:billing"), ("Sub", "Topic:orders")]),
    ("AckMessage", dict(topics=["orders"], group="billing"), [("Sub", "Group:billing"), ("Sub", "Topic:orders")]),
    ("ForwardMessageToDeadLetterQueue", dict(topics=["orders"], group="billing"),
     [("Sub", "Group:billing"), ("Sub", "Topic:orders")]),
    ("QueryAssignment", dict(topics=["orders"], group="billing"), [("Sub", "Group:billing"), ("Sub", "Topic:orders")]),
    ("ChangeInvisibleDuration", dict(topics=["orders"], group="billing"), [("Sub", "Group:billing")]),
    ("Heartbeat", dict(group="billing"), [("Sub", "Group:billing")]),
    ("Heartbeat", dict(group="", consumer=False), []),
    ("NotifyClientTermination", dict(group="billing"), [("Sub", "Group:billing")]),
    ("NotifyClientTermination", dict(group=""), []),
    ("PullMessage", dict(topics=["orders"], group="billing"), [("Sub", "Group:billing"), ("Sub", "Topic:orders")]),
    ("UpdateOffset", dict(topics=["orders"], group="billing"),
     [("Sub|Update", "Group:billing"), ("Sub|Update", "Topic:orders")]),
    ("GetOffset", dict(topics=["orders"], group="billing"), [("Get|Sub", "Group:billing"), ("Get|Sub", "Topic:orders")]),
    ("QueryOffset", dict(topics=["orders"]), [("Get|Sub", "Topic:orders")]),
    ("SyncLiteSubscription", dict(topics=["orders"], group="billing"),
     [("Sub", "Group:billing"), ("Sub", "Topic:orders")]),
]


@pytest.mark.parametrize("rpc, names, expected", CLIENT_CASES)
def test_client_requirements(rpc, names, expected):
    needs = client_requirements(rpc, **names)
    assert needs.missing is None and keys(needs) == expected


@pytest.mark.parametrize("rpc, names, missing", [
    ("SendMessage", dict(topics=[]), Missing.TOPIC),
    ("SendMessage", dict(topics=["orders", " "]), Missing.TOPIC),
    ("ReceiveMessage", dict(topics=["orders"], group=""), Missing.GROUP),
    ("Heartbeat", dict(group="", consumer=True), Missing.GROUP),
    ("QueryRoute", dict(topics=[""]), Missing.TOPIC),
])
def test_blank_names_are_missing(rpc, names, missing):
    assert client_requirements(rpc, **names) == Needs(missing=missing)


def test_telemetry_settings():
    assert keys(telemetry_requirements(["orders", "audit"])) == [("Pub", "Topic:orders"), ("Pub", "Topic:audit")]
    assert keys(telemetry_requirements(None, "billing", ["orders"])) == [("Sub", "Group:billing"), ("Sub", "Topic:orders")]
    assert telemetry_requirements(None, None) == Needs(missing=Missing.SETTINGS)
    assert telemetry_requirements([], None) == Needs()
    assert telemetry_requirements(None, "") == Needs(missing=Missing.GROUP)
    assert telemetry_requirements([""]) == Needs(missing=Missing.TOPIC)


ADMIN_CASES = [
    ("CreateOrUpdateTopic", dict(topics=["orders"]), [("Create", "Topic:orders")]),
    ("DeleteTopic", dict(topics=["orders"]), [("Delete", "Topic:orders")]),
    ("ListTopics", {}, [("List", "Cluster:DefaultCluster")]),
    ("CreateOrUpdateGroup", dict(groups=["billing"]), [("Create", "Group:billing")]),
    ("DeleteGroup", dict(groups=["billing"]), [("Delete", "Group:billing")]),
    ("ListGroups", {}, [("List", "Cluster:DefaultCluster")]),
    ("TopicStatus", dict(topics=["orders"]), [("Get", "Topic:orders")]),
    ("ConsumerProgress", dict(groups=["billing"]), [("Get", "Group:billing")]),
    ("ConsumerProgress", dict(groups=["billing"], topics=["orders"]), [("Get", "Group:billing"), ("Get", "Topic:orders")]),
    ("BrokerStatus", {}, [("Get", "Cluster:DefaultCluster")]),
    ("GetConsumerOffsets", {}, [("Get", "Cluster:DefaultCluster")]),
    ("GetReplicaMetadata", {}, [("Get", "Cluster:DefaultCluster")]),
    ("WriteConsumerOffsets", dict(topics=["orders", "audit", "orders"], groups=["billing"]),
     [("Update", "Group:billing"), ("Update", "Topic:orders"), ("Update", "Topic:audit")]),
    ("ResetOffset", dict(groups=["billing"], topics=["orders"]), [("Update", "Group:billing"), ("Update", "Topic:orders")]),
    ("QueryMessage", dict(topics=["orders"]), [("Get|Sub", "Topic:orders")]),
    ("ClientConnections", {}, [("Get", "Cluster:DefaultCluster")]),
    ("ClientConnections", dict(topics=["orders"]), [("Get", "Topic:orders")]),
    ("ClientConnections", dict(groups=["billing"], topics=["orders"]), [("Get", "Group:billing")]),
    ("GetBrokerConfig", {}, [("Get", "Cluster:DefaultCluster")]),
    ("UpdateBrokerConfig", {}, [("Update", "Cluster:DefaultCluster")]),
    ("AddBroker", {}, [("Update", "Cluster:DefaultCluster")]),
    ("RemoveBroker", {}, [("Update", "Cluster:DefaultCluster")]),
] + [(f"{verb}{noun}", {}, [("Update", "Cluster:DefaultCluster")]) for verb in ("Create", "Update", "Delete")
     for noun in ("User", "Acl")] \
  + [(f"{verb}{noun}", {}, [("Get", "Cluster:DefaultCluster")]) for verb in ("Get", "List") for noun in ("User", "Acl")]


def test_the_admin_cases_cover_every_command():
    assert {case[0] for case in ADMIN_CASES} == set(ADMIN_RULES)


@pytest.mark.parametrize("command, names, expected", ADMIN_CASES)
def test_admin_requirements(command, names, expected):
    needs = admin_requirements(command, CLUSTER, **names)
    assert needs.missing is None and keys(needs) == expected


@pytest.mark.parametrize("command, cluster, names, missing", [
    ("DeleteTopic", CLUSTER, dict(topics=[""]), Missing.TOPIC),
    ("DeleteGroup", CLUSTER, {}, Missing.GROUP),
    ("ResetOffset", CLUSTER, dict(groups=["billing"]), Missing.TOPIC),
    ("BrokerStatus", "", {}, Missing.CLUSTER),
    ("WriteConsumerOffsets", CLUSTER, {}, Missing.TOPIC),
])
def test_admin_missing_names(command, cluster, names, missing):
    assert admin_requirements(command, cluster, **names) == Needs(missing=missing)


# ---- the table test: every RPC and command against allow, deny, no policy, disabled, anonymous ----

def _grant(needs: Needs, decision: PolicyDecision) -> tuple[PolicyEntry, ...]:
    """One entry per resource the call needs, holding the first of its actions."""
    return tuple(PolicyEntry(r.resource, frozenset({sorted(r.actions, key=lambda a: a.value)[0]}), decision)
                 for r in needs.requirements)


def _state(entries: tuple[PolicyEntry, ...], status: UserStatus = UserStatus.ENABLED) -> AclState:
    users = {"app": User("app", "secret", UserType.NORMAL, status), "root": User("root", "secret", UserType.SUPER)}
    acls = {"app": Acl("app", (Policy(PolicyType.CUSTOM, entries),))} if entries else {}
    return AclState(1, users, acls)


ALL_CALLS = [("client", rpc, names) for rpc, names, expected in CLIENT_CASES if expected] + \
            [("admin", command, names) for command, names, _ in ADMIN_CASES]


def _needs(kind: str, name: str, names: dict) -> Needs:
    return client_requirements(name, **names) if kind == "client" else admin_requirements(name, CLUSTER, **names)


@pytest.mark.parametrize("kind, name, names", ALL_CALLS)
def test_every_call_against_each_kind_of_caller(kind, name, names):
    needs = _needs(kind, name, names)
    allowed = _state(_grant(needs, PolicyDecision.ALLOW))
    denied = _state(_grant(needs, PolicyDecision.DENY))
    everything_but_one = _state(_grant(needs, PolicyDecision.ALLOW)[:-1])
    disabled = _state(_grant(needs, PolicyDecision.ALLOW), UserStatus.DISABLED)

    def reason(state: AclState, username: str = "app") -> AccessReason:
        return authorize_all(state.users, state.index, username, needs.requirements, IP).reason

    assert reason(allowed) is AccessReason.ALLOWED
    assert reason(denied) is AccessReason.DENIED_BY_POLICY
    assert reason(everything_but_one) is AccessReason.NO_MATCHING_POLICY
    assert reason(_state(())) is AccessReason.NO_MATCHING_POLICY
    assert reason(disabled) is AccessReason.USER_DISABLED
    assert reason(allowed, "") is AccessReason.ANONYMOUS
    assert reason(allowed, "stranger") is AccessReason.NO_SUCH_USER
    assert reason(_state(()), "root") is AccessReason.SUPER_USER


def test_a_cluster_pattern_covers_cluster_commands():
    state = _state((PolicyEntry(parse_resource("Cluster"), frozenset({Action.GET})),))
    needs = admin_requirements("BrokerStatus", CLUSTER)
    assert authorize_all(state.users, state.index, "app", needs.requirements, IP).allowed
    needs = admin_requirements("AddBroker", CLUSTER)
    assert not authorize_all(state.users, state.index, "app", needs.requirements, IP).allowed
