"""Declared, owned, stoppable periodic work (STYLE.md, point 8).

Every periodic task has a name, an interval and an initial delay, and belongs to one
:class:`PeriodicTasks` supervisor.  A run never overlaps the previous one (the next run is
scheduled after the previous one finished), a failing run is logged with its name and the
task keeps its schedule, and :meth:`PeriodicTasks.stop` cancels and awaits every task --
or, with ``finish_runs``, lets a run in progress finish first and cancels only the waits
between runs (a run that must not be cut in half: an acting slave's escape and the
resolution that follows it).

A small asyncio supervisor rather than APScheduler: APScheduler 3 cannot await in-flight
coroutine jobs at shutdown, which is exactly the guarantee needed here.
"""
from __future__ import annotations

import asyncio
import inspect
import logging
from dataclasses import dataclass
from typing import Awaitable, Callable, Union

log = logging.getLogger(__name__)

TaskFunction = Callable[[], Union[None, Awaitable[None]]]


@dataclass(frozen=True)
class PeriodicTask:
    name: str
    interval_ms: int
    function: TaskFunction
    initial_delay_ms: int = 0

    def __post_init__(self) -> None:
        assert self.interval_ms > 0, f"{self.name}: interval must be positive"
        assert self.initial_delay_ms >= 0, f"{self.name}: initial delay must not be negative"


class PeriodicTasks:
    def __init__(self, owner: str):
        self.owner = owner
        self._declared: list[PeriodicTask] = []
        self._running: dict[str, asyncio.Task] = {}
        self._idle: dict[str, asyncio.Event] = {}  # per task: set while its function is not running
        self._stopping = False
        self.failures: dict[str, int] = {}

    def declare(self, name: str, interval_ms: int, function: TaskFunction, initial_delay_ms: int = 0) -> None:
        assert name not in {task.name for task in self._declared}, f"periodic task {name} declared twice"
        task = PeriodicTask(name, interval_ms, function, initial_delay_ms)
        self._declared.append(task)
        if self._running:  # declared after start: run it too
            self._start_one(task)

    def start(self) -> None:
        for task in self._declared:
            if task.name not in self._running:
                self._start_one(task)

    def _start_one(self, task: PeriodicTask) -> None:
        self._running[task.name] = asyncio.get_running_loop().create_task(self._loop(task), name=f"{self.owner}:{task.name}")

    async def _loop(self, task: PeriodicTask) -> None:
        await asyncio.sleep(task.initial_delay_ms / 1000)
        idle = self._idle.setdefault(task.name, asyncio.Event())
        while not self._stopping:
            idle.clear()
            try:
                result = task.function()
                if inspect.isawaitable(result):
                    await result
            except asyncio.CancelledError:
                raise
            except Exception:  # a periodic failure is logged, never swallowed silently
                self.failures[task.name] = self.failures.get(task.name, 0) + 1
                log.exception("%s: periodic task %s failed", self.owner, task.name)
            finally:
                idle.set()
            await asyncio.sleep(task.interval_ms / 1000)

    async def stop(self, finish_runs: bool = False) -> None:
        running = dict(self._running)
        self._running.clear()
        if finish_runs:  # no new run starts; runs in progress end before their loops are cancelled
            self._stopping = True
            try:
                for name, task in running.items():
                    idle = self._idle.get(name)
                    if idle is not None and not idle.is_set() and not task.done():
                        waiter = asyncio.ensure_future(idle.wait())
                        await asyncio.wait([waiter, task], return_when=asyncio.FIRST_COMPLETED)
                        waiter.cancel()
            finally:
                self._stopping = False
        tasks = list(running.values())
        for task in tasks:
            task.cancel()
        for task in tasks:
            try:
                await task
            except asyncio.CancelledError:
                pass
