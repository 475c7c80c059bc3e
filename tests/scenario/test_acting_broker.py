"""Acting master in one process, over real message stores in a tmp dir, time on a ManualClock:
an acting slave's timer, transactions and pop escape to a master broker next to it and never
write their own log; the escape bridge's choices (local first, dead excluded, none: nothing
advances, properties copied); the pop journal; the FIFO lock quorum between replicas."""
from __future__ import annotations

import asyncio
from types import MappingProxyType

import pytest

from ha.acting.escape_target import EscapeKind, NoTargetReason
from ha.acting.special_services import MemberView, Reason
from ha.role.decisions import Role
from metadata.message import MessageDraft, MessageType, Prop
from metadata.route_types import BrokerAddress, BrokerRoute, QueueData, TopicRoute
from metadata.status import Code, RequestRejected
from metadata.topic_config import PERM_READ_WRITE, TopicConfig
from proto import acting_pb2 as pb
from scheduler.clock import ManualClock
from scheduler.pop.records import AckRecord, QueueKey
from scheduler.timer import TimerIndex
from scheduler.transaction_check import HALF_TOPIC
from services.acting.client import ActingUnavailable
from services.acting.escape import EscapeBridge, EscapedItem, EscapedPlace, EscapeFailed
from services.acting.fifo_lock import FifoLocks
from services.acting.pop_journal import PopJournal
from services.acting.state import ActingState
from services.broker.api import FilterExpression, ReceiveRequest, SendItem
from services.broker.broker import Broker, Unreplicated
from services.broker.config import BrokerConfig
from services.broker.timer_service import timer_draft
from services.broker.transaction_service import half_draft, transaction_id
from store.config import FlushDiskType, StoreConfig
from store.message_store import MessageStore

TOPIC = "orders"


class Sink:
    def __init__(self):
        self.checks = []

    def push_transaction_check(self, check):
        self.checks.append(check)
        return True


class SlaveReplication(Unreplicated):
    """A slave's replication that is not connected to any master (its master died after the copy
    had caught up with it)."""

    role, copying_from_master, copy_caught_up = Role.SLAVE, False, True

    def __init__(self):
        super().__init__(BrokerConfig(broker_name="broker-a", broker_id=1, broker_role="SLAVE"))

    def check_replicas(self):
        raise AssertionError("a slave never writes")

    async def wait_replicated(self, end_offset):
        raise AssertionError("a slave never writes")


def store_at(path, clock) -> MessageStore:
    store = MessageStore(StoreConfig(store_path_root_dir=path, flush_disk_type=FlushDiskType.SYNC_FLUSH,
                                     mapped_file_size_commit_log=1 << 20), clock.now_ms)
    store.start()
    return store


class Pair:
    """broker-a's acting slave and broker-b's master, in one "container"."""

    def __init__(self, tmp_path, remote_route=None, client=None, **slave_keys):
        self.tmp_path, self.clock = tmp_path, ManualClock()
        self.remote_route, self.client = remote_route, client
        self.slave_keys = slave_keys
        self.masters: list[Broker] = []
        self.replication = SlaveReplication()

    async def start(self, with_target: bool = True):
        if with_target:
            self.target_store = store_at(self.tmp_path / "b", self.clock)
            self.target = Broker(BrokerConfig(broker_name="broker-b"), self.target_store, self.clock, Sink())
            await self.target.start()
            for topic in (TOPIC,):
                await self.target.upsert_topic(TopicConfig(topic, 2, 2))
            self.masters.append(self.target)
        self.slave_store = store_at(self.tmp_path / "a", self.clock)
        config = BrokerConfig(broker_name="broker-a", broker_id=1, broker_role="SLAVE", enable_slave_acting_master=True,
                              **self.slave_keys)
        acting = ActingState(enabled=True, view=MemberView(1, self.clock.now_ms()))
        acting.bridge = EscapeBridge("broker-a", config, self.clock, lambda: list(self.masters), self._route,
                                     self.client)
        self.sink = Sink()
        self.slave = Broker(config, self.slave_store, self.clock, self.sink, self.replication, acting=acting)
        self.slave.topics.upsert(TopicConfig(TOPIC, 2, 2), self.clock.now_ms())
        return self

    async def _route(self, topic):
        return self.remote_route

    async def copy_into_slave(self, drafts):
        """What replication would have brought: records the dead master wrote."""
        return await self.slave_store.put(drafts)

    async def act(self):
        await self.slave.start()
        assert self.slave.is_acting and self.slave.special_services_running

    async def stop(self):
        await self.slave.stop()
        self.slave_store.shutdown()
        for master in self.masters:
            await master.stop()
            master.store.shutdown()


