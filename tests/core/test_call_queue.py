"""The queue a session's calls wait in: threads and asyncio tasks, one at a time, in turn."""

from __future__ import annotations

import asyncio
import threading

import pytest

from core.call_queue import CallQueue
from core.errors import RunStateError
from tests.waiting import until


def _wait_for(condition: object, what: str) -> None:
    deadline = threading.Event()
    for _ in range(10_000):  # bounded: about 10 s at most
        if condition():  # type: ignore[operator]
            return
        deadline.wait(0.001)
    raise AssertionError(f"never: {what}")


def test_a_thread_waits_for_the_holder_then_runs_after_it() -> None:
    queue = CallQueue("test")
    order: list[str] = []
    holding, release = threading.Event(), threading.Event()

    def first() -> None:
        with queue.held():
            order.append("first in")
            holding.set()
            release.wait()
            order.append("first out")

    def second() -> None:
        with queue.held():
            order.append("second")

    a = threading.Thread(target=first)
    a.start()
    holding.wait()
    b = threading.Thread(target=second)
    b.start()
    _wait_for(lambda: len(queue._waiters) == 1, "the second call queued")
    assert order == ["first in"]
    release.set()
    a.join()
    b.join()
    assert order == ["first in", "first out", "second"]


def test_a_task_waits_for_a_thread_while_its_event_loop_goes_on() -> None:
    queue = CallQueue("test")
    holding, release = threading.Event(), threading.Event()

    def holder() -> None:
        with queue.held():
            holding.set()
            release.wait()

    async def scenario() -> list[str]:
        order: list[str] = []

        async def call() -> None:
            async with queue.held_async():
                order.append("task")

        thread = threading.Thread(target=holder)
        thread.start()
        await asyncio.to_thread(holding.wait)
        task = asyncio.create_task(call())
        await until(lambda: len(queue._waiters) == 1, "the task waiting in the queue")
        order.append("the loop went on")
        release.set()
        await task
        await asyncio.to_thread(thread.join)
        return order

    assert asyncio.run(scenario()) == ["the loop went on", "task"]


def test_a_cancelled_waiter_passes_its_turn_on() -> None:
    queue = CallQueue("test")

    async def scenario() -> list[str]:
        order: list[str] = []
        go = asyncio.Event()

        async def first() -> None:
            async with queue.held_async():
                await go.wait()

        async def call(name: str) -> None:
            async with queue.held_async():
                order.append(name)

        holder = asyncio.create_task(first())
        await asyncio.sleep(0)
        cancelled = asyncio.create_task(call("cancelled"))
        last = asyncio.create_task(call("last"))
        while len(queue._waiters) != 2:
            await asyncio.sleep(0)
        go.set()
        await holder  # the turn is handed to the first waiter...
        cancelled.cancel()  # ...which is cancelled before it runs
        with pytest.raises(asyncio.CancelledError):
            await cancelled
        await asyncio.wait_for(last, 10)
        return order

    assert asyncio.run(scenario()) == ["last"]
    assert not queue._held


def test_a_call_from_inside_a_call_is_refused() -> None:
    queue = CallQueue("test")
    with queue.held(), pytest.raises(RunStateError), queue.held():
        pass  # pragma: no cover
    assert not queue._held
