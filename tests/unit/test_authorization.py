"""ACL 2.0 decisions: precedence tables, users, source ranges, and the pattern matcher's properties.

The oracle in the property tests is a line-by-line transliteration of upstream's
``AclAuthorizationHandler`` (develop 8fc57f1: filter, custom-then-default, sort by
``comparePolicyEntries``, take the first), so the compiled index is held to decide exactly as
RocketMQ does.
"""
from __future__ import annotations

import functools
import ipaddress

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from metadata.acl_model import (Acl, AclInputError, AclRejection, Action, Policy, PolicyDecision, PolicyEntry,
                                PolicyType, Resource, ResourcePattern, ResourceType, User, UserStatus, UserType,
                                parse_actions, parse_resource, parse_source_ip, parse_subject, strip_retry_and_dlq)
from metadata.authorization import AccessReason, AclIndex, Requirement, authorize, authorize_all

ALLOW, DENY = PolicyDecision.ALLOW, PolicyDecision.DENY
CUSTOM, DEFAULT = PolicyType.CUSTOM, PolicyType.DEFAULT
IP = "192.168.0.7"


def entry(resource: str, actions: str = "Pub", decision: PolicyDecision = ALLOW, ips: tuple[str, ...] = ()) -> PolicyEntry:
    return PolicyEntry(parse_resource(resource), parse_actions(actions), decision, ips)


def decide(custom=(), default=(), action=Action.PUB, resource=Resource.topic("orders-eu-1"), ip=IP,
           user=User("u", "p"), username="u"):
    policies = tuple(Policy(kind, tuple(entries)) for kind, entries in ((CUSTOM, custom), (DEFAULT, default)) if entries)
    index = AclIndex.of([Acl("u", policies)] if policies else [])
    return authorize({user.username: user}, index, username, action, resource, ip)


# ---- precedence ----

PRECEDENCE = [
    # (custom entries, default entries, expected reason, winning resource key)
    ([entry("Topic:orders-eu-1", decision=DENY), entry("Topic:orders-*")], [], "DENIED_BY_POLICY", "Topic:orders-eu-1"),
    ([entry("Topic:orders-eu-1"), entry("Topic:orders-*", decision=DENY)], [], "ALLOWED", "Topic:orders-eu-1"),
    ([entry("Topic:orders-*", decision=DENY), entry("Topic:*")], [], "DENIED_BY_POLICY", "Topic:orders-*"),
    ([entry("Topic:*", decision=DENY), entry("Topic:orders-*")], [], "ALLOWED", "Topic:orders-*"),
    ([entry("Topic:*", decision=DENY), entry("*")], [], "DENIED_BY_POLICY", "Topic:*"),
    ([entry("*", decision=DENY), entry("Topic:*")], [], "ALLOWED", "Topic:*"),
    ([entry("Topic:orders-*", decision=DENY), entry("Topic:orders-eu-*")], [], "ALLOWED", "Topic:orders-eu-*"),
    ([entry("Topic:orders-eu-*", decision=DENY), entry("Topic:orders-*")], [], "DENIED_BY_POLICY", "Topic:orders-eu-*"),
    ([entry("Topic:o*"), entry("Topic:orders-eu-1*", decision=DENY), entry("Topic:ord*")], [],
     "DENIED_BY_POLICY", "Topic:orders-eu-1*"),
    # upstream's own test evaluate9: literal deny beats *, Topic:*, Topic:test*; Topic:test_* deny beats Topic:test*
    ([entry("*"), entry("Topic:*"), entry("Topic:orders*"), entry("Topic:orders-*", decision=DENY)], [],
     "DENIED_BY_POLICY", "Topic:orders-*"),
    # custom before default, whatever the specificity
    ([entry("*")], [entry("Topic:orders-eu-1", decision=DENY)], "ALLOWED", "*"),
    ([entry("Topic:*", decision=DENY)], [entry("Topic:orders-eu-1")], "DENIED_BY_POLICY", "Topic:*"),
    # default only when no custom entry matches (the custom one is for another action)
    ([entry("Topic:orders-eu-1", actions="Sub")], [entry("Topic:*")], "ALLOWED", "Topic:*"),
    ([entry("Topic:orders-eu-1", actions="Sub")], [entry("Topic:*", decision=DENY)], "DENIED_BY_POLICY", "Topic:*"),
    # an entry for another action or another type does not match: the less specific one decides
    ([entry("Topic:orders-eu-1", actions="Sub", decision=DENY), entry("Topic:*")], [], "ALLOWED", "Topic:*"),
    ([entry("Group:orders-eu-1", decision=DENY), entry("Topic:orders-*")], [], "ALLOWED", "Topic:orders-*"),
    # All covers every action; Any-of requests
    ([entry("Topic:orders-eu-1", actions="All", decision=DENY), entry("Topic:*")], [], "DENIED_BY_POLICY",
     "Topic:orders-eu-1"),
    # no match at all
    ([entry("Topic:payments")], [entry("Group:*")], "NO_MATCHING_POLICY", None),
    ([], [], "NO_MATCHING_POLICY", None),
]