def draft(body=b"x", topic=TOPIC, message_id="ID1", queue_id=0):
    return MessageDraft(topic, queue_id, body, 1, properties={Prop.MESSAGE_ID: message_id, "k": "v"})


def run(coro):
    return asyncio.run(coro)


def test_a_due_delay_message_escapes_to_the_local_master_and_the_slave_writes_nothing(tmp_path):
    async def scenario():
        pair = await Pair(tmp_path).start()
        due = pair.clock.now_ms() + 5_000
        await pair.copy_into_slave([timer_draft(draft(message_id="D1"), due)])
        await pair.act()
        log_end = pair.slave_store.commit_log_max_offset
        assert await pair.slave.run_timer() == 0  # not due yet
        pair.clock.advance(5_000)
        assert await pair.slave.run_timer() == 1
        assert await pair.slave.run_timer() == 0  # resolved: never twice
        delivered = [m for q in (0, 1) for m in pair.target_store.get(TOPIC, q, 0, 10).messages]
        assert [m.message_id for m in delivered] == ["D1"] and delivered[0].properties["k"] == "v"
        assert pair.slave_store.commit_log_max_offset == log_end  # no op, no message in the slave's own log
        assert pair.slave.timer.data_version.state_version == 1  # a new state version: the master adopts it
        await pair.stop()
    run(scenario())


def test_the_acting_slave_fsyncs_its_escape_checkpoint_off_the_event_loop(tmp_path, monkeypatch):
    """What the acting slave escaped is recorded in its timer checkpoint alone (it writes no op
    to its log): written (fsynced) before the run ends, in a worker thread, never on the loop
    that serves every call of the container."""
    import threading

    from services.broker import config_files

    writes, real_write = [], config_files.write_atomically

    def recording_write(path, text):
        writes.append((path, threading.current_thread() is threading.main_thread()))
        return real_write(path, text)

    async def scenario():
        pair = await Pair(tmp_path).start()
        due = pair.clock.now_ms() + 1_000
        await pair.copy_into_slave([timer_draft(draft(message_id=f"D{i}"), due) for i in range(3)])
        await pair.act()
        pair.clock.advance(1_000)
        monkeypatch.setattr(config_files, "write_atomically", recording_write)
        assert await pair.slave.run_timer() == 3
        monkeypatch.undo()
        assert [on_loop for path, on_loop in writes if path == pair.slave.timer.path] == [False]
        reread = config_files.read_document(pair.slave.timer.path, lambda document: document)
        checkpoint = pair.slave.timer.versioned_checkpoint()
        assert TimerIndex.from_document(reread).to_document() == checkpoint.document
        assert reread["dataVersion"] == checkpoint.data_version.to_json()
        await pair.stop()
    run(scenario())


def test_with_no_target_nothing_advances_and_the_message_waits(tmp_path):
    async def scenario():
        pair = await Pair(tmp_path).start(with_target=False)
        await pair.copy_into_slave([timer_draft(draft(message_id="D1"), pair.clock.now_ms())])
        await pair.act()
        assert await pair.slave.run_timer() == 0 and pair.slave.timer.index.pending  # waits
        pair.target_store = store_at(tmp_path / "b", pair.clock)  # a master appears here
        pair.target = Broker(BrokerConfig(broker_name="broker-b"), pair.target_store, pair.clock, Sink())
        await pair.target.start()
        await pair.target.upsert_topic(TopicConfig(TOPIC, 2, 2))
        pair.masters.append(pair.target)
        assert await pair.slave.run_timer() == 0  # escapeRetryIntervalMillis: not asked again at once
        pair.clock.advance(pair.slave.config.escape_retry_interval_ms)
        assert await pair.slave.run_timer() == 1 and not pair.slave.timer.index.pending
        await pair.stop()
    run(scenario())


class PreOnline:
    """A master's pre-online driver as the broker sees it: done or not."""

    done = False


