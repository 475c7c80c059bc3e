"""metadata.acl_replication: which version wins, what the controller commits, what a container does."""
from __future__ import annotations

import pytest

from ha.controller.events import decode_event, encode_event
from ha.raft.types import Entry
from metadata import acl_state
from metadata.acl_files import dump_acl_toml, parse_acl_toml
from metadata.acl_replication import (MAX_DOCUMENT_BYTES, UNSEEDED, AclDocument, AclReplicationRejection, AclStamp,
                                      CorruptDocument, Refused, ReplicatedAcl, SyncStep, answer_with_document,
                                      apply_document, decide_change, decide_seed, decide_sync)

SEED = """
[[users]]
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
"""
GOOD = dump_acl_toml(parse_acl_toml(SEED))
OTHER = dump_acl_toml(parse_acl_toml(SEED.replace("Topic:orders", "Topic:other")))


def seeded() -> ReplicatedAcl:
    document = decide_seed(ReplicatedAcl(), "o1", SEED)
    assert isinstance(document, AclDocument)
    return apply_document(ReplicatedAcl(), document)


# ---- the controller's side

def test_an_empty_controller_takes_the_first_seed_at_version_1_and_refuses_the_next():
    value = seeded()
    assert value.stamp == AclStamp("o1", 1) and set(value.state.users) == {"admin", "producer1"}
    again = decide_seed(value, "o2", OTHER)
    assert isinstance(again, Refused) and again.reason is AclReplicationRejection.ALREADY_SEEDED


@pytest.mark.parametrize("origin, text, reason, named", [
    ("o1", "[[users]]\nusername = 'x'\n", AclReplicationRejection.BAD_DOCUMENT, "line 1"),
    ("o1", SEED.replace('"Pub"', '"Publish"'), AclReplicationRejection.BAD_DOCUMENT, "actions"),
    ("o1", SEED.replace('subject = "User:producer1"', 'subject = "User:ghost"'), AclReplicationRejection.BAD_DOCUMENT,
     "no such user"),
    ("o1", "not toml ===", AclReplicationRejection.BAD_DOCUMENT, "not valid TOML"),
    ("", SEED, AclReplicationRejection.BAD_ORIGIN, "not an origin"),
    ("a b", SEED, AclReplicationRejection.BAD_ORIGIN, "not an origin"),
    ("o1", "#" * (MAX_DOCUMENT_BYTES + 1), AclReplicationRejection.DOCUMENT_TOO_LARGE, "bytes"),
])
def test_a_bad_seed_is_refused_naming_what_is_wrong(origin, text, reason, named):
    refused = decide_seed(ReplicatedAcl(), origin, text)
    assert isinstance(refused, Refused) and refused.reason is reason and named in refused.detail, refused


def test_an_accepted_command_commits_the_whole_next_version_and_a_rejected_one_nothing():
    value = seeded()
    document = decide_change(value, acl_state.create_user(value.state, "auditor", "auditor-secret"))
    assert isinstance(document, AclDocument) and (document.origin, document.version) == ("o1", 2)
    after = apply_document(value, document)
    assert after.stamp == AclStamp("o1", 2) and "auditor" in after.state.users
    assert decide_change(after, acl_state.create_user(after.state, "auditor", "x-secret")) is None  # USER_EXISTS


def test_a_change_that_would_outgrow_a_raft_entry_is_refused(monkeypatch):
    from metadata import acl_replication
    value = seeded()
    monkeypatch.setattr(acl_replication, "MAX_DOCUMENT_BYTES", len(GOOD) + 10)
    refused = decide_change(value, acl_state.create_user(value.state, "auditor", "auditor-secret"))
    assert isinstance(refused, Refused) and refused.reason is AclReplicationRejection.DOCUMENT_TOO_LARGE


