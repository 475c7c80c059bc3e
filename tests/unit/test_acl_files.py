"""The ACL document: what it reads to, the line and key every error names, and never anything else."""
from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from metadata.acl_files import dump_acl_toml, parse_acl_toml
from metadata.acl_model import Action, PolicyDecision, PolicyType, Resource, UserStatus, UserType
from metadata.authorization import AccessReason
from metadata.config import ConfigError

SECURE = """\
# the issue's conf/secure/acl.toml
[[users]]
username = "admin"
password = "admin-secret"
userType = "Super"

[[users]]
username = "producer1"
password = "producer1-secret"

[[users]]
username = "consumer1"
password = "consumer1-secret"
userStatus = "enable"

[[acls]]
subject = "User:producer1"

[[acls.policies]]
resources = ["Topic:orders"]
actions = ["Pub"]
decision = "Allow"

[[acls]]
subject = "User:consumer1"

[[acls.policies]]
resources = ["Topic:orders", "Group:billing"]
actions = ["Sub"]
decision = "Allow"

[[acls.policies]]
resources = ["*"]
actions = "Pub,Sub"
decision = "Deny"
sourceIps = ["10.0.0.0/8"]
policyType = "Default"
"""
IP = "192.168.0.5"


def test_the_secure_example_reads_and_decides():
    state = parse_acl_toml(SECURE, "acl.toml", version=7)
    assert state.version == 7 and set(state.users) == {"admin", "producer1", "consumer1"}
    assert state.users["admin"].user_type is UserType.SUPER
    assert state.users["producer1"].user_type is UserType.NORMAL and state.users["producer1"].status is UserStatus.ENABLED
    assert "admin" not in state.acls
    consumer = state.acls["consumer1"]
    assert [e.resource.key for e in consumer.policy(PolicyType.CUSTOM).entries] == ["Topic:orders", "Group:billing"]
    default = consumer.policy(PolicyType.DEFAULT).entries[0]
    assert (default.decision, default.source_ips, default.actions) == (PolicyDecision.DENY, ("10.0.0.0/8",),
                                                                       {Action.PUB, Action.SUB})
    assert state.authorize("producer1", Action.PUB, Resource.topic("orders"), IP).allowed
    assert not state.authorize("producer1", Action.SUB, Resource.topic("orders"), IP).allowed
    assert state.authorize("consumer1", Action.SUB, Resource.group("billing"), IP).allowed
    assert state.authorize("consumer1", Action.PUB, Resource.topic("x"), "10.1.1.1").reason is AccessReason.DENIED_BY_POLICY
    assert state.authorize("admin", Action.CREATE, Resource.topic("orders"), IP).reason is AccessReason.SUPER_USER


def test_an_empty_document_is_no_users():
    state = parse_acl_toml("", "acl.toml")
    assert state.users == {} and state.acls == {}


def test_dump_reads_back_to_the_same_state():
    state = parse_acl_toml(SECURE)
    again = parse_acl_toml(dump_acl_toml(state), version=state.version)
    assert again.users == state.users
    assert {name: acl.policies for name, acl in again.acls.items()} == \
        {name: acl.policies for name, acl in state.acls.items()}


def error(text: str) -> ConfigError:
    with pytest.raises(ConfigError) as caught:
        parse_acl_toml(text, "acl.toml")
    return caught.value


def replaced(old: str, new: str) -> str:
    assert old in SECURE
    return SECURE.replace(old, new, 1)


