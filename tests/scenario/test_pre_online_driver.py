"""Pre-online in one process: a returning master of broker-a (real store) and its acting slave
(real store, the acting-master setup of test_acting_broker.Pair); the nameserver, the slave's
container (OfferMaster, HandOver) and the replication connection are in-memory stand-ins the
test controls.  What a consumer sees afterwards is checked on the master itself: no offset
rolled back, no due delay message delivered twice, keys only the master had kept."""
from __future__ import annotations

import asyncio
from types import SimpleNamespace

from ha.role.pre_online import OnlineReason
from metadata.data_version import DataVersion
from metadata.member_group import BrokerMemberGroup
from metadata.status import Code, RequestRejected
from metadata.topic_config import TopicConfig
from proto import acting_pb2 as pb
from scheduler.clock import SystemClock
from services.acting.client import ActingUnavailable
from services.acting.handover import hand_over_to_proto
from services.broker.acting_mode import hand_over
from services.broker.api import FilterExpression, ReceiveRequest
from services.broker.broker import Broker
from services.broker.config import BrokerConfig
from services.broker.timer_service import timer_draft
from services.ha.pre_online import PreOnlineDriver
from tests.scenario.test_acting_broker import TOPIC, Pair, Sink, draft, run, store_at


class Connections:
    """The returning master's replication: which slaves are in TRANSFER (the test decides)."""

    def __init__(self):
        self.transferring, self.listeners = frozenset(), []

    def transferring_slaves(self):
        return self.transferring

    def add_transfer_listener(self, fn):
        self.listeners.append(fn)

    def remove_transfer_listener(self, fn):
        self.listeners.remove(fn)

    def set(self, *ids):
        self.transferring = frozenset(ids)
        for listener in list(self.listeners):
            listener()


class Nameserver:
    def __init__(self, members):
        self.members = members

    async def broker_member_group(self, name, cluster):
        if isinstance(self.members, Exception):
            raise self.members
        return BrokerMemberGroup(cluster, name, self.members)


class SlaveContainer:
    """The member's container: an offer makes its replication connect; HandOver is the real one."""

    def __init__(self, slave: Broker, connections: Connections, reachable: bool = True):
        self.slave, self.connections, self.reachable = slave, connections, reachable
        self.calls: list[str] = []
        self.drop_during_next_pull = False

    async def call(self, address, method, request, timeout_ms):
        self.calls.append(method)
        if not self.reachable:
            raise ActingUnavailable(f"{address}: UNAVAILABLE")
        if method == "OfferMaster":
            assert request.master_address == "master:1" and request.broker_id == 1
            self.connections.set(1)
            return pb.ActingOfferMasterResponse(replication_state="TRANSFER")
        assert method == "HandOver"
        reply = hand_over_to_proto(await hand_over(self.slave))
        if self.drop_during_next_pull:  # the slave restarts while its answer is on the way
            self.drop_during_next_pull = False
            self.connections.set()
        return reply


async def returning_master(pair: Pair, tmp_path, **keys) -> Broker:
    """broker-a's master, back with its own (older) store, in pre-online until its driver is done."""
    store = store_at(tmp_path / "a0", pair.clock)
    config = BrokerConfig(broker_name="broker-a", enable_slave_acting_master=True, pre_online_retry_interval_ms=10, **keys)
    master = Broker(config, store, pair.clock, Sink())
    master.topics.upsert(TopicConfig(TOPIC, 2, 2), pair.clock.now_ms())
    return master


async def go_online(master: Broker, container: SlaveContainer, nameserver: Nameserver) -> OnlineReason:
    """Start the driver (as the container does) and wait for its on_online call."""
    connections = container.connections
    master.pre_online = PreOnlineDriver(master, SimpleNamespace(master=connections), SystemClock())
    await master.start()
    assert master.special_decision().reason.value == "PRE_ONLINE" and not master.special_services_running
    went = asyncio.get_running_loop().create_future()

    async def online(reason):
        went.set_result(reason)
        await master.apply_role()

    master.pre_online.start(nameserver, container, "master:1", online)
    return await asyncio.wait_for(went, 10)


def receive(broker: Broker, group: str = "g"):
    return broker.receive(ReceiveRequest("c1", group, TOPIC, 0, FilterExpression(), 32, 10_000, False, 0,
                                         broker.clock.monotonic_ms() + 1000))


