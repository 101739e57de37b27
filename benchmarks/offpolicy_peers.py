"""SAC and TD3 on Pendulum-v1 beside rejax and SBX, in one process, runs interleaved; and where a
jaxrl off-policy step's time goes.

Peers (not jaxrl dependencies; install them in a separate environment that sees jaxrl, e.g.
`python -m venv --system-site-packages /tmp/peers && /tmp/peers/bin/pip install rejax sbx-rl`):

* rejax (https://github.com/keraJLi/rejax, `rejax/algos/sac.py`, `td3.py`): the whole training
  jitted, gymnax's Pendulum-v1 inside it. Its TD3 fixes 64-64 swish networks in `create_agent`;
  a subclass builds the same rejax modules at 256-256 ReLU instead. rejax 0.1.3 unpacks
  gymnax's older 5-tuple step, so its env is wrapped to return done = terminated or truncated
  (as rejax's own rollouts treat both); that changes no arithmetic of the update.
* SBX (https://github.com/araffin/sbx, the JAX port of Stable-Baselines3): a jitted update per
  env step called from Python, Gymnasium's Pendulum-v1 on the host.

Every side: 256-256 ReLU networks, batch 256, Adam 1e-3, one env, one update per env step after
1,000 uniformly random steps, `--steps` env steps, one evaluation at the end (rejax's own: 128
episodes; jaxrl: 10; SBX none). rejax is compiled once; jaxrl's `train` compiles its program
in each call, and a run's seconds are all of `train` but its `compile_seconds` (evaluation,
checkpoint and logs are in), after one untimed run that pays the process's first-call costs.
Then the runs alternate (jaxrl, rejax, SBX, jaxrl, ...). SBX compiles
inside `learn`: a short model learns first in the same process, so its jitted update is cached
before the timed runs. Printed: median run seconds (min-max), ms per update
((run s) / (steps − 1,000)), and the ratio of each peer's median to jaxrl's.

The breakdown section times, in one jitted program each, 1,000 jaxrl SAC/TD3 updates on one fixed
minibatch, 1,000 draws plus updates (`jaxrl.offpolicy.learn`), 1,000 collecting steps
(`jaxrl.offpolicy.collect`), and whole driver iterations (`train_step`, 1,000 env steps): what the
driver adds around the update.

    /tmp/peers/bin/python benchmarks/offpolicy_peers.py [--steps 5000] [--repeats 3] [--seeds 1]
"""

from __future__ import annotations

import argparse
import functools
import math
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from common import (
    RESULTS,
    best_of,
    machine,
    markdown_table,
    median_range,
    pendulum_learner,
    write_report,
)

from jaxrl import offpolicy, parallel
from jaxrl.cli import compose
from jaxrl.loop import train

DEFAULT_OUT = RESULTS / "offpolicy_peers.md"
HIDDEN = (256, 256)
LEARNING_STARTS = 1000
LEARNING_RATE = 1e-3
BATCH = 256
AGENTS = ("sac", "td3")
HEADER = ["side", "run s, median (min-max)", "ms per update", "peer / jaxrl", "final return"]

Run = Callable[[], tuple[float, float]]  # () -> (run s, final return)


def jaxrl_side(agent: str, steps: int, workdir: Path, seeds: int) -> Run:
    cfg = compose(
        [
            f"agent={agent}",
            f"num_seeds={seeds}",
            "env=Pendulum-v1",
            f"agent.hidden_sizes=[{HIDDEN[0]},{HIDDEN[1]}]",
            f"agent.actor_lr={LEARNING_RATE}",
            f"agent.critic_lr={LEARNING_RATE}",
            f"agent.learning_starts={LEARNING_STARTS}",
            f"agent.batch_size={BATCH}",
            f"agent.buffer_size={steps}",
            f"budget.env_steps={steps}",
            f"eval.every={steps // 1000}",
            "checkpoint.every=1000",
            "log.progress=false",
            "log.tensorboard=false",
        ]
    )
    count = iter(range(1_000_000))

    def run() -> tuple[float, float]:
        t = time.perf_counter()
        summary = train(cfg, workdir / f"{agent}{next(count)}").summary
        wall = time.perf_counter() - t
        return wall - summary["compile_seconds"], summary["final_eval_return"]

    run()  # untimed: the first `train` of a process pays one-off costs beyond its compile
    return run


