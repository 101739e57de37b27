"""Atari env throughput with a random policy, from ALE's own vector env up to the compiled bridge.

Breakout (`ALE/Breakout-v5`, default `AtariConfig`: 84×84×4 grey, frame skip 4, sticky actions
0.25), `--num-envs` games, ALE's worker threads automatic unless `--threads`. Rows:

* `ALE AtariVectorEnv, Python loop`: ale_py's vector env alone, same-step reset, raw rewards; the
  floor under everything else.
* `AtariPool, Python loop`: our pool (envs/atari.py) stepped from numpy: adds the Python-side
  clipping, episodic life, time limit, statistics and the [H, W, C] transpose.
* `bridge, lax.scan`: `envs.make` of the same config (a `HostEnv`), a jitted `lax.scan` of
  `env.step` on random actions drawn in JAX: one host call per step, as training loops run it.
* `bridge, vmap over 2 seeds`: the same scan `vmap`-ed over two keys: each step is ONE host call
  that steps both pools (2 × `--num-envs` games).

Each row times `--steps` steps after a warm-up; the bridge rows reset outside the timed call
(seeded resets reload the ROMs) and report the compile time of the scan.

    python benchmarks/atari_bridge.py [--num-envs 8] [--steps 2000] [--threads 0] [--out PATH]
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable
from pathlib import Path

import jax
import numpy as np
from common import RESULTS, fmt, load_note, machine, markdown_table

import envs
from envs.atari import AtariConfig, AtariPool, vector_env
from envs.host import host_errors
from jaxrl.env import Env, random_actions
from jaxrl.prng import make_key

DEFAULT_OUT = RESULTS / "atari_bridge.md"
WARMUP_STEPS = 50


def python_loop(step: Callable[[np.ndarray], object], num_envs: int, steps: int) -> float:
    """Seconds for `steps` calls of `step` on random Breakout actions, after a warm-up."""
    actions = np.random.default_rng(0).integers(0, 4, (WARMUP_STEPS + steps, num_envs))
    for a in actions[:WARMUP_STEPS]:
        step(a.astype(np.int32))
    t0 = time.perf_counter()
    for a in actions[WARMUP_STEPS:]:
        step(a.astype(np.int32))
    return time.perf_counter() - t0


def raw_ale(cfg: AtariConfig, num_envs: int, steps: int) -> float:
    env = vector_env(cfg, num_envs)
    env.reset(seed=0)
    try:
        return python_loop(env.step, num_envs, steps)
    finally:
        env.close()


def atari_pool(cfg: AtariConfig, num_envs: int, steps: int) -> float:
    pool = AtariPool(cfg, num_envs)
    pool.reset(0)
    try:
        return python_loop(pool.step, num_envs, steps)
    finally:
        pool.close()


def bridge(env: Env, steps: int, seeds: int) -> tuple[float, float]:
    """(compile s, run s) of a jitted scan of `steps` env steps, vmapped over `seeds` keys."""

    def run(state: jax.Array, key: jax.Array) -> tuple[jax.Array, jax.Array]:
        def body(state, k):
            action_key, step_key = jax.random.split(k)
            state, ts = env.step(state, random_actions(env.spec, action_key), step_key)
            return state, ts.reward.sum()

        state, rewards = jax.lax.scan(body, state, jax.random.split(key, steps))
        return state, rewards.sum()

    keys = jax.vmap(make_key)(np.arange(seeds))
    reset = jax.jit(jax.vmap(lambda k: env.reset(k)[0]))
    scan = jax.vmap(run)
    with host_errors():
        state = jax.block_until_ready(reset(keys))
        t0 = time.perf_counter()
        compiled = jax.jit(scan).lower(state, keys).compile()
        compile_s = time.perf_counter() - t0
        state, _ = jax.block_until_ready(compiled(state, jax.vmap(make_key)(np.arange(seeds) + 10)))
        t0 = time.perf_counter()
        jax.block_until_ready(compiled(state, jax.vmap(make_key)(np.arange(seeds) + 20)))
        run_s = time.perf_counter() - t0
    return compile_s, run_s


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--num-envs", type=int, default=8)
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--threads", type=int, default=0, help="ALE worker threads; 0: automatic")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args()
    cfg = AtariConfig(id="ALE/Breakout-v5", threads=args.threads)
    n, steps = args.num_envs, args.steps
    load_before = os.getloadavg()[0]

    header = ["what", "env steps/s", "compile s", "run s", "machine"]
    rows = []

    def add(what: str, env_steps: int, compile_s: float | None, run_s: float) -> None:
        compile_text = "—" if compile_s is None else f"{compile_s:.1f}"
        row = [what, fmt(env_steps / run_s, 0), compile_text, f"{run_s:.2f}", machine(load=True)]
        rows.append(row)
        print(" | ".join(row), flush=True)

    what = f"Breakout, {n} envs × {steps} steps"
    add(f"{what}, ALE AtariVectorEnv, Python loop", n * steps, None, raw_ale(cfg, n, steps))
    add(f"{what}, AtariPool, Python loop", n * steps, None, atari_pool(cfg, n, steps))
    env = envs.make(cfg, n)
    for seeds, label in ((1, "bridge, lax.scan"), (2, "bridge, vmap over 2 seeds")):
        compile_s, run_s = bridge(env, steps, seeds)
        add(f"{what}, {label}", seeds * n * steps, compile_s, run_s)
    env.close()

    table = markdown_table(header, rows)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(
        "# Atari env throughput, random policy\n\n"
        f"`python benchmarks/atari_bridge.py` (`--num-envs {n} --steps {steps} "
        f"--threads {args.threads}`); see the script's docstring for the rows. "
        + load_note(load_before, os.getloadavg()[0])
        + "\n\n"
        + table
        + "\n"
    )
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