async def acted_slave(tmp_path) -> tuple[Pair, list]:
    """The slave acted: it delivered and acked P0..P2 of queue 0 to group g and escaped D1."""
    pair = await Pair(tmp_path).start()
    messages = [draft(message_id=f"P{i}", queue_id=0) for i in range(5)]
    messages.append(timer_draft(draft(message_id="D1"), pair.clock.now_ms() + 1_000))
    await pair.copy_into_slave(messages)
    await pair.act()
    deliveries = await receive(pair.slave)
    for delivery in deliveries[:3]:
        await pair.slave.ack("g", TOPIC, delivery.message.message_id, delivery.receipt_handle)
    pair.clock.advance(1_000)
    assert await pair.slave.run_timer() == 1  # D1 escaped to broker-b by the acting slave
    pair.clock.advance(60_000)  # P3, P4 expire: the slave escapes their retries
    await pair.slave.run_revive()
    return pair, messages


def test_the_returning_master_adopts_what_its_acting_slave_advanced_and_delivers_nothing_twice(tmp_path):
    async def scenario():
        pair, messages = await acted_slave(tmp_path)
        master = await returning_master(pair, tmp_path)
        await master.store.put(messages)  # the same log: the slave's is a copy of it
        master.pop.keeper.write({("T", "OnlyMaster", 0): 5}, DataVersion(0, 1, 9))  # a key only the master has
        connections = Connections()
        container = SlaveContainer(pair.slave, connections)
        with_pop_held = asyncio.ensure_future(receive(master))  # a receive during pre-online waits
        reason = await go_online(master, container, Nameserver({1: "slave:1"}))
        assert reason is OnlineReason.SYNCED and container.calls == ["OfferMaster", "HandOver"]
        assert master.pre_online.adoptions == {1: {"timer": "adopt", "transactions": "adopt", "pop": "adopt",
                                                   "offsets": "adopt"}}
        assert master.special_services_running and master.acting.handover_done and not pair.slave.is_acting
        assert master.pop.keeper.get(TOPIC, "g", 0) == pair.slave.pop.keeper.get(TOPIC, "g", 0) == 5  # acked or retried
        assert master.pop.keeper.get("T", "OnlyMaster", 0) == 5  # kept
        pair.clock.advance(120_000)
        assert await master.run_timer() == 0  # D1 was escaped by the slave: never again
        assert await master.run_revive() == 0  # the retries it escaped: never again
        assert await with_pop_held == []  # held until online, then served from the adopted state
        assert [d.message.message_id for d in await receive(master)] == []  # P0-P4 all handled by the slave
        await master.stop()
        master.store.shutdown()
        await pair.stop()
    run(scenario())


def test_a_slave_older_than_the_master_changes_nothing(tmp_path):
    async def scenario():
        pair = await Pair(tmp_path).start()  # never acted: its tables are older
        master = await returning_master(pair, tmp_path)
        master.pop.keeper.write({(TOPIC, "g", 0): 7}, DataVersion(0, 5, 9))
        reason = await go_online(master, SlaveContainer(pair.slave, Connections()), Nameserver({1: "slave:1"}))
        assert reason is OnlineReason.SYNCED
        assert master.pre_online.adoptions[1]["offsets"] == "keep" and master.pop.keeper.get(TOPIC, "g", 0) == 7
        await master.stop()
        master.store.shutdown()
        await pair.stop()
    run(scenario())


def test_an_empty_slave_is_synced_and_the_master_keeps_its_tables(tmp_path):
    async def scenario():
        pair = await Pair(tmp_path).start()
        master = await returning_master(pair, tmp_path)
        master.pop.keeper.write({(TOPIC, "g", 0): 7}, DataVersion(0, 1, 1))
        await master.timer.schedule(draft(message_id="D9"), pair.clock.now_ms() + 5)
        reason = await go_online(master, SlaveContainer(pair.slave, Connections()), Nameserver({1: "slave:1"}))
        assert reason is OnlineReason.SYNCED and master.pop.keeper.get(TOPIC, "g", 0) == 7
        pair.clock.advance(10)
        assert await master.run_timer() == 1  # its own delay message, delivered once
        await master.stop()
        master.store.shutdown()
        await pair.stop()
    run(scenario())


def test_connection_lost_mid_sync_is_synced_again_on_the_next_attempt(tmp_path):
    async def scenario():
        pair, messages = await acted_slave(tmp_path)
        master = await returning_master(pair, tmp_path)
        container = SlaveContainer(pair.slave, Connections())
        container.drop_during_next_pull = True
        reason = await go_online(master, container, Nameserver({1: "slave:1"}))
        assert reason is OnlineReason.SYNCED
        assert container.calls == ["OfferMaster", "HandOver", "OfferMaster", "HandOver"]
        status = master.pre_online.status()
        assert status["attempt"] == 2 and "CONNECTION_LOST" in status["lastFailure"]
        assert master.pop.keeper.get(TOPIC, "g", 0) == 5
        await master.stop()
        master.store.shutdown()
        await pair.stop()
    run(scenario())


