"""RocketMQ 4.x plain_acl.yml -> ACL 2.0 users and ACLs, with a warning for what does not carry over."""
from __future__ import annotations

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from metadata.acl_files import dump_acl_toml, migrate_plain_acl, parse_acl_toml
from metadata.acl_model import Action, PolicyDecision, PolicyType, Resource, UserType
from metadata.authorization import AccessReason
from metadata.config import ConfigError

# RocketMQ 4.9.8's distribution/conf/plain_acl.yml, then accounts as operators wrote them
PLAIN_ACL = """\
globalWhiteRemoteAddresses:
  - 10.10.103.*
  - 192.168.0.*

accounts:
  - accessKey: RocketMQ
    secretKey: 12345678
    whiteRemoteAddress:
    admin: false
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms:
      - topicA=DENY
      - topicB=PUB|SUB
      - topicC=SUB
    groupPerms:
      # the group should convert to retry topic
      - groupA=DENY
      - groupB=PUB|SUB
      - groupC=SUB

  - accessKey: rocketmq2
    secretKey: 12345678
    whiteRemoteAddress: 192.168.1.*
    # if it is admin, it could access all resources
    admin: true

  - accessKey: orders-app
    secretKey: "orders-app-secret"
    defaultTopicPerm: PUB|SUB
    topicPerms:
      - orders = PUB
      - payments=READ
      - "%RETRY%billing=SUB"
      - broken
      - orders=PUB
    groupPerms:
      - "%RETRY%billing=SUB"
    color: blue

  - accessKey: RocketMQ
    secretKey: another

  - secretKey: nobody

  - accessKey:
    secretKey: empty-key
"""
IP = "172.16.0.3"


@pytest.fixture(scope="module")
def migrated():
    return migrate_plain_acl(PLAIN_ACL, "plain_acl.yml")


def test_accounts_become_users(migrated):
    users = {user.username: user for user in migrated.users}
    assert list(users) == ["RocketMQ", "rocketmq2", "orders-app"]
    assert users["RocketMQ"].password == "12345678"  # YAML read it as a number
    assert users["RocketMQ"].user_type is UserType.NORMAL
    assert users["rocketmq2"].user_type is UserType.SUPER
    assert "rocketmq2" not in {acl.username for acl in migrated.acls}


def test_permissions_become_custom_and_default_entries(migrated):
    acl = {acl.username: acl for acl in migrated.acls}["RocketMQ"]
    custom = {e.resource.key: (sorted(a.value for a in e.actions), e.decision) for e in acl.policy(PolicyType.CUSTOM).entries}
    assert custom == {
        "Topic:topicA": (["All"], PolicyDecision.DENY), "Topic:topicB": (["Pub", "Sub"], PolicyDecision.ALLOW),
        "Topic:topicC": (["Sub"], PolicyDecision.ALLOW), "Group:groupA": (["All"], PolicyDecision.DENY),
        "Group:groupB": (["Pub", "Sub"], PolicyDecision.ALLOW), "Group:groupC": (["Sub"], PolicyDecision.ALLOW)}
    default = {e.resource.key: (sorted(a.value for a in e.actions), e.decision) for e in acl.policy(PolicyType.DEFAULT).entries}
    assert default == {"Topic:*": (["All"], PolicyDecision.DENY), "Group:*": (["Sub"], PolicyDecision.ALLOW)}


@pytest.mark.parametrize("username, action, resource, reason", [
    ("RocketMQ", Action.PUB, Resource.topic("topicA"), AccessReason.DENIED_BY_POLICY),
    ("RocketMQ", Action.SUB, Resource.topic("topicB"), AccessReason.ALLOWED),
    ("RocketMQ", Action.PUB, Resource.topic("topicC"), AccessReason.DENIED_BY_POLICY),  # Topic:* Deny decides
    ("RocketMQ", Action.PUB, Resource.topic("other"), AccessReason.DENIED_BY_POLICY),
    ("RocketMQ", Action.SUB, Resource.group("groupA"), AccessReason.DENIED_BY_POLICY),
    ("RocketMQ", Action.SUB, Resource.group("%RETRY%groupC"), AccessReason.ALLOWED),
    ("RocketMQ", Action.SUB, Resource.group("anyGroup"), AccessReason.ALLOWED),
    ("rocketmq2", Action.CREATE, Resource.topic("x"), AccessReason.SUPER_USER),
    ("orders-app", Action.PUB, Resource.topic("orders"), AccessReason.ALLOWED),
    ("orders-app", Action.SUB, Resource.topic("orders"), AccessReason.ALLOWED),  # 4.x refused it: warned below
    ("orders-app", Action.PUB, Resource.topic("payments"), AccessReason.DENIED_BY_POLICY),  # unknown perm = DENY
    ("orders-app", Action.SUB, Resource.group("billing"), AccessReason.ALLOWED),
    ("orders-app", Action.SUB, Resource.group("other"), AccessReason.NO_MATCHING_POLICY),
])
def test_migrated_state_decides(migrated, username, action, resource, reason):
    assert migrated.state().authorize(username, action, resource, IP).reason is reason


