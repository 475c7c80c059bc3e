"""Slave metadata sync over a real in-process gRPC admin server: a master broker on real stores
serves GetReplicaMetadata, a slave broker adopts topics, groups, offsets and timer checkpoint
with the master's DataVersions, idempotently, across a restart, and survives bad masters."""
from __future__ import annotations

import asyncio

import grpc
import pytest

from metadata.message import MessageType
from metadata.replica_metadata import Keep, KeepReason
from metadata.subscription_group import SubscriptionGroupConfig
from metadata.topic_config import TopicConfig
from proto import admin_pb2 as pb
from proto import admin_pb2_grpc as pb_grpc
from scheduler.periodic import PeriodicTasks
from services.admin.client import AdminClient, AdminRejected
from services.admin.replica_converters import held_to_proto
from services.admin.service import add_admin_service
from services.broker.config import BrokerRole
from services.ha.metadata_sync import MetadataSync, SyncOutcome, SyncProblem
from tests.scenario.test_broker_flows import Harness
from tests.support.container_process import free_ports

pytestmark = pytest.mark.integration
ITEMS = {"topics", "groups", "offsets", "timer_checkpoint"}


class OneContainer:
    """The admin view of a container hosting the given brokers (what container/admin_adapter gives)."""

    def __init__(self, *brokers):
        self._brokers = {f"{b.name}#{b.broker_id}": b for b in brokers}

    def brokers(self):
        return dict(self._brokers)

    def container_status(self):
        return {}


async def serve(servicer_or_container) -> tuple[grpc.aio.Server, str]:
    server = grpc.aio.server()
    if isinstance(servicer_or_container, OneContainer):
        add_admin_service(server, servicer_or_container)
    else:
        pb_grpc.add_BrokerAdminServicer_to_server(servicer_or_container, server)
    address = f"127.0.0.1:{server.add_insecure_port('127.0.0.1:0')}"
    await server.start()
    return server, address


async def start_pair(tmp_path, **slave_overrides):
    (tmp_path / "master").mkdir()
    (tmp_path / "slave").mkdir()
    master = Harness(tmp_path / "master", broker_name="broker-a")
    slave = Harness(tmp_path / "slave", broker_name="broker-a", broker_id=1, broker_role=BrokerRole.SLAVE, **slave_overrides)
    await master.start()
    await slave.start()
    return master, slave


async def load_master(master: Harness) -> None:
    broker = master.broker
    await broker.upsert_topic(TopicConfig("orders", 2, 2))
    await broker.upsert_topic(TopicConfig("later", 1, 1, message_type="DELAY"))
    await broker.upsert_group(SubscriptionGroupConfig("G", retry_max_times=3))
    for _ in range(3):
        await master.send("orders")
    await master.send("later", kind=MessageType.DELAY, due=master.clock.now_ms() + 60_000)
    for delivery in await master.receive("G", "orders"):
        await broker.ack("G", "orders", delivery.message.message_id, delivery.receipt_handle)
    master.clock.advance(10)
    broker.persist()


def assert_same_metadata(slave: Harness, master: Harness) -> None:
    theirs, mine = master.broker.replica_metadata(), slave.broker.replica_metadata()
    assert mine.versions() == theirs.versions()
    assert mine.topics == theirs.topics and mine.groups == theirs.groups and mine.offsets == theirs.offsets
    assert mine.timer_checkpoint == theirs.timer_checkpoint


def config_mtimes(harness: Harness) -> dict[str, int]:
    directory = harness.tmp_path / "config"
    return {p.name: p.stat().st_mtime_ns for p in directory.iterdir()
            if p.name in ("topics.json", "subscriptionGroup.json", "consumerOffset.json", "timerCheckpoint.json")}


