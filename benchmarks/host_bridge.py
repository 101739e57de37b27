"""The host bridge's cost: a random policy on Gymnasium's CartPole-v1 through `envs.host.HostEnv`
(a jitted `lax.scan` of `env.step`, one host call per step) against the same Gymnasium envs
stepped from a plain Python loop, at 1, 8 and 64 envs (sync pools); and the cost of one host
call by callback kind (`buffer_callback` vs `io_callback`), which chose the bridge's callback,
and of the bridge's whole step over a pool that does no work (`InstantPool`), with a constant
action or the random policy's kernels in the loop.

Rows: `plain loop` is `SyncVectorEnv.step` (same-step auto-reset) with numpy random actions, the
reference of the ratio column; `pool loop` is our `GymnasiumPool.step` from Python (dense final
observations and episode statistics on top); `bridge` is the compiled scan, lowered as the
training loop lowers programs of host envs (`speedups.unrolled_threefry`). The bridge runs
again in a process started with XLA's concurrency-optimised scheduler off (`SCHEDULER_OFF` in
XLA_FLAGS): with it on (XLA's default) the loop body's independent kernels are handed to
XLA:CPU's thread pool, and each hand-off costs more than a small env step. The flag is process-
wide (a per-compilation option leaves it without effect), and it slows compute-bound programs,
so the last table runs PPO on CartPole-v1 (PureJaxRL's config, no host env) through the CLI with
and without it, interleaved. Each bridge figure is the best of `--repeats` timed runs after a
warm-up. The results file is written only when the 1-minute load average is below 1.5 (timings
on a shared machine say little).

    python benchmarks/host_bridge.py [--steps 32000] [--repeats 3] [--ppo-pairs 3] [--out PATH]
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import gymnasium
import jax
import jax.numpy as jnp
import numpy as np
from common import (
    PUREJAXRL_PPO_CARTPOLE,
    PUREJAXRL_SETTINGS,
    RESULTS,
    finished_cli_run,
    fmt,
    last_json,
    load_note,
    machine,
    markdown_table,
    median_range,
    repo_env,
    run_process,
    write_report_if_quiet,
)
from gymnasium.vector import AutoresetMode, SyncVectorEnv
from jax.experimental import io_callback
from jax.experimental.buffer_callback import buffer_callback

import envs
from envs.configs import HostEnvConfig
from envs.gym_pool import GymnasiumPool
from envs.host import HostEnv, HostStep
from jaxrl import speedups
from jaxrl.env import random_actions
from jaxrl.prng import make_key

DEFAULT_OUT = RESULTS / "host_bridge.md"
NUM_ENVS = (1, 8, 64)
QUIET_LOAD = 1.5
CALLBACK_CALLS = 5000
INSTANT_ENVS = 8
SCHEDULER_OFF = "--xla_cpu_enable_concurrency_optimized_scheduler=false"
PPO_CARTPOLE = [
    *PUREJAXRL_PPO_CARTPOLE,
    *PUREJAXRL_SETTINGS,
    "budget.env_steps=499712",
    "log.progress=false",
    "log.tensorboard=false",
]


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


class InstantPool:
    """A CartPole-shaped pool whose step returns at once: the bridge's cost without an env's."""

    def __init__(self, num_envs: int) -> None:
        self.num_envs = num_envs
        obs, zeros = np.zeros((num_envs, 4), np.float32), np.zeros(num_envs, np.float32)
        flags, lengths = np.zeros(num_envs, bool), np.zeros(num_envs, np.int32)
        self.result = HostStep(obs, zeros, flags, flags, obs, zeros, lengths, flags)

    def reset(self, seed: int, env_offset: int = 0) -> np.ndarray:
        return self.result.obs

    def step(self, actions: np.ndarray) -> HostStep:
        return self.result

    def close(self) -> None:
        pass


def scan_seconds(
    env: HostEnv, steps: int, repeats: int, policy: Callable[[jax.Array], jax.Array]
) -> tuple[float, float]:
    """(compile s, best run s) of a jitted scan of `steps` steps of `env` with `policy(key)`."""

    def rollout(key: jax.Array) -> jax.Array:
        state, _ = env.reset(key)

        def body(state: jax.Array, k: jax.Array) -> tuple[jax.Array, jax.Array]:
            state, ts = env.step(state, policy(k), k)
            return state, ts.reward.sum()

        return jax.lax.scan(body, state, jax.random.split(key, steps))[1].sum()

    t0 = time.perf_counter()
    with speedups.unrolled_threefry():  # as the training loop lowers programs of host envs
        compiled = jax.jit(rollout).lower(make_key(0)).compile()
    compile_s = time.perf_counter() - t0
    seconds = best_time(lambda: jax.block_until_ready(compiled(make_key(1))), repeats)
    return compile_s, seconds


def bridge(num_envs: int, steps: int, repeats: int) -> tuple[float, float]:
    """(compile s, best run s) of a jitted scan of `steps` random steps through the bridge."""
    env = envs.make(HostEnvConfig(id="gym/CartPole-v1"), num_envs)
    result = scan_seconds(env, steps, repeats, functools.partial(random_actions, env.spec))
    env.close()
    return result


def instant_step_micros(num_envs: int, repeats: int, random_policy: bool) -> float:
    """µs per step of the bridge over an `InstantPool`, with the random policy's kernels in the
    loop or a constant action."""
    env = HostEnv(
        envs.make(HostEnvConfig(id="gym/CartPole-v1"), num_envs).spec,
        lambda n, seed: InstantPool(n),
    )
    if random_policy:
        policy = functools.partial(random_actions, env.spec)
    else:
        policy = lambda k: jnp.zeros(num_envs, jnp.int32)
    _, seconds = scan_seconds(env, CALLBACK_CALLS, repeats, policy)
    env.close()
    return seconds / CALLBACK_CALLS * 1e6


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


def with_xla_flags(flags: str) -> dict[str, str]:
    """This process's environment (repository first on the path) with `flags` added to
    XLA_FLAGS."""
    return repo_env(XLA_FLAGS=f"{os.environ.get('XLA_FLAGS', '')} {flags}".strip())


def bridge_in_process(
    num_envs: int, steps: int, repeats: int, xla_flags: str
) -> tuple[float, float]:
    """`bridge` in a fresh process started with `xla_flags` (read once, at XLA's start)."""
    cmd = [sys.executable, __file__, "--bridge-worker", str(num_envs), str(steps), str(repeats)]
    stdout, _ = run_process("bridge worker", cmd, env=with_xla_flags(xla_flags))
    result = last_json(stdout)
    return result["compile_s"], result["seconds"]


def ppo_run_seconds(xla_flags: str, cache: Path, run_dir: Path) -> float:
    """Run seconds (compile excluded) of PPO CartPole-v1 through the CLI in a process with
    `xla_flags`."""
    env = with_xla_flags(xla_flags)
    env["JAXRL_CACHE_DIR"] = str(cache)  # one per flag setting: compiled once each
    cmd = [*PPO_CARTPOLE, f"log.dir={run_dir}"]
    return finished_cli_run("PPO CartPole", cmd, run_dir, env)["run_seconds"]


def ppo_with_and_without(pairs: int) -> list[list[str]]:
    """Rows of PPO CartPole run seconds, XLA's default against `SCHEDULER_OFF`, interleaved."""
    seconds: dict[str, list[float]] = {"": [], SCHEDULER_OFF: []}
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(pairs):
            order = list(seconds) if i % 2 == 0 else list(seconds)[::-1]
            for flags in order:
                tag = "off" if flags else "default"
                run_dir = Path(tmp, f"run{i}-{tag}")
                seconds[flags].append(ppo_run_seconds(flags, Path(tmp, f"cache-{tag}"), run_dir))
    default = statistics.median(seconds[""])
    return [
        [
            f"PPO CartPole-v1 500k, {'XLA default' if not flags else 'XLA_FLAGS=' + flags}",
            median_range(runs),
            f"{statistics.median(runs) / default:.2f}",
        ]
        for flags, runs in seconds.items()
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=32000, help="env steps per timed run")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--ppo-pairs", type=int, default=3)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--bridge-worker", type=int, nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.bridge_worker:  # one bridge figure in this process, as JSON
        compile_s, seconds = bridge(*args.bridge_worker)
        print(json.dumps({"compile_s": compile_s, "seconds": seconds}))
        return

    load_before = os.getloadavg()[0]
    where = machine()
    rows = []
    for n in NUM_ENVS:
        steps = max(args.steps // n, 100)
        env_steps = steps * n
        plain_s = plain_loop(n, steps, args.repeats)
        pool_s = pool_loop(n, steps, args.repeats)
        compile_s, bridge_s = bridge(n, steps, args.repeats)
        off_compile_s, off_s = bridge_in_process(n, steps, args.repeats, SCHEDULER_OFF)
        for what, seconds, compiled in (
            ("plain loop (SyncVectorEnv.step)", plain_s, None),
            ("pool loop (GymnasiumPool.step)", pool_s, None),
            ("bridge (jit scan of HostEnv.step)", bridge_s, compile_s),
            (f"bridge, XLA_FLAGS={SCHEDULER_OFF}", off_s, off_compile_s),
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
    for random_policy in (False, True):
        kind = f"bridge step, {INSTANT_ENVS} envs of a pool that returns at once, " + (
            "random policy" if random_policy else "constant action"
        )
        micros = instant_step_micros(INSTANT_ENVS, args.repeats, random_policy)
        callback_rows.append([kind, f"{micros:.1f}", where])
        print(f"{kind}: {micros:.1f} µs per call", flush=True)
    ppo_rows = ppo_with_and_without(args.ppo_pairs)
    for row in ppo_rows:
        print(" | ".join(row), flush=True)
    load_after = os.getloadavg()[0]

    text = (
        "# Host bridge overhead, CartPole-v1, random policy\n\n"
        f"`python benchmarks/host_bridge.py --steps {args.steps} --repeats {args.repeats} "
        f"--ppo-pairs {args.ppo_pairs}`. "
        "Ratio: env steps/s over the plain loop's at the same env count (the bridge aims for "
        "≥ 0.95 at 8 and 64 envs). Compile is cold (programs with host callbacks are not in JAX's "
        "persistent cache).\n\n"
        + markdown_table(["what", "env steps/s", "ratio", "compile s", "run s", "machine"], rows)
        + f"\n\nOne host call inside a jitted `lax.scan` of {CALLBACK_CALLS} calls (int32 in, "
        "int32 out), and the bridge's whole step over a pool that does no work:\n\n"
        + markdown_table(["callback", "µs per call", "machine"], callback_rows)
        + f"\n\nWhat the scheduler flag costs a compute-bound program ({where}; "
        f"{args.ppo_pairs} runs each, interleaved, medians with min-max; run s leaves the compile "
        "out):\n\n"
        + markdown_table(["what", "run s", "over XLA's default"], ppo_rows)
        + f"\n\n{load_note(load_before, load_after)}\n"
    )
    write_report_if_quiet(text, args.out, max(load_before, load_after), QUIET_LOAD)


if __name__ == "__main__":
    main()
