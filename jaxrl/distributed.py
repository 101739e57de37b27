"""One run trained by several processes (`distributed.*`; docs/distributed.md).

Every process runs the same compiled program on its share of the devices: `jax.distributed`
connects them, `jaxrl.parallel` builds the meshes over every process's devices, and the
collectives inside the program are all that crosses processes while training. Process 0 writes
the run's files; checkpoints are written by all processes together (orbax). A host decision that
leads to a collective (checkpoint now? stop now?) is agreed on by all processes first, so that
they make the same calls in the same order.

A process that dies: JAX's runtime notices its missing heartbeats after `distributed.timeout`
seconds (at once when the dead one is process 0, which hosts the coordination service) and ends
every other process with a fatal C++ error, an abort with a stack trace, which no Python code in
that process can catch. So the command line runs each process's share in a child process
(`supervise`) and turns that end into one line.

Only the standard library is imported here: the supervising parent never imports JAX.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import os
import re
import signal
import socket
import subprocess
import sys
import zlib
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from jaxrl.config import ConfigError, DistributedConfig
from jaxrl.interrupt import STOP_SIGNALS
from jaxrl.rundir import CHECKPOINTS

EXIT_FAILED = 1  # the command line's status for a run that failed
# Set in the environment of the child process that trains (`supervise`).
WORKER_ENV = "JAXRL_DISTRIBUTED_WORKER"
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "[::1]")
# How long a finished process waits for the others to finish too (JAX's shutdown barrier):
# process 0 may still record videos after the last checkpoint.
SHUTDOWN_SECONDS = 600


class DistributedError(Exception):
    """The processes could not connect, or a collective between them failed; the message says
    which in one line."""


def start(cfg: DistributedConfig) -> None:
    """Connect this process to the others (`jax.distributed.initialize`); a no-op for a run of
    one process. Must come before anything touches a device: meshes then span every process's
    devices. Bad settings raise ConfigError, a failed connection DistributedError."""
    if not cfg.enabled:
        return
    import jax

    if jax.distributed.is_initialized():  # a second run from the Python API
        joined = (jax.process_count(), jax.process_index())
        if cfg.coordinator != "auto" and joined != (cfg.num_processes, cfg.process_id):
            raise ConfigError(
                f"distributed.process_id={cfg.process_id} of distributed.num_processes="
                f"{cfg.num_processes}: this Python process already joined a run as process "
                f"{jax.process_index()} of {jax.process_count()}"
            )
        return
    address = None if cfg.coordinator == "auto" else cfg.coordinator
    # A coordinator on a loopback address can only be reached from this machine: listen there
    # alone, not on every interface (JAX's default).
    bind = address if address and address.rpartition(":")[0] in LOOPBACK_HOSTS else None
    # JAX's preemption service binds SIGTERM in C++ and only records it for a sync point that
    # jaxrl never asks about: the run would train on. `agree` shares stop signals instead.
    jax.config.update("jax_enable_preemption_service", False)
    try:
        jax.distributed.initialize(
            coordinator_address=address,
            num_processes=cfg.num_processes,
            process_id=cfg.process_id,
            initialization_timeout=cfg.connect_timeout,
            heartbeat_timeout_seconds=cfg.timeout,
            shutdown_timeout_seconds=SHUTDOWN_SECONDS,
            coordinator_bind_address=bind,
        )
    except RuntimeError as e:
        if "must be called before" in str(e):
            raise ConfigError(
                "distributed.coordinator is set, but JAX has already started in this Python "
                "process: a distributed run starts from the command line or a fresh process"
            ) from None
        raise DistributedError(
            f"could not start or reach the coordinator {address or '(auto)'}: {_first_line(e)}"
        ) from None
    except ValueError as e:  # auto: JAX found no cluster to read the processes from
        raise ConfigError(
            f"distributed.coordinator=auto: {_first_line(e)} (JAX reads SLURM, Open MPI and "
            f"cloud TPU variables); elsewhere give distributed.coordinator=HOST:PORT, "
            f"distributed.num_processes and distributed.process_id"
        ) from None


def _first_line(e: BaseException) -> str:
    lines = str(e).strip().splitlines()
    return lines[0] if lines else type(e).__name__


def is_distributed() -> bool:
    """Several processes train this run (after `start`)."""
    import jax

    return jax.process_count() > 1


def is_primary() -> bool:
    """The process that writes the run's files: process 0, or the only one."""
    if not is_distributed():
        return True
    import jax

    return jax.process_index() == 0


