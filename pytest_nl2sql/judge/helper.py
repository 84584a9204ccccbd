"""A second process that does, ahead of time, the parts of a case's judgement that need nothing
from the process running the cases: Spider exact match and the neighbour check.

Judging a case is sequential Python in one process, and most of its time is not executing SQL:
reading SQL for exact match, and the passing prediction's run on each neighbour database. The
helper takes those for the next few cases (`Pipeline.look_ahead`), so that on a machine with two
cores they run while pytest's process runs gold and prediction on the cases' own databases. Its
work items are pure functions of plain values (`on_neighbours.BeyondWork`; a gold, a prediction
and a schema), so a result is the same whichever process computed it.

One process and one pipe, no thread in pytest's process: work goes out with `submit` and each
result is read when `take` wants it (a thread pool's feeder threads would fight pytest's thread
for the interpreter lock, and lose the time the helper saves). When `take` wants a piece the
helper has not started (it is starting up, or behind after a run of slow pieces), this process
claims it and does it at once rather than wait; two flags per piece in shared memory, each
written by one side only, settle who does it (at worst both do, and one result is thrown away).
The helper never decides anything alone: a piece of work that failed there (an exception, a value
that would not travel, the helper gone) is done again here, as it would be without a helper, and
a helper that died is not used again.

Started only where it can pay: two CPUs or more, a run of at least `MIN_CASES` cases, not in an
xdist worker (the workers already share the cores), and predictions known without asking the model
(a predictions file, the cases' own `predicted`). `NL2SQL_HELPER=0` turns it off, `=1` on for any
run (tests).
"""

from __future__ import annotations

import importlib
import mmap
import multiprocessing
import os
import pickle
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

MIN_CASES = 100  # below this, starting a process (about 0.2 s of CPU) costs more than it saves
LOOKAHEAD = 32  # cases begun ahead of the running one, their work handed to the helper
SLOTS = 1024  # shared flags, reused in turn; pieces sent and not answered stay below half of it
MAX_MESSAGE_BYTES = 256 * 1024  # a larger piece of work is done here (a pipe holds little more)
ENV_SWITCH = "NL2SQL_HELPER"

T = TypeVar("T")


def wanted(cases: int, env: Mapping[str, str] = os.environ) -> bool:
    """Whether a run of `cases` cases should start a helper (see the module's docstring)."""
    switch = env.get(ENV_SWITCH, "").strip()
    if switch in ("0", "1"):
        return switch == "1"
    return cases >= MIN_CASES and available_cpus() >= 2


def available_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        return os.cpu_count() or 1


@dataclass(frozen=True)
class Ticket(Generic[T]):
    """A piece of work sent to the helper; `Helper.take` gives its result."""

    number: int


