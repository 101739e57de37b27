"""The async pools' worker process entry point, in a module that does not import JAX.

Gymnasium's own worker, with Ctrl-C ignored: the terminal sends SIGINT to the whole process group,
and a worker that died of it would turn the training loop's graceful first Ctrl-C (finish the
chunk, checkpoint, exit) into a crash. The parent closes its workers itself; a parent that ended
without closing them (a second Ctrl-C's immediate exit, kill -9) leaves them a broken pipe, on
which they end quietly rather than each printing Gymnasium's tracebacks into the run's stderr.
"""

from __future__ import annotations

import contextlib
import signal
from typing import Any

from gymnasium.vector.async_vector_env import _async_worker


def worker(*args: Any) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    with contextlib.suppress(EOFError, BrokenPipeError, ConnectionResetError):  # parent gone
        _async_worker(*args)
