"""Suite-wide settings.

* The persistent XLA cache is the CLI's own: a run of the same program (resume tests, repeated
  configs, a second suite run) loads its executable instead of compiling. Here it keeps every
  program, not only those that took 0.5 s to compile as in the CLI: the in-process tests run
  thousands of small eager operations and jitted helpers, each compiled afresh in every worker
  and every suite run otherwise, and loading them makes a warm suite's in-process test files
  about a third faster (benchmarks/results/test_suite_time.md).
* XLA:CPU compiles at LLVM optimisation level 1 (`--xla_backend_optimization_level=1`, also in
  the CLI subprocesses the tests start): the suite compiles hundreds of small programs, and
  level 1 cuts their compile time by about a third with the same run time
  (benchmarks/results/learning_tests.md).
* On a GPU, float32 matrix products run at full precision: JAX's default there is TF32 (10-bit
  mantissa) on Ampere and Hopper, and the hand-computed comparisons are float32 to float32.
  XLA:CPU multiplies float32 in float32 whatever the setting, so the CPU programs are unchanged.
* Forms are not chosen by timing (`JAXRL_AUTOTUNE=off`, also in the CLI subprocesses; a value
  already set wins): two forms within timing noise of each other flip from one fresh cache to
  the next, and a learning test must see the same program on every machine of a CPU type. The
  forms' equivalence and the choosing are tested on their own (`xla_cache_dir` switches it on).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import secrets
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

os.environ["XLA_FLAGS"] = " ".join(
    (os.environ.get("XLA_FLAGS", ""), "--xla_backend_optimization_level=1")
).strip()

os.environ.setdefault("JAXRL_AUTOTUNE", "off")

import jax
import pytest
from filelock import FileLock

from jaxrl import parallel
from jaxrl.cli import enable_compilation_cache, resumed_config
from jaxrl.config import RunConfig

# The devices a run of the CLI has: several runs of one program spread over the cores.
parallel.use_cores_as_devices()
enable_compilation_cache(min_compile_seconds=0)
if jax.default_backend() != "cpu":
    jax.config.update("jax_default_matmul_precision", "highest")


# The files whose tests take longest on 2 cores (`--durations=0`, in
# benchmarks/results/test_suite_time.md), first: `--dist loadfile` hands files to the workers in
# collection order, so the workers finish together instead of one running a long file alone at
# the end.
LONGEST_FILES = (
    "tests/jaxrl/test_reliability.py",
    "tests/jaxrl/test_distributed.py",
    "tests/jaxrl/test_cli.py",
    "tests/agents/test_hyar.py",
    "tests/test_notebooks.py",
    "tests/envs/test_ray_pool.py",
    "tests/jaxrl/test_multirun.py",
    "tests/agents/test_erl.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    rank = {path: i for i, path in enumerate(LONGEST_FILES)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::")[0], len(rank)))


@pytest.fixture
def xla_cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """An empty XLA compilation cache directory for one test (where `jaxrl.autotune` keeps its
    plans), with choosing forms by timing switched on; the suite's own cache again afterwards."""
    monkeypatch.setenv("JAXRL_AUTOTUNE", "on")
    before = jax.config.jax_compilation_cache_dir
    jax.config.update("jax_compilation_cache_dir", str(tmp_path))
    yield tmp_path
    jax.config.update("jax_compilation_cache_dir", before)


@dataclasses.dataclass(frozen=True)
class SharedRun:
    """A learning run that tests of several files read: its directory, `summary.json` and
    config (what a `RunResult` says of it that outlives the process that trained it)."""

    run_dir: Path
    summary: dict[str, Any]
    cfg: RunConfig

    @property
    def status(self) -> str:
        return self.summary["status"]


def shared_run(
    name: str, overrides: tuple[str, ...], tmp_path_factory: pytest.TempPathFactory
) -> SharedRun:
    """`overrides` trained once for the whole suite. A session fixture is once per xdist worker,
    and the runs below are wanted by files that the two workers take: the first worker to ask
    trains it under a file lock while the other waits, then reads the same directory (it waits
    for less than it would take to train the same run beside the first)."""
    import jaxrl

    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent  # the basetemp every worker of this session shares
    run_dir = root / name
    with FileLock(f"{run_dir}.lock"):
        if not (run_dir / "summary.json").is_file():
            jaxrl.train(*overrides, run_dir=run_dir)
    summary = json.loads((run_dir / "summary.json").read_text())
    return SharedRun(run_dir, summary, resumed_config(str(run_dir)))


@pytest.fixture(scope="session")
def pendulum_sac_expert(tmp_path_factory: pytest.TempPathFactory) -> SharedRun:
    """The imitation tests' expert (learning.PENDULUM_SAC_EXPERT), which is also test_sac's
    learning run: one training serves both."""
    from learning import PENDULUM_SAC_EXPERT

    return shared_run("sac_expert", PENDULUM_SAC_EXPERT, tmp_path_factory)


@pytest.fixture(scope="session")
def hyar_platform_run(tmp_path_factory: pytest.TempPathFactory) -> SharedRun:
    """HyAR's learning run on Platform (learning.HYAR_PLATFORM), which test_hyar checks and
    notebooks/06_hybrid_actions.ipynb is handed: one training serves both."""
    from learning import HYAR_PLATFORM

    return shared_run("hyar_platform", HYAR_PLATFORM, tmp_path_factory)


@pytest.fixture(scope="session")
def ray_cluster() -> Iterator[str]:
    """A Ray cluster of this machine alone for the `env.pool=ray` tests: its head's
    HOST:PORT. This process joins it as a driver; CLI runs join it by `env.ray.address`. Its
    workers import tests/fixtures (the faulty and hybrid envs), as the CLI subprocesses do."""
    # Ray's token authentication, with a token of this session's own (not ~/.ray's); the CLI
    # subprocesses inherit it. Set before Ray is imported: it reads them once.
    os.environ["RAY_AUTH_MODE"] = "token"
    os.environ["RAY_AUTH_TOKEN"] = secrets.token_hex(32)
    import ray
    from cli_helpers import RAY_TEST_CPUS, pythonpath

    from envs.configs import RayConfig
    from envs.ray_pool import connect

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    address = f"127.0.0.1:{port}"
    head = subprocess.Popen(
        [
            str(Path(sys.executable).with_name("ray")),
            "start",
            "--head",
            "--block",
            f"--port={port}",
            "--node-ip-address=127.0.0.1",
            f"--num-cpus={RAY_TEST_CPUS}",
            "--include-dashboard=false",
            "--disable-usage-stats",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "PYTHONPATH": pythonpath()},
    )
    try:
        deadline = time.monotonic() + 120
        while True:
            assert head.poll() is None, f"`ray start --head` exited with {head.returncode}"
            assert time.monotonic() < deadline, "the Ray head did not listen within 120 s"
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 1):
                break
            time.sleep(0.5)
        connect(RayConfig(address=address), timeout=120)
        yield address
    finally:
        ray.shutdown()
        head.terminate()  # `ray start --block` ends the processes it started
        head.wait(60)
