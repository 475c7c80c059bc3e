"""A receive's long poll on a real broker and store: when it ends early, and what wakes it.

- A SimpleConsumer's receive (``yields_to_backlog_elsewhere``) that finds nothing ends at once
  while another broker holds messages for its group (the container's backlog hint), counts
  itself in the hint's waiters while it waits, and ends when the hint learns of such a backlog.
- A FIFO receive waiting on a locked queue goes on as soon as the batch is acked whole, or
  when its invisibility ends, instead of sleeping out its long poll.
- ``PopService.receivable``: what a probe from another broker is told.
- An append wakes one waiting receive per group, which passes the wake on when it took
  something (a batch larger than its own reaches the next waiter at once) and as it goes away
  woken without looking; so many waiting consumers cost a message a look or two per group.
Time is a ManualClock; the long polls' waits are real (short) ones.
"""
from __future__ import annotations

import asyncio
import time

from metadata.message import MessageDraft, MessageType, Prop, SendItem
from metadata.subscription_group import SubscriptionGroupConfig
from services.broker.api import FilterExpression, ReceiveRequest
from store.config import FlushDiskType
from tests.scenario.test_broker_flows import Harness, _with_topic, run

LONG_POLL_MS = 10_000


class Hint:
    """The container's backlog hint as a receive sees it (services.messaging.backlog_probe)."""

    def __init__(self):
        self.backlog_elsewhere = False
        self.waiting_changes: list[tuple[str, str, str, int]] = []

    def elsewhere(self, topic, group, here):
        return self.backlog_elsewhere

    def waiting(self, topic, group, here, change):
        self.waiting_changes.append((topic, group, here, change))


def request(harness: Harness, group="G", topic="T", yields=True, batch=32, invisible_ms=30_000, long_poll_ms=LONG_POLL_MS):
    return ReceiveRequest("c", group, topic, -1, FilterExpression(), batch, invisible_ms, False, long_poll_ms,
                          harness.clock.monotonic_ms() + long_poll_ms, yields_to_backlog_elsewhere=yields)


def test_a_simple_consumers_receive_ends_at_once_while_another_broker_holds_its_backlog(tmp_path):
    async def scenario():
        harness = Harness(tmp_path)
        broker = await _with_topic(harness)
        hint = broker.pop.backlog_hint = Hint()
        hint.backlog_elsewhere = True
        began = time.monotonic()
        assert await broker.receive(request(harness)) == []
        assert time.monotonic() - began < LONG_POLL_MS / 1000 / 2  # ended, not waited out
        assert hint.waiting_changes == []  # it never waited
        await harness.send("T", b"here")  # what is here is delivered first, whatever is elsewhere
        assert [d.message.body for d in await broker.receive(request(harness))] == [b"here"]
        await harness.stop()
    run(scenario())


def test_a_waiting_receive_counts_itself_in_and_ends_when_a_backlog_elsewhere_is_learnt(tmp_path):
    async def scenario():
        harness = Harness(tmp_path)
        broker = await _with_topic(harness)
        hint = broker.pop.backlog_hint = Hint()
        waiting = asyncio.ensure_future(broker.receive(request(harness)))
        await asyncio.sleep(0.05)
        assert not waiting.done()
        assert hint.waiting_changes == [("T", "G", broker.name, +1)]
        hint.backlog_elsewhere = True
        broker.notifier.wake_every("T")  # what the probe does when its answer names another broker
        assert await asyncio.wait_for(waiting, 5) == []
        assert hint.waiting_changes == [("T", "G", broker.name, +1), ("T", "G", broker.name, -1)]
        await harness.stop()
    run(scenario())


