"""The async pools' worker process entry point, in a module that does not import JAX.

Gymnasium's own worker, with Ctrl-C ignored: the terminal sends SIGINT to the whole process group,
and a worker that died of it would turn the training loop's graceful first Ctrl-C (finish the
chunk, checkpoint, exit) into a crash. The parent closes its workers itself.
"""

from __future__ import annotations

import signal
from typing import Any

from gymnasium.vector.async_vector_env import _async_worker


def worker(*args: Any) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _async_worker(*args)
