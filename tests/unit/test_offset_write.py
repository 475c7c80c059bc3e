"""The admin offset write without I/O: the compare-and-set decision, skip records in the pop
table and log, request validation at the edge, and the servicer's replies and statuses."""
from __future__ import annotations

import time

import grpc
from hypothesis import given, settings, strategies as st

from metadata.data_version import DataVersion
from metadata.offset_write import Accepted, Moved, QueueFacts, QueueOffset, Refused, WriteRefusal, decide_offset_write
from proto import admin_pb2 as pb
from scheduler.pop.records import (
    SKIPS_PER_BODY, AckRecord, InFlight, PopRecord, QueueKey, SkipRecord, decode_records, encode_records,
)
from scheduler.pop.table import PopTable
from services.admin.service import BrokerAdminServicer
from tests.unit.test_admin_service import FakeAdminBroker, FakeContainer, call

V1, V2 = DataVersion(0, 10, 1), DataVersion(0, 20, 2)
FACTS = QueueFacts(queue_nums=2, max_offset=100, committed=10)


# ---- the decision ------------------------------------------------------------------------------

def test_accepted_bumps_the_counter_keeps_the_state_version_and_stamps_now():
    decision = decide_offset_write(DataVersion(3, 10, 7), DataVersion(3, 10, 7), [QueueOffset("T", "G", 0, 50)],
                                   {("T", "G", 0): FACTS}, now_ms=99)
    assert decision == Accepted((QueueOffset("T", "G", 0, 50),), DataVersion(3, 99, 8))


def test_moved_is_decided_before_any_queue_is_looked_at():
    decision = decide_offset_write(V1, V2, [QueueOffset("T", "G", 0, 5)], {("T", "G", 0): QueueFacts(None, 0, None)}, 1)
    assert decision == Moved(V1, V2)
    assert decision.describe() == ("MOVED_SINCE_PLAN: expected dataVersion {'counter': 1, 'stateVersion': 0, 'timestamp': 10}, "
                                   "current {'counter': 2, 'stateVersion': 0, 'timestamp': 20}")


def test_the_first_refused_queue_names_the_reason_and_counts_the_others():
    items = [QueueOffset("T", "G", 0, 50), QueueOffset("T", "G", 1, 101), QueueOffset("U", "G", 0, 1)]
    facts = {("T", "G", 0): FACTS, ("T", "G", 1): FACTS, ("U", "G", 0): QueueFacts(None, 0, None)}
    decision = decide_offset_write(V1, V1, items, facts, 1)
    assert isinstance(decision, Refused) and decision.reason is WriteRefusal.OFFSET_BEYOND_MAX
    assert decision.detail == "T@G queue 1: offset 101 is beyond the queue's max offset 100 (and 1 more refused queues)"


def test_bounds_are_inclusive_at_max_and_at_the_committed_offset():
    for offset in (10, 100):
        assert isinstance(decide_offset_write(V1, V1, [QueueOffset("T", "G", 1, offset)], {("T", "G", 1): FACTS}, 1), Accepted)
    refused = decide_offset_write(V1, V1, [QueueOffset("T", "G", 2, 10)], {("T", "G", 2): FACTS}, 1)
    assert refused.reason is WriteRefusal.QUEUE_NOT_FOUND and "has 2 queues" in refused.detail
    behind = decide_offset_write(V1, V1, [QueueOffset("T", "G", 0, 9)], {("T", "G", 0): FACTS}, 1)
    assert behind.reason is WriteRefusal.OFFSET_BEHIND_COMMITTED


# ---- skips in the pop table and the pop log ------------------------------------------------------

KEY = QueueKey("G", "T", 0)


def entry(offset: int, seq: int) -> InFlight:
    return InFlight(offset, seq, 1, 10**12, 16, offset * 100)


