"""The command line: `python -m jaxrl.run agent=es env=Pendulum-v1 seed=3 agent.sigma=0.05`.

Only the entry point: Ctrl-C and SIGTERM are routed to the run's stop request before anything
heavy is imported (see `jaxrl.interrupt`), then `jaxrl.cli` does the work.
"""

from __future__ import annotations

import os
import signal
import sys

from jaxrl.interrupt import STOP_SIGNALS, exit_code, signals_request_stop


def main(argv: list[str] | None = None) -> None:
    status = 1
    try:
        with signals_request_stop(exit_at_once=True) as stop:
            from jaxrl import cli

            if stop.requested:  # sent while Python imported JAX, Hydra and the agents
                print(f"{stop.reason} during start-up: nothing was run", file=sys.stderr)
                sys.exit(exit_code(stop.signum))
            cli.main(argv)
        status = 0
    except SystemExit as exit_:
        status = exit_.code if isinstance(exit_.code, int) else 1
        raise
    finally:
        # The run has said how it ended; a Ctrl-C or SIGTERM while Python shuts down (JAX's
        # atexit clean-up, closing env workers) ends the process with that status instead of a
        # traceback.
        for signum in STOP_SIGNALS:
            signal.signal(signum, lambda signum, frame: os._exit(status))


if __name__ == "__main__":
    main()
