"""One run across processes (`distributed.*`, docs/distributed.md), through the CLI as a user
launches it: several `python -m jaxrl.run` processes on this machine, joined over 127.0.0.1,
each with 2 forced CPU devices, against one process with 4.

Every process is guarded by a timeout: a distributed run that hangs fails here, never hangs."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from cli_helpers import QUICK_PPO, REPO, TINY_ES, cli, error_lines, read_evals

import jaxrl

QUIET = ("log.progress=false", "log.tensorboard=false")
# ES: 8 antithetic pairs, 2 per device; PPO: 4 envs, 1 per device.
RUNS = {
    "es": (*TINY_ES, "agent.population_size=16", "budget.env_steps=3000", "eval.every=2"),
    "ppo": (*QUICK_PPO, "env.num_envs=4", "budget.env_steps=1024", "eval.every=4"),
    # ERL: 4 members, 1 per device; 3 generations of 4 + 1 Pendulum episodes, a few updates each.
    "erl": (
        "agent=erl",
        "env=Pendulum-v1",
        "agent.population_size=4",
        "agent.hidden_sizes=[16,16]",
        "agent.buffer_size=20000",
        "agent.batch_size=32",
        "agent.learning_starts=64",
        "agent.updates_per_step=0.02",
        "agent.sync_period=1",
        "budget.env_steps=3000",
        "eval.every=1",
    ),
}
# A run of about 20 chunks (a checkpoint after every 5th), to stop in the middle: one program for
# the tests below, so that all but the first load it from the compilation cache (resumes too).
LONG_ES = (
    *TINY_ES,
    "agent.population_size=16",
    "budget.env_steps=40000",
    "eval.every=1",
    "checkpoint.min_seconds=0",
    "checkpoint.every=5",
)
LIMIT = 300  # seconds any one process may take


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def environment(devices: int) -> dict[str, str]:
    flags = f"{os.environ.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count={devices}"
    return {
        **os.environ,
        "XLA_FLAGS": flags,
        "JAX_PLATFORMS": "cpu",  # the forced host devices are CPU devices, also beside a GPU
        "PYTHONUNBUFFERED": "1",
        "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
    }


def start(devices: int, *args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "jaxrl.run", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=environment(devices),
    )


def launch(processes: int, *args: str) -> list[subprocess.Popen]:
    """The processes of one distributed run, 2 devices each, joined on 127.0.0.1."""
    address = f"127.0.0.1:{free_port()}"
    return [
        start(
            2,
            *args,
            f"distributed.coordinator={address}",
            f"distributed.num_processes={processes}",
            f"distributed.process_id={i}",
        )
        for i in range(processes)
    ]


def finish(proc: subprocess.Popen, limit: float = LIMIT) -> subprocess.CompletedProcess:
    try:
        stdout, stderr = proc.communicate(timeout=limit)
    except subprocess.TimeoutExpired:
        proc.kill()
        stdout, stderr = proc.communicate()
        raise AssertionError(f"still running after {limit} s: {stderr[-2000:]}") from None
    return subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)


def params(run_dir: Path) -> np.ndarray:
    return np.asarray(jaxrl.load(run_dir).params)


@pytest.mark.parametrize("agent", ["es", "ppo", "erl"])
def test_two_processes_of_two_devices_train_as_one_process_of_four(
    agent: str, tmp_path: Path
) -> None:
    """The same program over the same 4 devices, split 2 + 2 over processes: ES exactly (only
    gathered fitness, integer step counts and statistics each device merges alike cross
    devices), PPO and ERL to float rounding (asserted to 1e-6, above the differences measured:
    benchmarks/results/learning_tests.md). PPO's gradients are summed over devices by Gloo
    between processes and by XLA within one, in other orders. ERL gathers its members' episodes
    and every device computes the same buffer, GA step and learner updates, which XLA compiles
    otherwise for 2 processes than for 1.
    Process 0 alone writes the run's files and its last line, and `jaxrl.load` reads the
    checkpoint in one process."""
    args = (*RUNS[agent], *QUIET)
    one, two = tmp_path / "one", tmp_path / "two"
    reference = start(4, *args, f"log.dir={one}")
    processes = launch(2, *args, f"log.dir={two}")
    results = [finish(p) for p in (reference, *processes)]
    for result in results:
        assert result.returncode == 0, result.stderr[-3000:]
    assert results[1].stdout.startswith(f"completed: {agent}")
    assert results[2].stdout == ""  # process 0 says how the run ended

    summary = json.loads((two / "summary.json").read_text())
    assert summary["processes"] == 2 and len(summary["devices"]) == 4
    assert len(json.loads((one / "summary.json").read_text())["devices"]) == 4
    exact = agent == "es"
    columns = ("seed", "iteration", "env_steps") + (("eval_return",) if exact else ())
    rows = [[r[c] for c in columns] for r in read_evals(two)]
    assert rows == [[r[c] for c in columns] for r in read_evals(one)]  # written once, by process 0
    if exact:
        np.testing.assert_array_equal(params(two), params(one))
    else:
        np.testing.assert_allclose(params(two), params(one), rtol=1e-5, atol=1e-6)
    if agent == "erl":  # each process writes the replay items it holds: the whole buffer
        one_items, two_items = latest_replay_items(one), latest_replay_items(two)
        assert one_items and [f.name for f in two_items] == [f.name for f in one_items]
        assert [f.stat().st_size for f in two_items] == [f.stat().st_size for f in one_items]


# A process of a distributed run reads the replay items it writes from the carry's replicated
# arrays (`Checkpointer`): the whole array, also where the process holds no replica 0.
HOST_PARTS_OF_A_REPLICATED_ARRAY = """
import sys
import jax
jax.distributed.initialize(sys.argv[1], num_processes=2, process_id=int(sys.argv[2]))
import jax.numpy as jnp
import numpy as np
from jaxrl import parallel
from jaxrl.checkpoint import _host_parts
x = jax.jit(lambda: jnp.arange(24.0).reshape(4, 6), out_shardings=parallel.replicated())()
print(np.concatenate(_host_parts(x, 1)).sum())
jax.distributed.shutdown()
"""


def test_every_process_writes_the_whole_replicated_replay_items() -> None:
    """Both processes get the whole 4 x 6 array, 0 + 1 + ... + 23 = 276."""
    address = f"127.0.0.1:{free_port()}"
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", HOST_PARTS_OF_A_REPLICATED_ARRAY, address, str(i)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=environment(2),
        )
        for i in range(2)
    ]
    results = [finish(p) for p in processes]
    for result in results:
        assert result.returncode == 0, result.stderr[-3000:]
    assert [result.stdout.split() for result in results] == [["276.0"], ["276.0"]]


def latest_replay_items(run_dir: Path) -> list[Path]:
    """The replay item files of the run's latest checkpoint."""
    steps = [p for p in (run_dir / "checkpoints").iterdir() if p.name.isdigit()]
    return sorted((max(steps, key=lambda p: int(p.name)) / "replay").iterdir())