def test_a_skip_consumes_everything_below_it_and_only_moves_forward():
    table = PopTable()
    table.apply(PopRecord(KEY, 0, 6, tuple(entry(o, o + 1) for o in range(6))))
    table.apply(AckRecord(KEY, 4))
    commits = table.apply(SkipRecord(KEY, 3))
    state = table.get(KEY)
    assert [c.offset for c in commits] == [3] and sorted(state.inflight) == [3, 5] and state.acked == {4}
    assert table.apply(SkipRecord(KEY, 3)) == [] and table.apply(SkipRecord(KEY, 1)) == []  # idempotent, never back
    assert [c.offset for c in table.apply(SkipRecord(KEY, 4))] == [5]  # 4 was acked already: the commit runs on
    assert [c.offset for c in table.apply(SkipRecord(KEY, 9))] == [9]  # past the pop cursor: the cursor follows
    state.check()
    assert (state.commit, state.pop_offset, state.inflight, state.acked) == (9, 9, {}, set())
    assert table.apply(AckRecord(KEY, 5)) == [] and table.apply(PopRecord(KEY, 6, 9, (entry(7, 99),))) == []


def test_a_skip_of_an_unknown_queue_starts_it_there_and_a_far_skip_costs_nothing():
    table = PopTable()
    assert [c.offset for c in table.apply(SkipRecord(KEY, 7))] == [7] and table.get(KEY).pop_offset == 7
    started = time.perf_counter()
    table.apply(SkipRecord(KEY, 10**12))
    assert table.get(KEY).commit == 10**12 and time.perf_counter() - started < 0.1


def test_skips_share_bodies_of_at_most_skips_per_body_and_round_trip():
    skips = [SkipRecord(QueueKey("G", f"T{i}", i % 4), i) for i in range(SKIPS_PER_BODY + 5)]
    records = [AckRecord(KEY, 1), *skips, AckRecord(KEY, 2)]
    bodies = encode_records(records)
    assert len(bodies) == 4  # ack, 1000 skips, 5 skips, ack
    assert [record for body in bodies for record in decode_records(body)] == records
    assert decode_records(encode_records([skips[0]])[0]) == (skips[0],)
    assert decode_records(b'{"t":"skips","s":[["G","T",0]]}') == ()


# ---- the servicer -------------------------------------------------------------------------------

