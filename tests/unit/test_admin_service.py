"""The BrokerAdmin servicer over a fake container: selection, changes, status, add/remove broker."""
from __future__ import annotations

import asyncio
import json

import grpc
from hypothesis import given, settings, strategies as st

from metadata.consumer_offsets import ConsumerOffsetTable, loads as load_offsets
from metadata.data_version import DataVersion
from metadata.status import Code, RequestRejected
from metadata.subscription_group import SubscriptionGroupTable
from metadata.topic_config import TopicTable
from proto import admin_pb2 as pb
from services.admin.container_api import AddBrokerError, BrokerNotExistError
from services.admin.service import BrokerAdminServicer
from services.broker.admin_api import QueueProgress, QueueStatus


class FakeAdminBroker:
    def __init__(self, name: str, broker_id: int = 0, cluster: str = "DefaultCluster", role: str = "MASTER"):
        self.name, self.broker_id, self.cluster, self._role = name, broker_id, cluster, role
        self.topics = TopicTable()
        self.groups = SubscriptionGroupTable()
        self.offsets = ConsumerOffsetTable(DataVersion(0, 5, 2)).with_offsets({("T", "G", 0): 7}, DataVersion(0, 6, 3))
        self.max_offsets: dict[tuple[str, int], int] = {}
        self.is_acting = False

    @property
    def role(self) -> str:
        return self._role

    def topic_table(self):
        return self.topics

    async def upsert_topic(self, config):
        self.topics = self.topics.with_topic(config, self.topics.data_version.next_version(1))

    async def delete_topic(self, topic):
        self.topics = self.topics.without_topic(topic, self.topics.data_version.next_version(2))

    def group_table(self):
        return self.groups

    async def upsert_group(self, config):
        self.groups = self.groups.with_group(config, self.groups.data_version.next_version(1))

    async def delete_group(self, group):
        self.groups = self.groups.without_group(group, self.groups.data_version.next_version(2))

    def topic_status(self, topic):
        config = self.topics.topics.get(topic)
        if config is None:  # as the real broker does
            raise RequestRejected(Code.TOPIC_NOT_FOUND, f"topic {topic} does not exist")
        return [QueueStatus(q, 0, self.max_offsets.get((topic, q), 0), 0) for q in range(config.queue_nums)]

    def consumer_progress(self, group, topic=None):
        rows = []
        for name, config in sorted(self.topics.topics.items()):
            if topic is None or topic == name:
                rows += [QueueProgress(name, q, self.max_offsets.get((name, q), 0), self.offsets.get(name, group, q) or 0, 0)
                         for q in range(config.queue_nums)]
        return rows

    def consumer_offset_table(self):
        return self.offsets

    def status(self):
        return {"role": self._role, "putTps": 1.5}


class FakeContainer:
    def __init__(self, *brokers: FakeAdminBroker):
        self._brokers = {b.name: b for b in brokers}
        self.added: list[str] = []
        self.fail_add: str | None = None

    def brokers(self):
        return dict(self._brokers)

    async def add_broker(self, config_path: str) -> str:
        if self.fail_add:
            raise AddBrokerError(self.fail_add)
        self.added.append(config_path)
        return "DefaultCluster_broker-new_0"

    async def remove_broker(self, cluster, broker_name, broker_id):
        broker = self._brokers.get(broker_name)
        if broker is None or broker.cluster != cluster or broker.broker_id != broker_id:
            raise BrokerNotExistError()
        del self._brokers[broker_name]

    def container_status(self):
        return {"brokers": len(self._brokers)}


class Aborted(Exception):
    pass


class FakeContext:
    code = details = None

    async def abort(self, code, details):
        self.code, self.details = code, details
        raise Aborted(details)


def call(servicer, name, request):
    context = FakeContext()
    try:
        return asyncio.run(getattr(servicer, name)(request, context)), context
    except Aborted:
        return None, context


def make(**kw):
    master, slave = FakeAdminBroker("broker-a"), FakeAdminBroker("broker-b", 1, role="SLAVE")
    changed: list[str] = []
    servicer = BrokerAdminServicer(FakeContainer(master, slave), on_topics_changed=changed.append, **kw)
    return servicer, master, slave, changed


def topic_request(name="T", queues=4, message_type="FIFO", broker=""):
    return pb.AdminCreateOrUpdateTopicRequest(broker_name=broker, topic=pb.AdminTopic(
        topic=name, read_queue_nums=queues, write_queue_nums=queues, perm=6, message_type=message_type))


