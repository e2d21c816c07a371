"""asyncio: ``await xfer`` and ``await wait_async(xfer, timeout)``.

The wait runs in the event loop's default executor with the GIL released,
in short slices, so the loop stays free and a cancelled await stops the
thread's wait within one slice (the transfer itself goes on: close its
connection to cancel it).
"""
import asyncio
import threading

SLICE_S = 0.05


def _wait_until(xfer, stop, timeout):
    from ._errors import TimedOut
    left = timeout
    while not stop.is_set():
        step = SLICE_S if left is None else min(SLICE_S, left)
        try:
            xfer.wait(step)
            return
        except TimedOut:
            if xfer.done:  # failed by its own deadline (set_deadline): wait_async raises it
                return
            if left is not None:
                left -= step
                if left <= 0:
                    raise


async def wait_async(xfer, timeout=None):
    """Wait for xfer without blocking the event loop; raises as Xfer.wait."""
    if xfer.done:
        return xfer.wait(0)
    stop = threading.Event()
    loop = asyncio.get_running_loop()
    try:
        await loop.run_in_executor(None, _wait_until, xfer, stop, timeout)
    finally:
        stop.set()
    return xfer.wait(0)
