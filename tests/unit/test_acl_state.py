"""Users and ACLs: commands decide (events or a named rejection), apply changes, each event one version."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from metadata.acl_model import (Acl, AclRejection, Action, Policy, PolicyDecision, PolicyEntry, PolicyType, Resource,
                                User, UserStatus, UserType, parse_resource)
from metadata.acl_state import (MAX_USERS, Accepted, AclDeleted, AclPut, AclState, Rejected, UserDeleted, UserPut,
                                apply, apply_all, create_acl, create_user, delete_acl, delete_user, update_acl,
                                update_user)
from metadata.authorization import AccessReason

IP = "10.0.0.1"


def entry(resource: str, actions=(Action.PUB,), decision=PolicyDecision.ALLOW, ips=()) -> PolicyEntry:
    return PolicyEntry(parse_resource(resource), frozenset(actions), decision, tuple(ips))


def custom(*entries: PolicyEntry) -> list[Policy]:
    return [Policy(PolicyType.CUSTOM, entries)]


def run(state: AclState, decision) -> AclState:
    assert not decision.rejected, decision.reply
    return apply_all(state, decision.events)


def rejected(decision, reason: AclRejection) -> bool:
    return decision.events == () and isinstance(decision.reply, Rejected) and decision.reply.reason is reason


@pytest.fixture
def state() -> AclState:
    state = run(AclState(), create_user(AclState(), "alice", "alice-secret"))
    return run(state, create_acl(state, "alice", custom(entry("Topic:orders"))))


def test_commands_never_change_the_state_and_each_event_is_one_version(state):
    assert state.version == 2
    decision = create_user(state, "bob", "b")
    assert decision.events == (UserPut(User("bob", "b")),) and isinstance(decision.reply, Accepted)
    assert "bob" not in state.users
    after = apply(state, decision.events[0])
    assert after.version == 3 and after.users["bob"] == User("bob", "b", UserType.NORMAL, UserStatus.ENABLED)
    assert state.version == 2


def test_user_commands_and_their_rejections(state):
    assert rejected(create_user(state, "alice", "x"), AclRejection.USER_EXISTS)
    assert rejected(create_user(state, "a b", "x"), AclRejection.INVALID_USERNAME)
    assert rejected(create_user(state, "", "x"), AclRejection.INVALID_USERNAME)
    assert rejected(create_user(state, "bob", ""), AclRejection.INVALID_PASSWORD)
    assert rejected(update_user(state, "bob", password="x"), AclRejection.NO_SUCH_USER)
    assert rejected(update_user(state, "alice"), AclRejection.NOTHING_TO_UPDATE)
    assert rejected(update_user(state, "alice", password=""), AclRejection.INVALID_PASSWORD)
    assert rejected(delete_user(state, "bob"), AclRejection.NO_SUCH_USER)
    disabled = run(state, update_user(state, "alice", status=UserStatus.DISABLED))
    assert disabled.users["alice"] == User("alice", "alice-secret", UserType.NORMAL, UserStatus.DISABLED)
    assert disabled.authorize("alice", Action.PUB, Resource.topic("orders"), IP).reason is AccessReason.USER_DISABLED
    promoted = run(state, update_user(state, "alice", user_type=UserType.SUPER))
    assert promoted.authorize("alice", Action.DELETE, Resource.topic("x"), IP).reason is AccessReason.SUPER_USER


def test_deleting_a_user_deletes_its_acl(state):
    decision = delete_user(state, "alice")
    assert decision.events == (UserDeleted("alice"),)
    after = run(state, decision)
    assert after.users == {} and after.acls == {} and after.version == 3


def test_user_limit(monkeypatch, state):
    monkeypatch.setattr("metadata.acl_state.MAX_USERS", 1)
    assert rejected(create_user(state, "bob", "b"), AclRejection.TOO_MANY_USERS)
    assert MAX_USERS == 10_000


def test_create_and_update_merge_by_policy_type_then_resource(state):
    state = run(state, create_acl(state, "alice", custom(entry("Topic:orders", (Action.SUB,)), entry("Group:billing"))))
    state = run(state, update_acl(state, "alice", [Policy(PolicyType.DEFAULT, (entry("Topic:*", decision=PolicyDecision.DENY),))]))
    acl = state.acls["alice"]
    assert [p.policy_type for p in acl.policies] == [PolicyType.CUSTOM, PolicyType.DEFAULT]
    assert acl.policy(PolicyType.CUSTOM).entries == (entry("Topic:orders", (Action.SUB,)), entry("Group:billing"))
    assert state.authorize("alice", Action.PUB, Resource.topic("orders"), IP).reason is AccessReason.DENIED_BY_POLICY
    assert state.authorize("alice", Action.SUB, Resource.topic("orders"), IP).reason is AccessReason.ALLOWED
    assert rejected(update_acl(state, "alice", custom(entry("Group:billing"))), AclRejection.NOTHING_TO_UPDATE)


def test_acl_rejections(state):
    assert rejected(create_acl(state, "bob", custom(entry("Topic:a"))), AclRejection.NO_SUCH_USER)
    assert rejected(create_acl(state, "alice", []), AclRejection.EMPTY_POLICIES)
    assert rejected(create_acl(state, "alice", [Policy(PolicyType.CUSTOM, ())]), AclRejection.EMPTY_POLICIES)
    assert rejected(create_acl(state, "alice", custom(entry("Topic:a"), entry("Topic:a", (Action.SUB,)))),
                    AclRejection.DUPLICATE_RESOURCE)
    assert rejected(create_acl(state, "alice", custom(entry("Topic:a")) + custom(entry("Topic:b"))),
                    AclRejection.DUPLICATE_POLICY_TYPE)
    assert rejected(create_acl(state, "alice", custom(PolicyEntry(parse_resource("Topic:a"), frozenset()))),
                    AclRejection.EMPTY_ACTIONS)
    assert rejected(create_acl(state, "alice", custom(entry("Topic:a", ips=("10.0.0.0/40",)))),
                    AclRejection.INVALID_SOURCE_IP)


def test_delete_acl_entry_then_whole(state):
    state = run(state, create_acl(state, "alice", custom(entry("Group:billing"))))
    assert rejected(delete_acl(state, "alice", parse_resource("Topic:nope")), AclRejection.NO_SUCH_POLICY_ENTRY)
    assert rejected(delete_acl(state, "alice", parse_resource("Topic:orders"), PolicyType.DEFAULT),
                    AclRejection.NO_SUCH_POLICY_ENTRY)
    decision = delete_acl(state, "alice", parse_resource("Topic:orders"))
    assert decision.events == (AclPut(Acl("alice", (Policy(PolicyType.CUSTOM, (entry("Group:billing"),)),))),)
    state = run(state, decision)
    last = delete_acl(state, "alice", parse_resource("Group:billing"))
    assert last.events == (AclDeleted("alice"),)
    state = run(state, last)
    assert rejected(delete_acl(state, "alice"), AclRejection.NO_SUCH_ACL)
    assert rejected(delete_acl(state, "bob"), AclRejection.NO_SUCH_USER)
    assert state.authorize("alice", Action.PUB, Resource.topic("orders"), IP).reason is AccessReason.NO_MATCHING_POLICY


def test_apply_asserts_what_a_decision_would_have_refused(state):
    with pytest.raises(AssertionError):
        apply(state, AclPut(Acl("bob", tuple(custom(entry("Topic:a"))))))
    with pytest.raises(AssertionError):
        apply(state, UserDeleted("bob"))
    with pytest.raises(AssertionError):
        apply(state, AclDeleted("bob"))


def test_states_compare_by_value_not_by_index(state):
    again = AclState(state.version, dict(state.users), dict(state.acls))
    assert again == state


COMMANDS = st.one_of(
    st.tuples(st.just("create_user"), st.sampled_from(["a", "b", "c"])),
    st.tuples(st.just("delete_user"), st.sampled_from(["a", "b", "c"])),
    st.tuples(st.just("disable"), st.sampled_from(["a", "b", "c"])),
    st.tuples(st.just("acl"), st.sampled_from(["a", "b", "c"]), st.sampled_from(["Topic:t", "Topic:t*", "*"])),
    st.tuples(st.just("delete_acl"), st.sampled_from(["a", "b", "c"])),
)


def _decide(state: AclState, command):
    name, username = command[0], command[1]
    if name == "create_user":
        return create_user(state, username, "p")
    if name == "delete_user":
        return delete_user(state, username)
    if name == "disable":
        return update_user(state, username, status=UserStatus.DISABLED)
    if name == "acl":
        return create_acl(state, username, custom(entry(command[2])))
    return delete_acl(state, username)


@settings(max_examples=150, deadline=None)
@given(st.lists(COMMANDS, max_size=12))
def test_any_command_sequence_keeps_the_invariants(commands):
    state = AclState()
    for command in commands:
        decision = _decide(state, command)
        before = state
        state = apply_all(state, decision.events)
        assert state.version == before.version + len(decision.events)
        assert len(decision.events) == (0 if decision.rejected else 1)
        assert set(state.acls) <= set(state.users)
        assert all(acl.policies and all(p.entries for p in acl.policies) for acl in state.acls.values())
        assert set(state.index.by_username) == set(state.acls)