def test_slave_adopts_master_metadata_with_its_versions_idempotently_and_keeps_it_across_restart(tmp_path):
    async def scenario():
        master, slave = await start_pair(tmp_path)
        await load_master(master)
        server, address = await serve(OneContainer(master.broker))
        registrations = []

        async def register():
            registrations.append(slave.broker.topic_table().data_version)
        sync = MetadataSync(slave.broker, lambda: address, slave.clock, on_topics_changed=register)
        try:
            report = await sync.sync_once()
            assert report.outcome is SyncOutcome.SYNCED, report
            assert set(report.adopted) == ITEMS
            assert report.adopted == master.broker.replica_metadata().versions()
            assert report.topics_changed and registrations == [master.broker.topic_table().data_version]
            assert_same_metadata(slave, master)
            assert slave.broker.consumer_offset_table().get("orders", "G", 0) is not None
            assert slave.broker.timer.index.pending  # the master's pending delay message

            before = config_mtimes(slave)
            again = await sync.sync_once()
            assert again.outcome is SyncOutcome.SYNCED and again.adopted == {}
            assert all(isinstance(d, Keep) and d.reason is KeepReason.SAME_VERSION for d in again.decisions.values())
            assert config_mtimes(slave) == before  # equal versions: nothing rewritten
            asked = pb.AdminGetReplicaMetadataRequest(broker_name="broker-a", broker_id=0,
                                                      held=held_to_proto(slave.broker.replica_metadata().versions()))
            client = AdminClient(address)
            try:
                reply = await client.call("GetReplicaMetadata", asked)
            finally:
                await client.close()
            fields = ("topics", "subscription_groups", "consumer_offsets", "timer_checkpoint")
            assert all(getattr(reply, f).unchanged and not getattr(reply, f).document for f in fields)  # no text sent

            await master.broker.upsert_topic(TopicConfig("added", 1, 1))
            third = await sync.sync_once()
            assert set(third.adopted) == {"topics"} and "added" in slave.broker.topic_table().topics
            assert len(registrations) == 2  # re-registered once per adopted topic table, not on the idempotent run

            await slave.restart()
            assert_same_metadata(slave, master)
            after_restart = await MetadataSync(slave.broker, lambda: address, slave.clock).sync_once()
            assert after_restart.outcome is SyncOutcome.SYNCED and after_restart.adopted == {}
        finally:
            await sync.close()
            await server.stop(0)
            await master.stop()
            await slave.stop()
    asyncio.run(scenario())


def test_unreachable_missing_or_wrong_master_is_a_report_not_a_crash(tmp_path):
    async def scenario():
        master, slave = await start_pair(tmp_path, slave_synchronize_timeout_ms=1000)
        await load_master(master)
        [closed_port] = free_ports(1)
        other = Harness(tmp_path / "other", broker_name="broker-b")
        (tmp_path / "other").mkdir()
        await other.start()
        server, address = await serve(OneContainer(other.broker, slave.broker))  # no master of broker-a there
        addresses = iter([f"127.0.0.1:{closed_port}", None, address])

        async def next_address():
            return next(addresses)
        sync = MetadataSync(slave.broker, next_address, slave.clock)
        try:
            unreachable = await sync.sync_once()
            assert (unreachable.outcome, unreachable.problem) == (SyncOutcome.FAILED, SyncProblem.MASTER_UNREACHABLE)
            missing = await sync.sync_once()
            assert (missing.outcome, missing.problem) == (SyncOutcome.SKIPPED, SyncProblem.NO_MASTER_ADDRESS)
            refused = await sync.sync_once()
            assert (refused.outcome, refused.problem) == (SyncOutcome.FAILED, SyncProblem.MASTER_REFUSED)
            assert refused.detail.startswith("BROKER_NOT_EXIST")
            assert slave.broker.topic_table().topics == {} and slave.broker.group_table().groups == {}

            on_master = await MetadataSync(master.broker, lambda: address, master.clock).sync_once()
            assert (on_master.outcome, on_master.problem) == (SyncOutcome.SKIPPED, SyncProblem.NOT_A_SLAVE)
        finally:
            await sync.close()
            await server.stop(0)
            for harness in (master, slave, other):
                await harness.stop()
    asyncio.run(scenario())


