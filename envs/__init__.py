"""Environments of every family behind one constructor: `envs.make(cfg) -> Env`."""

from __future__ import annotations

from envs.gymnax_envs import MAX_EPISODE_STEPS, make_gymnax
from jaxrl.config import EnvConfig
from jaxrl.env import Env

JAX_NATIVE = tuple(MAX_EPISODE_STEPS)


def registered() -> tuple[str, ...]:
    """Every env name `make` accepts."""
    return JAX_NATIVE


def make(cfg: EnvConfig, num_envs: int | None = None) -> Env:
    """Build the env that `cfg.id` names; the family is read off the name (DESIGN.md §1)."""
    n = num_envs if num_envs is not None else cfg.num_envs
    if cfg.id in JAX_NATIVE:
        return make_gymnax(cfg.id, n, cfg.max_episode_steps)
    raise ValueError(f"unknown env '{cfg.id}'; valid envs: {', '.join(registered())}")
