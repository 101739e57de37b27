"""Environments of every family behind one constructor: `envs.make(cfg) -> Env`."""

from __future__ import annotations

from envs.brax_envs import BRAX_NAMES, DEFAULT_BACKEND, BraxEnvConfig, make_brax
from envs.gymnax_envs import MAX_EPISODE_STEPS, make_gymnax
from jaxrl.config import EnvConfig
from jaxrl.env import Env

JAX_NATIVE = tuple(MAX_EPISODE_STEPS)
# Listed whether or not Brax is installed: without it, `make` says how to install it.
BRAX = tuple(BRAX_NAMES)


def registered() -> tuple[str, ...]:
    """Every env name `make` accepts."""
    return JAX_NATIVE + BRAX


def config_for(env_id: str) -> EnvConfig:
    """The default env config of a registered name, of its family's config class."""
    if env_id in BRAX:
        return BraxEnvConfig(id=env_id)
    return EnvConfig(id=env_id)


def make(cfg: EnvConfig, num_envs: int | None = None) -> Env:
    """Build the env that `cfg.id` names; the family is read off the name (DESIGN.md §1)."""
    n = num_envs or cfg.num_envs or 1
    if cfg.id in JAX_NATIVE:
        return make_gymnax(cfg.id, n, cfg.max_episode_steps)
    if cfg.id in BRAX:
        backend = cfg.backend if isinstance(cfg, BraxEnvConfig) else DEFAULT_BACKEND
        return make_brax(cfg.id, n, cfg.max_episode_steps, backend)
    raise ValueError(f"unknown env '{cfg.id}'; valid envs: {', '.join(registered())}")
