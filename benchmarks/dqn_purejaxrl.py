"""DQN on CartPole-v1 beside PureJaxRL's own dqn.py, over several seeds, in one process, runs
interleaved: run time, and the final greedy return of every seed on each side.

PureJaxRL is not shipped with jaxrl: pass a checkout of https://github.com/luchris429/purejaxrl
(`--purejaxrl PATH`). Its `purejaxrl/dqn.py` is imported unchanged, with stand-ins for what it
imports that does not import today (`purejaxrl_compat.py`). It needs `flashbax`, PureJaxRL's
replay buffer, which jaxrl does not depend on: install it beside the other peers
(`python -m venv --system-site-packages /tmp/peers && /tmp/peers/bin/pip install flashbax`).

Both sides run dqn.py's config (its `main`): 10 envs, 5e5 env steps, a 10,000-transition buffer,
minibatches of 128, one update per 10 env steps after 10,000, the target copied every 500 env
steps (50 updates), ε from 1 to 0.05 over 250,000 env steps, Adam at 2.5e-4 constant, γ 0.99,
a 120-84 ReLU Q-network with flax's default (LeCun normal) weights, squared TD error, no gradient
clipping, no Double DQN.
For jaxrl that is `PUREJAXRL_DQN_CARTPOLE` (`common.py`), with its default evaluations (about
20 per run, 10 greedy episodes each) and checkpoints; its run time is the whole `train` call but
the compile. PureJaxRL is `jax.jit(jax.vmap(make_train(config)))`, compiled with
`.lower().compile()`, and evaluates nothing while it trains.
The process has the devices a CLI run has (`parallel.use_cores_as_devices`): jaxrl's seeds run
spread over the cores, PureJaxRL's program on the first device, as its script runs it.

Quality: each seed's final parameters, 10 greedy episodes — jaxrl's last evaluation; for
PureJaxRL the same episodes run on its final Q-network here (`jaxrl.rollout.run_episodes`,
greedy in its QNetwork's values). dqn.py replaces its seed key by `PRNGKey(0)` once the envs are
reset (`rng = jax.random.PRNGKey(0)  # use a dummy rng here`), so its seeds share network
initialisation, exploration and minibatches and differ only in the envs' first states.

Where jaxrl's time goes (ms, best of 3 programs of 1,000): one update on a fixed minibatch; one
driver round (10 env steps, a draw and an update; `train_step` over 1,000 rounds); and the
update's 11 matrix products alone (forward through the online and the target net, the backward
products of the online net) on random operands of the same shapes — the floor both sides share.

    /tmp/peers/bin/python benchmarks/dqn_purejaxrl.py --purejaxrl PATH [--seeds 4] [--repeats 3]
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from common import (
    PUREJAXRL_DQN_CARTPOLE,
    RESULTS,
    best_of,
    machine,
    markdown_table,
    median_range,
    write_report,
)
from purejaxrl_compat import load_make_train

import envs
from agents.dqn import make_learner
from jaxrl import offpolicy, parallel
from jaxrl.cli import compose
from jaxrl.config import EnvConfig
from jaxrl.loop import train
from jaxrl.rollout import run_episodes

DEFAULT_OUT = RESULTS / "dqn_purejaxrl.md"
EVAL_EPISODES = 10
QUIET = ["log.progress=false", "log.tensorboard=false"]
# dqn.py's `main` config, the keys make_train reads.
PUREJAXRL_CONFIG = {
    "NUM_ENVS": 10,
    "BUFFER_SIZE": 10000,
    "BUFFER_BATCH_SIZE": 128,
    "TOTAL_TIMESTEPS": 5e5,
    "EPSILON_START": 1.0,
    "EPSILON_FINISH": 0.05,
    "EPSILON_ANNEAL_TIME": 25e4,
    "TARGET_UPDATE_INTERVAL": 500,
    "LR": 2.5e-4,
    "LEARNING_STARTS": 10000,
    "TRAINING_INTERVAL": 10,
    "LR_LINEAR_DECAY": False,
    "GAMMA": 0.99,
    "TAU": 1.0,
    "ENV_NAME": "CartPole-v1",
}
Run = Callable[[], tuple[float, list[float]]]  # -> (run s, each seed's final greedy return)


def purejaxrl_side(checkout: Path, seeds: int) -> tuple[float, Run]:
    """(compile s, a function that trains every seed once: (run s, final greedy returns))."""
    make_train, module = load_make_train(checkout, "dqn.py")
    keys = jax.random.split(jax.random.PRNGKey(0), seeds)
    t0 = time.perf_counter()
    compiled = jax.jit(jax.vmap(make_train(dict(PUREJAXRL_CONFIG)))).lower(keys).compile()
    compile_s = time.perf_counter() - t0
    eval_env = envs.make(EnvConfig("CartPole-v1", num_envs=EVAL_EPISODES))
    net = module.QNetwork(action_dim=eval_env.spec.action_space.n)

    @jax.jit
    def greedy_returns(params: Any, key: jax.Array) -> jax.Array:
        def one_seed(p: Any, k: jax.Array) -> jax.Array:
            policy = lambda obs, _: jnp.argmax(net.apply(p, obs), axis=-1)
            return run_episodes(eval_env, policy, k).returns.mean()

        return jax.vmap(one_seed)(params, jax.random.split(key, seeds))

    def run() -> tuple[float, list[float]]:
        t = time.perf_counter()
        out = jax.block_until_ready(compiled(keys))
        run_s = time.perf_counter() - t
        params = out["runner_state"][0].params
        return run_s, [float(r) for r in greedy_returns(params, jax.random.key(1))]

    return compile_s, run


def jaxrl_side(seeds: int, workdir: Path, extra: list[str]) -> Callable[[], tuple]:
    """A function that trains every seed once in one program, into a new run directory:
    (run s, each seed's final eval return, compile s)."""
    cfg = compose([*PUREJAXRL_DQN_CARTPOLE, f"num_seeds={seeds}", *QUIET, *extra])
    count = iter(range(1_000_000))

    def run() -> tuple[float, list[float], float]:
        t = time.perf_counter()
        summary = train(cfg, workdir / f"run{next(count)}").summary
        wall = time.perf_counter() - t
        returns = [row["final_eval_return"] for row in summary["runs"]]
        return wall - summary["compile_seconds"], returns, summary["compile_seconds"]

    return run


def breakdown() -> list[list[str]]:
    """ms per update, per driver round and of the update's matrix products alone."""
    cfg = compose(PUREJAXRL_DQN_CARTPOLE)
    env = envs.make(cfg.env)
    learner = make_learner(cfg.agent, env.spec, cfg.budget.env_steps)
    setup = offpolicy.off_policy_setup(cfg.agent, env, learner)
    agent = offpolicy.off_policy_agent(setup)
    key = jax.random.key(0)
    state, env_state = agent.init(key), env.reset(key)
    steps = jax.jit(agent.train_step)
    while int(state.env_steps) < setup.learn_after + cfg.agent.batch_size:
        state, env_state, _ = steps(state, env_state, key)
    batch = offpolicy.sample_batch(setup, state.buffer, key)
    keys = jax.random.split(key, 1000)

    def updates(ls: Any) -> Any:
        return jax.lax.scan(lambda s, k: (learner.update(s, batch, k)[0], None), ls, keys)[0]

    sizes = (*env.spec.observation_space.shape, *cfg.agent.hidden_sizes, env.spec.action_space.n)
    n = cfg.agent.batch_size
    # (m, k, n) of each product: forward, online and target; backward, dx below the first layer
    # and dW of every layer.
    forward = [(n, a, b) for a, b in itertools.pairwise(sizes)]
    backward = [(n, b, a) for a, b in list(itertools.pairwise(sizes))[1:]]
    weight_grads = [(a, n, b) for a, b in itertools.pairwise(sizes)]
    shapes = [*forward, *forward, *backward, *weight_grads]
    operands = [(jnp.ones((m, k)), jnp.full((k, o), 1e-3)) for m, k, o in shapes]

    def products(x: Any) -> Any:
        def body(c: jax.Array, _: None) -> tuple[jax.Array, None]:
            return c + sum(((a + c) @ b).sum() for a, b in operands) * 1e-9, None

        return jax.lax.scan(body, x, None, 1000)[0]

    parts = {
        "jaxrl: one update on a fixed minibatch": (updates, state.learner),
        "jaxrl: one driver round (10 env steps, a draw, an update)": (
            lambda c: agent.train_step(*c, key),
            (state, env_state),
        ),
        f"the update's {len(shapes)} matrix products alone": (products, jnp.zeros(())),
    }
    rows = []
    for what, (fn, arg) in parts.items():
        compiled = jax.jit(fn).lower(arg).compile()
        rows.append([what, f"{best_of(compiled, arg):.3f}"])
        print(rows[-1], flush=True)
    return rows


def quality(returns: list[list[float]]) -> str:
    """The first run's seeds: mean (min) of the final returns, how many reached 475, and whether
    the repeats (same config, same seeds) reproduced them exactly."""
    first = returns[0]
    reached = sum(r >= 475 for r in first)
    same = "yes" if all(run == first for run in returns) else "no"
    mean = f"{np.mean(first):.1f} ({min(first):.1f})"
    return f"{mean}, {reached}/{len(first)} ≥ 475; repeats equal: {same}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--purejaxrl", type=Path, required=True, help="a PureJaxRL checkout")
    parser.add_argument("--seeds", type=int, default=4, help="seeds per program, both sides")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--jaxrl", nargs="*", default=[], help="extra jaxrl overrides")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args()
    parallel.use_cores_as_devices()  # the devices a CLI run of jaxrl has

    with tempfile.TemporaryDirectory(prefix="jaxrl-bench-dqn-pjr-") as tmp:
        peer_compile, peer_run = purejaxrl_side(args.purejaxrl, args.seeds)
        ours_run = jaxrl_side(args.seeds, Path(tmp), args.jaxrl)
        print(f"PureJaxRL compiled in {peer_compile:.1f} s", flush=True)
        peer, ours = [], []
        for _ in range(args.repeats):
            peer.append(peer_run())
            ours.append(ours_run())
            print(f"  PureJaxRL {peer[-1]}, jaxrl {ours[-1]}", flush=True)
    peer_s, ours_s = [r[0] for r in peer], [r[0] for r in ours]
    steps = int(PUREJAXRL_CONFIG["TOTAL_TIMESTEPS"])
    # `--jaxrl` may change jaxrl's budget (a smoke run): its row counts its own env steps.
    ours_steps = int(compose([*PUREJAXRL_DQN_CARTPOLE, *args.jaxrl]).budget.env_steps)
    rows = [
        [
            "PureJaxRL dqn.py",
            f"{peer_compile:.1f}",
            median_range(peer_s, 1),
            f"{args.seeds * steps / statistics.median(peer_s):,.0f}",
            "1.00x",
            quality([r[1] for r in peer]),
        ],
        [
            "jaxrl `agent=dqn`, with its evaluations and checkpoints",
            f"{statistics.median([r[2] for r in ours]):.1f}",
            median_range(ours_s, 1),
            f"{args.seeds * ours_steps / statistics.median(ours_s):,.0f}",
            f"{statistics.median(peer_s) / statistics.median(ours_s):.2f}x",
            quality([r[1] for r in ours]),
        ],
    ]
    header = [
        "side",
        "compile s",
        "run s, median (min-max)",
        "env steps/s (all seeds)",
        "speed-up over PureJaxRL",
        f"final greedy return of the {args.seeds} seeds: mean (min)",
    ]
    per_run = "\n".join(
        f"* run {i + 1}: PureJaxRL {[round(r, 1) for r in p[1]]}, "
        f"jaxrl {[round(r, 1) for r in o[1]]}"
        for i, (p, o) in enumerate(zip(peer, ours, strict=True))
    )
    text = (
        "# DQN CartPole-v1: jaxrl beside PureJaxRL's dqn.py (one process, runs interleaved)\n\n"
        f"Machine: {machine()}. Command: `python benchmarks/dqn_purejaxrl.py "
        f"{' '.join(sys.argv[1:])}`. {args.seeds} seeds in one program per side, "
        f"{steps:,} env steps each (jaxrl {ours_steps:,}), {args.repeats} runs per side, "
        "alternating; medians with min-max. jaxrl overrides: "
        f"`{' '.join(PUREJAXRL_DQN_CARTPOLE + args.jaxrl)}`.\n\n"
        f"{markdown_table(header, rows)}\n\nEach seed's final greedy return (10 episodes):\n\n"
        f"{per_run}\n"
    )
    text += "\nWhere jaxrl's time goes (ms each, best of 3 programs of 1,000):\n\n"
    text += markdown_table(["what", "ms"], breakdown()) + "\n"
    write_report(text, args.out)


if __name__ == "__main__":
    main()