def test_create_topic_on_every_master_and_tell_the_container():
    servicer, master, slave, changed = make()
    reply, _ = call(servicer, "CreateOrUpdateTopic", topic_request())
    assert list(reply.broker_names) == ["broker-a"]
    assert master.topics.topics["T"].message_type == "FIFO" and master.topics.topics["T"].order
    assert "T" not in slave.topics.topics and changed == ["broker-a"]
    listed, _ = call(servicer, "ListTopics", pb.AdminListTopicsRequest(broker_name="broker-a"))
    assert [t.topic for t in listed.brokers[0].topics] == ["T"] and listed.brokers[0].data_version.counter == 1


def test_changes_on_a_named_slave_or_unknown_broker_are_refused_by_name():
    servicer, *_ = make()
    _, context = call(servicer, "CreateOrUpdateTopic", topic_request(broker="broker-b"))
    assert context.code == grpc.StatusCode.FAILED_PRECONDITION and context.details.startswith("BROKER_IS_SLAVE")
    _, context = call(servicer, "CreateOrUpdateTopic", topic_request(broker="nobody"))
    assert context.code == grpc.StatusCode.NOT_FOUND and context.details.startswith("BROKER_NOT_EXIST")


def test_bad_topic_fields_are_invalid_argument():
    servicer, *_ = make()
    _, context = call(servicer, "CreateOrUpdateTopic", topic_request(queues=0))
    assert context.code == grpc.StatusCode.INVALID_ARGUMENT and "readQueueNums" in context.details
    _, context = call(servicer, "CreateOrUpdateTopic", topic_request(message_type="WEIRD"))
    assert context.code == grpc.StatusCode.INVALID_ARGUMENT


def test_delete_topic_and_topic_status():
    servicer, master, _, changed = make()
    call(servicer, "CreateOrUpdateTopic", topic_request(queues=2))
    master.max_offsets[("T", 1)] = 9
    status, _ = call(servicer, "TopicStatus", pb.AdminTopicStatusRequest(topic="T"))
    assert [(b.broker_name, [q.max_offset for q in b.queues]) for b in status.brokers] == [("broker-a", [0, 9])]
    _, context = call(servicer, "TopicStatus", pb.AdminTopicStatusRequest(topic="T", broker_name="broker-b"))
    assert context.details.startswith("TOPIC_NOT_FOUND")
    reply, _ = call(servicer, "DeleteTopic", pb.AdminDeleteTopicRequest(topic="T"))
    assert list(reply.broker_names) == ["broker-a"] and "T" not in master.topics.topics
    assert changed == ["broker-a", "broker-a"]


def test_groups_keep_unsent_fields_and_progress_reports_lag():
    servicer, master, *_ = make()
    call(servicer, "CreateOrUpdateGroup", pb.AdminCreateOrUpdateGroupRequest(
        group=pb.AdminGroup(group="G", consume_message_orderly=True, retry_max_times=3)))
    call(servicer, "CreateOrUpdateGroup", pb.AdminCreateOrUpdateGroupRequest(
        group=pb.AdminGroup(group="G", consume_message_orderly=True)))
    assert master.groups.groups["G"].retry_max_times == 3 and master.groups.groups["G"].consume_enable
    call(servicer, "CreateOrUpdateTopic", topic_request(queues=1))
    master.max_offsets[("T", 0)] = 10
    progress, _ = call(servicer, "ConsumerProgress", pb.AdminConsumerProgressRequest(group="G", broker_name="broker-a"))
    row = progress.brokers[0].queues[0]
    assert (row.broker_offset, row.consumer_offset, row.lag) == (10, 7, 3)


def test_topic_status_and_progress_say_which_broker_acts_for_its_absent_master():
    servicer, master, slave, _ = make()
    call(servicer, "CreateOrUpdateTopic", topic_request(queues=1))
    slave.topics, slave.is_acting = master.topics, True  # broker-b's slave, acting while its master is gone
    status, _ = call(servicer, "TopicStatus", pb.AdminTopicStatusRequest(topic="T"))
    assert [(b.broker_name, b.role, b.acting) for b in status.brokers] == [("broker-a", "MASTER", False),
                                                                         ("broker-b", "SLAVE", True)]
    progress, _ = call(servicer, "ConsumerProgress", pb.AdminConsumerProgressRequest(group="G"))
    assert [(b.broker_name, b.acting) for b in progress.brokers] == [("broker-a", False), ("broker-b", True)]


