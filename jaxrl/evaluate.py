"""The command line of `jaxrl.evaluation`: `python -m jaxrl.evaluate <run dir> episodes=100`.

Exits 0 (scored), 1 (the env failed), 2 (bad input), 130/143 (Ctrl-C, SIGTERM: nothing is
written, so it stops at once). Only an entry point: the Python API is `jaxrl.evaluate(...)`,
which this module's name would shadow if it were imported, so nothing imports it.
"""

from __future__ import annotations

import os
import signal
import sys
from types import FrameType

from jaxrl.interrupt import STOP_SIGNALS, exit_code, stop_reason


def _stop_at_once(signum: int, frame: FrameType | None) -> None:
    os.write(2, f"{stop_reason(signum)}: nothing was written\n".encode())
    os._exit(exit_code(signum))


def main(argv: list[str]) -> int:
    for signum in STOP_SIGNALS:
        signal.signal(signum, _stop_at_once)
    from jaxrl import evaluation
    from jaxrl.config import ConfigError

    if argv and argv[0] in ("-h", "--help"):
        print(f"usage: {evaluation.USAGE}\n\n{evaluation.__doc__}")
        return 0
    try:
        request = evaluation.parse(argv)  # first: bad input is answered without importing JAX
        from envs.host import HostEnvError
        from jaxrl.cli import enable_compilation_cache

        enable_compilation_cache()
        try:
            scored = evaluation.evaluate_run(request)
        except HostEnvError as e:
            print(f"error: {e}", file=sys.stderr)
            return 1
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if request.out is not None:
        evaluation.write_json(scored, request.out)
    try:
        print(scored.report())
        if request.out is not None:
            print(f"written: {request.out}", flush=True)
    except BrokenPipeError:  # a reader that stopped early (`| head`) is no error
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