@pytest.mark.parametrize("custom, default, reason, winner", PRECEDENCE)
def test_precedence(custom, default, reason, winner):
    decision = decide(custom, default)
    assert decision.reason.value == reason
    assert (decision.entry.resource.key if decision.entry else None) == winner
    assert decision.allowed == (reason == "ALLOWED")


def test_deny_breaks_a_tie_at_equal_specificity():
    # only reachable with two entries of one resource, which the commands refuse; the core still says deny
    for order in ((entry("Topic:orders-eu-1"), entry("Topic:orders-eu-1", decision=DENY)),
                  (entry("Topic:orders-eu-1", decision=DENY), entry("Topic:orders-eu-1"))):
        assert decide(order).reason is AccessReason.DENIED_BY_POLICY


def test_a_request_for_any_of_several_actions_matches_an_entry_holding_one():
    assert decide([entry("Topic:orders-eu-1", actions="Sub")], action=(Action.PUB, Action.SUB)).allowed
    assert not decide([entry("Topic:orders-eu-1", actions="Get")], action=(Action.PUB, Action.SUB)).allowed


# ---- users ----

def test_users_before_policies():
    allow_all = [entry("*", actions="All")]
    assert decide(allow_all, username="").reason is AccessReason.ANONYMOUS
    assert decide(allow_all, username="nobody").reason is AccessReason.NO_SUCH_USER
    assert decide(allow_all, user=User("u", "p", status=UserStatus.DISABLED)).reason is AccessReason.USER_DISABLED
    deny_all = [entry("*", actions="All", decision=DENY)]
    assert decide(deny_all, user=User("u", "p", UserType.SUPER)).reason is AccessReason.SUPER_USER
    assert decide((), user=User("u", "p", UserType.SUPER)).allowed
    disabled_super = User("u", "p", UserType.SUPER, UserStatus.DISABLED)
    assert decide(allow_all, user=disabled_super).reason is AccessReason.USER_DISABLED


def test_the_refusal_message_names_user_action_resource_and_address():
    message = decide([entry("Topic:orders-*", decision=DENY)]).message()
    assert message == ("User:u may not Pub on Topic:orders-eu-1 from 192.168.0.7: DENIED_BY_POLICY "
                       "(Custom entry Topic:orders-*)")


# ---- source ranges ----

@pytest.mark.parametrize("ips, source, matches", [
    ((), "10.1.2.3", True),
    ((), "", True),
    (("192.168.0.0/24",), "192.168.0.7", True),
    (("192.168.0.0/24",), "192.168.1.7", False),
    (("192.168.0.5/24",), "192.168.0.200", True),       # host bits ignored, as upstream masks them
    (("192.168.0.7",), "192.168.0.7", True),
    (("192.168.0.7",), "192.168.0.8", False),
    (("10.0.0.0/8", "192.168.0.7"), "192.168.0.7", True),
    (("192.168.0.0/24",), "", False),                    # ranges but no address: no match
    (("192.168.0.0/24",), "not an address", False),
    (("192.168.0.0/24",), "::ffff:192.168.0.9", True),   # an IPv4-mapped peer is its IPv4
    (("::1",), "0:0:0:0:0:0:0:1", True),                 # addresses, not strings
    (("2001:db8::/32",), "2001:db8::1", True),
    (("2001:db8::/32",), "192.168.0.7", False),
    (("::ffff:10.0.0.0/104",), "10.9.9.9", True),
    (("0.0.0.0/0",), "8.8.8.8", True),
])
def test_source_ranges(ips, source, matches):
    decision = decide([entry("Topic:orders-eu-1", ips=ips)], ip=source)
    assert decision.allowed is matches
    assert decision.reason is (AccessReason.ALLOWED if matches else AccessReason.NO_MATCHING_POLICY)


def test_an_entry_from_another_address_falls_through_to_a_less_specific_one():
    custom = [entry("Topic:orders-eu-1", ips=("10.0.0.0/8",), decision=DENY), entry("Topic:*")]
    assert decide(custom, ip="10.0.0.1").reason is AccessReason.DENIED_BY_POLICY
    assert decide(custom, ip="192.168.0.1").reason is AccessReason.ALLOWED