class Helper:
    """One helper process, fed over a pipe; results are read in the order the work was sent."""

    def __init__(self, setup: Callable[..., Any] | None = None, setup_args: tuple[Any, ...] = (),
                 modules: tuple[str, ...] = ()) -> None:
        """`setup(*setup_args)`: the helper's state, made there once and given to every piece of
        work as its first argument (closed at the end if it has `close`); `modules`: imported
        there before it takes any work (a piece it has begun is waited for, so its first piece
        should not also pay for the imports)."""
        # spawn, not fork: pytest's process may have threads (predictions asked ahead), and a forked
        # copy of a process with threads can hang
        context = multiprocessing.get_context("spawn")
        self._pipe, theirs = context.Pipe(duplex=True)
        # the flags: a small file both processes map (the helper removes it once mapped); bytes
        # [0, SLOTS) are written here (this process does, or dropped, the piece), [SLOTS, 2*SLOTS)
        # there (the helper began it)
        handle, self._flags_path = tempfile.mkstemp(prefix="nl2sql-helper-")
        try:
            os.write(handle, bytes(2 * SLOTS))
            self._flags = mmap.mmap(handle, 2 * SLOTS)
        finally:
            os.close(handle)
        self._process = context.Process(target=serve, args=(theirs, self._flags_path, modules, setup, setup_args),
                                        name="nl2sql-helper", daemon=True)
        try:
            self._process.start()
        finally:
            theirs.close()
        self._alive = True
        self._sent = 0
        self._done: dict[int, tuple[bool, Any]] = {}  # results read, not yet taken
        self._waiting: set[int] = set()  # sent, result not read yet
        self._unwanted: set[int] = set()  # results to throw away when they come
        self.answered = 0  # pieces whose result came from the helper (tests, benchmarks)
        self.computed_here = 0  # pieces sent and done here after all (not begun there in time, or failed there)

    @property
    def alive(self) -> bool:
        return self._alive

    def submit(self, work: Callable[..., T], *args: Any) -> Ticket[T] | None:
        """Send `work(*args)` to the helper; None when it cannot take it (the caller does it here)."""
        if not self._alive or len(self._waiting) >= SLOTS // 2:
            return None
        try:
            message = pickle.dumps((self._sent, work, args), protocol=pickle.HIGHEST_PROTOCOL)
        except Exception:  # noqa: BLE001 - a value that does not pickle: done here
            return None
        if len(message) > MAX_MESSAGE_BYTES:
            return None
        self._read_ready()  # keep the helper's side of the pipe from filling up
        self._flags[self._sent % SLOTS] = 0
        self._flags[SLOTS + self._sent % SLOTS] = 0  # (the slot's previous piece is answered)
        try:
            self._pipe.send_bytes(message)
        except OSError:
            self._drop()
            return None
        ticket: Ticket[T] = Ticket(self._sent)
        self._waiting.add(self._sent)
        self._sent += 1
        return ticket

    def take(self, ticket: Ticket[T] | None, here: Callable[[], T]) -> T:
        """The result of `ticket`; `here()` when the helper has not started it (claimed here at
        once) or has none to give (the work failed there, the helper is gone)."""
        if ticket is None:
            return here()
        if ticket.number in self._waiting and not self._started_by_helper(ticket.number):
            self._unwanted.add(ticket.number)  # the helper skips it, or its result is thrown away
            self.computed_here += 1
            return here()
        while ticket.number not in self._done and ticket.number in self._waiting and self._alive:
            self._read_one()
        ok, value = self._done.pop(ticket.number, (False, None))
        if not ok:
            self.computed_here += 1
            return here()
        self.answered += 1
        return value  # type: ignore[no-any-return]

    def drop(self, ticket: Ticket[Any] | None) -> None:
        """A result no longer wanted: thrown away when it comes."""
        if ticket is None:
            return
        if self._done.pop(ticket.number, None) is None and ticket.number in self._waiting:
            self._flags[ticket.number % SLOTS] = 1
            self._unwanted.add(ticket.number)

    def close(self) -> None:
        if self._alive:
            self._alive = False
            self._pipe.close()  # the helper reads the end of its input and stops
        self._process.join(timeout=5)
        if self._process.is_alive():
            self._process.kill()
            self._process.join()
        self._flags.close()
        if os.path.exists(self._flags_path):  # the helper never started
            os.unlink(self._flags_path)

    def _started_by_helper(self, number: int) -> bool:
        """Claim the piece for this process; True if the helper had begun it (its answer is awaited)."""
        slot = number % SLOTS
        self._flags[slot] = 1
        return bool(self._flags[SLOTS + slot])

    def _read_ready(self) -> None:
        try:
            while self._alive and self._waiting and self._pipe.poll():
                self._read_one()
        except OSError:
            self._drop()

    def _read_one(self) -> None:
        try:
            number, ok, value = self._pipe.recv()
        except (EOFError, OSError, pickle.UnpicklingError):
            self._drop()
            return
        self._waiting.discard(number)
        if number in self._unwanted:
            self._unwanted.discard(number)
        else:
            self._done[number] = (ok, value)

    def _drop(self) -> None:
        """The helper died or its pipe broke: everything it had is done here from now on."""
        self._alive = False
        self._waiting.clear()
        self._unwanted.clear()
        try:
            self._pipe.close()
        except OSError:
            pass


def serve(pipe: Any, flags_path: str, modules: tuple[str, ...] = (),
          setup: Callable[..., Any] | None = None, setup_args: tuple[Any, ...] = ()) -> None:
    """The helper process: run each piece of work in order, unless the other process claimed it,
    and answer every piece (its result, or that it was not done)."""
    with open(flags_path, "r+b") as handle:
        flags = mmap.mmap(handle.fileno(), 2 * SLOTS)
    os.unlink(flags_path)
    for name in modules:
        importlib.import_module(name)
    state = setup(*setup_args) if setup is not None else None
    try:
        _serve(pipe, flags, state, with_state=setup is not None)
    finally:
        if hasattr(state, "close"):
            state.close()


def _serve(pipe: Any, flags: mmap.mmap, state: Any, *, with_state: bool) -> None:
    while True:
        try:
            number, work, args = pickle.loads(pipe.recv_bytes())
        except (EOFError, OSError):
            return
        slot = number % SLOTS
        flags[SLOTS + slot] = 1
        if flags[slot]:
            reply: tuple[int, bool, Any] = (number, False, None)
        else:
            try:
                reply = (number, True, work(state, *args) if with_state else work(*args))
            except Exception:  # noqa: BLE001 - the caller does the work again, and sees the error itself
                reply = (number, False, None)
        try:
            pipe.send(reply)
        except (pickle.PicklingError, TypeError, AttributeError, RecursionError):  # a result that does not travel
            pipe.send((number, False, None))
        except OSError:
            return
