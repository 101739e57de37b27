"""Running the CLI as a user does, for the tests: `python -m jaxrl.run` in a subprocess, with the
repository and tests/fixtures (custom Gymnasium envs) importable."""

from __future__ import annotations

import csv
import json
import os
import struct
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "tests" / "fixtures"
TINY_ES = ("agent.population_size=8", "agent.episodes_per_member=1", "agent.hidden_sizes=[8]")
# PPO iterations of 4 envs x 32 steps = 128 env steps, about 0.1 s each on a 2-core CPU.
QUICK_PPO = ("agent=ppo", "agent.num_steps=32", "agent.num_minibatches=2")
RAY_TEST_CPUS = 4  # logical CPUs of conftest's Ray cluster (tests place actors past them)


def cli(
    *args: str,
    cwd: Path | None = None,
    timeout: float = 300,
    preexec_fn: Callable[[], None] | None = None,
    extra_env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": pythonpath(), **(extra_env or {})}
    return subprocess.run(
        [sys.executable, "-m", "jaxrl.run", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd,
        env=env,
        preexec_fn=preexec_fn,
    )


def start(*args: str) -> subprocess.Popen:
    """A run in the background, stderr captured."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": pythonpath()}
    return subprocess.Popen(
        [sys.executable, "-m", "jaxrl.run", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def pythonpath() -> str:
    """The repository and tests/fixtures first, as the CLI subprocesses and Ray workers see them."""
    return os.pathsep.join([str(REPO), str(FIXTURES), os.environ.get("PYTHONPATH", "")])


def wait_for_evals(run_dir: Path, rows: int, proc: subprocess.Popen, limit: float = 240) -> None:
    """Until the run has logged `rows` evaluations (so it is training, past compilation)."""
    evals = run_dir / "evals.csv"
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline and proc.poll() is None:
        if evals.exists() and len(evals.read_text().splitlines()) > rows:
            return
        time.sleep(0.05)
    raise AssertionError(f"no {rows} evaluations in {limit} s: {proc.poll()}")


def read_evals(run_dir: Path) -> list[dict[str, str]]:
    with open(run_dir / "evals.csv", newline="") as f:
        return list(csv.DictReader(f))


def error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.strip()]


def script_result(script: str, devices: int, timeout: float = 240) -> dict:
    """The JSON that `script` prints after `RESULT ` when run by a Python of its own with
    `devices` forced CPU devices (XLA reads the count at start-up: one process per count)."""
    forced = f"--xla_force_host_platform_device_count={devices}"
    # JAX_PLATFORMS=cpu: the forced host devices are CPU devices, also on a machine with a GPU.
    env = {
        **os.environ,
        "XLA_FLAGS": f"{os.environ.get('XLA_FLAGS', '')} {forced}",
        "JAX_PLATFORMS": "cpu",
    }
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=timeout, env=env
    )
    assert result.returncode == 0, result.stderr[-3000:]
    line = next(x for x in result.stdout.splitlines() if x.startswith("RESULT "))
    return json.loads(line.removeprefix("RESULT "))


def tensorboard_events(path: Path) -> list[bytes]:
    """The serialized Event records of a TensorBoard file (TFRecord: length, crc, data, crc)."""
    data, records, offset = path.read_bytes(), [], 0
    while offset + 12 <= len(data):
        (length,) = struct.unpack("<Q", data[offset : offset + 8])
        records.append(data[offset + 12 : offset + 12 + length])
        offset += 12 + length + 4
    return records