def test_authorize_all_returns_the_first_refusal():
    users = {"u": User("u", "p")}
    index = AclIndex.of([Acl("u", (Policy(CUSTOM, (entry("Group:billing", actions="Sub"),
                                                    entry("Topic:orders", actions="Sub"))),))])
    needs = [Requirement(frozenset({Action.SUB}), Resource.group("billing")),
             Requirement(frozenset({Action.SUB}), Resource.topic("orders"))]
    assert authorize_all(users, index, "u", needs, IP).allowed
    refused = authorize_all(users, index, "u", needs + [Requirement(frozenset({Action.SUB}), Resource.topic("x"))], IP)
    assert refused.reason is AccessReason.NO_MATCHING_POLICY and refused.requirement.resource.key == "Topic:x"
    assert authorize_all(users, index, "u", [], IP) is None


# ---- parsing ----

@pytest.mark.parametrize("text, key, pattern", [
    ("*", "*", ResourcePattern.ANY), ("Topic:*", "Topic:*", ResourcePattern.ANY),
    ("topic:orders", "Topic:orders", ResourcePattern.LITERAL), ("Group:bill-*", "Group:bill-*", ResourcePattern.PREFIXED),
    ("Cluster", "Cluster:*", ResourcePattern.ANY), ("Cluster:DefaultCluster", "Cluster:DefaultCluster",
                                                    ResourcePattern.LITERAL),
    (" Topic:a ", "Topic:a", ResourcePattern.LITERAL),
])
def test_resource_keys(text, key, pattern):
    resource = parse_resource(text)
    assert (resource.key, resource.pattern) == (key, pattern)
    assert parse_resource(resource.key) == resource


@pytest.mark.parametrize("text", ["", "Topic:", "Topic", "Queue:a", "Namespace:a", "Topic:a*b", "Topic:a b",
                                  "Group:%RETRY%g", "Any:x", "Topic:**", 7, None, "Cluster:"])
def test_bad_resources_are_named_rejections(text):
    with pytest.raises(AclInputError) as caught:
        parse_resource(text)
    assert caught.value.reason is AclRejection.INVALID_RESOURCE


def test_other_parsers():
    assert parse_actions("Pub|sub") == {Action.PUB, Action.SUB}
    assert parse_actions(["ALL"]) == {Action.ALL}
    for bad, reason in ((["Any"], AclRejection.INVALID_ACTION), ([], AclRejection.EMPTY_ACTIONS),
                        ("Publish", AclRejection.INVALID_ACTION), (3, AclRejection.INVALID_ACTION)):
        with pytest.raises(AclInputError) as caught:
            parse_actions(bad)
        assert caught.value.reason is reason
    assert parse_subject("User:alice") == "alice"
    for bad in ("alice", "Group:alice", "User:", "User:a b"):
        with pytest.raises(AclInputError):
            parse_subject(bad)
    assert parse_source_ip(" 10.0.0.0/8 ") == "10.0.0.0/8"
    for bad in ("10.0.0.0/33", "10.0.0", "10.0.0.*", "", "host"):
        with pytest.raises(AclInputError):
            parse_source_ip(bad)


def test_retry_and_dlq_names_are_their_groups():
    assert Resource.group("%RETRY%billing") == Resource.group("billing") == Resource(ResourceType.GROUP, "billing")
    assert Resource.group("%DLQ%billing").key == "Group:billing"
    assert Resource.topic("%RETRY%billing").key == "Group:billing"
    assert Resource.topic("%RETRY%billing%orders").key == "Group:billing"  # RelayMQ's per-topic retry topic
    assert Resource.topic("%DLQ%billing").key == "Group:billing"
    assert strip_retry_and_dlq("%RETRY%%0123abcd") == "%0123abcd"
    assert decide([entry("Group:billing", actions="Sub")], action=Action.SUB,
                  resource=Resource.group("%RETRY%billing")).allowed


# ---- properties: the pattern matcher and the index against upstream's algorithm ----

NAMES = st.text(alphabet="ab-", min_size=1, max_size=4)
TYPES = st.sampled_from([ResourceType.TOPIC, ResourceType.GROUP])


@st.composite
def patterns(draw) -> Resource:
    kind = draw(st.sampled_from(["literal", "prefixed", "type_any", "any"]))
    if kind == "any":
        return Resource(ResourceType.ANY, "", ResourcePattern.ANY)
    resource_type = draw(TYPES)
    if kind == "type_any":
        return Resource(resource_type, "", ResourcePattern.ANY)
    pattern = ResourcePattern.LITERAL if kind == "literal" else ResourcePattern.PREFIXED
    return Resource(resource_type, draw(NAMES), pattern)


@given(patterns(), TYPES, NAMES)
def test_a_pattern_matches_as_its_key_says(pattern, resource_type, name):
    request = Resource(resource_type, name)
    key = pattern.key
    if key == "*":
        expected = True
    else:
        type_text, _, rest = key.partition(":")
        expected = type_text == resource_type.value and (
            rest == "*" or (rest.endswith("*") and name.startswith(rest[:-1])) or rest == name)
    assert pattern.matches(request) is expected
    assert parse_resource(key) == pattern


