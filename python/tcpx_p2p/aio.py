"""asyncio: ``await xfer`` and ``await wait_async(xfer, timeout)``.

Each (event loop, session) pair gets one reader on the session's completion
fd (``Session.fileno()``, ``loop.add_reader``): when it becomes readable the
loop takes ``Session.completions()`` and resolves the futures of the
transfers that ended.  No thread is parked per await and nothing polls while
the session's progress thread drives the transfers.  A session without a
progress thread is driven from the loop itself: while awaits are pending,
``completions()`` (which drives the session once) is called from loop
callbacks, soon after each post and then backing off to every
``DRIVE_MAX_S``; give such a session ``progress_thread=True`` to make that
unnecessary.

Several loops (in several threads) may await transfers of one session:
whichever loop takes an end hands it to the loop that awaits it.  A thread
that waits on, tests or cancels an awaited transfer tells the loops when it
lets go of it (the end may have been passed over meanwhile).

A cancelled or timed-out await stops waiting; the transfer itself goes on
(``Xfer.cancel`` cancels it).
"""
import asyncio
import threading
import weakref

DRIVE_MIN_S = 0.0001
DRIVE_MAX_S = 0.005

_reactors = weakref.WeakKeyDictionary()  # loop -> {id(session): _Reactor}
_by_session = {}  # id(session) -> [_Reactor], one per loop watching it
_by_session_lock = threading.Lock()


def _others(reactor):
    with _by_session_lock:
        return [r for r in _by_session.get(id(reactor.session), ()) if r is not reactor]


def _hand(reactor, method, arg):
    """Run reactor.method(arg) on its own loop, from any thread."""
    try:
        reactor.loop.call_soon_threadsafe(method, arg)
    except RuntimeError:
        pass  # that loop is closed: nothing awaits there any more


class _Reactor:
    """The futures of one session's awaited transfers, on one loop."""

    def __init__(self, loop, session):
        self.loop = loop
        self.session = session
        self.waiters = {}  # Xfer -> [futures]
        self.fd = session.fileno()
        self.threaded = session.progress_thread
        self.delay = DRIVE_MIN_S
        self.timer = None
        loop.add_reader(self.fd, self._ready)
        with _by_session_lock:
            _by_session.setdefault(id(session), []).append(self)

    def close(self):
        with _by_session_lock:
            peers = _by_session.get(id(self.session), [])
            if self in peers:
                peers.remove(self)
            if not peers:
                _by_session.pop(id(self.session), None)
        self.loop.remove_reader(self.fd)
        if self.timer:
            self.timer.cancel()
            self.timer = None

    def _resolve(self, xfers):
        for x in xfers:
            for fut in self.waiters.pop(x, ()):
                if not fut.done():
                    fut.set_result(None)

    def _take(self):
        try:
            ended = self.session.completions()
        except Exception as e:  # the session was closed under us
            for futs in self.waiters.values():
                for fut in futs:
                    if not fut.done():
                        fut.set_exception(e)
            self.waiters.clear()
            return False
        mine = [x for x in ended if x in self.waiters]
        self._resolve(mine)
        if len(mine) < len(ended):  # the rest may be awaited on other loops
            for r in _others(self):
                _hand(r, r._resolve, ended)
        if not ended:  # woken for what another caller of completions() took
            self._resolve([x for x in self.waiters if x.done])
        return bool(ended)

    def _look_again(self, xfer):
        """A thread let go of xfer: resolve it if it has ended."""
        if xfer not in self.waiters:
            return
        try:
            ended = xfer.done or xfer.query()["done"]
        except Exception:  # its connection is being closed: that ends it too
            ended = True
        if ended:
            self._resolve([xfer])

    def _ready(self):
        self._take()

    def _drive(self):
        self.timer = None
        if not self.waiters:
            return
        moved = self._take()
        self.delay = DRIVE_MIN_S if moved else min(self.delay * 2, DRIVE_MAX_S)
        self._arm()

    def _arm(self):
        if self.threaded or self.timer or not self.waiters:
            return
        self.timer = self.loop.call_later(self.delay, self._drive)

    def add(self, xfer):
        fut = self.loop.create_future()
        self.waiters.setdefault(xfer, []).append(fut)
        if xfer.done:  # ended before we looked
            self._resolve([xfer])
        else:
            self.delay = DRIVE_MIN_S
            self._arm()
        return fut

    def remove(self, xfer, fut):
        futs = self.waiters.get(xfer)
        if futs and fut in futs:
            futs.remove(fut)
            if not futs:
                del self.waiters[xfer]


def _reactor(loop, session):
    per_loop = _reactors.get(loop)
    if per_loop is None:
        per_loop = _reactors[loop] = {}
    r = per_loop.get(id(session))
    if r is None or r.session is not session:
        r = per_loop[id(session)] = _Reactor(loop, session)
    return r


def let_go(xfer):
    """A thread stopped using xfer (the extension calls this; any thread)."""
    with _by_session_lock:
        watching = list(_by_session.get(id(xfer.conn.session), ()))
    for r in watching:
        _hand(r, r._look_again, xfer)


def forget(session):
    """Stop watching session's fd on every loop (Session.close calls it)."""
    for per_loop in list(_reactors.values()):
        r = per_loop.pop(id(session), None)
        if r is not None:
            try:
                r.close()
            except Exception:
                pass  # the loop is closed already


async def wait_async(xfer, timeout=None):
    """Wait for xfer without blocking the event loop; raises as Xfer.wait."""
    from ._errors import TimedOut
    if xfer.done:
        return xfer.wait(0)
    loop = asyncio.get_running_loop()
    r = _reactor(loop, xfer.conn.session)
    fut = r.add(xfer)
    try:
        await asyncio.wait_for(asyncio.shield(fut), timeout)
    except asyncio.TimeoutError:
        if not xfer.done:
            raise TimedOut(-7, f"transfer pending after {timeout} s", "wait_async") from None
    finally:
        r.remove(xfer, fut)
    return xfer.wait(0)