def test_a_slave_whose_copy_was_never_shown_caught_up_does_not_act_and_escapes_nothing(tmp_path):
    """Issue 24 defect 2: a slave restarted while its master was away has a copy without what the
    master did meanwhile (here: it delivered D1).  It is the group's smallest live member with a
    fresh view, yet it must not act: D1 would be delivered again."""
    async def scenario():
        pair = Pair(tmp_path)
        pair.replication.copy_caught_up = False  # no connection to its master since it started
        await pair.start()
        await pair.copy_into_slave([timer_draft(draft(message_id="D1"), pair.clock.now_ms())])
        await pair.slave.start()
        pair.clock.advance(5_000)
        await pair.slave.apply_role()
        assert not pair.slave.special_services_running and not pair.slave.is_acting
        assert pair.slave.acting.reason is Reason.COPY_NOT_CAUGHT_UP
        assert [m for q in (0, 1) for m in pair.target_store.get(TOPIC, q, 0, 10).messages] == []
        pair.replication.copy_caught_up = True  # a connection showed the copy holding all its master's
        await pair.slave.apply_role()
        assert pair.slave.is_acting
        await pair.stop()
    run(scenario())


def test_nothing_escapes_into_a_master_in_pre_online(tmp_path):
    """Issue 24 defect 2: the local master has not taken its own group's state back yet.  A due
    message waits (MASTER_PRE_ONLINE) and goes there once it is online; the master refuses an
    escape meanwhile, whoever sends it."""
    async def scenario():
        pair = await Pair(tmp_path).start()
        pair.target.pre_online = PreOnline()
        await pair.copy_into_slave([timer_draft(draft(message_id="D1"), pair.clock.now_ms())])
        await pair.act()
        assert await pair.slave.run_timer() == 0 and pair.slave.timer.index.pending
        with pytest.raises(EscapeFailed) as failure:
            await pair.slave.acting.bridge.escape(EscapeKind.DELAY, TOPIC, [EscapedItem("k", EscapeKind.DELAY, draft())])
        assert failure.value.no_target is NoTargetReason.MASTER_PRE_ONLINE
        with pytest.raises(RequestRejected) as refused:
            await pair.target.escape_put([EscapedItem("k2", EscapeKind.DELAY, draft())])
        assert refused.value.code is Code.HA_NOT_AVAILABLE
        assert [m for q in (0, 1) for m in pair.target_store.get(TOPIC, q, 0, 10).messages] == []
        pair.target.went_online()
        pair.clock.advance(pair.slave.config.escape_retry_interval_ms)
        assert await pair.slave.run_timer() == 1 and not pair.slave.timer.index.pending
        await pair.stop()
    run(scenario())


def test_an_escape_repeated_after_the_targets_log_was_cut_is_stored_again(tmp_path):
    """A target keeps an escape's key once within its de-duplication window, but only while the
    record is there: after its log was cut (or it stepped down), a repeated escape is stored
    again, not answered with a place that no longer holds it (the chaos finding of the send
    path, services.broker.send_service)."""
    async def scenario():
        pair = await Pair(tmp_path).start()
        store = pair.target_store
        cut = store.commit_log_max_offset
        item = EscapedItem("broker-a:timer:9", EscapeKind.DELAY, draft(message_id="E9"))
        first = await pair.target.escape_put([item])
        assert await pair.target.escape_put([item]) == first  # repeated: not stored twice
        assert [m.message_id for q in (0, 1) for m in store.get(TOPIC, q, 0, 10).messages] == ["E9"]
        store.truncate(cut)  # rejoining as a slave: the record is gone
        await pair.target.escape_put([item])
        assert [m.message_id for q in (0, 1) for m in store.get(TOPIC, q, 0, 10).messages] == ["E9"]
        await pair.stop()
    run(scenario())


def test_a_client_send_is_never_answered_with_an_escapes_place(tmp_path):
    """Escapes share the target's de-duplication memory under a topic no client can name: a
    client's message whose id spells an escape's key, or the key with the old "escape:" prefix,
    is stored, not answered with the escape's place."""
    async def scenario():
        pair = await Pair(tmp_path).start()
        key = "broker-a:timer:9"
        await pair.target.escape_put([EscapedItem(key, EscapeKind.DELAY, draft(message_id="E9"))])
        for message_id in (key, "escape:" + key):
            outcomes = await pair.target.send([SendItem.of(draft(message_id=message_id), MessageType.NORMAL, None, None)])
            assert outcomes[0].message_id == message_id
        stored = sorted(m.message_id for q in (0, 1) for m in pair.target_store.get(TOPIC, q, 0, 10).messages)
        assert stored == sorted(["E9", key, "escape:" + key])
        await pair.stop()
    run(scenario())