def test_get_consumer_offsets_returns_the_document_and_identity():
    servicer, master, *_ = make()
    reply, _ = call(servicer, "GetConsumerOffsets", pb.AdminGetConsumerOffsetsRequest(broker_name="broker-a"))
    assert reply.document == master.offsets.dumps()
    assert load_offsets(reply.document).get("T", "G", 0) == 7
    assert (reply.role, reply.broker_id, reply.data_version.counter) == ("MASTER", 0, 3)
    _, context = call(servicer, "GetConsumerOffsets", pb.AdminGetConsumerOffsetsRequest())
    assert context.code == grpc.StatusCode.INVALID_ARGUMENT


def test_broker_status_is_json():
    servicer, *_ = make()
    reply, _ = call(servicer, "BrokerStatus", pb.AdminBrokerStatusRequest())
    assert [b.role for b in reply.brokers] == ["MASTER", "SLAVE"]
    assert json.loads(reply.brokers[0].status_json)["putTps"] == 1.5
    assert json.loads(reply.container_json) == {"brokers": 2}


def test_add_broker_checks_path_file_and_duplicates(tmp_path):
    files = {"dup": {"brokerName": "broker-a"}, "slave": {"brokerName": "x", "brokerRole": "SLAVE", "brokerId": "0"},
             "ok": {"brokerName": "broker-new"}}
    servicer, *_ = make(load_config=lambda path: files[path] if path in files else (_ for _ in ()).throw(OSError("gone")))
    cases = [("", "addBroker config path is empty"), ("missing", "addBroker properties empty"),
             ("slave", "slave broker id must be > 0"),
             ("dup", "DefaultCluster_broker-a_0 has already been added to current broker container")]
    for path, message in cases:
        _, context = call(servicer, "AddBroker", pb.AdminAddBrokerRequest(config_path=path))
        assert context.code == grpc.StatusCode.FAILED_PRECONDITION and context.details.endswith(message), context.details
    reply, _ = call(servicer, "AddBroker", pb.AdminAddBrokerRequest(config_path="ok"))
    assert reply.canonical_name == "DefaultCluster_broker-new_0"
    servicer.container.fail_add = "start broker failed"
    _, context = call(servicer, "AddBroker", pb.AdminAddBrokerRequest(config_path="ok"))
    assert context.details == "ADD_BROKER_FAILED: start broker failed"


def test_remove_broker_and_broker_not_exist():
    servicer, *_ = make()
    _, context = call(servicer, "RemoveBroker", pb.AdminRemoveBrokerRequest(cluster="DefaultCluster", broker_name="zzz"))
    assert context.code == grpc.StatusCode.NOT_FOUND and context.details == "BROKER_NOT_EXIST: Broker not exist"
    reply, _ = call(servicer, "RemoveBroker", pb.AdminRemoveBrokerRequest(cluster="DefaultCluster", broker_name="broker-a"))
    assert reply is not None and "broker-a" not in servicer.container.brokers()


names = st.one_of(st.text(max_size=30), st.sampled_from(["", "T", "broker-a", "broker-b", "a b"]))
ints = st.integers(min_value=-(2**31), max_value=2**31 - 1)


@settings(max_examples=150, deadline=None)
@given(broker=names, topic=names, read=ints, write=ints, perm=ints, message_type=names, group=names,
       retry=st.one_of(st.none(), ints), broker_id=st.integers(min_value=-(2**62), max_value=2**62))
def test_no_request_crashes_the_servicer(broker, topic, read, write, perm, message_type, group, retry, broker_id):
    servicer, *_ = make()
    requests = [
        ("CreateOrUpdateTopic", pb.AdminCreateOrUpdateTopicRequest(broker_name=broker, topic=pb.AdminTopic(
            topic=topic, read_queue_nums=read, write_queue_nums=write, perm=perm, message_type=message_type))),
        ("CreateOrUpdateGroup", pb.AdminCreateOrUpdateGroupRequest(broker_name=broker, group=pb.AdminGroup(
            group=group, retry_max_times=retry))),
        ("TopicStatus", pb.AdminTopicStatusRequest(broker_name=broker, topic=topic)),
        ("ConsumerProgress", pb.AdminConsumerProgressRequest(broker_name=broker, group=group, topic=topic)),
        ("RemoveBroker", pb.AdminRemoveBrokerRequest(cluster=topic, broker_name=broker, broker_id=broker_id)),
        ("DeleteTopic", pb.AdminDeleteTopicRequest(broker_name=broker, topic=topic)),
    ]
    for name, request in requests:
        reply, context = call(servicer, name, request)
        assert reply is not None or context.code in (
            grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.NOT_FOUND, grpc.StatusCode.FAILED_PRECONDITION), context.details
