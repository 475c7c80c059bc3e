"""The pop log's writer (services.broker.pop_log_writer): hand-in order, one put at a time,
applied records of a failed put written first by the next one."""
from __future__ import annotations

import asyncio

import pytest

from metadata.status import Code, RequestRejected
from scheduler.pop.records import AckRecord, QueueKey
from services.broker.pop_log_writer import PopLogWriter
from store.errors import DiskFull

KEY = QueueKey("G", "T", 0)


def record(offset: int) -> AckRecord:
    return AckRecord(KEY, offset)


class Log:
    def __init__(self):
        self.puts: list[list[int]] = []
        self.applied: list[bool] = []   # per put: every record in it applied before the write
        self.fail = 0
        self.serving = True

    async def put(self, records, applied):
        await asyncio.sleep(0)
        if self.fail:
            self.fail -= 1
            raise DiskFull("injected")
        self.puts.append([r.offset for r in records])
        self.applied.append(applied)

    def writer(self) -> PopLogWriter:
        return PopLogWriter(self.put, lambda: self.serving, lambda: RequestRejected(Code.FORBIDDEN, "not serving"))


def test_writes_queued_during_a_put_go_together_in_order():
    async def scenario():
        log = Log()
        writer = log.writer()
        first = asyncio.ensure_future(writer.write([record(1)], True))
        await asyncio.sleep(0)
        await asyncio.sleep(0)   # the put of 1 is in flight
        await asyncio.gather(writer.write([record(2)], True), writer.write([record(3), record(4)], False))
        await first
        assert log.puts == [[1], [2, 3, 4]]
        assert log.applied == [True, False]   # 3 and 4 are applied only once written: the put says so
    asyncio.run(scenario())


@pytest.mark.parametrize("applied, next_put", [(True, [1, 2]), (False, [2])])
def test_a_failed_put_keeps_only_applied_records_and_writes_them_first(applied, next_put):
    async def scenario():
        log = Log()
        writer = log.writer()
        log.fail = 1
        with pytest.raises(DiskFull):
            await writer.write([record(1)], applied)
        assert writer.unwritten == (1 if applied else 0)
        await writer.write([record(2)], False)
        assert log.puts == [next_put] and writer.unwritten == 0
    asyncio.run(scenario())


def test_applied_records_wait_through_several_failures_and_every_caller_hears_of_its_own():
    async def scenario():
        log = Log()
        writer = log.writer()
        log.fail = 2
        results = await asyncio.gather(writer.write([record(1)], True), writer.write([record(2)], True),
                                       return_exceptions=True)
        assert all(isinstance(r, DiskFull) for r in results) and writer.unwritten == 2
        with pytest.raises(DiskFull):
            await writer.write([record(3)], False)
        assert writer.unwritten == 2
        await writer.write([record(4)], False)
        assert log.puts == [[1, 2, 4]]
    asyncio.run(scenario())


def test_a_broker_that_stops_serving_drops_what_waits_and_refuses():
    async def scenario():
        log = Log()
        writer = log.writer()
        log.fail = 1
        with pytest.raises(DiskFull):
            await writer.write([record(1)], True)
        log.serving = False
        with pytest.raises(RequestRejected):
            await writer.write([record(2)], True)
        log.serving = True
        await writer.write([record(3)], True)
        assert log.puts == [[3]]
    asyncio.run(scenario())


def test_a_caller_that_goes_away_still_has_its_records_written():
    async def scenario():
        log = Log()
        writer = log.writer()
        task = asyncio.ensure_future(writer.write([record(1)], True))
        await asyncio.sleep(0)
        task.cancel()
        await writer.write([record(2)], False)
        assert [o for put in log.puts for o in put] == [1, 2]
    asyncio.run(scenario())