def _upstream_compare(o1: PolicyEntry, o2: PolicyEntry) -> int:
    """AclAuthorizationHandler.comparePolicyEntries, develop 8fc57f1, line by line."""
    compare = 0
    r1, r2 = o1.resource, o2.resource
    if r1.type is not r2.type:
        if r1.type is ResourceType.ANY:
            compare = 1
        if r2.type is ResourceType.ANY:
            compare = -1
    elif r1.pattern is r2.pattern:
        if r1.pattern is ResourcePattern.PREFIXED:
            compare = -1 * ((len(r1.name) > len(r2.name)) - (len(r1.name) < len(r2.name)))
    else:
        if r1.pattern is ResourcePattern.LITERAL:
            compare = -1
        elif r2.pattern is ResourcePattern.LITERAL:
            compare = 1
        elif r1.pattern is ResourcePattern.PREFIXED:
            compare = -1
        elif r2.pattern is ResourcePattern.PREFIXED:
            compare = 1
    if compare != 0:
        return compare
    return 1 if o1.decision is DENY else -1 if o2.decision is DENY else 0


@given(patterns(), patterns(), TYPES, NAMES)
def test_two_patterns_matching_one_resource_are_never_equally_specific(first, second, kind, name):
    # why the deny tie-break never decides anything with one entry per resource per policy
    request = Resource(kind, name)
    if first.matches(request) and second.matches(request) and first != second:
        one, other = PolicyEntry(first, frozenset({Action.PUB})), PolicyEntry(second, frozenset({Action.PUB}))
        assert _upstream_compare(one, other) != 0 and _upstream_compare(one, other) == -_upstream_compare(other, one)


def _in_range(entry_: PolicyEntry, ip: str) -> bool:
    return not entry_.source_ips or any(ipaddress.ip_address(ip) in ipaddress.ip_network(r) for r in entry_.source_ips)


def _upstream(custom, default, actions, request, ip) -> PolicyEntry | None:
    def matching(entries):
        return [e for e in entries if e.resource.matches(request) and e.covers(actions) and _in_range(e, ip)]
    found = matching(custom) or matching(default)
    return sorted(found, key=functools.cmp_to_key(_upstream_compare))[0] if found else None


def _unique(entries):
    return list({e.resource: e for e in entries}.values())  # one entry per resource, as upstream keeps


ENTRIES = st.builds(PolicyEntry, patterns(), st.frozensets(st.sampled_from([Action.PUB, Action.SUB, Action.ALL]),
                                                           min_size=1), st.sampled_from([ALLOW, DENY]),
                    st.sampled_from([(), (), ("192.168.0.0/24",), ("10.0.0.0/8", "192.168.0.9")]))


@settings(max_examples=150, deadline=None)
@given(st.lists(ENTRIES, max_size=8), st.lists(ENTRIES, max_size=4), TYPES, NAMES,
       st.sampled_from([Action.PUB, Action.SUB]), st.sampled_from(["192.168.0.9", "10.1.1.1", "172.16.0.1"]))
def test_the_index_decides_as_upstream_sorts(custom, default, kind, name, action, ip):
    custom, default = _unique(custom), _unique(default)
    request = Resource(kind, name)
    expected = _upstream(custom, default, frozenset({action}), request, ip)
    decision = decide(custom, default, action=action, resource=request, ip=ip)
    if expected is None:
        assert decision.reason is AccessReason.NO_MATCHING_POLICY
    else:
        assert decision.entry == expected
        assert decision.allowed is (expected.decision is ALLOW)


def test_a_thousand_entries_index_by_literal_and_prefix():
    entries = [entry(f"Topic:t{i}", actions="Pub", decision=DENY if i % 3 == 0 else ALLOW) for i in range(900)]
    entries += [entry(f"Topic:p{i}-*", actions="Sub") for i in range(99)] + [entry("*", actions="Get")]
    users = {"u": User("u", "p")}
    index = AclIndex.of([Acl("u", (Policy(CUSTOM, tuple(entries)),))])
    assert authorize(users, index, "u", Action.PUB, Resource.topic("t3"), IP).reason is AccessReason.DENIED_BY_POLICY
    assert authorize(users, index, "u", Action.PUB, Resource.topic("t4"), IP).allowed
    assert authorize(users, index, "u", Action.SUB, Resource.topic("p42-x"), IP).entry.resource.key == "Topic:p42-*"
    assert authorize(users, index, "u", Action.GET, Resource.topic("t4"), IP).entry.resource.key == "*"
    assert not authorize(users, index, "u", Action.SUB, Resource.topic("t4"), IP).allowed
