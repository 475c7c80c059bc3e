"""Replica metadata adoption: the pure decision, the table rules, each manager's adopt and the wire form."""
from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, strategies as st

from metadata.consumer_offsets import ConsumerOffsetTable
from metadata.data_version import DataVersion
from metadata.replica_metadata import (Adopt, AdoptReason, Keep, KeepReason, ReplicaMetadata, ReplyRejected, SyncDirection,
                                       VersionedDocument, adopted_offsets, adopted_topics, check_master_reply, decide_adoption)
from metadata.subscription_group import SubscriptionGroupConfig, SubscriptionGroupTable
from metadata.topic_config import TopicConfig, TopicTable
from proto import admin_pb2 as pb
from services.admin.replica_converters import (BadReplicaReply, held_from_proto, held_to_proto, replica_metadata_from_proto,
                                              replica_metadata_to_proto)
from services.broker.config import BrokerConfig
from services.broker.config_files import read_document
from services.broker.groups import GroupManager
from services.broker.offset_keeper import OffsetKeeper
from services.broker.topics import TopicManager

V1, V2, V3 = DataVersion(0, 100, 1), DataVersion(0, 200, 2), DataVersion(1, 50, 1)
versions = st.builds(DataVersion, st.integers(0, 3), st.integers(0, 3), st.integers(0, 3))


def test_slave_adopts_whenever_the_versions_differ_even_backwards():
    assert decide_adoption(V1, V1) == Keep(KeepReason.SAME_VERSION, V1, V1)
    assert decide_adoption(V1, V2) == Adopt(AdoptReason.VERSION_DIFFERS, V1, V2)
    assert decide_adoption(V2, V1) == Adopt(AdoptReason.VERSION_DIFFERS, V2, V1)  # a master restored from backup wins


def test_reverse_sync_adopts_newer_or_equal_and_keeps_a_newer_local_copy():
    assert isinstance(decide_adoption(V1, V1, SyncDirection.REVERSE), Adopt)  # ties adopt (reference 2.5)
    assert decide_adoption(V1, V3, SyncDirection.REVERSE).reason is AdoptReason.REMOTE_NOT_OLDER  # stateVersion first
    assert decide_adoption(V3, V2, SyncDirection.REVERSE) == Keep(KeepReason.LOCAL_NEWER, V3, V2)


@given(versions, versions)
def test_from_master_keeps_exactly_on_equal_versions(local, remote):
    assert isinstance(decide_adoption(local, remote), Keep) == (local == remote)


@given(versions, versions)
def test_reverse_agrees_with_data_version_compare(local, remote):
    assert isinstance(decide_adoption(local, remote, SyncDirection.REVERSE), Adopt) == (local.compare(remote) <= 0)


def _metadata(name="broker-a", broker_id=0, role="MASTER"):
    return ReplicaMetadata(name, broker_id, role, TopicTable(), SubscriptionGroupTable(), ConsumerOffsetTable(), VersionedDocument())


def test_only_the_master_of_the_same_broker_name_is_followed():
    assert check_master_reply("broker-a", _metadata()) is None
    assert check_master_reply("broker-b", _metadata()) is ReplyRejected.WRONG_BROKER_NAME
    assert check_master_reply("broker-a", _metadata(broker_id=1, role="SLAVE")) is ReplyRejected.NOT_THE_MASTER
    assert check_master_reply("broker-a", _metadata(broker_id=0, role="SLAVE")) is ReplyRejected.NOT_THE_MASTER


def test_adopted_topics_keep_local_system_topics_the_master_lacks():
    local = TopicTable(V1, {"old": TopicConfig("old"), "%RETRY%g": TopicConfig("%RETRY%g", 1, 1), "rmq_sys_x": TopicConfig("rmq_sys_x", 1, 1)})
    remote = TopicTable(V2, {"new": TopicConfig("new"), "rmq_sys_x": TopicConfig("rmq_sys_x", 2, 2)})
    table = adopted_topics(local, remote)
    assert table.data_version == V2
    assert set(table.topics) == {"new", "%RETRY%g", "rmq_sys_x"}
    assert table.topics["rmq_sys_x"].read_queue_nums == 2  # the master's copy wins where both have one


