"""Where PPO CartPole-v1's run time goes (PureJaxRL's config), against PureJaxRL's whole run.

Issue 14 asks for PPO at >= 1.2x PureJaxRL's ppo.py with jaxrl's default evaluations and
checkpoints included. This splits jaxrl's time into what any PPO must do and what the run adds,
all in one process, each program compiled once and then timed `--repeats` times (medians):

* `iterations`: `--iterations` training iterations (rollout, GAE, update) in one `lax.scan`,
  with no chunks, evaluations or checkpoints: the algorithm alone;
* `rollouts`: the same number of 128-step rollouts of the 4 envs at fixed parameters;
* `updates`: the same number of 4-epoch x 4-minibatch updates on one rollout's samples;
* `updates, 8-8 networks`: the updates with 8-unit hidden layers: what an update costs beside
  its matrix products;
* jaxrl's `train` as the CLI runs it (20 evaluations, checkpoints at its start and end): the
  chunks' seconds (`run_seconds`) and the whole call but the compile;
* PureJaxRL's `make_train` compiled as `ppo_purejaxrl.py` compiles it (one seed; with
  `--purejaxrl PATH`, a checkout).

    python benchmarks/ppo_time_split.py [--purejaxrl ../purejaxrl] [--repeats 3]
"""

from __future__ import annotations

import argparse
import functools
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax
from common import RESULTS, machine, markdown_table, median_range, write_report
from jax.sharding import PartitionSpec as P
from ppo_purejaxrl import JAXRL_OVERRIDES, purejaxrl_side
from purejaxrl_compat import load_make_train

import envs
from agents.ppo import PPOConfig, ppo_loss
from jaxrl import onpolicy, parallel
from jaxrl.cli import compose
from jaxrl.config import EnvConfig
from jaxrl.loop import train

DEFAULT_OUT = RESULTS / "ppo_time_split.md"
ITERATIONS = 976  # jaxrl's run of 499,712 env steps: 976 iterations of 4 envs x 128 steps


def programs(hidden_sizes: tuple[int, ...], iterations: int) -> dict[str, Callable[[Any], Any]]:
    """The three programs of one key (see the module docstring) for PureJaxRL's settings."""
    env = envs.make(EnvConfig(id="CartPole-v1", num_envs=4))
    cfg = PPOConfig(obs_normalization=False, return_normalization=False, hidden_sizes=hidden_sizes)
    algorithm = onpolicy.Algorithm(
        loss=lambda dist, value, sample: ppo_loss(cfg, dist, value, sample),
        num_steps=cfg.num_steps,
        gae_lambda=cfg.gae_lambda,
        epochs=cfg.update_epochs,
        minibatches=cfg.num_minibatches,
    )
    setup = onpolicy.on_policy_setup(cfg, env, algorithm, iterations * 512)
    envs_spec = P(onpolicy.ENV_AXIS)
    state_spec = onpolicy.OnPolicyState(P(), P(), P(), P(), envs_spec, P(), envs_spec)

    def start(key: Any) -> tuple[Any, Any, Any]:
        init_key, env_key, loop_key = jax.random.split(key, 3)
        return onpolicy.init(setup, init_key), env.reset(env_key), loop_key

    def iterations_program(key: Any) -> Any:
        state, env_state, key = start(key)
        step = setup.axis.shard_map(
            functools.partial(onpolicy.iteration, setup),
            in_specs=(state_spec, envs_spec, P()),
            out_specs=(state_spec, envs_spec, P()),
        )

        def body(carry: Any, k: Any) -> Any:
            state, env_state, metrics = step(*carry, k)
            return (state, env_state), metrics["loss"]

        return jax.lax.scan(body, (state, env_state), jax.random.split(key, iterations))[1]

    def rollouts_program(key: Any) -> Any:
        state, env_state, key = start(key)

        def one(env_state: Any, k: Any) -> Any:
            env_state, ro, _, _ = onpolicy.rollout(setup, state, env_state, k)
            return env_state, ro.transition.reward.sum()

        one = setup.axis.shard_map(one, in_specs=(envs_spec, P()), out_specs=(envs_spec, P()))
        return jax.lax.scan(one, env_state, jax.random.split(key, iterations))[1]

    def updates_program(key: Any) -> Any:
        state, env_state, key = start(key)

        def all_updates(env_state: Any, key: Any) -> Any:
            rollout_key, key = jax.random.split(key)
            _, ro, _, _ = onpolicy.rollout(setup, state, env_state, rollout_key)
            samples = onpolicy.samples_of(setup, state, ro, state.return_stats)

            def one(carry: Any, k: Any) -> Any:
                current = state._replace(params=carry[0], opt_state=carry[1])
                params, opt_state, metrics = onpolicy.update(
                    setup, current, samples, ro.valid, k, cfg.learning_rate
                )
                return (params, opt_state), metrics["loss"]

            carry = (state.params, state.opt_state)
            return jax.lax.scan(one, carry, jax.random.split(key, iterations))[1]

        sharded = setup.axis.shard_map(all_updates, in_specs=(envs_spec, P()), out_specs=P())
        return sharded(env_state, key)

    return {
        "iterations": iterations_program,
        "rollouts": rollouts_program,
        "updates": updates_program,
    }


