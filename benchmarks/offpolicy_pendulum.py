"""SAC, TD3 and DDPG on Pendulum-v1 (and a short brax/halfcheetah run): training env steps/s and
return at the budget.

Rows, each one `jaxrl.loop.train` in this process (no persistent compile cache), 1 seed, one
evaluation (10 deterministic episodes) at the end of the budget, one update per env step:

* Pendulum-v1, 20k env steps, the learning tests' configuration (tests/agents/test_{sac,td3,
  ddpg}.py): 64-64 ReLU networks, Adam 1e-3, 1,000 random warm-up steps, the rest each agent's
  defaults;
* Pendulum-v1, the same with the library's 256-256 networks (as the SB3 zoo's 20k-step Pendulum
  settings, which also use Adam 1e-3);
* brax/halfcheetah (`spring` backend unless --brax-backend, to keep CPU compile small), SAC and
  TD3 with their defaults (256-256, Adam 3e-4) and 5,000 random warm-up steps on a short budget,
  beside a random policy's return. Skipped with --brax-steps 0 or when Brax is not installed.

Env steps/s counts env steps per second of run time; the run time is mostly the learner's
updates (one per env step), so the column is a training throughput, not an env throughput.

    python benchmarks/offpolicy_pendulum.py [--steps 20000] [--brax-steps 20000] [--out PATH]
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import tempfile
from pathlib import Path

import jax
import numpy as np
from common import (
    RESULTS,
    TrainingRow,
    load_note,
    machine,
    training_table,
    write_report,
)

import envs
from jaxrl.cli import compose
from jaxrl.env import random_actions
from jaxrl.loop import train
from jaxrl.prng import make_key
from jaxrl.rollout import run_episodes

DEFAULT_OUT = RESULTS / "offpolicy_pendulum.md"
QUIET = ["log.progress=false", "log.tensorboard=false", "checkpoint.every=1000"]
AGENTS = ("sac", "td3", "ddpg")
PENDULUM = [
    "env=Pendulum-v1",
    "agent.actor_lr=1e-3",
    "agent.critic_lr=1e-3",
    "agent.learning_starts=1000",
]
BRAX_AGENTS = ("sac", "td3")
BRAX_EPISODES = 5


def run(what: str, overrides: list[str], steps: int, workdir: Path) -> TrainingRow:
    """One training of `steps` env steps (1,000 per iteration), evaluated once at the end."""
    budget = [
        f"budget.env_steps={steps}",
        f"eval.every={max(steps // 1000, 1)}",
        f"agent.buffer_size={max(steps, 1000)}",  # holds every step: the same as the default 1M
    ]
    cfg = compose([*overrides, *budget, *QUIET])
    s = train(cfg, workdir / str(len(list(workdir.iterdir())))).summary
    return TrainingRow(
        what, s["env_steps"], s["compile_seconds"], s["run_seconds"], s["final_eval_return"]
    )


def random_return(env_overrides: list[str], episodes: int) -> float:
    """Mean return of uniformly random actions over `episodes` episodes."""
    env = envs.make(compose(["agent=sac", *env_overrides]).env, num_envs=episodes)
    policy = lambda obs, key: random_actions(env.spec, key)
    returns = jax.jit(lambda key: run_episodes(env, policy, key).returns)(make_key(0))
    return float(np.mean(returns))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=20000, help="Pendulum env steps")
    parser.add_argument("--brax-steps", type=int, default=20000, help="0: no Brax rows")
    parser.add_argument("--brax-backend", default="spring")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args()

    load_before = os.getloadavg()[0]
    rows: list[TrainingRow] = []
    notes = []

    def add(row: TrainingRow) -> None:
        rows.append(row)
        print(training_table([row], ""), flush=True)

    with tempfile.TemporaryDirectory(prefix="jaxrl-bench-offpolicy-") as tmp:
        work = Path(tmp)
        for size in (64, 256):
            for agent in AGENTS:
                what = f"{agent.upper()} Pendulum-v1, {size}-{size} nets"
                overrides = [f"agent={agent}", *PENDULUM, f"agent.hidden_sizes=[{size},{size}]"]
                add(run(what, overrides, args.steps, work))
        if args.brax_steps > 0 and importlib.util.find_spec("brax") is not None:
            brax = ["env=brax/halfcheetah", f"env.backend={args.brax_backend}"]
            for agent in BRAX_AGENTS:
                what = f"{agent.upper()} brax/halfcheetah ({args.brax_backend}), defaults"
                overrides = [
                    f"agent={agent}",
                    *brax,
                    "agent.learning_starts=5000",
                    f"eval.episodes={BRAX_EPISODES}",
                ]
                add(run(what, overrides, args.brax_steps, work))
            baseline = random_return(brax, BRAX_EPISODES)
            notes.append(
                f"brax/halfcheetah: a random policy returns {baseline:.1f} "
                f"({BRAX_EPISODES} episodes of 1,000 steps)."
            )
    load_after = os.getloadavg()[0]

    text = "\n\n".join(
        [
            "# SAC, TD3 and DDPG on Pendulum-v1 and brax/halfcheetah",
            f"`python benchmarks/offpolicy_pendulum.py --steps {args.steps} "
            f"--brax-steps {args.brax_steps} --brax-backend {args.brax_backend}`",
            training_table(rows, machine()),
            "One seed per row, one update per env step, one evaluation at the end of the budget "
            "(Pendulum: 10 deterministic episodes; halfcheetah: "
            f"{BRAX_EPISODES}). Env steps/s is per second of run time and includes the "
            "learner's updates. SB3 zoo reference at 20k Pendulum steps: SAC −157 ± 89, TD3 "
            "−152 ± 90. " + " ".join(notes) + " " + load_note(load_before, load_after),
        ]
    )
    write_report(text + "\n", args.out)


if __name__ == "__main__":
    main()
