"""Stopping owned tasks: cancel them, wait for them, never swallow the caller's cancellation.

``task.cancel(); try: await task; except CancelledError: pass`` (or ``asyncio.wait_for``)
cannot tell the task's own ``CancelledError`` from one aimed at the caller, so a caller
cancelled during shutdown (a deadline, a supervisor) carried on as if nothing happened.
``cancel_and_wait`` waits with ``asyncio.wait``, which never raises the tasks' errors, and
re-raises the caller's cancellation once the tasks have ended.
"""
from __future__ import annotations

import asyncio
import logging
from typing import Iterable

log = logging.getLogger(__name__)


async def cancel_and_wait(tasks: Iterable[asyncio.Task | None]) -> None:
    """Cancel ``tasks`` and wait until they have ended.

    The tasks' own ``CancelledError`` is expected and dropped; a cancellation of the
    *caller* (it is being cancelled itself, e.g. by a deadline) is re-raised once the
    tasks are done, never swallowed.  An exception a task ended with is logged.
    """
    tasks = [t for t in tasks if t is not None]
    for task in tasks:
        task.cancel()
    if not tasks:
        return
    cancelled_here = False
    while True:
        try:
            await asyncio.wait(tasks)
            break
        except asyncio.CancelledError:
            cancelled_here = True  # keep waiting: a task left running would outlive its owner
    for task in tasks:
        if not task.cancelled() and task.exception() is not None:
            log.error("task %s ended with an error while stopping", task.get_name(), exc_info=task.exception())
    if cancelled_here:
        raise asyncio.CancelledError
