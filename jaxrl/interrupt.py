"""Ctrl-C during a run: the first press asks the run to stop at its next safe point (after the
chunk in flight, with a checkpoint); a second press stops at once.

Standard library only: the CLI installs the handler before it imports JAX, so a Ctrl-C during
start-up is seen too. A `KeyboardInterrupt` raised from the handler would be unreliable there:
raised inside one of JAX's garbage-collector callbacks it is printed and swallowed, and the run
goes on. So the handler only sets a flag, and from the CLI a second press ends the process with
`os._exit` after one line: every checkpoint is written atomically, so the last complete one is
what a resume finds. From the Python API (a notebook) a second press raises `KeyboardInterrupt`
instead, which leaves the interpreter alive.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Iterator

EXIT_INTERRUPTED = 130


class StopRequest:
    """Whether Ctrl-C was pressed, and what a second press says before it stops the process."""

    def __init__(self, exit_at_once: bool) -> None:
        self.requested = False
        self.exit_at_once = exit_at_once
        # Kept current by the training loop: what a second press leaves on disk.
        self.kept = "nothing was trained yet"

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
    previous = signal.signal(signal.SIGINT, request.handle)
    _active = request
    try:
        yield request
    finally:
        _active = None
        signal.signal(signal.SIGINT, previous)
