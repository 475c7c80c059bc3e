"""Consumer lag for the metrics refresh: every (group, topic) pair's unacked messages, from
one pass over the keys.

Rules:
- A group's topics are those of its committed offsets and of its pop state
  (:func:`consumed_topics`, also what ``Broker.consumer_progress`` lists).  They are read once
  for every group: asking per group read every group's keys each time, and the refresh (every
  5 s) held the loop 431 ms with 1,000 groups of 10 topics.
- A queue's lag is its max offset less the group's committed offset, never negative, summed
  per topic over the queues ``Broker.progress_queues`` names; only the groups asked for.
- The refresh yields to the loop every ``REFRESH_SLICE`` pairs: 10,000 pairs of 8 queues
  still take about 140 ms, which no call should wait for in one piece.
"""
from __future__ import annotations

from typing import Iterable, Iterator

REFRESH_SLICE = 256  # (group, topic) pairs the metrics refresh sets between two looks at the loop


def consumed_topics(broker, groups: Iterable[str]) -> dict[str, set[str]]:
    """group -> the topics it has committed offsets or pop state for, for ``groups`` only."""
    wanted = set(groups)
    found: dict[str, set[str]] = {}
    for key in broker.pop.keeper.table.offsets:
        if key.group in wanted:
            found.setdefault(key.group, set()).add(key.topic)
    for key, _ in broker.pop.table.items():
        if key.group in wanted:
            found.setdefault(key.group, set()).add(key.topic)
    return found


def lags_by_group_topic(broker, groups: Iterable[str]) -> Iterator[tuple[str, str, int]]:
    """(group, topic, messages not yet acknowledged) for every topic each group consumes here.
    The pairs are listed first; each lag is read as it is taken, so a caller may yield to the
    loop between them (the refresh does, every ``REFRESH_SLICE`` pairs)."""
    max_offset, committed = broker.store.max_offset, broker.pop.committed_offset
    for group, topics in consumed_topics(broker, groups).items():
        for topic in sorted(topics):
            yield group, topic, sum(max(0, max_offset(topic, queue_id) - (committed(group, topic, queue_id) or 0))
                                    for queue_id in broker.progress_queues(group, topic))
