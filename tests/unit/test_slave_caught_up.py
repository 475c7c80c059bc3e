"""Whether a slave's copy holds everything its master made visible (``SlaveSession.caught_up``):
what the acting-master switch needs before a slave acts for a dead master (issue 24 defect 2).
One table of transcripts on the pure session: a handshake, then batches; after each step the
session's ``caught_up``."""
from __future__ import annotations

import pytest

from ha.epochs import EpochHistory
from ha.replication.messages import MasterHandshake, TransferBatch, batch_crc
from ha.replication.slave import SlaveSession, SlaveSettings


def batch(start: int, size: int, confirm: int) -> TransferBatch:
    payload = b"x" * size
    return TransferBatch(start, 1, 0, confirm, payload, batch_crc(payload, ()))


# (name, slave's log end, master's log end at the handshake, batches, caught_up after the handshake
#  and after each batch)
TRANSCRIPTS = [
    ("at the master's end at the handshake", 100, 100, [], [True]),
    ("behind at the handshake (restarted while its master wrote on)", 100, 300, [], [False]),
    ("behind, then copies up to the master's confirm offset", 100, 300,
     [batch(100, 120, 300), batch(220, 80, 300)], [False, False, True]),
    ("at the end, then a heartbeat", 100, 100, [batch(100, 0, 100)], [True, True]),
    ("in the SyncStateSet: the confirm offset trails its own acks", 100, 100,
     [batch(100, 50, 100), batch(150, 50, 150)], [True, True, True]),
    ("caught up, then the master's confirm offset runs ahead of the copy", 100, 100,
     [batch(100, 10, 400)], [True, False]),
]


@pytest.mark.parametrize("name,slave_end,master_end,batches,expected", TRANSCRIPTS, ids=[t[0] for t in TRANSCRIPTS])
def test_caught_up_follows_what_the_master_showed(name, slave_end, master_end, batches, expected):
    session = SlaveSession(SlaveSettings(1), EpochHistory.from_pairs([(1, 0)]), 0, slave_end, slave_end)
    assert session.caught_up is None  # nothing shown yet: unknown
    session.connected(0)
    seen = []
    out = session.on_master_handshake(MasterHandshake(((1, 0),), master_end, 0, 0), 1)
    assert out.closed is None
    seen.append(session.caught_up)
    for index, step in enumerate(batches):
        out = session.on_batch(step, 2 + index)
        assert out.closed is None, out.closed
        seen.append(session.caught_up)
    assert seen == expected


def test_a_closed_connection_leaves_what_it_showed():
    session = SlaveSession(SlaveSettings(1), EpochHistory.from_pairs([(1, 0)]), 0, 100, 100)
    session.connected(0)
    session.on_master_handshake(MasterHandshake(((1, 0),), 100, 0, 0), 1)
    session.connection_lost()
    assert session.caught_up is True
