"""The virtual clock: the event loop's timers and the wall clock move together, in virtual
seconds, and time never jumps past work the loop is still waiting for."""

from __future__ import annotations

import asyncio
import os
import threading
import time

import pytest

from stead.testing import VirtualClock


def test_an_hour_of_sleeping_takes_no_time() -> None:
    clock = VirtualClock()

    async def main() -> tuple[float, float]:
        loop = asyncio.get_running_loop()
        wall, mono = clock(), loop.time()
        await asyncio.sleep(3600)
        return clock() - wall, loop.time() - mono

    # Were the hour slept, the test's timeout would fail it.
    assert clock.run(main()) == (pytest.approx(3600), pytest.approx(3600))


def test_timers_fire_in_order_at_their_virtual_times() -> None:
    clock = VirtualClock(start=1000.0)
    fired: list[tuple[str, float]] = []

    async def main() -> None:
        loop = asyncio.get_running_loop()
        for name, delay in (("c", 30.0), ("a", 0.5), ("b", 2.0)):
            loop.call_later(delay, lambda n=name: fired.append((n, clock())))
        await asyncio.sleep(31)

    clock.run(main())
    assert [n for n, _ in fired] == ["a", "b", "c"]
    assert [t for _, t in fired] == pytest.approx([1000.5, 1002.0, 1030.0])


def test_wait_timeouts_and_asyncio_timeout_use_virtual_time() -> None:
    clock = VirtualClock()

    async def main() -> None:
        never = asyncio.Event()
        done, _ = await asyncio.wait({asyncio.ensure_future(never.wait())}, timeout=90)
        assert not done and clock.monotonic() == pytest.approx(90)
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(10):
                await never.wait()
        assert clock.monotonic() == pytest.approx(100)

    clock.run(main())


def test_a_jump_lands_past_the_timer() -> None:
    # Code that waits for a time to have passed (now > deadline) sees it passed when its
    # timer fires, as with a real clock; on the timer exactly it would re-arm forever.
    clock = VirtualClock()

    async def main() -> bool:
        deadline = clock() + 300
        fired = asyncio.get_running_loop().create_future()
        asyncio.get_running_loop().call_later(
            deadline - clock(), lambda: fired.set_result(clock() > deadline)
        )
        return await fired

    assert clock.run(main())


def test_advance_moves_time_and_due_timers_fire() -> None:
    clock = VirtualClock()

    async def main() -> list[float]:
        seen: list[float] = []
        asyncio.get_running_loop().call_later(5, lambda: seen.append(clock.monotonic()))
        clock.advance(10)
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        return seen

    assert clock.run(main()) == [10]
    with pytest.raises(ValueError):
        clock.advance(-1)


def test_time_waits_for_a_thread_of_the_loop() -> None:
    clock = VirtualClock()

    async def main() -> float:
        timer = asyncio.ensure_future(asyncio.sleep(1))
        # A real half second in a thread: time must not jump the sleep's second meanwhile.
        await asyncio.to_thread(time.sleep, 0.5)
        at = clock.monotonic()
        await timer
        return at

    assert clock.run(main()) == 0


def test_time_waits_for_a_pipe_that_answers_within_the_grace() -> None:
    clock = VirtualClock(io_grace=5.0)

    async def main() -> float:
        loop = asyncio.get_running_loop()
        read, write = os.pipe()
        got = loop.create_future()
        loop.add_reader(read, lambda: got.done() or got.set_result(os.read(read, 1)))
        timer = asyncio.ensure_future(asyncio.sleep(1))
        # A thread the loop knows nothing of answers after a real moment: the loop, watching
        # the pipe, waits for it instead of jumping to the timer.
        threading.Thread(target=_write_later, args=(write,), daemon=True).start()
        try:
            assert await got == b"x"
            return clock.monotonic()
        finally:
            loop.remove_reader(read)
            os.close(read)
            os.close(write)
            await timer

    assert clock.run(main()) == 0


def _write_later(fd: int) -> None:
    time.sleep(0.05)
    os.write(fd, b"x")