def test_after_a_failed_put_on_the_local_master_due_messages_wait_one_retry_interval_not_the_exclusion(tmp_path):
    """Issue 24 defect 3: the only target, the master next to the acting slave, failed one put
    (its replica wait ran out: its own slave died with the other container).  It is alive: the
    due message goes there at the next retry (escapeRetryIntervalMillis), not after
    escapeExcludeMillis -- that held a group's due messages 10 s per failure."""
    async def scenario():
        pair = await Pair(tmp_path).start()
        real_put, failures = pair.target.escape_put, []

        async def fails_once(items):
            if not failures:
                failures.append(items)
                raise RequestRejected(Code.HA_NOT_AVAILABLE, "broker broker-b: replicas did not ack within slaveTimeout")
            return await real_put(items)

        pair.target.escape_put = fails_once
        await pair.copy_into_slave([timer_draft(draft(message_id="D1"), pair.clock.now_ms())])
        await pair.act()
        assert await pair.slave.run_timer() == 0 and failures  # failed: the message waits
        config = pair.slave.config
        assert config.escape_retry_interval_ms < config.escape_exclude_ms
        pair.clock.advance(config.escape_retry_interval_ms - 1)
        assert await pair.slave.run_timer() == 0  # not hammered
        pair.clock.advance(1)
        assert await pair.slave.run_timer() == 1 and not pair.slave.timer.index.pending
        await pair.stop()
    run(scenario())


def test_a_commit_on_the_acting_slave_escapes_and_a_send_is_refused(tmp_path):
    async def scenario():
        pair = await Pair(tmp_path).start()
        [half] = await pair.copy_into_slave([half_draft(draft(message_id="T1"))])
        await pair.act()
        txid = transaction_id(half.queue_offset, "T1")
        await pair.slave.end_transaction(TOPIC, "T1", txid, commit=True, from_check=True)
        await pair.slave.end_transaction(TOPIC, "T1", txid, commit=True, from_check=False)  # repeated: OK, once
        delivered = [m for q in (0, 1) for m in pair.target_store.get(TOPIC, q, 0, 10).messages]
        assert [m.message_id for m in delivered] == ["T1"]
        with pytest.raises(RequestRejected) as refused:
            await pair.slave.send([SendItem.of(draft(message_id="S1"), MessageType.NORMAL, None, None)])
        assert refused.value.code == Code.FORBIDDEN and "acting" in refused.value.message
        assert await pair.slave.query_offset(HALF_TOPIC, 0, "END", None) == 1  # a master's read, answered
        await pair.stop()
    run(scenario())


def test_pop_on_the_acting_slave_journals_acks_and_escapes_retries(tmp_path):
    async def scenario():
        pair = await Pair(tmp_path).start()
        await pair.copy_into_slave([draft(message_id=f"P{i}", queue_id=0) for i in range(3)])
        await pair.act()
        log_end = pair.slave_store.commit_log_max_offset
        request = ReceiveRequest("c1", "g", TOPIC, -1, FilterExpression(), 32, 10_000, False, 0,
                                 pair.clock.monotonic_ms() + 1000)
        deliveries = await pair.slave.receive(request)
        assert [d.message.message_id for d in deliveries] == ["P0", "P1", "P2"]
        await pair.slave.ack("g", TOPIC, "P0", deliveries[0].receipt_handle)
        await pair.slave.change_invisible_duration("g", TOPIC, "P1", deliveries[1].receipt_handle, 1_000)
        assert pair.slave_store.commit_log_max_offset == log_end  # journaled, not logged
        assert any(isinstance(r, AckRecord) for r in pair.slave.pop.journal.replay())
        pair.clock.advance(10_001)
        assert await pair.slave.run_revive() == 2  # P1 and P2 expired: retry copies escape to broker-b
        retry = [m for m in pair.target_store.get("%RETRY%g%orders", 0, 0, 10).messages]
        assert sorted(m.message_id for m in retry) == ["P1", "P2"]
        assert await pair.slave.run_revive() == 0  # acked here once escaped: never a second retry
        await pair.slave.stop()  # stops acting: the snapshot holds the journal, which goes
        assert pair.slave.pop.journal.replay() == []
        await pair.target.stop()
        pair.target_store.shutdown()
        pair.slave_store.shutdown()
    run(scenario())


