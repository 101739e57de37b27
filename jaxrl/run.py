"""The command line: `python -m jaxrl.run agent=es env=Pendulum-v1 seed=3 agent.sigma=0.05`.

Only the entry point: Ctrl-C is routed to the run's stop request before anything heavy is
imported (see `jaxrl.interrupt`), then `jaxrl.cli` does the work.
"""

from __future__ import annotations

import os
import signal
import sys

from jaxrl.interrupt import EXIT_INTERRUPTED, ctrl_c_requests_stop


def main(argv: list[str] | None = None) -> None:
    exit_code = 1
    try:
        with ctrl_c_requests_stop(exit_at_once=True) as stop:
            from jaxrl import cli

            if stop.requested:  # pressed while Python imported JAX, Hydra and the agents
                print("interrupted during start-up: nothing was run", file=sys.stderr)
                sys.exit(EXIT_INTERRUPTED)
            cli.main(argv)
        exit_code = 0
    except SystemExit as exit_:
        exit_code = exit_.code if isinstance(exit_.code, int) else 1
        raise
    finally:
        # The run has said how it ended; a Ctrl-C while Python shuts down (JAX's atexit clean-up,
        # closing env workers) ends the process with that status instead of a traceback.
        signal.signal(signal.SIGINT, lambda signum, frame: os._exit(exit_code))


if __name__ == "__main__":
    main()