def timed(program: Callable[[Any], Any], repeats: int) -> tuple[float, list[float]]:
    """(compile s, run seconds of each call) of a program of one key."""
    t = time.perf_counter()
    compiled = jax.jit(program).lower(jax.random.key(0)).compile()
    compile_s = time.perf_counter() - t
    seconds = []
    for i in range(repeats):
        t = time.perf_counter()
        jax.block_until_ready(compiled(jax.random.key(i)))
        seconds.append(time.perf_counter() - t)
    return compile_s, seconds


def jaxrl_train(repeats: int, workdir: Path) -> tuple[list[float], list[float]]:
    """jaxrl's `train` as `ppo_purejaxrl.py` runs it: (chunk seconds, whole call but the
    compile) per run, after one warm-up run."""
    cfg = compose(JAXRL_OVERRIDES)
    chunks, calls = [], []
    for i in range(repeats + 1):
        t = time.perf_counter()
        summary = train(cfg, workdir / f"run{i}").summary
        wall = time.perf_counter() - t
        if i:  # the first run pays the compile cache's misses
            chunks.append(summary["run_seconds"])
            calls.append(wall - summary["compile_seconds"])
    return chunks, calls


def purejaxrl_run(checkout: Path, repeats: int) -> tuple[float, list[float]]:
    """PureJaxRL's program as `ppo_purejaxrl.py` compiles it (one seed): (compile s, run
    seconds of each call)."""
    make_train, _ = load_make_train(checkout, "ppo.py")
    compile_s, run = purejaxrl_side(make_train, 1)
    return compile_s, [run()[0] for _ in range(repeats)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--purejaxrl", type=Path, help="a PureJaxRL checkout")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--iterations", type=int, default=ITERATIONS)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args()
    parallel.use_cores_as_devices()  # the devices a CLI run has (one seed: one device)

    rows = []

    def row(what: str, compile_s: float | None, seconds: list[float]) -> None:
        compiled = "—" if compile_s is None else f"{compile_s:.1f}"
        rows.append([what, compiled, median_range(seconds)])
        print(rows[-1], flush=True)

    for name, program in programs((64, 64), args.iterations).items():
        row(f"{name} (64-64)", *timed(program, args.repeats))
    row("updates, 8-8 networks", *timed(programs((8, 8), args.iterations)["updates"], args.repeats))
    with tempfile.TemporaryDirectory(prefix="jaxrl-bench-split-") as tmp:
        chunks, calls = jaxrl_train(args.repeats, Path(tmp))
    row("jaxrl `train`: its chunks (`run_seconds`: iterations, 20 evaluations)", None, chunks)
    row("jaxrl `train`: the whole call but the compile (+ checkpoints, files)", None, calls)
    if args.purejaxrl:
        row(
            "PureJaxRL's ppo.py, as `ppo_purejaxrl.py` runs it",
            *purejaxrl_run(args.purejaxrl, args.repeats),
        )
    table = markdown_table(["what", "compile s", "run s, median (min-max)"], rows)
    text = (
        "# Where PPO CartPole-v1's time goes (PureJaxRL's config)\n\n"
        f"Machine: {machine(load=True)}. Command: `python benchmarks/ppo_time_split.py "
        f"{' '.join(sys.argv[1:])}`. {args.iterations} iterations of 4 envs x 128 steps, "
        f"4 minibatches x 4 epochs, 64-64 tanh networks unless said; {args.repeats} runs each, "
        f"one process.\n\n{table}\n"
    )
    write_report(text, args.out)


if __name__ == "__main__":
    main()
