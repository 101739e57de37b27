"""Host env pools side by side: `env.pool=sync`, `async` and `ray` (envs/ray_pool.py) stepping
CartPole-v1, Breakout (ALE) and PyBullet's RaceCar at 8, 32 and 64 envs with random actions.

Each cell is one pool's `step` called from Python (the bridge adds the same per-step cost to
every pool: benchmarks/results/host_bridge.md): env steps/s of the best of `--repeats` timed runs
after a warm-up, and the seconds from creating the pool to its first observations. The Ray pool
runs on a local cluster started here, with `--workers` actors (default: one per core); the async
pool has one process per env; ALE's sync pool steps its games on ALE's threads, and ALE has no
async pool. Then ES on `bullet/RaceCar-v0` through the CLI with each pool (the original
race-car experiment's setting, scaled down: `ES_RACECAR` below), in generations per minute of run
time. The results file is written only when the 1-minute load average was below 1.5 at the start.

    python benchmarks/ray_pool.py [--workers 2] [--repeats 2] [--out PATH]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import secrets
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from common import RESULTS, fmt, load_note, machine, markdown_table, write_report_if_quiet

import envs
from envs.configs import AtariConfig, HostEnvConfig, HostPoolConfig, RayConfig
from envs.ray_pool import connect

DEFAULT_OUT = RESULTS / "ray_pool.md"
# The original: population 64, 5 episodes each, up to 2,000 steps; here a population whose
# per-member pools still number a few dozen (the async pool starts a process per env).
ES_RACECAR = (
    "agent=es",
    "env=bullet/RaceCar-v0",
    "agent.population_size=16",
    "agent.episodes_per_member=2",
    "env.max_episode_steps=200",
    "budget.env_steps=40000",
    "eval.episodes=2",
    "log.progress=false",
    "log.tensorboard=false",
)
NUM_ENVS = (8, 32, 64)
QUIET_LOAD = 1.5
# Env steps per timed run: a few seconds each on a 2-core CPU.
ENVS: dict[str, tuple[HostPoolConfig, int]] = {
    "CartPole-v1": (HostEnvConfig(id="gym/CartPole-v1"), 32_000),
    "Breakout": (AtariConfig(id="ALE/Breakout-v5"), 4_000),
    "bullet/RaceCar-v0": (HostEnvConfig(id="bullet/RaceCar-v0"), 4_000),
}


def measure(
    cfg: HostPoolConfig, num_envs: int, env_steps: int, repeats: int
) -> tuple[float, float]:
    """(env steps/s of the best timed run, seconds from creating the pool to its first obs)."""
    env = envs.make(cfg, num_envs)
    t0 = time.perf_counter()
    pool = env.make_pool(num_envs, 0)
    pool.reset(0)
    start_s = time.perf_counter() - t0
    space = env.spec.action_space
    rng = np.random.default_rng(0)
    steps = max(env_steps // num_envs, 20)

    def actions() -> np.ndarray:
        if hasattr(space, "n"):
            return rng.integers(0, space.n, num_envs).astype(np.int32)
        return rng.uniform(space.low, space.high, (num_envs, *space.shape)).astype(np.float32)

    best = float("inf")
    for _ in range(repeats + 1):  # the first is the warm-up
        t0 = time.perf_counter()
        for _ in range(steps):
            pool.step(actions())
        best = min(best, time.perf_counter() - t0)
    pool.close()
    return steps * num_envs / best, start_s


def es_racecar(pool: str, ray_cfg: RayConfig, run_dir: Path) -> dict[str, float]:
    """Generations per minute of run time and compile seconds of `ES_RACECAR` on `pool`."""
    subprocess.run(
        [
            sys.executable,
            "-m",
            "jaxrl.run",
            *ES_RACECAR,
            f"env.pool={pool}",
            f"env.ray.num_workers={ray_cfg.num_workers}",
            f"env.ray.address={ray_cfg.address}",
            f"log.dir={run_dir}",
        ],
        check=True,
        capture_output=True,
    )
    summary = json.loads((run_dir / "summary.json").read_text())
    return {
        "generations": summary["iterations"],
        "per_minute": 60 * summary["iterations"] / summary["run_seconds"],
        "compile_s": summary["compile_seconds"],
        "final": summary["final_eval_return"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 2, help="Ray actors")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args()

    # A local cluster of this run's own, with a token of its own that the CLI runs inherit.
    os.environ["RAY_AUTH_MODE"] = "token"
    os.environ["RAY_AUTH_TOKEN"] = secrets.token_hex(32)
    connect(RayConfig(address="local"), timeout=120)
    import ray

    ray_cfg = RayConfig(address=ray.get_runtime_context().gcs_address, num_workers=args.workers)
    load_before = os.getloadavg()[0]
    where = machine()
    rows = []
    for name, (base, env_steps) in ENVS.items():
        for n in NUM_ENVS:
            rates: dict[str, float] = {}
            for pool in base.pool_modes():
                cfg = dataclasses.replace(base, pool=pool, ray=ray_cfg)
                rate, start_s = measure(cfg, n, env_steps, args.repeats)
                rates[pool] = rate
                row = [name, str(n), pool, fmt(rate, 0), f"{start_s:.1f}"]
                print(" | ".join(row), flush=True)
                rows.append(row)
            for row in rows[-len(rates) :]:
                row.append(f"{rates[row[2]] / rates['sync']:.2f}")
                row.append(where)
    es_rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for pool in ("sync", "async", "ray"):
            es = es_racecar(pool, ray_cfg, Path(tmp) / pool)
            row = [
                pool,
                str(es["generations"]),
                f"{es['per_minute']:.1f}",
                f"{es['compile_s']:.1f}",
                fmt(es["final"]),
                where,
            ]
            print(" | ".join(row), flush=True)
            es_rows.append(row)
    load_after = os.getloadavg()[0]

    text = (
        "# Host env pools: sync, async and Ray, random actions\n\n"
        f"`python benchmarks/ray_pool.py --workers {args.workers} --repeats {args.repeats}`. "
        "One pool's `step` called from Python; env steps/s of the best timed run; start: seconds "
        "from creating the pool to its first observations (Ray: on a running local cluster; "
        f"its {args.workers} actors import jaxrl's env modules); × sync: env steps/s over the "
        "sync pool's at the same env count.\n\n"
        + markdown_table(
            ["env", "envs", "pool", "env steps/s", "start s", "× sync", "machine"], rows
        )
        + "\n\nES on the race car, `python -m jaxrl.run "
        + " ".join(ES_RACECAR)
        + " env.pool=<pool>` (one pool per member of 2 envs: 16 pools in one host call per "
        "step):\n\n"
        + markdown_table(
            ["pool", "generations", "generations/min", "compile s", "final return", "machine"],
            es_rows,
        )
        + f"\n\n{load_note(load_before, load_after)}\n"
    )
    # Its own workers load the machine (64 async processes, the Ray actors): only the load
    # before it started says whether the machine was shared.
    write_report_if_quiet(text, args.out, load_before, QUIET_LOAD)


if __name__ == "__main__":
    main()
