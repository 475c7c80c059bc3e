"""PeriodicTasks: runs never overlap, failures are counted, and a stop either cancels a run in
progress or (finish_runs) lets it end -- an acting slave's escape is never cut from its
resolution."""
from __future__ import annotations

import asyncio

from scheduler.periodic import PeriodicTasks


def test_stop_cancels_a_run_in_progress_by_default_and_finish_runs_lets_it_end():
    async def scenario(finish: bool) -> list[str]:
        events: list[str] = []
        started = asyncio.Event()
        release = asyncio.Event()

        async def run() -> None:
            events.append("start")
            started.set()
            await release.wait()
            events.append("end")

        tasks = PeriodicTasks("test")
        tasks.declare("run", 10, run)
        tasks.start()
        await started.wait()
        stopping = asyncio.ensure_future(tasks.stop(finish_runs=finish))
        await asyncio.sleep(0)  # the stop is waiting (or has cancelled)
        release.set()
        await stopping
        await asyncio.sleep(0.03)  # three intervals: a loop still alive would run again
        return events

    assert asyncio.run(scenario(False)) == ["start"]
    assert asyncio.run(scenario(True)) == ["start", "end"]


def test_a_failing_run_is_counted_and_the_task_keeps_its_schedule():
    async def scenario() -> tuple[int, int]:
        calls = []
        done = asyncio.Event()

        def run() -> None:
            calls.append(1)
            if len(calls) >= 3:
                done.set()
            raise RuntimeError("boom")

        tasks = PeriodicTasks("test")
        tasks.declare("fails", 1, run)
        tasks.start()
        await asyncio.wait_for(done.wait(), 5)
        await tasks.stop(finish_runs=True)
        return len(calls), tasks.failures["fails"]

    calls, failures = asyncio.run(scenario())
    assert calls >= 3 and failures == calls