class LyingMaster(pb_grpc.BrokerAdminServicer):
    def __init__(self, reply: pb.AdminGetReplicaMetadataResponse):
        self.reply = reply

    async def GetReplicaMetadata(self, request, context):
        return self.reply


def test_malformed_or_foreign_replies_are_refused_without_touching_the_slave(tmp_path):
    async def scenario():
        master, slave = await start_pair(tmp_path)
        await load_master(master)
        good_server, good = await serve(OneContainer(master.broker))
        reply = await AdminClient(good).call("GetReplicaMetadata", pb.AdminGetReplicaMetadataRequest(broker_name="broker-a"))
        broken = pb.AdminGetReplicaMetadataResponse()
        broken.CopyFrom(reply)
        broken.topics.document = "{not json"
        foreign = pb.AdminGetReplicaMetadataResponse()
        foreign.CopyFrom(reply)
        foreign.broker_id, foreign.role = 1, "SLAVE"
        try:
            for lie, problem in ((broken, SyncProblem.BAD_REPLY), (foreign, SyncProblem.NOT_THE_MASTER)):
                server, address = await serve(LyingMaster(lie))
                sync = MetadataSync(slave.broker, lambda: address, slave.clock)
                report = await sync.sync_once()
                await sync.close()
                await server.stop(0)
                assert (report.outcome, report.problem) == (SyncOutcome.FAILED, problem), report
                assert slave.broker.topic_table().topics == {}
        finally:
            await good_server.stop(0)
            await master.stop()
            await slave.stop()
    asyncio.run(scenario())


def test_get_replica_metadata_validates_the_request_at_the_edge(tmp_path):
    async def scenario():
        master, slave = await start_pair(tmp_path)
        server, address = await serve(OneContainer(master.broker, slave.broker))
        client = AdminClient(address)
        try:
            for request, code, reason in (
                    (pb.AdminGetReplicaMetadataRequest(), grpc.StatusCode.INVALID_ARGUMENT, "BAD_REQUEST"),
                    (pb.AdminGetReplicaMetadataRequest(broker_name="nope"), grpc.StatusCode.NOT_FOUND, "BROKER_NOT_EXIST"),
                    (pb.AdminGetReplicaMetadataRequest(broker_name="broker-a", broker_id=7), grpc.StatusCode.NOT_FOUND,
                     "BROKER_NOT_EXIST"),
                    (pb.AdminGetReplicaMetadataRequest(broker_name="broker-a", broker_id=-1), grpc.StatusCode.INVALID_ARGUMENT,
                     "BAD_REQUEST")):
                with pytest.raises(AdminRejected) as refused:
                    await client.call("GetReplicaMetadata", request)
                assert refused.value.code is code and refused.value.details.startswith(reason), refused.value.details
            of_slave = await client.call("GetReplicaMetadata", pb.AdminGetReplicaMetadataRequest(broker_name="broker-a", broker_id=1))
            assert (of_slave.broker_id, of_slave.role) == (1, "SLAVE")  # what pre-online will pull
        finally:
            await client.close()
            await server.stop(0)
            await master.stop()
            await slave.stop()
    asyncio.run(scenario())


def test_declared_periodic_task_keeps_the_slave_in_step(tmp_path):
    async def scenario():
        master, slave = await start_pair(tmp_path, slave_synchronize_period_ms=50)
        await load_master(master)
        server, address = await serve(OneContainer(master.broker))
        tasks = PeriodicTasks("container")
        sync = MetadataSync(slave.broker, lambda: address, slave.clock)
        sync.declare_on(tasks)
        tasks.start()
        try:
            await master.broker.upsert_topic(TopicConfig("fresh", 1, 1))
            for _ in range(200):
                if "fresh" in slave.broker.topic_table().topics:
                    break
                await asyncio.sleep(0.025)
            assert_same_metadata(slave, master)
            assert tasks.failures == {}
        finally:
            await tasks.stop()
            await sync.close()
            await server.stop(0)
            await master.stop()
            await slave.stop()
    asyncio.run(scenario())
