"""When a timer checkpoint is worth taking again (scheduler.timer.checkpoint_due), and the
index's change count that rule reads."""
import pytest

from scheduler.timer import CHECKPOINT_AMORTIZED_FROM, CHECKPOINT_FRACTION, TimerIndex, checkpoint_due

BIG = CHECKPOINT_AMORTIZED_FROM


@pytest.mark.parametrize("pending, changes_since, due", [
    (0, 0, False),                      # nothing changed: the last checkpoint is the index
    (10, 0, False),
    (BIG * 4, 0, False),
    (0, 1, True),                       # a small index: every change is checkpointed
    (BIG - 1, 1, True),
    (BIG, 1, False),                    # a large one: not until an eighth of it changed
    (BIG, BIG // CHECKPOINT_FRACTION - 1, False),
    (BIG, BIG // CHECKPOINT_FRACTION, True),
    (1_000_000, 124_999, False),
    (1_000_000, 125_000, True),
    (1_000_000, 2_000_000, True),       # everything resolved and refilled twice over
])
def test_checkpoint_due(pending, changes_since, due):
    assert checkpoint_due(pending, changes_since) is due


def test_the_threshold_is_a_parameter():
    assert checkpoint_due(100, 1, amortized_from=1_000)
    assert not checkpoint_due(100, 11, amortized_from=8) and checkpoint_due(100, 12, amortized_from=8)


def test_changes_count_adds_and_resolves_that_changed_the_index():
    index = TimerIndex()
    assert index.signature() == (0, 0, 0)
    index.add(1, 100)
    index.add(1, 100)  # already pending: no change
    index.add(2, 200)
    assert index.changes == 2
    assert index.resolve(1) and not index.resolve(1) and not index.resolve(9)
    assert index.changes == 3
    index.due(1_000, 10)  # looking changes nothing
    index.scan_offset = 3
    assert index.signature() == (3, 3, 0)
