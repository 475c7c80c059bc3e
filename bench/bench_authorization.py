"""What authorization costs: single sends and receive+ack with authorizationEnabled on and off.

Each round starts one container (tests/support/container_process.py, ASYNC_FLUSH, one broker)
twice with the same signed client and the same ``authorizationMetadataFile``: the bench user
plus ``--entries`` ACL entries (1,000 by default: the bench user's own policy holds literal
and prefixed entries for other topics and groups, next to the two it needs, and other users
hold the rest), once with ``authorizationEnabled = true`` and once with ``false``.
Authentication is on in both, so the figure is authorization's alone.  The cases are
bench_broker's: one message per SendMessage with 16 in flight, and the end-to-end run's
receive (batch 32) + ack phase.  Printed per round: msg/s and server CPU per 1000 messages of
each, and the on/off ratio taken within the round (the VM's speed moves between minutes);
then medians.  Issue 25's goal: under 5 % of throughput.

    .venv/bin/python bench/bench_authorization.py --rounds 3

Benchmarks print; they never fail on timing.
"""
from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import grpc  # noqa: E402

import bench.bench_broker as bb  # noqa: E402
from metadata.authentication import authorization_value  # noqa: E402
from proto import messaging_definition_pb2 as d  # noqa: E402
from proto import messaging_service_pb2_grpc as g  # noqa: E402

TOPIC = "bench-auth"
USER, SECRET = "bench", "bench-secret"


def acl_document(entries: int) -> str:
    """The bench user allowed Pub and Sub on TOPIC and Sub on groups bench-*, among ``entries``
    ACL entries in all (half the bench user's, half other users')."""
    own = entries // 2
    lines = ['[[users]]', 'username = "admin"', 'password = "admin-secret"', 'userType = "Super"', '',
             '[[users]]', f'username = "{USER}"', f'password = "{SECRET}"', '',
             '[[acls]]', f'subject = "User:{USER}"', '',
             '[[acls.policies]]', f'resources = ["Topic:{TOPIC}", "Group:bench-*"]', 'actions = ["Pub", "Sub"]',
             'decision = "Allow"', '']
    others = [f'"Topic:other-{i}"' if i % 2 else f'"Group:other{i}-*"' for i in range(own - 2)]
    if others:
        lines += ['[[acls.policies]]', f'resources = [{", ".join(others)}]', 'actions = ["Pub", "Sub"]',
                  'decision = "Deny"', '']
    for user in range(max(0, entries - own) // 10):
        lines += ['[[users]]', f'username = "user{user}"', f'password = "secret{user}"', '',
                  '[[acls]]', f'subject = "User:user{user}"', '',
                  '[[acls.policies]]', f'resources = [{", ".join(f"{chr(34)}Topic:t{user}-{i}{chr(34)}" for i in range(10))}]',
                  'actions = ["Pub"]', 'decision = "Allow"', '']
    return "\n".join(lines) + "\n"


def signed_metadata() -> tuple:
    date_time = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    return bb.META + (("x-mq-date-time", date_time), ("authorization", authorization_value(USER, SECRET, date_time)))


def start(data: Path, acl: Path, authorization: bool):
    from tests.support.container_process import ContainerProcess

    container = ContainerProcess(data, brokers=[{"brokerName": "broker-a", "flushDiskType": "ASYNC_FLUSH"}],
                                 extra={"authenticationEnabled": True, "authorizationEnabled": authorization,
                                        "authorizationMetadataFile": str(acl)}).start()
    deadline = time.monotonic() + 30
    while True:
        done = container.admin("--access-key", "admin", "--secret-key", "admin-secret", "update-topic",
                               "--topic", TOPIC, "--type", "NORMAL", "--namesrv", container.namesrv)
        if done.returncode == 0:
            return container
        if time.monotonic() > deadline:
            container.stop()
            raise RuntimeError(f"update-topic failed: {done.stdout[-300:]} {done.stderr[-500:]}")
        time.sleep(0.2)


async def measure(endpoint: str, pid: int, seconds: float, count: int, consumers: int) -> dict:
    bb.META = signed_metadata()   # bench_broker's calls read it at call time
    async with grpc.aio.insecure_channel(endpoint) as channel:
        stub = g.MessagingServiceStub(channel)
        send, requests = bb.send_call(channel), bb.SendRequests(TOPIC)

        async def send_one():
            response = await send(requests.request(1), metadata=bb.META)
            assert response.status.code == d.OK, response.status

        denied = await send(bb.SendRequests("other-1").request(1), metadata=bb.META)  # a Deny entry of the bench user
        enforced = denied.status.code == d.FORBIDDEN
        single = await bb.closed_loop(send_one, 16, seconds, pid=pid)
        e2e = await bb.end_to_end(stub, send, endpoint, TOPIC, count, consumers, pid)
    return {"send": single["msg_s"], "send_cpu": single["cpu_ms_1k"], "receive_ack": e2e["receive_ack_msg_s"],
            "receive_ack_cpu": e2e["receive_ack_cpu_ms_1k"], "enforced": enforced}


def one(tmp: Path, acl: Path, authorization: bool, args) -> dict:
    container = start(tmp / ("on" if authorization else "off"), acl, authorization)
    try:
        return asyncio.run(measure(container.endpoint, container.process.pid, args.seconds, args.count, args.consumers))
    finally:
        container.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--entries", type=int, default=1000, help="ACL entries loaded")
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--count", type=int, default=4000, help="messages of the receive+ack case")
    parser.add_argument("--consumers", type=int, default=4)
    args = parser.parse_args()
    if args.rounds < 1 or args.entries < 4 or args.seconds <= 0 or args.count < 32 or args.consumers < 1:
        parser.error("--rounds, --consumers positive; --entries at least 4; --count at least 32")
    print(f"# bench_authorization: {args.entries} ACL entries, single sends 16 in flight for {args.seconds} s, "
          f"receive(32)+ack of {args.count} with {args.consumers} loops, ASYNC_FLUSH, {args.rounds} rounds", flush=True)
    ratios: dict[str, list[float]] = {"send": [], "receive_ack": []}
    cpu_ratios: dict[str, list[float]] = {"send": [], "receive_ack": []}  # server CPU per message, on / off
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        acl = tmp / "acl.toml"
        acl.write_text(acl_document(args.entries))
        for round_no in range(args.rounds):
            order = (True, False) if round_no % 2 == 0 else (False, True)  # neither always goes first
            got = {on: one(tmp / f"r{round_no}", acl, on, args) for on in order}
            assert got[True]["enforced"] and not got[False]["enforced"], "authorization was not what the run says"
            for case in ratios:
                ratios[case].append(got[True][case] / got[False][case])
                cpu_ratios[case].append(got[True][case + "_cpu"] / got[False][case + "_cpu"])
            print(f"round {round_no + 1}: " + "; ".join(
                f"{case}: on {got[True][case]:.0f} msg/s ({got[True][case + '_cpu']:.0f} ms CPU/1k), "
                f"off {got[False][case]:.0f} msg/s ({got[False][case + '_cpu']:.0f} ms CPU/1k), "
                f"on/off {got[True][case] / got[False][case]:.3f}" for case in ratios), flush=True)
    for case, values in ratios.items():
        print(f"{case}: authorization on / off, median {statistics.median(values):.3f} "
              f"(min {min(values):.3f}, max {max(values):.3f}); server CPU per message on / off, median "
              f"{statistics.median(cpu_ratios[case]):.3f} (min {min(cpu_ratios[case]):.3f}, max {max(cpu_ratios[case]):.3f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
