"""`relaymq offset-diff --apply` of a plan made from live replicas, against real containers.

Two containers hold broker-a's master and slave (tests/support/ha_pair.py).  Offsets are
committed by a consumer over the client protocol; the plan is made from the replicas' live
tables (GetConsumerOffsets) without Spark, with the safe table raised as a slave that had
consumed further would make it.  Checked from the outside: the admin API, consumerOffset.json
on disk, a kill -9 and restart, and where receives continue.
"""
from __future__ import annotations

import subprocess
import sys

import grpc
import pytest

from metadata.consumer_offsets import ConsumerOffsetTable, OffsetKey, loads
from metadata.data_version import DataVersion
from proto import admin_pb2 as pb
from proto import admin_pb2_grpc as pb_grpc
from tests.integration.test_container_lifecycle import wait_for_route
from tests.support.container_process import ROOT, ContainerProcess
from tests.support.ha_pair import HaPair, wait_until
from tests.support.offset_plan import PlannedReplica, write_live_plan
from tests.support.raw_client import RawClient

pytestmark = pytest.mark.integration
OK = 20000


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    running = HaPair(tmp_path_factory.mktemp("offset-apply"), role="ASYNC_MASTER", extra={"slaveSynchronizePeriod": 500})
    try:
        running.start()
        wait_until(lambda: running.slave_connected("broker-a"), 30, what="broker-a's slave connected")
        yield running
    finally:
        running.close()


def admin_address(container: ContainerProcess) -> str:
    return f"127.0.0.1:{container.admin_port}"


def admin_call(container: ContainerProcess, method: str, request):
    with grpc.insecure_channel(admin_address(container)) as channel:
        return getattr(pb_grpc.BrokerAdminStub(channel), method)(request, timeout=10)


def live_table(container: ContainerProcess) -> tuple[ConsumerOffsetTable, pb.AdminGetConsumerOffsetsResponse]:
    reply = admin_call(container, "GetConsumerOffsets", pb.AdminGetConsumerOffsetsRequest(broker_name="broker-a"))
    return loads(reply.document), reply


def file_table(container: ContainerProcess) -> ConsumerOffsetTable:
    return loads((container.data_dir / "broker-a-0" / "config" / "consumerOffset.json").read_text())


def loaded_topic(pair: HaPair, topic: str, sent: int, received: int, acked: int) -> tuple[RawClient, list]:
    """``sent`` messages in a 1-queue topic; group G receives ``received`` and acks the first ``acked``."""
    pair.update_topic(topic, queues=1, broker="broker-a")
    client = RawClient(pair.master_of("broker-a").endpoint)
    wait_for_route(client, topic)
    for index in range(sent):
        assert client.send(topic, f"m{index}".encode()).status.code == OK
    messages = wait_until(lambda: client.receive("G", topic, "broker-a", batch=received, invisible_s=300, poll_s=2),
                          15, what="a receive")
    assert [m.system_properties.queue_offset for m in messages] == list(range(received))
    for message in messages[:acked]:
        assert client.ack("G", topic, message).status.code == OK
    return client, messages


def plan_raising(tmp_path, pair: HaPair, raises: dict[tuple[str, str, int], int]):
    """A plan from both replicas' live tables; the safe table is the master's with ``raises``."""
    master, slave = pair.master_of("broker-a"), pair.slave_of("broker-a")
    (master_table, master_reply), (_, slave_reply) = live_table(master), live_table(slave)
    assert (master_reply.role, slave_reply.role, slave_reply.broker_id) == ("MASTER", "SLAVE", 1)
    offsets = {key: dict(queues) for key, queues in master_table.offsets.items()}
    for (topic, group, queue_id), offset in raises.items():
        offsets.setdefault(OffsetKey(topic, group), {})[queue_id] = offset
    replicas = [PlannedReplica(0, "master", admin_address(master), master_table.data_version),
                PlannedReplica(1, "slave", admin_address(slave), loads(slave_reply.document).data_version)]
    return write_live_plan(tmp_path / "plan", {"broker-a": (replicas, ConsumerOffsetTable(DataVersion(), offsets))}), master_table


def apply(plan_dir) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "container", "offset-diff", "--apply", str(plan_dir), "--apply-timeout-ms", "5000"],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)


