"""What the hybrid-action agents' tests (P-DQN, PA-DDPG, HyAR) share: Platform-v0's parameter
bounds and the check of a grid of runs trained on it."""

from __future__ import annotations

from pathlib import Path

import jax.numpy as jnp
import numpy as np
from learning import seed_values

import jaxrl
from jaxrl.loop import RunResult

PLATFORM_LOW = np.array([0.0, 0.0, 0.0], np.float32)
PLATFORM_HIGH = np.array([30.0, 720.0, 430.0], np.float32)


def check_platform_grid(
    result: RunResult, run_dir: Path, key: str, values: list[float], env_steps: int
) -> None:
    """A grid of two `key` values × seeds 0 and 1 on Platform-v0: every run completed its env
    steps, the runs are point-major, every run's parameters differ, and a loaded policy gives
    Platform's `(choice, parameters)` within the parameter bounds."""
    assert result.status == "completed"
    runs = result.summary["runs"]
    assert [(r["grid_point"], r[key], r["seed"]) for r in runs] == [
        (point, value, seed) for point, value in enumerate(values) for seed in (0, 1)
    ]
    assert all(r["env_steps"] == env_steps for r in runs)
    assert np.isfinite(seed_values(result.summary, "final_eval_success_rate")).all()
    policies = [jaxrl.load(run_dir, seed=s, grid_point=p) for p in (0, 1) for s in (0, 1)]
    flat = [np.asarray(policy.params) for policy in policies]
    for i in range(4):
        for j in range(i):
            assert np.abs(flat[i] - flat[j]).max() > 1e-4, (i, j)
    choice, parameters = policies[0](np.zeros((5, 9), np.float32))
    assert choice.shape == (5,) and choice.dtype == jnp.int32 and parameters.shape == (5, 3)
    assert (parameters >= PLATFORM_LOW).all() and (parameters <= PLATFORM_HIGH).all()