def test_no_peer_reachable_goes_online_with_its_own_tables_and_holds_writes_of_offsets_until_then(tmp_path):
    async def scenario():
        pair = await Pair(tmp_path).start()
        master = await returning_master(pair, tmp_path)
        master.pop.keeper.write({(TOPIC, "g", 0): 7}, DataVersion(0, 1, 1))
        master.pre_online = PreOnlineDriver(master, SimpleNamespace(master=Connections()), SystemClock())
        try:
            await master.write_consumer_offsets(DataVersion(0, 1, 1), [])
            raise AssertionError("an offset write during pre-online must be refused")
        except RequestRejected as refused:
            assert refused.code == Code.PRECONDITION_FAILED and "pre-online" in refused.message
        try:
            master.replica_metadata()
            raise AssertionError("a slave's metadata sync from a master in pre-online must be refused")
        except RequestRejected as refused:
            assert refused.code == Code.PRECONDITION_FAILED and "pre-online" in refused.message
        master.pre_online = None
        container = SlaveContainer(pair.slave, Connections(), reachable=False)
        assert await go_online(master, container, Nameserver({1: "slave:1"})) is OnlineReason.NO_PEER_REACHABLE
        assert master.pop.keeper.get(TOPIC, "g", 0) == 7 and master.special_services_running
        await master.stop()
        master.store.shutdown()
        await pair.stop()
    run(scenario())


def test_a_nameserver_that_does_not_answer_keeps_the_master_in_pre_online(tmp_path):
    async def scenario():
        pair = await Pair(tmp_path).start()
        master = await returning_master(pair, tmp_path)
        nameserver = Nameserver(ConnectionError("nameserver down"))
        went = asyncio.ensure_future(go_online(master, SlaveContainer(pair.slave, Connections()), nameserver))
        while master.pre_online is None or master.pre_online.core.attempt < 3:
            await asyncio.sleep(0.01)
        status = master.pre_online.status()
        assert not went.done() and status["step"] in ("RETRY_WAIT", "FETCH_MEMBERS")
        assert "MEMBERS_UNAVAILABLE" in status["lastFailure"] and not master.special_services_running
        nameserver.members = {}
        assert await went is OnlineReason.NO_MEMBERS
        await master.stop()
        master.store.shutdown()
        await pair.stop()
    run(scenario())


def test_the_delay_offset_update_step_bumps_the_timer_checkpoint_every_nth_resolution(tmp_path):
    async def scenario():
        pair = await Pair(tmp_path).start()
        master = await returning_master(pair, tmp_path, delay_offset_update_version_step=2)
        await master.start()
        for index in range(3):
            await master.timer.schedule(draft(message_id=f"D{index}"), pair.clock.now_ms())
        master.timer.catch_up()
        before = master.timer.data_version
        await master.run_timer()  # three resolutions: the second bumps, the third does not
        assert master.timer.data_version.counter == before.counter + 1
        await master.stop()
        master.store.shutdown()
        await pair.stop()
    run(scenario())


def test_a_controller_mode_master_opens_its_epoch_on_every_table(tmp_path):
    """Scenario 33: a new master's tables carry its epoch as stateVersion, so they are newer than
    any table an older master wrote, whatever that one's counters say."""
    async def scenario():
        pair = await Pair(tmp_path).start()
        master = await returning_master(pair, tmp_path)
        await master.start()
        master.pop.keeper.write({(TOPIC, "g", 0): 7}, DataVersion(1, 1, 2))
        master.open_state_version(3)
        versions = {master.pop.keeper.table.data_version.state_version, master.pop.data_version.state_version,
                    master.timer.data_version.state_version, master.transactions.data_version.state_version}
        assert versions == {3}
        from services.broker.config_files import read_document
        from metadata.consumer_offsets import parse_document
        on_disk = read_document(master.pop.offset_path, parse_document)
        assert on_disk.data_version.state_version == 3 and on_disk.get(TOPIC, "g", 0) == 7
        from metadata.pre_online_merge import plan_merge
        old_master = DataVersion(2, 10_000, 999)  # an older master that committed far more
        assert plan_merge(0, {0: old_master, 1: on_disk.data_version}).adopts(1)
        await master.stop()
        master.store.shutdown()
        await pair.stop()
    run(scenario())
