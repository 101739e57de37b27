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
* `EnvPool, Python loop` and `EnvPool XLA, lax.fori_loop` (only where `envpool` imports: a peer,
  not a dependency): EnvPool's Atari (github.com/sail-sg/envpool, whose C++ pool ALE's vector
  env descends from) with the same preprocessing, stepped from numpy, and through its XLA
  interface (`env.xla()`: send/recv as FFI custom calls) in a jitted loop on random actions drawn
  in JAX, the established way to call host envs from a compiled JAX program. Its auto-reset is
  the next step's (that step's action is ignored), which the compiled `Env` cannot use: agents
  need the same step's reset and the ended episode's last observation.

The jitted rows (bridge and EnvPool XLA) lower JAX's threefry hash unrolled, as the training
loop lowers programs of host envs (`speedups.unrolled_threefry`). Each row times `--steps` steps
after a warm-up; the bridge rows reset outside the timed call
(seeded resets reload the ROMs) and report the compile time of the scan. The rows run
`--repeats` times in rotation (each env built once), and each cell is the median run.

    python benchmarks/atari_bridge.py [--num-envs 8] [--steps 2000] [--threads 0] [--repeats 3]
                                      [--out PATH]
"""

from __future__ import annotations

import argparse
import importlib.util
import itertools
import os
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax
import numpy as np
from common import RESULTS, fmt, load_note, machine, markdown_table

import envs
from envs.atari import AtariPool, vector_env
from envs.configs import AtariConfig
from envs.host import host_errors
from jaxrl import speedups
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


def envpool_env(cfg: AtariConfig, num_envs: int) -> Any:
    """EnvPool's synchronous Atari pool with `cfg`'s preprocessing and raw rewards."""
    import envpool

    return envpool.make(
        cfg.id.removeprefix("ALE/"),
        env_type="gymnasium",
        num_envs=num_envs,
        batch_size=num_envs,
        num_threads=cfg.threads,
        seed=0,
        max_episode_steps=cfg.episode_steps,
        stack_num=cfg.frame_stack,
        frame_skip=cfg.frame_skip,
        noop_max=cfg.noop_max,
        episodic_life=False,
        reward_clip=False,
        use_fire_reset=cfg.fire_reset,
        img_height=cfg.screen_size,
        img_width=cfg.screen_size,
        full_action_space=cfg.full_action_space,
        repeat_action_probability=cfg.repeat_action_probability,
    )


def envpool_xla(env: Any, num_envs: int, steps: int) -> tuple[Callable[[], float], float]:
    """A timed run of `steps` steps of EnvPool's XLA interface in a jitted `lax.fori_loop`, and
    its compile seconds."""
    handle, _, _, step = env.xla()
    num_actions = int(env.action_space.n)

    def run(handle: jax.Array, key: jax.Array) -> tuple[jax.Array, jax.Array]:
        def body(_, carry):
            handle, key, total = carry
            key, action_key = jax.random.split(key)
            actions = jax.random.randint(action_key, (num_envs,), 0, num_actions)
            handle, (_, reward, *_) = step(handle, actions)
            return handle, key, total + reward.sum()

        handle, _, total = jax.lax.fori_loop(0, steps, body, (handle, key, 0.0))
        return handle, total

    t0 = time.perf_counter()
    with speedups.unrolled_threefry():  # the random actions drawn as on the bridge's side
        compiled = jax.jit(run).lower(handle, make_key(0)).compile()
    compile_s = time.perf_counter() - t0
    return timed_runs(compiled, handle, make_key), compile_s


def timed_runs(
    compiled: Callable[[Any, jax.Array], tuple[Any, jax.Array]],
    handles: Any,
    keys: Callable[[int], jax.Array],
) -> Callable[[], float]:
    """After one warm-up call, a function that times the next call of `compiled(handles,
    keys(i))` (i = 2, 3, …), passing on the env handles each call returns."""
    handles = jax.block_until_ready(compiled(handles, keys(1))[0])
    calls = itertools.count(2)

    def timed() -> float:
        nonlocal handles
        round_keys = keys(next(calls))
        with host_errors():
            t0 = time.perf_counter()
            handles = jax.block_until_ready(compiled(handles, round_keys)[0])
            return time.perf_counter() - t0

    return timed


def bridge(env: Env, steps: int, seeds: int) -> tuple[Callable[[], float], float]:
    """A timed run of a jitted scan of `steps` env steps, vmapped over `seeds` keys, and its
    compile seconds."""

    def run(state: jax.Array, key: jax.Array) -> tuple[jax.Array, jax.Array]:
        def body(state, k):
            action_key, step_key = jax.random.split(k)
            state, ts = env.step(state, random_actions(env.spec, action_key), step_key)
            return state, ts.reward.sum()

        state, rewards = jax.lax.scan(body, state, jax.random.split(key, steps))
        return state, rewards.sum()

    keys = jax.vmap(make_key)(np.arange(seeds))
    reset = jax.jit(jax.vmap(lambda k: env.reset(k)[0]))
    with host_errors():
        handles = jax.block_until_ready(reset(keys))
        t0 = time.perf_counter()
        with speedups.unrolled_threefry():  # as the training loop lowers programs of host envs
            compiled = jax.jit(jax.vmap(run)).lower(handles, keys).compile()
        compile_s = time.perf_counter() - t0
        round_keys = lambda i: jax.vmap(make_key)(np.arange(seeds) + 10 * i)
        return timed_runs(compiled, handles, round_keys), compile_s


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--num-envs", type=int, default=8)
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--threads", type=int, default=0, help="ALE worker threads; 0: automatic")
    parser.add_argument("--repeats", type=int, default=3, help="runs per row, in rotation")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args()
    cfg = AtariConfig(id="ALE/Breakout-v5", threads=args.threads)
    n, steps = args.num_envs, args.steps
    load_before = os.getloadavg()[0]

    # Each row: (what, env steps per run, compile s or None, a function timing one run).
    ale = vector_env(cfg, n)
    ale.reset(seed=0)
    pool = AtariPool(cfg, n)
    pool.reset(0)
    what = f"Breakout, {n} envs × {steps} steps"
    rows_to_time: list[tuple[str, int, float | None, Callable[[], float]]] = [
        (f"{what}, ALE AtariVectorEnv, Python loop", n * steps, None,
         lambda: python_loop(ale.step, n, steps)),
        (f"{what}, AtariPool, Python loop", n * steps, None,
         lambda: python_loop(pool.step, n, steps)),
    ]  # fmt: skip
    env = envs.make(cfg, n)
    for seeds, label in ((1, "bridge, lax.scan"), (2, "bridge, vmap over 2 seeds")):
        timed, compile_s = bridge(env, steps, seeds)
        rows_to_time.append((f"{what}, {label}", seeds * n * steps, compile_s, timed))
    peer = None
    if importlib.util.find_spec("envpool") is not None:
        import envpool

        peer = envpool_env(cfg, n)
        peer.reset()
        name = f"EnvPool {envpool.__version__}"
        rows_to_time.append(
            (f"{what}, {name}, Python loop", n * steps, None,
             lambda: python_loop(peer.step, n, steps))
        )  # fmt: skip
        timed, compile_s = envpool_xla(peer, n, steps)
        rows_to_time.append((f"{what}, {name} XLA, lax.fori_loop", n * steps, compile_s, timed))

    seconds: list[list[float]] = [[] for _ in rows_to_time]
    for _ in range(args.repeats):
        for times, (_, _, _, timed) in zip(seconds, rows_to_time, strict=True):
            times.append(timed())
    for closable in (ale, pool, env, peer):
        if closable is not None:
            closable.close()

    header = ["what", "env steps/s", "compile s", "run s, median (min-max)", "machine"]
    rows = []
    for times, (what_row, env_steps, compile_s, _) in zip(seconds, rows_to_time, strict=True):
        run_s = statistics.median(times)
        rows.append(
            [
                what_row,
                fmt(env_steps / run_s, 0),
                "—" if compile_s is None else f"{compile_s:.1f}",
                f"{run_s:.2f} ({min(times):.2f}-{max(times):.2f})",
                machine(load=True),
            ]
        )
        print(" | ".join(rows[-1]), flush=True)

    table = markdown_table(header, rows)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(
        "# Atari env throughput, random policy\n\n"
        f"`python benchmarks/atari_bridge.py` (`--num-envs {n} --steps {steps} "
        f"--threads {args.threads} --repeats {args.repeats}`); see the script's docstring for "
        "the rows. " + load_note(load_before, os.getloadavg()[0]) + "\n\n" + table + "\n"
    )
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
