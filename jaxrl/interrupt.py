"""Ctrl-C (or SIGTERM) during a run: the first signal asks the run to stop at its next safe
point (after the chunk in flight, with a checkpoint); a second one stops at once.

Standard library only: the CLI installs the handlers before it imports JAX, so a Ctrl-C during
start-up is seen too. A `KeyboardInterrupt` raised from the handler would be unreliable there:
raised inside one of JAX's garbage-collector callbacks it is printed and swallowed, and the run
goes on. So the handler only sets a flag, and from the CLI a second signal ends the process with
`os._exit` after one line (at once even inside a chunk: `jaxrl.loop` runs chunks in a thread of
their own, so the main thread, where Python runs handlers, is never held in XLA): every
checkpoint is written atomically, so the last complete one is what a resume finds. From the
Python API (a notebook) a second one raises `KeyboardInterrupt` instead, which leaves the
interpreter alive. SIGTERM (what `kill`, Docker, Kubernetes and SLURM
without submitit send before they kill) is taken only where nothing else handles it; the exit
status is 128 + the signal's number, as a shell reports a process the signal ended (130, 143).

A job scheduler's preemption signal is taken the same way. submitit (Hydra's submitit launcher)
binds USR2 to a handler that requeues the job and calls `sys.exit` from wherever the signal
lands — mid checkpoint write, with tensorstore's threads still calling into Python while the
interpreter shuts down, which can abort the process ("FATAL: exception not rethrown") so that
it is neither requeued nor given a result. While a run trains, such a handler (any Python one
on USR1 or USR2) is deferred: the signal asks for a stop, and once the run has checkpointed
and closed its writers the scheduler's handler is called as the signal would have been."""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Callable, Iterator
from types import FrameType
from typing import Any

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
PREEMPTION_SIGNALS = (signal.SIGUSR1, signal.SIGUSR2)


def exit_code(signum: int) -> int:
    """The exit status of a run that `signum` stopped: 128 + its number, as a shell reports."""
    return 128 + signum


# A run that a signal stopped (with its checkpoint), whichever signal it was.
STOPPED_BY_SIGNAL = frozenset(exit_code(s) for s in (*STOP_SIGNALS, *PREEMPTION_SIGNALS))


def stop_reason(signum: int) -> str:
    """How a run that `signum` stopped reports it."""
    return "interrupted" if signum == signal.SIGINT else f"stopped by {signal.Signals(signum).name}"


class StopRequest:
    """Whether a signal asked the run to stop, which one, and what a second signal says before
    it stops the process."""

    def __init__(self, exit_at_once: bool) -> None:
        self.requested = False
        self.exit_at_once = exit_at_once
        # Kept current by the training loop: what a second signal leaves on disk.
        self.kept = "nothing was trained yet"
        self.signum: int = signal.SIGINT  # the signal that asked for the stop
        self.reason = "interrupted"
        # The preemption signal taken and its scheduler's handler, called when the run has stopped.
        self.preemption: tuple[int, Callable[[int, FrameType | None], Any]] | None = None

    def _ask(self, signum: int, reason: str) -> None:
        self.requested = True
        self.signum = signum
        self.reason = reason

    def stopped_elsewhere(self, signum: int) -> None:
        """Take the stop that another process of a distributed run was asked for by `signum`:
        the run then reports and exits as that process does."""
        if not self.requested:
            self._ask(signum, stop_reason(signum))

    @property
    def signal_taken(self) -> int | None:
        """The signal that asked for the stop, None while none did."""
        return self.signum if self.requested else None

    def defer(self, handler: Callable[[int, FrameType | None], Any]) -> Callable[..., None]:
        """A signal handler that asks for a stop and leaves `handler` for `finish`; a second
        such signal calls it at once."""

        def ask_for_stop(signum: int, frame: FrameType | None) -> None:
            if self.preemption is None:
                self.preemption = (signum, handler)
                self._ask(signum, f"stopped by {signal.Signals(signum).name} (preemption)")
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
            self._ask(signum, stop_reason(signum))
            return
        if not self.exit_at_once:
            raise KeyboardInterrupt
        name = signal.Signals(signum).name
        again = "interrupted again" if signum == signal.SIGINT else f"{name} again"
        os.write(2, f"{again}: stopped at once; {self.kept}\n".encode())
        os._exit(exit_code(signum))


_active: StopRequest | None = None


def rebind_handlers() -> None:
    """Bind the Python handlers of the stop and preemption signals again where native code
    replaced them: joining Ray installs absl's failure-signal handler, which on SIGTERM dumps a
    stack and kills the process, so the run lost the chunk in flight. Python still lists its own
    handler (`signal.getsignal`); binding it again restores it. Main thread only."""
    if threading.current_thread() is not threading.main_thread():
        return
    for signum in (*STOP_SIGNALS, *PREEMPTION_SIGNALS):
        handler = signal.getsignal(signum)
        if callable(handler):
            signal.signal(signum, handler)


@contextlib.contextmanager
def signals_request_stop(exit_at_once: bool = False) -> Iterator[StopRequest]:
    """Route SIGINT, SIGTERM (unless something else handles it) and a scheduler's preemption
    signal to a `StopRequest` while the block runs. Nested uses share the outer one (the CLI's,
    installed first); outside the main thread no handler can be installed and the request is
    never set."""
    global _active
    if _active is not None:
        yield _active
        return
    request = StopRequest(exit_at_once)
    if threading.current_thread() is not threading.main_thread():
        yield request
        return
    previous = {}
    for signum in STOP_SIGNALS:
        if signum == signal.SIGINT or signal.getsignal(signum) == signal.SIG_DFL:
            previous[signum] = signal.signal(signum, request.handle)
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
