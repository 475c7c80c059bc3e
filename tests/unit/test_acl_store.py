"""The ACL file store: loaded at start, watched, written back atomically, a bad edit keeps the last good version."""
from __future__ import annotations

import asyncio
import logging
import os
from pathlib import Path

import pytest

from metadata import acl_state
from metadata.acl_model import Action, Policy, PolicyDecision, PolicyEntry, PolicyType, Resource, parse_resource
from metadata.config import ConfigError
from services.access.acl_store import AclFileBad, AclStore

GOOD = '''[[users]]
username = "admin"
password = "admin-secret"
userType = "Super"

[[users]]
username = "producer1"
password = "producer1-secret"

[[acls]]
subject = "User:producer1"

[[acls.policies]]
resources = ["Topic:orders"]
actions = ["Pub"]
decision = "Allow"
'''


def write(path: Path, text: str) -> None:
    """An edit the watcher must see even within one clock tick: a new inode, as editors save."""
    temporary = path.with_suffix(".edit")
    temporary.write_text(text)
    os.replace(temporary, path)


@pytest.fixture
def store(tmp_path) -> AclStore:
    path = tmp_path / "acl.toml"
    path.write_text(GOOD)
    return AclStore.open(path)


def reload(store: AclStore) -> bool:
    return asyncio.run(store.watch())


def allowed(store: AclStore, user: str, topic: str) -> bool:
    return store.state.authorize(user, Action.PUB, Resource.topic(topic), "127.0.0.1").allowed


def test_the_file_at_start_is_version_1_and_a_bad_one_names_its_line(tmp_path, store):
    assert store.state.version == 1 and allowed(store, "producer1", "orders") and not allowed(store, "producer1", "x")
    assert store.secret_key("producer1") == "producer1-secret" and store.secret_key("nobody") is None
    bad = tmp_path / "bad.toml"
    bad.write_text(GOOD.replace('actions = ["Pub"]', 'actions = ["Publish"]'))
    with pytest.raises(ConfigError, match=r"bad.toml line 15: acls\[1\]\.policies\[1\]\.actions"):
        AclStore.open(bad)


def test_an_unchanged_file_is_not_read_again(store):
    assert not reload(store)
    os.utime(store.path)  # touched: read again, same users and ACLs, same version
    assert not reload(store) and store.state.version == 1


def test_a_good_edit_is_the_next_version_and_a_bad_one_keeps_the_last_good(store, caplog):
    write(store.path, GOOD.replace("Topic:orders", "Topic:orders-*"))
    assert reload(store) and store.state.version == 2
    assert allowed(store, "producer1", "orders-eu") and not allowed(store, "producer1", "orders")
    with caplog.at_level(logging.ERROR):
        write(store.path, GOOD.replace('decision = "Allow"', 'decision = "Maybe"'))
        assert not reload(store)
    assert store.state.version == 2 and allowed(store, "producer1", "orders-eu")
    assert "line 16" in caplog.text and "version 2 stays enforced" in caplog.text
    caplog.clear()
    assert not reload(store) and not caplog.text  # logged once per change, not every second
    write(store.path, GOOD)
    assert reload(store) and store.state.version == 3 and allowed(store, "producer1", "orders")


def test_a_deleted_file_keeps_the_last_good_version(store):
    store.path.unlink()
    assert not reload(store) and store.state.version == 1 and allowed(store, "producer1", "orders")


def test_a_change_is_written_then_enforced_and_the_watch_does_not_count_it_twice(store):
    entry = PolicyEntry(parse_resource("Topic:payments"), frozenset({Action.PUB}), PolicyDecision.ALLOW)
    decision = asyncio.run(store.change(lambda s: acl_state.create_acl(s, "producer1", [Policy(PolicyType.CUSTOM, (entry,))])))
    assert not decision.rejected and store.state.version == 2 and allowed(store, "producer1", "payments")
    assert "Topic:payments" in store.path.read_text()
    assert not reload(store) and store.state.version == 2
    assert AclStore.open(store.path).state.acls == store.state.acls  # the file is the truth
    assert not list(store.path.parent.glob(".acl.toml.tmp-*"))


def test_a_refused_change_writes_nothing(store):
    before = store.path.read_text()
    decision = asyncio.run(store.change(lambda s: acl_state.create_user(s, "admin", "x")))
    assert decision.rejected and decision.reply.reason.value == "USER_EXISTS"
    assert store.path.read_text() == before and store.state.version == 1


def test_a_change_reads_a_hand_edit_first_and_waits_for_a_bad_file_to_be_fixed(store):
    write(store.path, GOOD + '\n[[users]]\nusername = "late"\npassword = "late-secret"\n')
    asyncio.run(store.change(lambda s: acl_state.create_user(s, "newer", "newer-secret")))
    assert {"late", "newer"} <= set(store.state.users) and store.state.version == 3
    write(store.path, "[[users]\n")
    with pytest.raises(AclFileBad, match="line 1"):
        asyncio.run(store.change(lambda s: acl_state.create_user(s, "third", "third-secret")))
    assert store.path.read_text() == "[[users]\n" and store.state.version == 3


def test_a_disabled_user_is_known_as_disabled(store):
    asyncio.run(store.change(lambda s: acl_state.update_user(s, "producer1", status=acl_state.UserStatus.DISABLED)))
    assert store.disabled("producer1") and not store.disabled("admin") and not store.disabled("nobody")
