"""Brax env throughput on this machine: a uniformly random policy, no learning.

Each row builds `envs.make` for a Brax env and backend, `jit`s one `lax.scan` of `--steps` steps of
the whole batch (`--num-envs` envs, random actions, time limits and auto-reset included) and
reports env steps/s of a second, timed call, the cold compile time (lower + compile, no
persistent cache) and the run time. A `raw Brax` row per env steps Brax's own vmapped env with no
time limit, auto-reset or statistics, to show what our `BraxEnv` layer costs.

    python benchmarks/brax_envs.py [--num-envs 128] [--steps 1000] [--out PATH]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from pathlib import Path

import jax
from common import RESULTS, fmt, machine, markdown_table

import envs
from envs.brax_envs import BraxEnv
from envs.configs import BraxEnvConfig
from jaxrl.env import Env, random_actions

DEFAULT_OUT = RESULTS / "brax_envs.md"
ENVS = ("brax/hopper", "brax/halfcheetah")
BACKENDS = ("generalized", "positional", "spring")


def ours(env: Env, steps: int) -> Callable[[jax.Array], jax.Array]:
    def run(key: jax.Array) -> jax.Array:
        reset_key, loop_key = jax.random.split(key)
        state, _ = env.reset(reset_key)

        def body(state, k):
            action_key, step_key = jax.random.split(k)
            state, ts = env.step(state, random_actions(env.spec, action_key), step_key)
            return state, ts.reward.sum()

        return jax.lax.scan(body, state, jax.random.split(loop_key, steps))[1].sum()

    return run


def raw_brax(env: BraxEnv, steps: int) -> Callable[[jax.Array], jax.Array]:
    brax_env, n = env.env, env.spec.num_envs

    def run(key: jax.Array) -> jax.Array:
        reset_key, loop_key = jax.random.split(key)
        state = jax.vmap(brax_env.reset)(jax.random.split(reset_key, n))

        def body(state, k):
            state = jax.vmap(brax_env.step)(state, random_actions(env.spec, k))
            return state, state.reward.sum()

        return jax.lax.scan(body, state, jax.random.split(loop_key, steps))[1].sum()

    return run


def measure(fn: Callable[[jax.Array], jax.Array], env_steps: int) -> tuple[float, float, float]:
    """(env steps/s, compile s, run s) of one timed call after a warm-up call."""
    t0 = time.perf_counter()
    compiled = jax.jit(fn).lower(jax.random.PRNGKey(0)).compile()
    compile_s = time.perf_counter() - t0
    jax.block_until_ready(compiled(jax.random.PRNGKey(1)))
    t0 = time.perf_counter()
    jax.block_until_ready(compiled(jax.random.PRNGKey(2)))
    run_s = time.perf_counter() - t0
    return env_steps / run_s, compile_s, run_s


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--num-envs", type=int, default=128)
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args()

    header = ["what", "env steps/s", "compile s", "run s", "machine"]
    rows = []
    for env_id in ENVS:
        for backend in BACKENDS:
            env = envs.make(BraxEnvConfig(id=env_id, backend=backend), args.num_envs)
            variants = [("", ours)]
            if backend == "positional":
                variants.append((", raw Brax", raw_brax))
            for suffix, build in variants:
                sps, compile_s, run_s = measure(build(env, args.steps), args.num_envs * args.steps)
                what = f"{env_id} {backend}, {args.num_envs} envs × {args.steps} steps{suffix}"
                row = [what, fmt(sps, 0), f"{compile_s:.1f}", f"{run_s:.2f}", machine(load=True)]
                rows.append(row)
                print(" | ".join(row), flush=True)

    table = markdown_table(header, rows)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(
        "# Brax env throughput, random policy\n\n"
        "`python benchmarks/brax_envs.py` "
        f"(`--num-envs {args.num_envs} --steps {args.steps}`). Compile is cold (no persistent "
        "cache). `raw Brax`: Brax's env vmapped, without our time limit, auto-reset and "
        "statistics.\n\n" + table + "\n"
    )
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
