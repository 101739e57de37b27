"""Hyperparameters as data: a grid of agent configs that differ only in values that change no
array shape, trained together in one compiled program.

An agent's config class lists those values in `HYPERPARAMETERS`. For a grid run the training
loop passes them to the compiled chunk as a pytree of per-run float32 scalars (one run per grid
point and seed, vmapped like seeds) and builds the agent inside the traced program from a copy of
the config whose hyperparameter fields hold those traced scalars (`traced_config`). So an agent
factory must use a hyperparameter only in array arithmetic, never in Python control flow
(`if cfg.x`), a shape or a `float(...)`; `tests/jaxrl/test_hyper.py` traces every agent that way.
A run without a grid keeps them as Python constants: its program is exactly the one it was.
"""

from __future__ import annotations

import copy
import dataclasses
import itertools
import math
import sys
from typing import Any

import numpy as np

from jaxrl.config import ConfigError


def hyperparameters(config: Any) -> tuple[str, ...]:
    """The keys of an agent config (class or instance) that a grid may vary."""
    return tuple(getattr(config, "HYPERPARAMETERS", ()))


def grid_points(agent_cfg: Any, grid: dict[str, list[float]]) -> list[dict[str, float]]:
    """Every combination of the grid's values (the last key varies fastest), each checked as a
    config of its own so that a bad value is refused with the agent's own message."""
    if not grid:
        return []
    names = {f.name for f in dataclasses.fields(agent_cfg)}
    allowed = hyperparameters(agent_cfg)
    for key, values in grid.items():
        if key not in names:
            raise ConfigError(
                f"grid.agent.{key}: '{key}' is not a key of agent {agent_cfg.name}; keys a grid "
                f"may vary: {', '.join(allowed)}"
            )
        if key not in allowed:
            listed = (
                ",".join(f"{float(v):g}" for v in values)
                if isinstance(values, list | tuple)
                else ""
            )
            raise ConfigError(
                f"grid.agent.{key}: '{key}' changes the compiled program's shapes or structure, "
                f"so it cannot vary inside one program; sweep it with Hydra's multirun instead "
                f"(one program per value, composes with grid.*): -m agent.{key}={listed}. Keys a "
                f"grid may vary: {', '.join(allowed)}"
            )
        if not isinstance(values, list | tuple) or not values:
            raise ConfigError(
                f"grid.agent.{key}={values}: give a non-empty list of values, e.g. "
                f"grid.agent.{key}=[1e-3,3e-4]"
            )
        bad = [v for v in values if not math.isfinite(float(v))]
        if bad:
            raise ConfigError(f"grid.agent.{key}={list(values)}: {bad[0]} is not a finite number")
    keys = list(grid)
    points = [
        dict(zip(keys, (float(v) for v in combination), strict=True))
        for combination in itertools.product(*(grid[k] for k in keys))
    ]
    for point in points:
        try:
            dataclasses.replace(agent_cfg, **point)
        except ConfigError as e:
            raise ConfigError(f"grid point {point_name(point)}: {e}") from None
    return points


def stacked(points: list[dict[str, float]], repeats: int) -> dict[str, np.ndarray]:
    """Per-run float32 values, point-major: run r is point r // repeats."""
    if not points:
        return {}
    return {
        key: np.repeat(np.asarray([p[key] for p in points], np.float32), repeats)
        for key in points[0]
    }


def is_array(value: Any) -> bool:
    """Whether a config field holds a JAX array (a grid's traced value) rather than a Python
    constant; without importing JAX, which a process that never imported it cannot hold."""
    jax = sys.modules.get("jax")
    return jax is not None and isinstance(value, jax.Array)


def traced_config(agent_cfg: Any, values: dict[str, Any]) -> Any:
    """A copy of `agent_cfg` whose hyperparameter fields hold `values` (traced scalars). Range
    checks are skipped: every grid point was checked by `grid_points`."""
    if not values:
        return agent_cfg
    traced = copy.copy(agent_cfg)
    for key, value in values.items():
        object.__setattr__(traced, key, value)
    return traced


def point_name(point: dict[str, float]) -> str:
    """A grid point as it appears in names and messages: `learning_rate=0.001,ent_coef=0`."""
    return ",".join(f"{k}={v:g}" for k, v in point.items())