def test_applying_a_document_that_does_not_parse_is_corruption_not_input():
    with pytest.raises(CorruptDocument):
        apply_document(ReplicatedAcl(), AclDocument("o1", 1, "garbage ="))
    with pytest.raises(AssertionError):  # an older version of the same origin never applies
        apply_document(seeded(), AclDocument("o1", 1, GOOD))


@pytest.mark.parametrize("known, sends", [
    (AclStamp("o1", 1), False), (UNSEEDED, True), (AclStamp("o1", 0), True), (AclStamp("o9", 1), True),
])
def test_the_document_goes_only_to_a_container_out_of_step(known, sends):
    assert answer_with_document(seeded(), known) is sends
    assert answer_with_document(ReplicatedAcl(), known) is False


def test_the_event_round_trips_through_the_raft_log_encoding():
    document = AclDocument("o1", 7, GOOD)
    assert decode_event(encode_event(document)) == document


def test_the_machine_applies_documents_and_its_snapshot_keeps_them():
    from ha.controller.liveness import BrokerLiveness
    from services.controller.machine import ControllerMachine

    machine = ControllerMachine(BrokerLiveness(1000, 10), lambda: 0, lambda name, view: None)
    machine.apply_entry(Entry(1, 1, encode_event(AclDocument("o1", 1, GOOD))))
    assert machine.acl.stamp == AclStamp("o1", 1)
    data = machine.snapshot_encoder()()
    restored = ControllerMachine(BrokerLiveness(1000, 10), lambda: 0, lambda name, view: None)
    restored.restore(data)
    assert restored.acl.stamp == AclStamp("o1", 1) and restored.acl.state.users == machine.acl.state.users
    empty = ControllerMachine(BrokerLiveness(1000, 10), lambda: 0, lambda name, view: None)
    plain = empty.snapshot_encoder()()
    assert b'"acl"' not in plain  # nothing seeded: the snapshot is the replica tables only
    restored.restore(plain)
    assert restored.acl == ReplicatedAcl()


# ---- a container's side: the table of docs/security.md

@pytest.mark.parametrize("enforced, offered, text, step", [
    (UNSEEDED, UNSEEDED, None, SyncStep.SEED),
    (AclStamp("o1", 3), UNSEEDED, None, SyncStep.SEED),  # a controller that lost its state: seeded again
    (AclStamp("o1", 3), AclStamp("o1", 3), None, SyncStep.IN_STEP),
    (UNSEEDED, AclStamp("o1", 1), GOOD, SyncStep.ADOPT),  # another container seeded first: its version wins
    (AclStamp("o1", 3), AclStamp("o2", 1), GOOD, SyncStep.ADOPT),  # a new history, even at a lower version
    (AclStamp("o1", 3), AclStamp("o1", 5), GOOD, SyncStep.ADOPT),  # missed versions: the document is whole
    (AclStamp("o1", 3), AclStamp("o1", 2), GOOD, SyncStep.KEEP),  # a stale answer never rolls back
    (AclStamp("o1", 3), AclStamp("o1", 4), None, SyncStep.BAD),
    (AclStamp("o1", 3), AclStamp("o1", 4), "users = 3", SyncStep.BAD),
    (AclStamp("o1", 3), AclStamp("o1", 4), "x" * (MAX_DOCUMENT_BYTES + 1), SyncStep.BAD),
])
def test_what_a_container_does_with_each_answer(enforced, offered, text, step):
    outcome = decide_sync(enforced, offered, text)
    assert outcome.step is step, outcome
    if step is SyncStep.ADOPT:
        assert outcome.state.version == offered.version and "producer1" in outcome.state.users
    else:
        assert outcome.state is None
    if step in (SyncStep.BAD, SyncStep.KEEP):
        assert str(enforced) in outcome.detail


def test_a_bad_document_names_the_line_and_keeps_what_is_enforced():
    outcome = decide_sync(AclStamp("o1", 3), AclStamp("o1", 4), GOOD.replace('"Pub"', '"Publish"'))
    assert outcome.step is SyncStep.BAD and "line" in outcome.detail and "version 3" in outcome.detail
