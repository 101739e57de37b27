"""Ctrl-C during a run: the first press asks the run to stop at its next safe point (after the
chunk in flight, with a checkpoint); a second press stops at once.

Standard library only: the CLI installs the handler before it imports JAX, so a Ctrl-C during
start-up is seen too. A `KeyboardInterrupt` raised from the handler would be unreliable there:
raised inside one of JAX's garbage-collector callbacks it is printed and swallowed, and the run
goes on. So the handler only sets a flag, and from the CLI a second press ends the process with
`os._exit` after one line: every checkpoint is written atomically, so the last complete one is
what a resume finds. From the Python API (a notebook) a second press raises `KeyboardInterrupt`
instead, which leaves the interpreter alive.

A job scheduler's preemption signal is taken the same way. submitit (Hydra's submitit launcher)
binds USR2 to a handler that requeues the job and calls `sys.exit` from wherever the signal
lands — mid checkpoint write, with tensorstore's threads still calling into Python while the
interpreter shuts down, which can abort the process ("FATAL: exception not rethrown") so that
it is neither requeued nor given a result. While a run trains, such a handler (any Python one
on USR1 or USR2) is deferred: the signal asks for a stop like Ctrl-C, and once the run has
checkpointed and closed its writers the scheduler's handler is called as the signal would have.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Callable, Iterator
from types import FrameType
from typing import Any

EXIT_INTERRUPTED = 130
PREEMPTION_SIGNALS = (signal.SIGUSR1, signal.SIGUSR2)


class StopRequest:
    """Whether Ctrl-C (or a deferred preemption signal) asked the run to stop, and what a second
    press says before it stops the process."""

    def __init__(self, exit_at_once: bool) -> None:
        self.requested = False
        self.exit_at_once = exit_at_once
        # Kept current by the training loop: what a second press leaves on disk.
        self.kept = "nothing was trained yet"
        self.reason = "interrupted"
        # The preemption signal taken and its scheduler's handler, called when the run has stopped.
        self.preemption: tuple[int, Callable[[int, FrameType | None], Any]] | None = None

    def defer(self, handler: Callable[[int, FrameType | None], Any]) -> Callable[..., None]:
        """A signal handler that asks for a stop and leaves `handler` for `finish`; a second
        such signal calls it at once."""

        def ask_for_stop(signum: int, frame: FrameType | None) -> None:
            if self.preemption is None:
                self.preemption = (signum, handler)
                self.reason = f"stopped by {signal.Signals(signum).name} (preemption)"
                self.requested = True
            else:
                self.preemption = None
                handler(signum, frame)

        return ask_for_stop

    def finish(self) -> None:
        """Hand a deferred preemption signal to its handler (submitit's requeues and exits)."""
        if self.preemption is not None:
            signum, handler = self.preemption
            self.preemption = None
            handler(signum, None)

    def handle(self, signum: int, frame: object) -> None:
        if not self.requested:
            self.requested = True
            return
        if not self.exit_at_once:
            raise KeyboardInterrupt
        os.write(2, f"interrupted again: stopped at once; {self.kept}\n".encode())
        os._exit(EXIT_INTERRUPTED)


_active: StopRequest | None = None


@contextlib.contextmanager
def ctrl_c_requests_stop(exit_at_once: bool = False) -> Iterator[StopRequest]:
    """Route SIGINT to a `StopRequest` while the block runs. Nested uses share the outer one (the
    CLI's, installed first); outside the main thread no handler can be installed and the request
    is never set."""
    global _active
    if _active is not None:
        yield _active
        return
    request = StopRequest(exit_at_once)
    if threading.current_thread() is not threading.main_thread():
        yield request
        return
    previous = {signal.SIGINT: signal.signal(signal.SIGINT, request.handle)}
    for signum in PREEMPTION_SIGNALS:
        handler = signal.getsignal(signum)
        if callable(handler):
            previous[signum] = signal.signal(signum, request.defer(handler))
    _active = request
    try:
        yield request
    finally:
        _active = None
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        request.finish()