class _FiveTupleStep:
    """gymnax ≥ 1.0's env with the 5-tuple step rejax 0.1.3 unpacks (done = either end)."""

    def __init__(self, env: Any) -> None:
        self._env = env

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name == "_env":
            raise AttributeError(name)
        return getattr(self._env, name)

    def step(self, key: jax.Array, state: Any, action: jax.Array, params: Any = None) -> tuple:
        obs, state, reward, terminated, truncated, info = self._env.step(key, state, action, params)
        return obs, state, reward, jnp.logical_or(terminated, truncated), info


def rejax_side(agent: str, steps: int, seeds: int) -> Run:
    import gymnax
    from rejax import SAC, TD3

    class TD3Sized(TD3):
        """rejax 0.1.3's TD3 with the networks' sizes and activation given (its `create_agent`
        fixes 64-64 swish), built from rejax's own modules."""

        @classmethod
        def create_agent(cls, config: dict, env: Any, env_params: Any) -> dict:
            from flax import linen as nn
            from rejax.networks import DeterministicPolicy, QNetwork

            space = env.action_space(env_params)
            sizes = tuple(config.pop("hidden_layer_sizes"))
            actor = DeterministicPolicy(
                int(np.prod(space.shape)),
                (space.low, space.high),
                hidden_layer_sizes=sizes,
                activation=nn.relu,
            )
            return {
                "actor": actor,
                "critic": QNetwork(hidden_layer_sizes=sizes, activation=nn.relu),
            }

    env, params = gymnax.make("Pendulum-v1")
    algo = (SAC if agent == "sac" else TD3Sized).create(
        env=_FiveTupleStep(env),
        env_params=params,
        total_timesteps=steps,
        eval_freq=steps,
        skip_initial_evaluation=True,
        num_envs=1,
        buffer_size=steps,
        fill_buffer=LEARNING_STARTS,
        batch_size=BATCH,
        learning_rate=LEARNING_RATE,
        hidden_layer_sizes=HIDDEN,
    )
    # Several seeds: rejax's own way, `vmap` of `train` over keys.
    keys = jax.random.split(jax.random.PRNGKey(0), seeds)
    compiled = jax.jit(jax.vmap(algo.train)).lower(keys).compile()

    def run() -> tuple[float, float]:
        t = time.perf_counter()
        _, (_, returns) = jax.block_until_ready(compiled(keys))
        return time.perf_counter() - t, float(returns[:, -1].mean())

    return run


def sbx_side(agent: str, steps: int, seeds: int) -> Run:
    from sbx import SAC, TD3

    algo = SAC if agent == "sac" else TD3
    settings = dict(
        learning_starts=LEARNING_STARTS,
        batch_size=BATCH,
        learning_rate=LEARNING_RATE,
        buffer_size=steps,
        policy_kwargs=dict(net_arch=list(HIDDEN)),
        verbose=0,
        seed=0,
    )
    algo("MlpPolicy", "Pendulum-v1", **settings).learn(LEARNING_STARTS + 10)  # compiles

    def run() -> tuple[float, float]:
        """Several seeds one after another: SB3's models train one seed each."""
        seconds = 0.0
        for seed in range(seeds):
            model = algo("MlpPolicy", "Pendulum-v1", **{**settings, "seed": seed})
            t = time.perf_counter()
            model.learn(steps)
            seconds += time.perf_counter() - t
        return seconds, float("nan")

    return run


def side_by_side(
    agent: str, steps: int, repeats: int, workdir: Path, seeds: int
) -> list[list[str]]:
    sides = {
        "jaxrl": jaxrl_side(agent, steps, workdir, seeds),
        "rejax": rejax_side(agent, steps, seeds),
        "SBX": sbx_side(agent, steps, seeds),
    }
    times: dict[str, list[float]] = {name: [] for name in sides}
    returns: dict[str, float] = {}
    for _ in range(repeats):
        for name, run in sides.items():
            seconds, final = run()
            times[name].append(seconds)
            returns[name] = final
            print(f"{agent} {name}: {seconds:.1f} s, final return {final:.1f}", flush=True)
    ours = statistics.median(times["jaxrl"])
    updates = steps - LEARNING_STARTS
    return [
        [
            f"{agent.upper()} {name}",
            median_range(xs, 1),
            f"{1000 * statistics.median(xs) / updates:.2f}",
            "—" if name == "jaxrl" else f"{statistics.median(xs) / ours:.2f}×",
            "—" if math.isnan(returns[name]) else f"{returns[name]:.1f}",
        ]
        for name, xs in times.items()
    ]