def test_apply_writes_the_master_durably_slaves_follow_and_receives_continue_there(pair, tmp_path):
    client, messages = loaded_topic(pair, "applied", sent=10, received=4, acked=3)  # offset 3 stays in flight
    plan_dir, before = plan_raising(tmp_path, pair, {("applied", "G", 0): 8, ("applied", "G2", 0): 6})
    assert before.get("applied", "G", 0) == 3

    result = apply(plan_dir)
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("applied broker-a:0 (127.0.0.1:") and "2 queues, dataVersion" in lines[0]
    assert "  applied@G queue 0: 3 -> 8" in lines and "  applied@G2 queue 0: (none) -> 6" in lines
    assert "  slaves follow by metadata sync: broker-a:1" in lines and lines[-1] == "APPLIED: 1 broker groups"

    master = pair.master_of("broker-a")
    after, reply = live_table(master)
    expected = before.data_version.next_version(after.data_version.timestamp_ms)
    assert after.data_version == expected and (after.get("applied", "G", 0), after.get("applied", "G2", 0)) == (8, 6)
    assert file_table(master) == after  # fsynced before the reply
    wait_until(lambda: live_table(pair.slave_of("broker-a"))[0] == after, 20, what="the slave adopting the written table")

    assert client.ack("G", "applied", messages[3]).status.code == OK  # below the new offset: consumed already
    client.close()
    master.kill()
    master.start()
    assert live_table(master)[0] == after and file_table(master) == after
    client = RawClient(master.endpoint)
    wait_for_route(client, "applied")
    resumed = wait_until(lambda: client.receive("G", "applied", "broker-a", poll_s=2), 15, what="a receive after restart")
    assert [m.system_properties.queue_offset for m in resumed] == [8, 9]
    for message in resumed:
        assert client.ack("G", "applied", message).status.code == OK
    client.close()


def test_a_commit_between_plan_and_apply_is_refused_and_nothing_is_written(pair, tmp_path):
    client, messages = loaded_topic(pair, "moved", sent=5, received=2, acked=1)
    plan_dir, planned = plan_raising(tmp_path, pair, {("moved", "G", 0): 4})
    assert client.ack("G", "moved", messages[1]).status.code == OK  # the table moves after the plan
    client.close()

    result = apply(plan_dir)
    assert result.returncode == 3, result.stdout + result.stderr
    assert result.stdout.startswith("NOT APPLIED: replicas moved since the plan was made; re-run the diff\n")
    assert f"broker-a:0 ({admin_address(pair.master_of('broker-a'))}): dataVersion {planned.data_version.to_json()} ->" in result.stdout
    master = pair.master_of("broker-a")
    now, _ = live_table(master)
    assert now.get("moved", "G", 0) == 2 and now.data_version != planned.data_version

    # the broker's own compare-and-set, without the CLI's check first
    request = pb.AdminWriteConsumerOffsetsRequest(
        broker_name="broker-a", broker_id=0, offsets=[pb.AdminQueueOffset(topic="moved", group="G", queue_id=0, offset=4)],
        expected_data_version=pb.AdminDataVersion(state_version=planned.data_version.state_version,
                                                  timestamp_ms=planned.data_version.timestamp_ms, counter=planned.data_version.counter))
    reply = admin_call(master, "WriteConsumerOffsets", request)
    assert not reply.written and reply.detail.startswith("MOVED_SINCE_PLAN: expected dataVersion")
    assert (reply.data_version.counter, reply.data_version.timestamp_ms) == (now.data_version.counter, now.data_version.timestamp_ms)
    assert live_table(master)[0] == now and file_table(master).get("moved", "G", 0) != 4


def test_bad_writes_get_named_errors_and_write_nothing(pair):
    pair.update_topic("checked", queues=2, broker="broker-a")
    master, slave = pair.master_of("broker-a"), pair.slave_of("broker-a")
    before, _ = live_table(master)
    version = before.data_version
    expected = pb.AdminDataVersion(state_version=version.state_version, timestamp_ms=version.timestamp_ms, counter=version.counter)

    def refused(container, topic="checked", queue_id=0, offset=0, **fields) -> grpc.RpcError:
        request = pb.AdminWriteConsumerOffsetsRequest(
            broker_name="broker-a", offsets=[pb.AdminQueueOffset(topic=topic, group="G", queue_id=queue_id, offset=offset)],
            **{"expected_data_version": expected, **fields})
        with pytest.raises(grpc.RpcError) as failure:
            admin_call(container, "WriteConsumerOffsets", request)
        return failure.value

    cases = [
        (refused(master, topic="no-such-topic"), grpc.StatusCode.NOT_FOUND, "TOPIC_NOT_FOUND: no-such-topic@G queue 0"),
        (refused(master, offset=-1), grpc.StatusCode.INVALID_ARGUMENT, "BAD_REQUEST: offsets[0].offset: -1 must not be negative"),
        (refused(master, queue_id=2), grpc.StatusCode.NOT_FOUND, "QUEUE_NOT_FOUND: checked@G queue 2: topic checked has 2 queues"),
        (refused(master, offset=1), grpc.StatusCode.OUT_OF_RANGE, "OFFSET_BEYOND_MAX: checked@G queue 0: offset 1 is beyond"),
        (refused(master, expected_data_version=None), grpc.StatusCode.INVALID_ARGUMENT, "BAD_REQUEST: expected_data_version: required"),
        (refused(slave), grpc.StatusCode.FAILED_PRECONDITION, "BROKER_IS_SLAVE: broker-a broker id 1 is a slave"),
        (refused(slave, broker_id=1), grpc.StatusCode.FAILED_PRECONDITION, "BROKER_IS_SLAVE"),
    ]
    for error, code, start in cases:
        assert (error.code(), error.details()[:len(start)]) == (code, start), error.details()
    assert live_table(master)[0] == before