def test_adopted_offsets_copy_from_master_and_put_all_in_reverse():
    local = ConsumerOffsetTable(V1).with_offsets({("T", "G", 0): 5, ("T", "OnlyLocal", 0): 9}, V1)
    remote = ConsumerOffsetTable(V2).with_offsets({("T", "G", 0): 7, ("T", "G", 1): 3}, V2)
    assert adopted_offsets(local, remote) == remote
    merged = adopted_offsets(local, remote, SyncDirection.REVERSE)
    assert merged.data_version == V2
    assert list(merged.rows()) == [("T", "G", 0, 7), ("T", "G", 1, 3), ("T", "OnlyLocal", 0, 9)]


def test_topic_manager_adopts_with_the_remote_version_and_persists(tmp_path):
    topics = TopicManager(BrokerConfig(), tmp_path)
    topics.upsert(TopicConfig("mine"), now_ms=1)
    remote = TopicTable(DataVersion(0, 999, 42), {"theirs": TopicConfig("theirs", 4, 4)})
    assert isinstance(topics.adopt(remote), Adopt)
    assert topics.data_version == DataVersion(0, 999, 42) and set(topics.table.topics) == {"theirs"}
    assert read_document(topics.path, TopicTable.from_document) == topics.table
    before = topics.path.stat().st_mtime_ns
    assert isinstance(topics.adopt(remote), Keep)
    assert topics.path.stat().st_mtime_ns == before  # equal version: nothing written


def test_group_manager_adopts_the_whole_table(tmp_path):
    groups = GroupManager(tmp_path)
    groups.upsert(SubscriptionGroupConfig("local"), now_ms=1)
    remote = SubscriptionGroupTable(V2, {"G": SubscriptionGroupConfig("G", retry_max_times=3)})
    assert isinstance(groups.adopt(remote), Adopt)
    assert groups.table == remote
    assert read_document(groups.path, SubscriptionGroupTable.from_document) == remote
    assert isinstance(groups.adopt(remote), Keep)


def test_offset_keeper_versions_every_change_before_handing_the_table_out():
    keeper = OffsetKeeper(version_step=500)
    keeper.commit("T", "G", 0, 1, now_ms=10)
    assert keeper.table.data_version.counter == 0
    handed = keeper.versioned_table(now_ms=20)
    assert handed.data_version == DataVersion(0, 20, 1)
    assert keeper.versioned_table(now_ms=30) is handed  # nothing moved: same version
    assert keeper.table_to_persist(now_ms=40).to_document()["dataVersion"]["counter"] == 1  # still written, not bumped again
    keeper.adopt(ConsumerOffsetTable(V3))
    assert keeper.table_to_persist(now_ms=50) is None and keeper.versioned_table(60).data_version == V3


# ---- the wire form (services/admin/replica_converters.py) ----------------------------------------


def _full_metadata() -> ReplicaMetadata:
    return ReplicaMetadata(
        "broker-a", 0, "MASTER",
        TopicTable(V1, {"T": TopicConfig("T", 2, 2, message_type="FIFO", order=True)}),
        SubscriptionGroupTable(V2, {"G": SubscriptionGroupConfig("G", consume_message_orderly=True, retry_max_times=2)}),
        ConsumerOffsetTable(V3).with_offsets({("T", "G", 0): 5, ("T", "G", 1): 0}, V3),
        VersionedDocument(DataVersion(0, 7, 9), {"scanOffset": 3, "opOffset": 1, "pending": {2: 1_700_000_000_000}}))


def test_replica_metadata_round_trips_through_the_wire():
    assert replica_metadata_from_proto(replica_metadata_to_proto(_full_metadata())) == _full_metadata()


def test_a_changed_table_is_served_as_it_is_now_not_as_the_text_kept_for_the_last_one():
    """The master keeps the text of the tables it served last (they are immutable values) and
    writes it again for a changed one."""
    first = _full_metadata()
    assert replica_metadata_from_proto(replica_metadata_to_proto(first)) == first
    changed = dataclasses.replace(first, topics=first.topics.with_topic(TopicConfig("U", 4, 4), V2),
                                  groups=first.groups.with_group(SubscriptionGroupConfig("H"), V3))
    assert replica_metadata_from_proto(replica_metadata_to_proto(changed)) == changed
    assert replica_metadata_to_proto(first).topics.document == replica_metadata_to_proto(first).topics.document