@pytest.mark.parametrize("text, where, key, words", [
    (replaced('actions = ["Pub"]', 'actions = ["Publish"]'), "acl.toml line 21", "acls[1].policies[1].actions",
     "'Publish' is not one of Pub"),
    (replaced('userType = "Super"', 'userType = "Root"'), "acl.toml line 5", "users[1].userType", "'Root'"),
    (replaced('resources = ["Topic:orders"]', 'resources = ["Topic:or ders"]'), "acl.toml line 20",
     "acls[1].policies[1].resources", "not a valid topic name"),
    (replaced('sourceIps = ["10.0.0.0/8"]', 'sourceIps = ["10.0.0.0/33"]'), "acl.toml line 36",
     "acls[2].policies[2].sourceIps", "not an IP address"),
    (replaced('subject = "User:producer1"', 'subject = "User:nobody"'), "acl.toml line 17", "acls[1].subject",
     "no such user"),
    (replaced('subject = "User:producer1"', 'subject = "producer1"'), "acl.toml line 17", "acls[1].subject",
     "not a subject"),
    (replaced('decision = "Allow"\n', ''), "acl.toml line 19", "acls[1].policies[1].decision", "is required"),
    (replaced('password = "producer1-secret"', 'pasword = "x"'), "acl.toml line 9", "users[2].pasword", "unknown key"),
    (replaced('username = "consumer1"', 'username = "producer1"'), "acl.toml line 12", "users[3].username",
     "given twice"),
    (replaced('subject = "User:consumer1"', 'subject = "User:producer1"'), "acl.toml line 25", "acls[2].subject",
     "another [[acls]] table"),
    (replaced('resources = ["Topic:orders", "Group:billing"]', 'resources = ["Topic:orders", "Topic:orders"]'),
     "acl.toml line 24", "acls[2].policies", "Topic:orders is given twice"),
    (replaced('policyType = "Default"', 'policyType = "Fallback"'), "acl.toml line 37",
     "acls[2].policies[2].policyType", "'Fallback'"),
    (replaced('resources = ["*"]', 'resources = []'), "acl.toml line 33", "acls[2].policies[2].resources",
     "non-empty list"),
    (replaced('userType = "Super"', 'userType = 1'), "acl.toml line 5", "users[1].userType", "1 is not one of"),
    ("who = 1\n" + SECURE, "acl.toml line 1", "who", "unknown key"),
    (SECURE + "who = 1\n", "acl.toml line 38", "acls[2].policies[2].who", "unknown key"),  # TOML: inside the last table
    (replaced('password = "admin-secret"', 'password = "admin-secret'), "acl.toml line 4", None, "not valid TOML"),
    ("users = 3", "acl.toml line 1", "users", "must be a list"),
    ('password = "x"', "acl.toml line 1", "password", "unknown key"),
    (SECURE + 'x = """', "acl.toml line 38", None, "not valid TOML"),
    ("users = [3]", "acl.toml line 1", "users[1]", "must be a table"),
    ('users = [{username = "a", password = "b", userStatus = "off"}]', "acl.toml line 1", "users[1].userStatus",
     "not one of enable, disable"),
])
def test_every_error_names_line_and_key(text, where, key, words):
    caught = error(text)
    assert caught.where == where
    assert caught.key == key
    assert words in caught.reason


# ---- fuzzing: only ConfigError, naming a line or a key ----

def _mutations() -> st.SearchStrategy[str]:
    lines = SECURE.splitlines()
    junk = st.sampled_from(['"', "[", "]]", "=", "x = 1", "[[acls.policies]]", "[[users]]", 'resources = [1]',
                            'actions = []', 'decision = "allow"', 'sourceIps = "1.2.3.4"', "\\u0000", "{", "}",
                            "userType = true", 'subject = "User:"', "[users]", "policies = 3", "a.b.c = 1",
                            'resources = ["Cluster"]', "actions = [[]]", 'sourceIps = ["::1", 2]'])
    edit = st.tuples(st.integers(0, len(lines)), st.sampled_from(["insert", "replace", "delete"]), junk)

    def apply_edits(edits):
        out = list(lines)
        for index, kind, text in edits:
            index = min(index, len(out))
            if kind == "insert" or index == len(out):
                out.insert(index, text)
            elif kind == "replace":
                out[index] = text
            else:
                del out[index]
        return "\n".join(out)
    return st.lists(edit, min_size=1, max_size=4).map(apply_edits)


def _check(text: str) -> None:
    try:
        parse_acl_toml(text, "acl.toml")
    except ConfigError as exc:
        assert exc.where.startswith("acl.toml")
        named_line = re.fullmatch(r"acl\.toml line \d+", exc.where) is not None
        assert named_line or exc.key, str(exc)
        assert "Traceback" not in str(exc)


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_mutations())
def test_a_mangled_document_fails_only_with_a_named_error(text):
    _check(text)


@settings(max_examples=150, deadline=None)
@given(st.text(max_size=200))
def test_any_text_fails_only_with_a_named_error(text):
    try:
        parse_acl_toml(text, "acl.toml")
    except ConfigError as exc:
        assert exc.where.startswith("acl.toml")


def test_deep_nesting_and_size_are_named_errors():
    assert "nested too deeply" in error("a = " + "[" * 3000 + "]" * 3000).reason
    assert "longer than" in error("#" * (5 << 20)).reason
