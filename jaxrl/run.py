"""The command line: `python -m jaxrl.run agent=es env=Pendulum-v1 seed=3 agent.sigma=0.05`.

Only the entry point: Ctrl-C is routed to the run's stop request before anything heavy is
imported (see `jaxrl.interrupt`), then `jaxrl.cli` does the work.
"""

from __future__ import annotations

import sys

from jaxrl.interrupt import EXIT_INTERRUPTED, ctrl_c_requests_stop


def main(argv: list[str] | None = None) -> None:
    with ctrl_c_requests_stop(exit_at_once=True) as stop:
        from jaxrl import cli

        if stop.requested:  # pressed while Python imported JAX, Hydra and the agents
            print("interrupted during start-up: nothing was run", file=sys.stderr)
            sys.exit(EXIT_INTERRUPTED)
        cli.main(argv)


if __name__ == "__main__":
    main()