def test_what_does_not_carry_over_is_a_warning(migrated):
    text = "\n".join(migrated.warnings)
    expected = [
        "globalWhiteRemoteAddresses ['10.10.103.*', '192.168.0.*']",
        "accounts[2] (rocketmq2): whiteRemoteAddress '192.168.1.*'",
        "accounts[3] (orders-app): topicPerms item 'payments': permission 'READ' is not PUB, SUB, PUB|SUB or DENY",
        "accounts[3] (orders-app): topicPerms item '%RETRY%billing': a retry or DLQ topic is decided by its group",
        "accounts[3] (orders-app): topicPerms item 'broken' is not NAME=PERM; skipped",
        "accounts[3] (orders-app): topicPerms names Topic:orders twice; the last one is kept",
        "accounts[3]: unknown key 'color' ignored",
        "accounts[3] (orders-app): 4.x refused Sub on Topic:orders",
        "accounts[4]: accessKey 'RocketMQ' is given again; the first one is kept",
        "accounts[5]: '': a username is 1..256",
        "accounts[6]: '': a username is 1..256",
    ]
    for words in expected:
        assert words in text, words
    assert len(migrated.warnings) == len(expected)


def test_the_result_prints_as_an_acl_document_that_reads_back(migrated):
    state = parse_acl_toml(dump_acl_toml(migrated.state()), "migrated.toml")
    assert state.users == migrated.state().users
    assert state.acls == migrated.state().acls


@pytest.mark.parametrize("text, where, words", [
    ("accounts: [", "plain_acl.yml line 1", "not valid YAML"),
    ("- just\n- a list\n", "plain_acl.yml", "must be a mapping"),
    ("accounts: 3\n", "plain_acl.yml", "must be a list"),
    ("accounts:\n  - accessKey: a\n    secretKey: !!python/object:os.system x\n", "plain_acl.yml line 3", "not valid YAML"),
])
def test_unreadable_files_are_named_errors(text, where, words):
    with pytest.raises(ConfigError) as caught:
        migrate_plain_acl(text, "plain_acl.yml")
    assert caught.value.where == where and words in caught.value.reason


def test_an_empty_file_migrates_to_nothing():
    result = migrate_plain_acl("", "plain_acl.yml")
    assert (result.users, result.acls, result.warnings) == ((), (), ())


YAML_VALUES = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=12),
                           lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                                        max_size=4), max_leaves=12)
ACCOUNT = st.dictionaries(st.sampled_from(["accessKey", "secretKey", "admin", "whiteRemoteAddress", "defaultTopicPerm",
                                           "defaultGroupPerm", "topicPerms", "groupPerms", "x"]),
                          YAML_VALUES | st.lists(st.sampled_from(["a=PUB", "b=SUB", "=", "c=DENY=1", "%DLQ%g=SUB"])),
                          max_size=8)


@settings(max_examples=60, deadline=None)  # PyYAML in pure Python: about 10 ms an example
@given(st.dictionaries(st.sampled_from(["accounts", "globalWhiteRemoteAddresses", "dataVersion", "other"]),
                       st.lists(ACCOUNT, max_size=3) | YAML_VALUES, max_size=3))
def test_any_yaml_document_migrates_or_fails_with_a_named_error(document):
    try:
        result = migrate_plain_acl(yaml.safe_dump(document), "plain_acl.yml")
    except ConfigError as exc:
        assert exc.where.startswith("plain_acl.yml")
        return
    state = result.state()
    assert set(state.acls) <= set(state.users)
    assert all(acl.policies for acl in state.acls.values())