def agree(
    stop_signal: int | None, checkpoint_due: bool, call_size: int
) -> tuple[int | None, bool, int]:
    """(the signal to stop on, checkpoint now, iterations of the next call) as every process will
    act on them: stop if any process was asked to (Ctrl-C reaches them at different moments; the
    signal of the lowest process id that took one, so that all report and exit alike),
    checkpoint and size the next call as process 0's clock says. One tiny all-gather; a run of
    one process takes its own answers without one."""
    if not is_distributed():
        return stop_signal, checkpoint_due, call_size
    import numpy as np
    from jax.experimental import multihost_utils

    with collectives_fail_as_one_line():  # a peer that died while the others agree
        votes = multihost_utils.process_allgather(
            np.array([stop_signal or 0, checkpoint_due, call_size])
        )
    taken = votes[:, 0][votes[:, 0] > 0]
    return (int(taken[0]) if taken.size else None), bool(votes[0, 1]), int(votes[0, 2])


@functools.cache
def processes_on_this_host() -> int:
    """How many of the run's processes share this machine (1 outside a distributed run): each
    holds its own copy of the run's state and program, so on a CPU they share its memory. One
    tiny all-gather of a hash of the host's name, the first time it is asked."""
    if not is_distributed():
        return 1
    import numpy as np
    from jax.experimental import multihost_utils

    host = zlib.crc32(socket.gethostname().encode())
    with collectives_fail_as_one_line():
        hosts = multihost_utils.process_allgather(np.array([host], dtype=np.int64))
    return int(np.count_nonzero(hosts == host))


def on_every_host(tree: Any) -> Any:
    """`tree`'s global arrays as numpy arrays in this process (a collective: every process
    calls it), for work one process does alone, such as recording videos."""
    if not is_distributed():
        return tree
    from jax.experimental import multihost_utils

    with collectives_fail_as_one_line():
        return multihost_utils.process_allgather(tree, tiled=True)


@contextlib.contextmanager
def collectives_fail_as_one_line() -> Iterator[None]:
    """A collective whose peer died (a reset connection) as a DistributedError; JAX's runtime
    usually ends the process first (see `supervise`)."""
    if not is_distributed():
        yield
        return
    import jax

    try:
        yield
    except jax.errors.JaxRuntimeError as e:
        raise DistributedError(
            f"a collective with the other processes failed ({_first_line(e)}): one of them stopped"
        ) from None


# ---------------------------------------------------------------------------------------------
# The supervising parent (the command line): no JAX here.

# JAX's runtime ending a process because of another one (glog's fatal line).
_FATAL = re.compile(r"^F\d{4} .*\] Terminating process because the JAX distributed service")
# A line of XLA's log (glog's format), and one that speaks of the coordination service: the first
# sign that JAX's runtime lost another process.
_RUNTIME_LOG = re.compile(r"^[IWEF]\d{4} [\d:.]+\s+\d+ \S+:\d+\]")
_COORDINATION_TROUBLE = re.compile(r"^[WEF]\d{4} [\d:.]+\s+\d+ .*coordination[ _]service")


