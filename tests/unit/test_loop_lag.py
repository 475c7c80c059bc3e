"""The event loop's lag as a periodic look sees it (scheduler.loop_lag)."""
from scheduler.loop_lag import LoopLag


def test_a_look_observes_how_much_later_than_its_interval_it_ran():
    now, seen = [1_000.0], []
    lag = LoopLag(100, lambda: now[0], seen.append)
    for at in (1_000.0, 1_100.0, 1_201.0, 1_551.0, 1_640.0):  # on time, 1 ms late, 250 ms late, early
        now[0] = at
        lag.look()
    assert seen == [0.0, 0.001, 0.25, 0.0] and lag.worst_ms == 250.0
