"""Issue 24, defect 6, at the controller: a broker is not declared dead for the controller's own
pause.  With ``pause_aware`` (the controller's driver) a look at the brokers that comes late
(the loop stalled while their heartbeats waited unread) excuses the pause and expires nobody;
a broker that really stopped beating still expires, one look later at most."""
from __future__ import annotations

import pytest

from ha.controller.liveness import BrokerLiveness, Heartbeat

C, B = "DefaultCluster", "broker-a"
TIMEOUT_MS = 1500   # controllerHeartBeatTimeoutMills in conf/controller-mode: looks every 375 ms


def beat(broker_id: int) -> Heartbeat:
    return Heartbeat(C, B, broker_id, f"127.0.0.1:{broker_id}", timeout_ms=TIMEOUT_MS)


# name, heartbeats of broker 1 (times), looks (expire calls), the looks that expire broker 1
ROWS = [
    ("on-time looks expire a silent broker", [0], [375, 750, 1125, 1500, 1501], [1501]),
    ("a late look is the controller's pause", [0], [375, 3000], []),
    ("after the pause the broker is judged on awake time", [0], [375, 3000, 3375, 3750, 4125], [4125]),
    ("heartbeats read after the pause keep it alive", [0, 3010, 3400, 3800], [375, 3000, 3375, 3750, 4125], []),
    ("jitter under half a look is not a pause", [0], [375, 750, 1125, 1450, 1650], [1650]),
]


@pytest.mark.parametrize("name,beats,looks,expired", ROWS, ids=[row[0] for row in ROWS])
def test_a_late_look_expires_nobody(name, beats, looks, expired):
    live = BrokerLiveness(10_000, 10, pause_aware=True)
    events = sorted([(t, "beat") for t in beats] + [(t, "look") for t in looks])
    got = []
    for at, kind in events:
        if kind == "beat":
            live.heartbeat(beat(1), at)
        elif any(info.broker_id == 1 for info in live.expire(at)):
            got.append(at)
    assert got == expired


def test_the_driver_is_asked_to_look_every_quarter_timeout():
    live = BrokerLiveness(10_000, 10, pause_aware=True)
    live.heartbeat(beat(1), 0)
    assert live.next_expiry_ms() == 375
    plain = BrokerLiveness(10_000, 10)
    plain.heartbeat(beat(1), 0)
    assert plain.next_expiry_ms() == 1501 and [i.broker_id for i in plain.expire(5000)] == [1]