def test_a_push_consumers_receive_never_yields(tmp_path):
    """auto_renew receives (PushConsumer) poll every broker in their own loops: never sent away."""
    async def scenario():
        harness = Harness(tmp_path)
        broker = await _with_topic(harness)
        hint = broker.pop.backlog_hint = Hint()
        hint.backlog_elsewhere = True
        waiting = asyncio.ensure_future(broker.receive(request(harness, yields=False)))
        await asyncio.sleep(0.05)
        assert not waiting.done() and hint.waiting_changes == []
        await harness.send("T", b"late")
        assert [d.message.body for d in await asyncio.wait_for(waiting, 5)] == [b"late"]
        await harness.stop()
    run(scenario())


async def _fifo(harness: Harness, count: int):
    broker = await _with_topic(harness, kind="FIFO", queues=1)
    await broker.upsert_group(SubscriptionGroupConfig("G", consume_message_orderly=True))
    for index in range(count):
        await harness.send("T", str(index).encode(), kind=MessageType.FIFO, group="order-1")
    return broker


def test_a_receive_waiting_on_a_locked_fifo_queue_goes_on_when_the_batch_is_acked_whole(tmp_path):
    async def scenario():
        harness = Harness(tmp_path)
        broker = await _fifo(harness, 6)
        first = await broker.receive(request(harness, batch=3, yields=False))
        assert [d.message.body for d in first] == [b"0", b"1", b"2"]
        waiting = asyncio.ensure_future(broker.receive(request(harness, yields=False)))
        for delivery in first[:2]:
            await broker.ack("G", "T", "", delivery.receipt_handle)
        await asyncio.sleep(0.05)
        assert not waiting.done()  # message 2 still holds the queue
        await broker.ack("G", "T", "", first[2].receipt_handle)
        assert [d.message.body for d in await asyncio.wait_for(waiting, 5)] == [b"3", b"4", b"5"]
        await harness.stop()
    run(scenario())


def test_a_receive_waiting_on_a_locked_fifo_queue_takes_the_batch_back_when_its_invisibility_ends(tmp_path):
    async def scenario():
        harness = Harness(tmp_path)
        broker = await _fifo(harness, 2)
        first = await broker.receive(request(harness, invisible_ms=300, yields=False))
        assert len(first) == 2
        waiting = asyncio.ensure_future(broker.receive(request(harness, yields=False)))
        await asyncio.sleep(0.05)
        assert not waiting.done()
        harness.clock.advance(300)  # the batch is visible again; the wait ends at its redelivery time
        again = await asyncio.wait_for(waiting, 5)
        assert [(d.message.body, d.delivery_attempt) for d in again] == [(b"0", 2), (b"1", 2)]
        await harness.stop()
    run(scenario())


def test_receivable_is_what_a_receive_of_the_group_could_take_now(tmp_path):
    async def scenario():
        harness = Harness(tmp_path)
        broker = await _with_topic(harness, queues=2)
        pop = broker.pop
        assert pop.receivable("G", "T", 100) == 0 and pop.receivable("G", "nope", 100) == 0
        for index in range(5):
            await harness.send("T", str(index).encode())
        assert pop.receivable("G", "T", 100) == 5 and pop.receivable("G", "T", 3) == 3
        taken = await broker.receive(request(harness, batch=2, yields=False))
        assert pop.receivable("G", "T", 100) == 3 and pop.receivable("other", "T", 100) == 5
        for delivery in taken:
            await broker.ack("G", "T", "", delivery.receipt_handle)
        assert pop.receivable("G", "T", 100) == 3
        await harness.stop()

        harness = Harness(tmp_path / "fifo")
        broker = await _fifo(harness, 4)
        assert broker.pop.receivable("G", "T", 100) == 4
        await broker.receive(request(harness, batch=2, invisible_ms=500, yields=False))
        assert broker.pop.receivable("G", "T", 100) == 0  # locked: nothing until the batch is acked or visible
        harness.clock.advance(500)
        assert broker.pop.receivable("G", "T", 100) == 2  # the batch, visible again
        await harness.stop()
    run(scenario())


async def _until(condition, what: str, timeout_s: float = 2.0) -> None:
    """Yield to the loop until ``condition()`` holds (a failure names ``what``)."""
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not condition():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"never happened: {what}")
        await asyncio.sleep(0.002)