def test_a_fifo_batch_on_the_acting_slave_comes_back_in_order_after_a_partial_ack_and_a_restart(tmp_path):
    """FIFO order holds on the acting slave: a receive takes consecutive messages of the queue,
    the queue stays locked while any of them is unacked and invisible, and the unacked rest is
    redelivered in order once visible -- across a restart (the pop journal replayed)."""
    from metadata.subscription_group import SubscriptionGroupConfig

    async def scenario():
        pair = await Pair(tmp_path).start()
        pair.slave.groups.upsert(SubscriptionGroupConfig("g", consume_message_orderly=True), pair.clock.now_ms())
        ordered = [MessageDraft(TOPIC, 0, f"m{i}".encode(), 1, properties={Prop.MESSAGE_ID: f"F{i}", Prop.MESSAGE_GROUP: "o"})
                   for i in range(6)]
        await pair.copy_into_slave(ordered)
        await pair.act()

        def request():
            return ReceiveRequest("c1", "g", TOPIC, -1, FilterExpression(), 4, 5_000, False, 0, pair.clock.monotonic_ms() + 1000)
        first = await pair.slave.receive(request())
        assert [d.message.message_id for d in first] == ["F0", "F1", "F2", "F3"]
        await pair.slave.ack("g", TOPIC, "F0", first[0].receipt_handle)
        assert await pair.slave.receive(request()) == []  # F1-F3 hold the queue
        await pair.slave.stop()
        pair.slave = Broker(pair.slave.config, pair.slave_store, pair.clock, pair.sink, SlaveReplication(),
                            acting=pair.slave.acting)
        pair.slave.groups.upsert(SubscriptionGroupConfig("g", consume_message_orderly=True), pair.clock.now_ms())
        await pair.act()
        assert await pair.slave.receive(request()) == []  # still invisible after the restart
        pair.clock.advance(5_000)
        again = await pair.slave.receive(request())
        assert [(d.message.message_id, d.delivery_attempt) for d in again] == [("F1", 2), ("F2", 2), ("F3", 2)]
        for delivery in again:
            await pair.slave.ack("g", TOPIC, "", delivery.receipt_handle)
        assert [d.message.message_id for d in await pair.slave.receive(request())] == ["F4", "F5"]
        await pair.stop()
    run(scenario())


# --- the escape bridge's choices ------------------------------------------------------------------
class FakeClient:
    def __init__(self, dead: set[str]):
        self.dead, self.calls = dead, []

    async def call(self, address, method, request, timeout_ms):
        self.calls.append((address, request.broker_name))
        if address in self.dead:
            raise ActingUnavailable(f"{address}: UNAVAILABLE")
        return pb.ActingEscapePutResponse(places=[pb.ActingEscapedPlace(topic=m.topic, queue_id=0, queue_offset=7)
                                                  for m in request.messages])


def route_of(*names):
    brokers = [BrokerRoute("DefaultCluster", name, {0: BrokerAddress(f"{name}:10911", f"{name}:8081")},
                           QueueData(2, 2, PERM_READ_WRITE, "NORMAL")) for name in names]
    return TopicRoute(TOPIC, tuple(brokers))


def test_remote_escape_skips_a_dead_master_and_copies_properties(tmp_path):
    async def scenario():
        client = FakeClient(dead={"broker-c:10911"})
        config = BrokerConfig(broker_name="broker-a", broker_id=1, enable_slave_acting_master=True,
                              enable_remote_escape=True)
        clock = ManualClock()
        bridge = EscapeBridge("broker-a", config, clock, lambda: [], lambda topic: _async(route_of("broker-c", "broker-d")),
                              client)
        original = draft(message_id="R1")
        places = await bridge.escape(EscapeKind.DELAY, TOPIC, [EscapedItem("broker-a:timer:1", EscapeKind.DELAY, original)])
        assert places == [EscapedPlace("broker-d", TOPIC, 0, 7)]  # #7923: the dead master is excluded
        assert bridge.exclusions.active(clock.now_ms()) == {"broker-c"}
        await bridge.escape(EscapeKind.DELAY, TOPIC, [EscapedItem("broker-a:timer:2", EscapeKind.DELAY, original)])
        assert client.calls[-1] == ("broker-d:10911", "broker-d")  # not asked again while excluded
        assert dict(original.properties) == {Prop.MESSAGE_ID: "R1", "k": "v"}  # #7601: untouched
        client.dead.add("broker-d:10911")
        with pytest.raises(EscapeFailed) as failed:
            await bridge.escape(EscapeKind.DELAY, TOPIC, [EscapedItem("broker-a:timer:3", EscapeKind.DELAY, original)])
        assert failed.value.no_target is NoTargetReason.ALL_EXCLUDED
    run(scenario())