def supervise(argv: Sequence[str], cfg: DistributedConfig, run_dir: Path) -> int:
    """Run this process's share of a distributed run (`python -m jaxrl.run <argv>`) in a child
    process and return its exit status. Its stderr passes through, except JAX's fatal report
    when another process died, which becomes one line naming the cause and the checkpoint kept
    (exit status 1). SIGINT and SIGTERM are passed on to the child, which runs in its own
    session so that a terminal's Ctrl-C reaches it once, and which dies with this process."""
    child = subprocess.Popen(
        [sys.executable, "-m", "jaxrl.run", *argv],
        env={**os.environ, WORKER_ENV: "1"},
        stderr=subprocess.PIPE,
        text=True,
        errors="replace",
        bufsize=1,
        start_new_session=True,
        preexec_fn=_die_with_parent,
    )
    forwarded = {
        signum: signal.signal(signum, lambda s, frame: child.send_signal(s))
        for signum in STOP_SIGNALS
    }
    # From the runtime's first word of trouble with the coordination service on: held back, since
    # JAX may be about to end this process with its report and a stack trace.
    ending: list[str] = []
    runtime_log: list[str] = []  # XLA's other log lines: at the end, unless the run failed
    said_error = False  # an error line of the run's own went through
    assert child.stderr is not None
    try:
        for line in child.stderr:
            if ending or _COORDINATION_TROUBLE.match(line) or _FATAL.match(line):
                ending.append(line)
            elif _RUNTIME_LOG.match(line):
                runtime_log.append(line)
            else:
                said_error = said_error or line.startswith("error:")
                sys.stderr.write(line)
                sys.stderr.flush()
        code = child.wait()
    finally:
        for signum, handler in forwarded.items():
            signal.signal(signum, handler)
    fatal = any(_FATAL.match(line) for line in ending)
    held_errors = [line for line in ending if line.startswith("error:")]
    if not fatal and code >= 0:
        if said_error or held_errors:
            sys.stderr.writelines(held_errors)
        else:  # a run that went on: nothing is hidden
            sys.stderr.writelines(runtime_log + ending)
        return code
    if not said_error:
        cause = _cause("".join(ending), cfg) if fatal else f"ended by {signal.Signals(-code).name}"
        who = "this process" if cfg.process_id is None else f"process {cfg.process_id}"
        print(f"error: {who}: {cause}; stopped. {_kept(run_dir, cfg)}", file=sys.stderr)
    return EXIT_FAILED


def quiet_native_stdout() -> None:
    """In the child that trains (`supervise`): Gloo, the CPU collectives between processes,
    prints a note of each connection it makes on the native stdout from several threads at once,
    cut into and across lines, so no line filter can take it out. The native stdout goes to
    /dev/null; Python's `sys.stdout` keeps the original stream, where the run's lines go."""
    sys.stdout.flush()
    original = os.dup(sys.stdout.fileno())
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    sys.stdout = os.fdopen(original, "w", buffering=1)


def _cause(report: str, cfg: DistributedConfig) -> str:
    """What JAX's report says happened, in words."""
    unhealthy = re.search(r"stopped sending heartbeats\):\s*([\d,\s]+?)\s*\n", report)
    if unhealthy:
        ids = ", ".join(unhealthy.group(1).split())
        return (
            f"process {ids} sent no heartbeat for distributed.timeout={cfg.timeout}s (it died "
            f"or hangs)"
        )
    if "RegisterTask" in report:
        return (
            f"the processes did not all connect to the coordinator {cfg.coordinator} within "
            f"distributed.connect_timeout={cfg.connect_timeout}s"
        )
    if "Failed to send RPC to coordination service" in report:
        return "lost the coordinator, process 0 (it died or its machine cannot be reached)"
    status = re.search(r"absl::Status: (.*)", report)
    return f"another process failed ({status.group(1) if status else 'no reason given'})"


def _kept(run_dir: Path, cfg: DistributedConfig) -> str:
    directory = run_dir / CHECKPOINTS
    names = [p.name for p in directory.iterdir()] if directory.is_dir() else []
    steps = [int(name) for name in names if name.isdigit()]
    if not steps:
        return "No checkpoint was written."
    processes = cfg.num_processes or "the same number of"
    return (
        f"The checkpoint of iteration {max(steps)} is kept; continue with resume={run_dir} on "
        f"{processes} processes"
    )


def _die_with_parent() -> None:
    """In the child, before it runs: SIGKILL when the supervising parent dies (Linux), so that
    killing the parent kills the process that trains."""
    with contextlib.suppress(OSError, AttributeError):
        pr_set_pdeathsig = 1
        ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGKILL)
