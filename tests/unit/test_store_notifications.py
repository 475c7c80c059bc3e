"""store.notifications: a rise of the read limit names the topics it made readable, so only
their long polls look again; and it never leaves out a topic it made readable."""
from __future__ import annotations

import asyncio

import pytest
from hypothesis import given, settings, strategies as st

from metadata.message import MessageDraft, Prop
from services.broker.long_poll import AppendNotifier
from store.config import StoreConfig
from store.message_store import MessageStore
from store.notifications import NewlyVisible

TOPICS = ("A", "B", "C", "rmq_sys_REVIVE_LOG")


@pytest.fixture
def listened(tmp_path):
    """A store on disk, and what its append and visibility listeners heard (topics)."""
    store = MessageStore(StoreConfig(tmp_path), lambda: 1_700_000_000_000)
    store.start()
    appended, visible = [], []
    store.add_append_listener(lambda topic, queue_id, end: appended.append(topic))
    store.add_visibility_listener(visible.append)
    yield store, appended, visible
    store.shutdown()


def _put(store: MessageStore, topic: str, count: int = 1) -> int:
    async def go():
        for number in range(count):
            await store.put([MessageDraft(topic, 0, b"x" * 50, 7, "h:1", {Prop.MESSAGE_ID: f"{topic}-{number}"}, {})])
    asyncio.run(go())
    return store.commit_log_max_offset


def test_a_rise_names_the_topics_whose_records_it_made_readable(listened):
    store, appended, visible = listened
    store.set_read_limit(store.commit_log_max_offset)
    end_a = _put(store, "A", 3)
    end_b = _put(store, "B")
    _put(store, "rmq_sys_REVIVE_LOG")  # never capped: its appends wake its waiters
    store.set_read_limit(end_a)
    store.set_read_limit(end_a)  # no rise: nothing said
    store.set_read_limit(end_b)
    end_c = _put(store, "C")
    store.set_read_limit(end_c + 1_000)
    assert visible == [frozenset({"A"}), frozenset({"B"}), frozenset({"C"})]
    store.set_read_limit(None)  # lifted: every topic
    assert visible[-1] is None


def test_records_hidden_by_a_new_limit_make_the_next_rise_name_every_topic(listened):
    """A master that gains a replica sets a limit below records consumers could read: their
    topics were never noted as unreadable, so the rise past them wakes everyone."""
    store, appended, visible = listened
    middle = _put(store, "A")
    end = _put(store, "B")
    store.set_read_limit(middle)
    store.set_read_limit(end)
    assert visible == [None]
    later = _put(store, "C")
    store.set_read_limit(later)
    assert visible == [None, frozenset({"C"})]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.tuples(st.just("write"), st.lists(st.sampled_from(TOPICS), min_size=1, max_size=3),
                                    st.integers(1, 400)),
                          st.tuples(st.just("limit"), st.one_of(st.none(), st.floats(0, 1.2)), st.just(0))),
                max_size=60),
       st.integers(1, 6))
def test_no_rise_leaves_out_a_topic_it_made_readable(steps, max_entries):
    """Against a model that keeps every record: whatever the writes, limits set, lowered,
    raised and lifted, and however small the table, a rise from ``before`` to ``limit`` names
    (or says "every topic" for) each user topic with a record ending in (before, limit]."""
    table = NewlyVisible(max_entries)
    limit, end, records = None, 0, []  # the model: (end, topic) of every user topic's record
    for kind, value, size in steps:
        if kind == "write":
            end += size
            table.written(value, end, limit)
            records += [(end, topic) for topic in value if not topic.startswith("rmq_sys_")]
            continue
        before, limit = limit, None if value is None else int(value * end)  # a limit near the log's end
        if limit is not None and (before is None or limit < before) and limit < end:
            table.hidden(end)  # what the store does when records readable before are hidden
        if before is None or (limit is not None and limit <= before):
            continue
        named = table.rose(limit)
        readable = {topic for e, topic in records if e > before and (limit is None or e <= limit)}
        assert named is None or readable <= named, (readable, named)


def test_past_its_size_the_table_names_every_topic_until_the_limit_passes_what_it_missed():
    table = NewlyVisible(max_entries=2)
    for end, topic in ((10, "A"), (20, "B"), (30, "C"), (40, "A")):
        table.written([topic], end, limit=0)
    assert table.rose(20) is None and table.rose(40) is None  # C and A were not kept
    table.written(["B"], 50, limit=40)
    assert table.rose(50) == frozenset({"B"})


def test_a_long_poll_sleeps_through_a_rise_for_another_topic():
    async def go():
        notifier = AppendNotifier()
        notifier.bind_loop()
        on_a, on_b = notifier.register(("A", "%RETRY%g_A")), notifier.register(("B",))
        notifier.wake_visible(frozenset({"B"}))
        woken = (on_a.event.is_set(), on_b.event.is_set())
        notifier.wake_visible(None)
        return woken, on_a.event.is_set()
    assert asyncio.run(go()) == ((False, True), True)


def test_an_append_past_the_read_limit_is_heard_when_the_limit_rises_over_it(listened):
    store, appended, visible = listened
    _put(store, "A")
    assert appended == ["A"]  # no limit: readable at once
    store.set_read_limit(store.commit_log_max_offset)
    end = _put(store, "B")
    _put(store, "rmq_sys_REVIVE_LOG")  # a system topic is never capped
    assert appended == ["A", "rmq_sys_REVIVE_LOG"] and visible == []
    store.set_read_limit(end)
    assert visible == [frozenset({"B"})]


def test_a_put_partly_readable_is_heard_at_once(listened):
    """A put whose first record the limit already covers wakes its receives now (they can read
    that much); the rest is named again when the limit rises over it."""
    store, appended, visible = listened
    before = store.commit_log_max_offset
    size = _put(store, "A") - before  # one record's size
    start = store.commit_log_max_offset
    store.set_read_limit(start + size)  # covers the first record of the next put only

    async def two():
        await store.put([MessageDraft("B", 0, b"x" * 50, 7, "h:1", {Prop.MESSAGE_ID: f"b-{n}"}, {}) for n in range(2)])
    asyncio.run(two())
    assert appended == ["A", "B"] and store.commit_log_max_offset == start + 2 * size
    store.set_read_limit(start + 2 * size)
    assert visible == [frozenset({"B"})]