def test_a_document_whose_version_differs_from_its_field_is_refused():
    reply = replica_metadata_to_proto(_full_metadata())
    reply.consumer_offsets.data_version.counter += 1
    with pytest.raises(BadReplicaReply, match="consumer_offsets: document dataVersion"):
        replica_metadata_from_proto(reply)


@pytest.mark.parametrize("change, match", [
    (lambda r: r.ClearField("timer_checkpoint"), "timer_checkpoint: missing"),
    (lambda r: setattr(r, "role", "LEADER"), "role"),
    (lambda r: setattr(r, "broker_name", ""), "broker_name"),
    (lambda r: setattr(r.subscription_groups, "document", "[1, 2]"), "subscription_groups"),
    (lambda r: setattr(r.timer_checkpoint, "document", '{"scanOffset": -1}'), "timer_checkpoint"),
    (lambda r: setattr(r.timer_checkpoint, "document", '{"pending": [1]}'), "timer_checkpoint"),
])
def test_malformed_replies_name_the_item(change, match):
    reply = replica_metadata_to_proto(_full_metadata())
    change(reply)
    with pytest.raises(BadReplicaReply, match=match):
        replica_metadata_from_proto(reply)


@given(st.sampled_from(["topics", "subscription_groups", "consumer_offsets", "timer_checkpoint"]), st.text(max_size=60))
def test_only_bad_reply_escapes_on_any_document_text(item, text):
    reply = replica_metadata_to_proto(_full_metadata())
    getattr(reply, item).document = text
    try:
        replica_metadata_from_proto(reply)
    except BadReplicaReply:
        pass


def test_tables_the_asker_holds_at_their_version_come_back_unchanged_and_are_its_own():
    master = _full_metadata()
    held = dataclasses.replace(master, topics=TopicTable(V2, {}), broker_id=1, role="SLAVE")  # older topics only
    versions = held_from_proto(held_to_proto(held.versions()))
    assert versions == held.versions()
    reply = replica_metadata_to_proto(master, versions)
    assert [getattr(reply, f).unchanged for f in ("topics", "subscription_groups", "consumer_offsets", "timer_checkpoint")] \
        == [False, True, True, True]
    assert not reply.timer_checkpoint.document and reply.topics.document
    parsed = replica_metadata_from_proto(reply, held)
    assert parsed == master and parsed.timer_checkpoint is held.timer_checkpoint and parsed.offsets is held.offsets
    assert not any(getattr(replica_metadata_to_proto(master, {}), f).unchanged for f in ("topics", "timer_checkpoint"))


def test_the_timer_checkpoint_goes_as_two_lists_only_to_an_asker_that_names_what_it_holds():
    """An asker that names no versions may be an older slave, which reads only the object form."""
    import orjson
    master = _full_metadata()
    old_form = orjson.loads(replica_metadata_to_proto(master).timer_checkpoint.document)["pending"]
    new_form = orjson.loads(replica_metadata_to_proto(master, {}).timer_checkpoint.document)["pending"]
    assert old_form == {"2": 1_700_000_000_000} and new_form == [[2], [1_700_000_000_000]]
    assert replica_metadata_from_proto(replica_metadata_to_proto(master, {})) == master


@pytest.mark.parametrize("held_change, match", [
    (None, "timer_checkpoint: unchanged at"),  # the asker named no versions
    (lambda held: dataclasses.replace(held, timer_checkpoint=VersionedDocument(V3, {})), "timer_checkpoint: unchanged at"),
])
def test_an_unchanged_table_the_asker_did_not_hold_at_that_version_is_refused(held_change, match):
    master = _full_metadata()
    reply = replica_metadata_to_proto(master, {"timer_checkpoint": master.timer_checkpoint.data_version})
    held = None if held_change is None else held_change(master)
    with pytest.raises(BadReplicaReply, match=match):
        replica_metadata_from_proto(reply, held)


def test_an_unchanged_table_that_carries_a_document_is_refused():
    master = _full_metadata()
    reply = replica_metadata_to_proto(master, master.versions())
    reply.consumer_offsets.document = "{}"
    with pytest.raises(BadReplicaReply, match="consumer_offsets: .*carries a document"):
        replica_metadata_from_proto(reply, master)


def test_the_request_names_one_replica():
    request = pb.AdminGetReplicaMetadataRequest(broker_name="broker-a")
    assert not request.HasField("broker_id")
    assert pb.AdminGetReplicaMetadataRequest(broker_name="broker-a", broker_id=0).HasField("broker_id")