class WritableBroker(FakeAdminBroker):
    def __init__(self, *args, decision=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.decision, self.calls = decision, []

    async def write_consumer_offsets(self, expected, offsets):
        self.calls.append((expected, tuple(offsets)))
        if self.decision is not None:
            return self.decision
        return Accepted(tuple(offsets), expected.next_version(77))


def servicer(decision=None):
    master = WritableBroker("broker-a", decision=decision)
    slave = WritableBroker("broker-b", 1, role="SLAVE")
    return BrokerAdminServicer(FakeContainer(master, slave)), master, slave


def write_request(broker="broker-a", offsets=(("T", "G", 0, 5),), version=(0, 6, 3), **kw):
    state, timestamp, counter = version
    return pb.AdminWriteConsumerOffsetsRequest(
        broker_name=broker, expected_data_version=pb.AdminDataVersion(state_version=state, timestamp_ms=timestamp, counter=counter),
        offsets=[pb.AdminQueueOffset(topic=t, group=g, queue_id=q, offset=o) for t, g, q, o in offsets], **kw)


def test_a_write_replies_the_new_version_and_the_offsets_as_stored():
    service, master, _ = servicer()
    reply, _ = call(service, "WriteConsumerOffsets", write_request(broker_id=0))
    assert reply.written and (reply.broker_name, reply.broker_id) == ("broker-a", 0)
    assert (reply.data_version.counter, reply.data_version.timestamp_ms) == (4, 77)
    assert [(o.topic, o.group, o.queue_id, o.offset) for o in reply.offsets] == [("T", "G", 0, 5)]
    assert master.calls == [(DataVersion(0, 6, 3), (QueueOffset("T", "G", 0, 5),))]


def test_moved_is_a_reply_with_the_current_version_not_an_error():
    service, *_ = servicer(decision=Moved(DataVersion(0, 6, 3), DataVersion(0, 9, 4)))
    reply, context = call(service, "WriteConsumerOffsets", write_request())
    assert context.code is None and not reply.written and list(reply.offsets) == []
    assert reply.data_version.counter == 4 and reply.detail.startswith("MOVED_SINCE_PLAN")


def test_refusals_slaves_and_unknown_replicas_are_named_statuses():
    cases = [
        (WriteRefusal.TOPIC_NOT_FOUND, grpc.StatusCode.NOT_FOUND), (WriteRefusal.QUEUE_NOT_FOUND, grpc.StatusCode.NOT_FOUND),
        (WriteRefusal.OFFSET_BEYOND_MAX, grpc.StatusCode.OUT_OF_RANGE),
        (WriteRefusal.OFFSET_BEHIND_COMMITTED, grpc.StatusCode.FAILED_PRECONDITION),
    ]
    for reason, code in cases:
        service, *_ = servicer(decision=Refused(reason, "T@G queue 0: why"))
        _, context = call(service, "WriteConsumerOffsets", write_request())
        assert (context.code, context.details) == (code, f"{reason.value}: T@G queue 0: why")
    service, _, slave = servicer()
    _, context = call(service, "WriteConsumerOffsets", write_request(broker="broker-b"))
    assert context.code == grpc.StatusCode.FAILED_PRECONDITION and context.details.startswith("BROKER_IS_SLAVE")
    assert "metadata sync" in context.details and slave.calls == []
    _, context = call(service, "WriteConsumerOffsets", write_request(broker_id=1))
    assert context.code == grpc.StatusCode.NOT_FOUND and context.details.endswith("broker-a with brokerId 1")


def test_malformed_requests_are_invalid_argument_naming_the_field():
    cases = [
        (write_request(broker=""), "broker_name"),
        (write_request(offsets=()), "offsets: 0 entries"),
        (write_request(offsets=(("T", "G", 0, -1),)), "offsets[0].offset: -1"),
        (write_request(offsets=(("T", "G", -2, 1),)), "offsets[0].queue_id: -2"),
        (write_request(offsets=(("T", "a b", 0, 1),)), "offsets[0].group"),
        (write_request(offsets=(("T@x", "G", 0, 1),)), "offsets[0].topic"),
        (write_request(offsets=(("T", "G", 0, 1), ("T", "G", 0, 2))), "offsets[1]: T@G queue 0 is given twice"),
        (write_request(version=(0, -1, 3)), "expected_data_version.timestamp_ms"),
        (pb.AdminWriteConsumerOffsetsRequest(broker_name="broker-a", offsets=[pb.AdminQueueOffset(topic="T", group="G")]),
         "expected_data_version: required"),
    ]
    service, master, _ = servicer()
    for request, fragment in cases:
        _, context = call(service, "WriteConsumerOffsets", request)
        assert context.code == grpc.StatusCode.INVALID_ARGUMENT and fragment in context.details, context.details
    assert master.calls == []


names = st.one_of(st.text(max_size=20), st.sampled_from(["", "T", "G", "broker-a", "broker-b"]))
longs = st.integers(min_value=-(2**63), max_value=2**63 - 1)


@settings(max_examples=150, deadline=None)
@given(broker=names, broker_id=st.one_of(st.none(), longs), version=st.tuples(longs, longs, longs),
       offsets=st.lists(st.tuples(names, names, st.integers(-(2**31), 2**31 - 1), longs), max_size=4))
def test_no_write_request_crashes_the_servicer(broker, broker_id, version, offsets):
    service, *_ = servicer()
    request = write_request(broker=broker, offsets=offsets, version=version)
    if broker_id is not None:
        request.broker_id = broker_id
    reply, context = call(service, "WriteConsumerOffsets", request)
    assert reply is not None or context.code in (
        grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.NOT_FOUND, grpc.StatusCode.FAILED_PRECONDITION), context.details