def child_of(proc: subprocess.Popen) -> int:
    """The process that trains: the child of the command line's supervising process."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        children = Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()
        if children:
            return int(children[0])
        time.sleep(0.1)
    raise AssertionError("the supervising process started no child")


def wait_for_rows(run_dir: Path, rows: int, procs: list[subprocess.Popen]) -> None:
    deadline = time.monotonic() + LIMIT
    while time.monotonic() < deadline and all(p.poll() is None for p in procs):
        evals = run_dir / "evals.csv"
        if evals.exists() and len(evals.read_text().splitlines()) > rows:
            return
        time.sleep(0.1)
    raise AssertionError(f"no {rows} evaluations: {[finish(p, 5).stderr[-2000:] for p in procs]}")


@pytest.mark.parametrize(
    ("victim", "fault"),
    [(0, signal.SIGKILL), (1, signal.SIGSTOP)],
    ids=["process-0-killed", "process-1-hangs"],
)
def test_a_dead_process_stops_the_other_in_one_line(
    victim: int, fault: signal.Signals, tmp_path: Path
) -> None:
    """Process 0 killed (the coordinator: the other's collectives fail at once), or process 1
    stopped (a lost machine: no connection is reset, so only its missing heartbeats tell, after
    `distributed.timeout`): the survivor ends with one `error:` line, exit status 1, within the
    timeout and a margin for a 2-core machine; the last checkpoint loads in one process, and
    (once) `resume=` on 2 processes continues the run past it."""
    run_dir, timeout = tmp_path / "run", 10
    procs = launch(2, *LONG_ES, *QUIET, f"log.dir={run_dir}", f"distributed.timeout={timeout}")
    wait_for_rows(run_dir, 1, procs)
    worker = child_of(procs[victim])
    os.kill(worker, fault)
    faulted = time.monotonic()
    survivor = finish(procs[1 - victim], limit=timeout + 60)
    stopped_after = time.monotonic() - faulted
    with contextlib.suppress(ProcessLookupError):  # a stopped one; a killed one is gone
        os.kill(worker, signal.SIGKILL)
    finish(procs[victim])
    lines = error_lines(survivor.stderr)
    assert survivor.returncode == 1, survivor.stderr
    assert len(lines) == 1 and lines[0].startswith("error: "), survivor.stderr
    assert "Traceback" not in survivor.stderr and "stack trace" not in survivor.stderr
    assert stopped_after < timeout + 30, stopped_after
    if fault == signal.SIGSTOP:
        assert f"process 1 sent no heartbeat for distributed.timeout={timeout}s" in lines[0]

    jaxrl.load(run_dir)  # the checkpoint kept is complete
    if fault != signal.SIGSTOP:  # one resume is enough (and both would cost a minute here)
        return
    resumed = [finish(p) for p in launch(2, f"resume={run_dir}", *QUIET)]
    assert [r.returncode for r in resumed] == [0, 0], resumed[0].stderr + resumed[1].stderr
    assert resumed[0].stdout.startswith("completed: es")
    assert int(read_evals(run_dir)[-1]["env_steps"]) >= 40000  # the budget of LONG_ES


def joining(coordinator: str = "127.0.0.1:1234", process_id: str = "0") -> tuple[str, ...]:
    """The settings of one process of two."""
    return (
        f"distributed.coordinator={coordinator}",
        "distributed.num_processes=2",
        f"distributed.process_id={process_id}",
    )


def test_a_signal_to_one_process_stops_every_process_at_one_checkpoint(tmp_path: Path) -> None:
    """SIGTERM to process 1 alone: the processes agree after the chunk in flight, checkpoint
    together (a collective) and all exit as SIGTERM says, 143; process 0, which took no signal
    itself, reports it. (Ctrl-C takes the same path with 130.)"""
    run_dir = tmp_path / "run"
    procs = launch(2, *LONG_ES, *QUIET, f"log.dir={run_dir}", "distributed.timeout=10")
    wait_for_rows(run_dir, 1, procs)
    procs[1].send_signal(signal.SIGTERM)  # its supervisor passes it on to the process training
    results = [finish(p, limit=120) for p in procs]
    assert [r.returncode for r in results] == [143, 143], results[0].stderr + results[1].stderr
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "interrupted"
    steps = sorted(int(p.name) for p in (run_dir / "checkpoints").iterdir() if p.name.isdigit())
    assert steps[-1] == summary["iterations"] > 0  # the stop's own checkpoint, complete
    assert "stopped by SIGTERM: checkpoint at iteration" in results[0].stderr
    assert results[1].stdout == ""


# Refused before JAX starts: (id, overrides, start of the one stderr line).
BAD_CONFIG = [
    (
        "process-id-beyond-the-processes",
        joining(process_id="2"),
        "error: distributed.process_id=2 must be from 0 to 1 (distributed.num_processes=2)",
    ),
    (
        "coordinator-without-a-port",
        joining(coordinator="localhost"),
        "error: distributed.coordinator='localhost' is not HOST:PORT",
    ),
    (
        "coordinator-port-out-of-range",
        joining(coordinator="10.0.0.1:70000"),
        "error: distributed.coordinator='10.0.0.1:70000' is not HOST:PORT",
    ),
    (
        "processes-without-a-coordinator",
        ("distributed.num_processes=2",),
        "error: distributed.num_processes needs distributed.coordinator=HOST:PORT (or auto)",
    ),
    (
        "coordinator-without-the-processes",
        ("distributed.coordinator=127.0.0.1:1234",),
        "error: distributed.coordinator=127.0.0.1:1234 needs distributed.num_processes and",
    ),
    (
        "no-run-directory",
        joining(),
        "error: distributed.coordinator=127.0.0.1:1234: a distributed run needs log.dir=",
    ),
    (
        "swept-with-m",
        ("-m", *joining(process_id="0,1")),
        "error: distributed.coordinator=127.0.0.1:1234: distributed.* trains one run across",
    ),
]


@pytest.fixture(scope="module")
def bad_config_results(
    tmp_path_factory: pytest.TempPathFactory,
) -> dict[str, tuple[subprocess.CompletedProcess, Path]]:
    """Every case's CLI run, three at a time (each is mostly Python's start-up)."""

    def run(case: tuple[str, tuple[str, ...], str]) -> tuple[str, tuple[Any, Path]]:
        name, args, _ = case
        cwd = tmp_path_factory.mktemp(name)
        log_dir = () if name == "no-run-directory" else (f"log.dir={cwd / 'run'}",)
        return name, (cli(*args, *log_dir, cwd=cwd, timeout=120), cwd)

    with ThreadPoolExecutor(3) as pool:
        return dict(pool.map(run, BAD_CONFIG))


@pytest.mark.parametrize("case", BAD_CONFIG, ids=[c[0] for c in BAD_CONFIG])
def test_bad_distributed_config_is_one_line_exit_2(
    case: tuple[str, tuple[str, ...], str],
    bad_config_results: dict[str, tuple[subprocess.CompletedProcess, Path]],
) -> None:
    name, _, first = case
    result, cwd = bad_config_results[name]
    lines = error_lines(result.stderr)
    assert result.returncode == 2, result.stderr
    assert len(lines) == 1 and lines[0].startswith(first), result.stderr
    assert not (cwd / "run").exists() and not (cwd / "runs").exists()  # nothing was written


def test_what_cannot_be_split_over_the_processes_is_refused_by_each(tmp_path: Path) -> None:
    """Found once the processes have joined, before anything compiles or is written: an agent
    that trains on one device, a population whose pairs do not split over the processes. Every
    process refuses in the same line, exit status 2."""
    cases = {
        "dqn": (("agent=dqn",), "error: agent 'dqn' trains on one device"),
        "odd-pairs": (
            ("agent.population_size=18",),
            "error: the 9 antithetic pairs of agent.population_size=18 cannot be split evenly "
            "over 2 processes (distributed.num_processes=2)",
        ),
    }

    def run(name: str) -> list[subprocess.CompletedProcess]:
        args, _ = cases[name]
        return [finish(p) for p in launch(2, *args, f"log.dir={tmp_path / name}", *QUIET)]

    with ThreadPoolExecutor(len(cases)) as pool:
        results = dict(zip(cases, pool.map(run, cases), strict=True))
    for name, (_, first) in cases.items():
        for result in results[name]:
            lines = error_lines(result.stderr)
            assert result.returncode == 2, result.stderr
            assert len(lines) == 1 and lines[0].startswith(first), result.stderr
        assert not (tmp_path / name).exists()


def test_processes_on_one_host_share_its_memory(tmp_path: Path) -> None:
    """Each process holds the whole state, so two on this machine need twice its bytes: an ERL
    replay buffer of three quarters of the machine's memory (34 bytes a Pendulum transition:
    obs and next_obs 12 each, action and reward 4 each, the two end flags 1 each) fits one
    process and is refused by both of two, in one line naming each one's share, before
    anything is allocated or written."""
    import jax

    from jaxrl.loop import device_memory_bytes

    limit = device_memory_bytes(jax.devices("cpu")[0])
    assert limit is not None
    buffer_size = int(0.75 * limit / 34)
    run_dir = tmp_path / "run"
    args = (*RUNS["erl"], f"agent.buffer_size={buffer_size}", f"log.dir={run_dir}", *QUIET)
    for result in [finish(p) for p in launch(2, *args)]:
        lines = error_lines(result.stderr)
        assert result.returncode == 2, result.stderr
        assert len(lines) == 1, result.stderr
        assert lines[0].startswith(
            f"error: the state of 1 run(s) needs {34 * buffer_size / 1e9:,.1f} GB, more than the "
            f"{limit // 2 / 1e9:,.1f} GB each of the 2 processes on this host has (its "
            f"{limit / 1e9:,.1f} GB of memory shared); its largest part is "
            "agent_state.buffer.data.obs"
        ), lines[0]
    assert not run_dir.exists()
