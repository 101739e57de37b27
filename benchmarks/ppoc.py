"""PPOC beside PPO on the same budget and PPO settings: Pendulum-v1 (the learning test's
configuration) and a Brax locomotion env (brax/hopper, `spring` backend, by default).

Each row is one `jaxrl.loop.train` in this process (seeds vmapped in one program), with the
shared settings below for both agents, so that only the algorithm differs: PPOC's options (2),
its policy over options and terminations, against PPO's single Gaussian policy. Final returns
are the last evaluation of each seed (deterministic; PPOC evaluated with its options running),
beside a random policy's return on the Brax env.

    python benchmarks/ppoc.py [--seeds 2] [--pendulum-steps 200000] [--brax-env brax/hopper]
        [--brax-backend spring] [--brax-steps 1000000] [--out PATH]
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import os
import tempfile
from pathlib import Path

import jax
import numpy as np
from common import RESULTS, fmt, load_note, machine, markdown_table, write_report

import envs
from jaxrl.cli import compose
from jaxrl.env import random_actions
from jaxrl.loop import train
from jaxrl.presets import PPO_PENDULUM
from jaxrl.prng import make_key
from jaxrl.rollout import run_episodes

DEFAULT_OUT = RESULTS / "ppoc.md"
QUIET = ["log.progress=false", "log.tensorboard=false", "checkpoint.every=1000"]
AGENTS = ("ppo", "ppoc")
# tests/agents/test_ppo.py's and test_ppoc.py's Pendulum settings: the agents' pendulum preset.
PENDULUM = ["env=Pendulum-v1", *PPO_PENDULUM, "eval.episodes=32"]
# The PPO settings of benchmarks/results/ppo_brax_hopper.md's run, with PPOC's epochs and lr.
BRAX = [
    "env.num_envs=32",
    "agent.num_steps=64",
    "agent.num_minibatches=4",
    "agent.update_epochs=10",
    "agent.learning_rate=3e-4",
    "agent.ent_coef=0.0",
    "eval.episodes=8",
]
EVALUATIONS = 10


def run(agent: str, overrides: list[str], steps: int, seeds: int, workdir: Path) -> dict:
    """One training of `seeds` seeds and `steps` env steps each, evaluated EVALUATIONS times;
    its summary."""
    cfg = compose([f"agent={agent}", *overrides, f"num_seeds={seeds}", *QUIET])
    every = max(steps // (cfg.env.num_envs * cfg.agent.num_steps) // EVALUATIONS, 1)
    cfg = dataclasses.replace(
        cfg,
        budget=dataclasses.replace(cfg.budget, env_steps=steps),
        eval=dataclasses.replace(cfg.eval, every=every),
    )
    return train(cfg, workdir / f"{agent}-{len(list(workdir.iterdir()))}").summary


def row(agent: str, env: str, summary: dict) -> list[str]:
    finals = [r["final_eval_return"] for r in summary["runs"]]
    best = [r["best_eval_return"] for r in summary["runs"]]
    steps = summary["runs"][0]["env_steps"]
    return [
        f"{agent.upper()} {env}, {len(finals)} seeds",
        fmt(steps, 0),
        fmt(sum(r["env_steps"] for r in summary["runs"]) / summary["run_seconds"], 0),
        fmt(summary["compile_seconds"]),
        fmt(summary["run_seconds"]),
        f"{np.mean(finals):.1f} ({', '.join(f'{f:.1f}' for f in finals)})",
        f"{np.mean(best):.1f}",
    ]


def random_return(env_overrides: list[str], episodes: int) -> float:
    """Mean return of uniformly random actions over `episodes` episodes."""
    env = envs.make(compose(["agent=ppo", *env_overrides]).env, num_envs=episodes)
    policy = lambda obs, key: random_actions(env.spec, key)
    returns = jax.jit(lambda key: run_episodes(env, policy, key).returns)(make_key(0))
    return float(np.mean(returns))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--pendulum-steps", type=int, default=200_000, help="0: no Pendulum rows")
    parser.add_argument("--brax-env", default="brax/hopper")
    parser.add_argument("--brax-backend", default="spring")
    parser.add_argument("--brax-steps", type=int, default=1_000_000, help="0: no Brax rows")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args()

    load_before = os.getloadavg()[0]
    rows, notes = [], []
    with tempfile.TemporaryDirectory(prefix="jaxrl-bench-ppoc-") as tmp:
        work = Path(tmp)
        if args.pendulum_steps > 0:
            for agent in AGENTS:
                summary = run(agent, PENDULUM, args.pendulum_steps, args.seeds, work)
                rows.append(row(agent, "Pendulum-v1", summary))
                print(markdown_table(HEADER, rows[-1:]), flush=True)
        if args.brax_steps > 0 and importlib.util.find_spec("brax") is not None:
            brax = [f"env={args.brax_env}", f"env.backend={args.brax_backend}"]
            for agent in AGENTS:
                summary = run(agent, [*brax, *BRAX], args.brax_steps, args.seeds, work)
                rows.append(row(agent, f"{args.brax_env} ({args.brax_backend})", summary))
                print(markdown_table(HEADER, rows[-1:]), flush=True)
            episodes = 8
            notes.append(
                f"{args.brax_env}: a random policy returns {random_return(brax, episodes):.1f} "
                f"({episodes} episodes)."
            )
    load_after = os.getloadavg()[0]

    command = (
        f"`python benchmarks/ppoc.py --seeds {args.seeds} --pendulum-steps "
        f"{args.pendulum_steps} --brax-env {args.brax_env} --brax-backend {args.brax_backend} "
        f"--brax-steps {args.brax_steps}`"
    )
    text = "\n\n".join(
        [
            "# PPOC beside PPO",
            command,
            f"Machine: {machine()}.",
            markdown_table(HEADER, rows),
            "Both agents of an env take the same settings and budget (Pendulum-v1: "
            f"{' '.join(PENDULUM)}; Brax: {' '.join(BRAX)}); PPOC's own keys are its defaults "
            "(2 options, option entropy 0.01, no deliberation cost). Final return: the mean of "
            "the seeds' last evaluations (each seed's in brackets); best: the mean of each seed's "
            "best evaluation. Env steps/s counts every seed's steps per second of run time. "
            + " ".join(notes)
            + " "
            + load_note(load_before, load_after),
        ]
    )
    write_report(text + "\n", args.out)


HEADER = ["what", "env steps", "env steps/s", "compile s", "run s", "final return", "best"]


if __name__ == "__main__":
    main()
