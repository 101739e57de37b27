"""jaxrl: JAX-accelerated functional reinforcement learning.

Python entry points (the CLI is `python -m jaxrl.run`):

    result = jaxrl.train("agent=es", "env=CartPole-v1", "num_seeds=4")
    policy = jaxrl.load(result.run_dir)
    action = policy(obs)

Importing `jaxrl` imports neither JAX nor any agent or env: they load when first used.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from jaxrl.loop import RunResult
    from jaxrl.policy import Policy

__all__ = ["Policy", "load", "train"]


def train(*overrides: str, run_dir: str | Path | None = None) -> RunResult:
    """Train from Hydra-style overrides, exactly as the CLI would; returns the run's result.
    `run_dir` is `log.dir` (a new directory under `runs/` when neither is given)."""
    from jaxrl import cli, loop

    cfg, directory = cli.plan(list(overrides), run_dir)
    return loop.train(cfg, directory)


def load(run_dir: str | Path, seed: int | None = None, grid_point: int | None = None) -> Policy:
    """The deterministic policy of one run of a run directory (default: the first seed of the
    first grid point), from its latest checkpoint."""
    from jaxrl.policy import load_policy

    return load_policy(run_dir, seed, grid_point)


def __getattr__(name: str) -> object:
    if name == "Policy":
        from jaxrl.policy import Policy

        return Policy
    raise AttributeError(f"module 'jaxrl' has no attribute '{name}'")