def breakdown(agent: str) -> list[list[str]]:
    """ms per step of the update alone, draw + update, collecting alone and the whole driver."""
    setup, driver, state, env_state, batch = pendulum_learner(agent, HIDDEN, BATCH)
    learner = setup.learner
    key = jax.random.key(0)
    keys = jax.random.split(key, 1000)

    def updates(ls: Any) -> Any:
        return jax.lax.scan(lambda s, k: (learner.update(s, batch, k)[0], None), ls, keys)[0]

    def learns(ls: Any, buffer: Any) -> Any:
        def body(s: Any, k: jax.Array) -> tuple[Any, None]:
            return offpolicy.learn(setup, s, buffer, state.env_steps, k)[0], None

        return jax.lax.scan(body, ls, keys)[0]

    def collects(carry: Any) -> Any:
        return jax.lax.scan(functools.partial(offpolicy.collect, setup), carry, keys)[0]

    parts = {
        "update on a fixed minibatch": (updates, state.learner),
        "draw + update (`offpolicy.learn`)": (learns, state.learner, state.buffer),
        "collecting step (`offpolicy.collect`)": (collects, (state, env_state)),
        "whole driver step (`train_step`)": (driver.train_step, state, env_state, key),
    }
    rows = []
    for what, (fn, *args) in parts.items():
        compiled = jax.jit(fn).lower(*args).compile()
        rows.append([f"{agent.upper()}: {what}", f"{best_of(compiled, *args):.3f}"])
    flops = jax.jit(learner.update).lower(state.learner, batch, key).compile().cost_analysis()
    update_ms = float(rows[0][1])
    rows.append(
        [
            f"{agent.upper()}: one update's FLOPs (XLA's count; TD3's include its delayed "
            "actor step, taken every other update), GFLOP/s reached",
            f"{flops['flops'] / 1e6:.0f} MFLOP, {flops['flops'] / update_ms / 1e6:.0f} GFLOP/s",
        ]
    )
    return rows


def matmul_rate() -> float:
    """GFLOP/s of XLA:CPU on 256×256 by 256×256 products in a loop: the size of a 256-256
    layer's products at batch 256, what the updates above are made of."""
    x = jax.random.normal(jax.random.key(1), (BATCH, 256))

    def loop(w: jax.Array) -> jax.Array:
        return jax.lax.scan(lambda w, _: (w + 1e-6 * (x.T @ (x @ w)), None), w, None, 1000)[0]

    w = jax.random.normal(jax.random.key(2), (256, 256))
    seconds = best_of(jax.jit(loop).lower(w).compile(), w)
    return 1000 * 2 * 2 * BATCH * 256 * 256 / seconds / 1e9


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=5000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seeds", type=int, default=1, help="seeds per run, every side")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args()
    parallel.use_cores_as_devices()  # the devices a CLI run of jaxrl has
    rows, parts = [], []
    with tempfile.TemporaryDirectory(prefix="jaxrl-bench-peers-") as tmp:
        for agent in AGENTS:
            parts += breakdown(agent)
            print(markdown_table(["what", "ms per step"], parts), flush=True)
            rows += side_by_side(agent, args.steps, args.repeats, Path(tmp), args.seeds)
            print(markdown_table(HEADER, rows), flush=True)
    text = "\n\n".join(
        [
            "# SAC and TD3 on Pendulum-v1 beside rejax and SBX",
            f"`python benchmarks/offpolicy_peers.py --steps {args.steps} --repeats {args.repeats}"
            f" --seeds {args.seeds}` on {machine()}",
            markdown_table(HEADER, rows),
            f"256-256 networks, batch {BATCH}, one env, one update per env step after "
            f"{LEARNING_STARTS:,} random steps, {args.steps:,} env steps, {args.seeds} seed(s) "
            "per run (jaxrl: one program, spread over the cores; rejax: `vmap` of its `train`; "
            "SBX: one model per seed, one after another); run seconds leave the "
            "compile out; ms per update = run seconds / updates of one seed; ratio = the side's "
            "median over jaxrl's (above 1: jaxrl is faster). Final return: the run's last "
            "evaluation, mean over seeds (this short budget: a check that each side learns, not "
            "a comparison).",
            "## Where a jaxrl step's time goes (256-256, batch 256)",
            markdown_table(["what", "ms per step"], parts),
            f"XLA:CPU reaches {matmul_rate():.0f} GFLOP/s on 256×256 by 256×256 matrix "
            "products in a loop on this machine: the update is bound by its matrix products, "
            "and the driver adds the draw of a minibatch and the collecting step around it.",
        ]
    )
    write_report(text + "\n", args.out)


if __name__ == "__main__":
    main()