async def _settle() -> None:
    """Let every callback and task already scheduled run (loop passes, no clock)."""
    for _ in range(50):
        await asyncio.sleep(0)


def _looks(broker) -> list:
    """Counts the receives' looks (one planner pass each)."""
    calls, plan = [], broker.pop.planner.plan

    def counted(*args, **kwargs):
        calls.append(args[0].group)
        return plan(*args, **kwargs)
    broker.pop.planner.plan = counted
    return calls


def test_an_append_wakes_one_waiting_receive_per_group_not_all_of_them(tmp_path):
    async def scenario():
        harness = Harness(tmp_path)
        broker = await _with_topic(harness)
        waiting = [asyncio.ensure_future(broker.receive(request(harness, group=group, yields=False)))
                   for group in ["G"] * 6 + ["H"] * 3]
        await _until(lambda: broker.notifier.waiting("T") == 9, "nine receives waiting")
        looks = _looks(broker)
        await harness.send("T", b"one")
        await _until(lambda: sum(task.done() for task in waiting) == 2 and len(looks) >= 4, "both groups served")
        await _settle()
        done = [task for task in waiting if task.done()]
        assert sorted((task.result()[0].message.body, group) for task, group in
                      zip(waiting, ["G"] * 6 + ["H"] * 3) if task.done()) == [(b"one", "G"), (b"one", "H")]
        # each group: the woken receive's look, then the one it passed the wake to (finds nothing)
        assert sorted(looks) == ["G", "G", "H", "H"] and len(done) == 2
        for task in waiting:
            task.cancel()
        await asyncio.gather(*waiting, return_exceptions=True)
        await harness.stop()
    run(scenario())


def test_more_than_one_receive_takes_reaches_the_next_waiter_at_once(tmp_path):
    """Ten messages in one put, four receives of four waiting: the woken one takes four and
    passes the wake on, and so on; the fourth looks, finds nothing and waits on."""
    async def scenario():
        harness = Harness(tmp_path)
        broker = await _with_topic(harness, queues=1)
        waiting = [asyncio.ensure_future(broker.receive(request(harness, batch=4, yields=False))) for _ in range(4)]
        await _until(lambda: broker.notifier.waiting("T") == 4, "four receives waiting")
        items = [SendItem.of(MessageDraft("T", -1, str(index).encode(), harness.clock.now_ms(),
                                          properties={Prop.MESSAGE_ID: f"BATCH{index:04d}"}), MessageType.NORMAL)
                 for index in range(10)]
        await broker.send(items)
        delivered = await asyncio.wait_for(asyncio.gather(*waiting[:3]), 2)  # not the 10 s long poll
        assert sorted(int(d.message.body) for batch in delivered for d in batch) == list(range(10))
        await _until(lambda: broker.notifier.waiting("T") == 1, "the fourth waiting again")
        assert not waiting[3].done()
        waiting[3].cancel()
        await asyncio.gather(waiting[3], return_exceptions=True)
        await harness.stop()
    run(scenario())


def test_a_woken_receive_that_goes_away_before_looking_passes_the_wake_on(tmp_path):
    async def scenario():
        harness = Harness(tmp_path, FlushDiskType.ASYNC_FLUSH)  # the send answers before the woken one runs
        broker = await _with_topic(harness)
        first = asyncio.ensure_future(broker.receive(request(harness, yields=False)))
        await _until(lambda: broker.notifier.waiting("T") == 1, "the first waiting")
        second = asyncio.ensure_future(broker.receive(request(harness, yields=False)))
        await _until(lambda: broker.notifier.waiting("T") == 2, "the second waiting")
        await harness.send("T", b"kept")  # wakes the longest waiting: the first
        first.cancel()  # its client went away before it looked
        await asyncio.gather(first, return_exceptions=True)
        assert [d.message.body for d in await asyncio.wait_for(second, 2)] == [b"kept"]
        await harness.stop()
    run(scenario())