def test_a_local_escape_gets_its_own_property_maps(tmp_path):
    async def scenario():
        seen = []

        class Target:
            name, pre_online_pending = "broker-b", False
            topics = type("T", (), {"get": staticmethod(lambda topic: TopicConfig(topic, 2, 2))})

            async def escape_put(self, items):
                seen.extend(items)
                return [EscapedPlace("broker-b", i.draft.topic, 0, 0) for i in items]

        config = BrokerConfig(broker_name="broker-a", broker_id=1, enable_slave_acting_master=True)
        bridge = EscapeBridge("broker-a", config, ManualClock(), lambda: [Target()], lambda topic: _async(None), None)
        original = draft()
        await bridge.escape(EscapeKind.RETRY, TOPIC, [EscapedItem("k", EscapeKind.RETRY, original)])
        assert seen[0].draft.properties == original.properties
        assert seen[0].draft.properties is not original.properties
        assert isinstance(seen[0].draft.properties, MappingProxyType)
    run(scenario())


async def _async(value):
    return value


# --- the pop journal ------------------------------------------------------------------------------
def test_the_pop_journal_replays_whole_frames_and_stops_at_a_torn_one(tmp_path):
    journal = PopJournal(tmp_path / "journal.bin")
    assert journal.replay() == []
    key = QueueKey("g", TOPIC, 0)
    journal.append([AckRecord(key, 1), AckRecord(key, 2)])
    journal.append([AckRecord(key, 3)])
    with open(journal.path, "ab") as torn:
        torn.write(b"\x00\x00\x10\x00garbage")  # a crash mid-append
    assert [r.offset for r in journal.replay()] == [1, 2, 3]
    journal.clear()
    assert journal.replay() == [] and not journal.path.exists()


# --- the FIFO lock quorum between replicas ----------------------------------------------------------
class Peers:
    """In-memory LockQueues between FifoLocks replicas; a replica in ``down`` does not answer."""

    def __init__(self):
        self.replicas: dict[str, FifoLocks] = {}
        self.down: set[str] = set()

    async def call(self, address, method, request, timeout_ms):
        if address in self.down:
            raise ActingUnavailable(address)
        keys = [QueueKey(q.group, q.topic, q.queue_id) for q in request.queues]
        granted = self.replicas[address].grant(keys, request.holder_id, request.lease_ms)
        return pb.ActingLockQueuesResponse(granted=[pb.ActingQueueKey(group=k.group, topic=k.topic, queue_id=k.queue_id)
                                                    for k in granted])


def _replicas(total: int, strict: bool, peers: Peers, clock) -> list[FifoLocks]:
    members = {i: f"r{i}" for i in range(total)}
    config = BrokerConfig(lock_in_strict_mode=strict, enable_slave_acting_master=True)
    for i in range(total):
        peers.replicas[f"r{i}"] = FifoLocks("broker-a", lambda i=i: i, config, total, clock, lambda: members, peers)
    return [peers.replicas[f"r{i}"] for i in range(total)]


def test_strict_fifo_locks_need_a_quorum_of_the_configured_replicas():
    async def scenario():
        clock, peers, key = ManualClock(), Peers(), QueueKey("g", "fifo", 0)
        master, slave = _replicas(2, True, peers, clock)
        assert await master.acquire([key]) == {key}  # the slave granted it
        assert await slave.acquire([key]) == set()  # never both at once
        peers.down.add("r0")  # the master dies, holding the lease on the slave
        assert await slave.acquire([key]) == set()  # two replicas: the acting slave alone is no quorum
        clock.advance(60_001)
        assert await slave.acquire([key]) == set()  # even after the lease expired
        trio = _replicas(3, True, Peers(), clock)
        assert await trio[1].acquire([key]) == {key}  # three replicas: itself and one more
        loose_master, loose_slave = _replicas(2, False, Peers(), clock)
        assert await loose_slave.acquire([key]) == {key}  # not strict: local
    run(scenario())


def test_a_returning_master_cannot_take_a_queue_an_acting_slave_still_holds():
    async def scenario():
        clock, peers, key = ManualClock(), Peers(), QueueKey("g", "fifo", 0)
        r0, r1, r2 = _replicas(3, True, peers, clock)
        peers.down.add("r0")
        assert await r1.acquire([key]) == {key}  # the acting slave, with r2's grant
        peers.down.discard("r0")
        assert await r0.acquire([key]) == set()  # both others refuse while r1 holds it
        r1.release_own()
        peers.replicas["r2"].release([key], 1)
        assert await r0.acquire([key]) == {key}
    run(scenario())
