"""The host bridge's cost: a random policy on Gymnasium's CartPole-v1 through `envs.host.HostEnv`
(a jitted `lax.scan` of `env.step`, one host call per step) against the same Gymnasium vector env
stepped from a plain Python loop, at 1, 8 and 64 envs (sync pools); and the cost of one host
call by callback kind (`buffer_callback` vs `io_callback`), which chose the bridge's callback.

Rows: `plain loop` is `SyncVectorEnv.step` (same-step auto-reset) with numpy random actions, the
reference of the ratio column; `pool loop` is our `GymnasiumPool.step` from Python (dense final
observations and episode statistics on top); `bridge` is the compiled scan. Each figure is the
best of `--repeats` timed runs after a warm-up. The results file is written only when the
1-minute load average is below 1.5 (timings on a shared machine say little).

    python benchmarks/host_bridge.py [--steps 32000] [--repeats 3] [--out PATH]
"""

from __future__ import annotations

import argparse
import functools
import os
import time
from collections.abc import Callable
from pathlib import Path

import gymnasium
import jax
import jax.numpy as jnp
import numpy as np
from common import RESULTS, fmt, load_note, machine, markdown_table, write_report_if_quiet
from gymnasium.vector import AutoresetMode, SyncVectorEnv
from jax.experimental import io_callback
from jax.experimental.buffer_callback import buffer_callback

import envs
from envs.gym_pool import GymnasiumPool
from envs.host import HostEnvConfig
from jaxrl.env import random_actions
from jaxrl.prng import make_key

DEFAULT_OUT = RESULTS / "host_bridge.md"
NUM_ENVS = (1, 8, 64)
QUIET_LOAD = 1.5
CALLBACK_CALLS = 5000


def best_time(fn: Callable[[], object], repeats: int) -> float:
    """Seconds of the fastest of `repeats` calls of `fn` (after one warm-up call)."""
    fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def plain_loop(num_envs: int, steps: int, repeats: int) -> float:
    make = functools.partial(gymnasium.make, "CartPole-v1")
    vec = SyncVectorEnv([make] * num_envs, autoreset_mode=AutoresetMode.SAME_STEP)
    vec.reset(seed=0)
    rng = np.random.default_rng(0)

    def run() -> None:
        for _ in range(steps):
            vec.step(rng.integers(0, 2, num_envs))

    seconds = best_time(run, repeats)
    vec.close()
    return seconds


def pool_loop(num_envs: int, steps: int, repeats: int) -> float:
    pool = GymnasiumPool([functools.partial(gymnasium.make, "CartPole-v1")] * num_envs, "sync")
    pool.reset(0)
    rng = np.random.default_rng(0)

    def run() -> None:
        for _ in range(steps):
            pool.step(rng.integers(0, 2, num_envs))

    seconds = best_time(run, repeats)
    pool.close()
    return seconds


def bridge(num_envs: int, steps: int, repeats: int) -> tuple[float, float]:
    """(compile s, best run s) of a jitted scan of `steps` random steps through the bridge."""
    env = envs.make(HostEnvConfig(id="gym/CartPole-v1"), num_envs)

    def rollout(key: jax.Array) -> jax.Array:
        state, _ = env.reset(key)

        def body(state: jax.Array, k: jax.Array) -> tuple[jax.Array, jax.Array]:
            state, ts = env.step(state, random_actions(env.spec, k), k)
            return state, ts.reward.sum()

        return jax.lax.scan(body, state, jax.random.split(key, steps))[1].sum()

    t0 = time.perf_counter()
    compiled = jax.jit(rollout).lower(make_key(0)).compile()
    compile_s = time.perf_counter() - t0
    seconds = best_time(lambda: jax.block_until_ready(compiled(make_key(1))), repeats)
    env.close()
    return compile_s, seconds


def callback_cost(kind: str, repeats: int) -> float:
    """µs per call of a scan of trivial host calls (an int32 in, the same plus one out)."""
    shape = jax.ShapeDtypeStruct((), jnp.int32)

    def add_one(x: np.ndarray) -> np.ndarray:
        return np.asarray(x + 1, np.int32)

    def write(ctx: object, out: object, x: object) -> None:
        np.asarray(out)[...] = np.asarray(x) + 1

    calls = {
        "buffer_callback (has_side_effect)": buffer_callback(write, shape, has_side_effect=True),
        "io_callback (unordered)": lambda x: io_callback(add_one, shape, x, ordered=False),
        "io_callback (ordered)": lambda x: io_callback(add_one, shape, x, ordered=True),
    }
    call = calls[kind]
    loop = jax.jit(
        lambda x: jax.lax.scan(lambda c, _: (call(c), None), x, None, length=CALLBACK_CALLS)[0]
    )
    seconds = best_time(lambda: jax.block_until_ready(loop(jnp.int32(0))), repeats)
    return seconds / CALLBACK_CALLS * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=32000, help="env steps per timed run")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args()

    load_before = os.getloadavg()[0]
    where = machine()
    rows = []
    for n in NUM_ENVS:
        steps = max(args.steps // n, 100)
        env_steps = steps * n
        plain_s = plain_loop(n, steps, args.repeats)
        pool_s = pool_loop(n, steps, args.repeats)
        compile_s, bridge_s = bridge(n, steps, args.repeats)
        for what, seconds, compiled in (
            ("plain loop (SyncVectorEnv.step)", plain_s, None),
            ("pool loop (GymnasiumPool.step)", pool_s, None),
            ("bridge (jit scan of HostEnv.step)", bridge_s, compile_s),
        ):
            row = [
                f"CartPole-v1, {n} envs × {steps} steps, {what}",
                fmt(env_steps / seconds, 0),
                f"{plain_s / seconds:.2f}",
                "—" if compiled is None else f"{compiled:.2f}",
                f"{seconds:.3f}",
                where,
            ]
            rows.append(row)
            print(" | ".join(row), flush=True)

    callback_rows = []
    for kind in (
        "buffer_callback (has_side_effect)",
        "io_callback (unordered)",
        "io_callback (ordered)",
    ):
        micros = callback_cost(kind, args.repeats)
        callback_rows.append([kind, f"{micros:.1f}", where])
        print(f"{kind}: {micros:.1f} µs per call", flush=True)
    load_after = os.getloadavg()[0]

    text = (
        "# Host bridge overhead, CartPole-v1, random policy\n\n"
        f"`python benchmarks/host_bridge.py --steps {args.steps} --repeats {args.repeats}`. "
        "Ratio: env steps/s over the plain loop's at the same env count (the bridge aims for "
        "≥ 0.9 at 64 envs). Compile is cold (programs with host callbacks are not in JAX's "
        "persistent cache).\n\n"
        + markdown_table(["what", "env steps/s", "ratio", "compile s", "run s", "machine"], rows)
        + f"\n\nOne host call inside a jitted `lax.scan` of {CALLBACK_CALLS} calls (int32 in, "
        "int32 out):\n\n"
        + markdown_table(["callback", "µs per call", "machine"], callback_rows)
        + f"\n\n{load_note(load_before, load_after)}\n"
    )
    write_report_if_quiet(text, args.out, max(load_before, load_after), QUIET_LOAD)


if __name__ == "__main__":
    main()
