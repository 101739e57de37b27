"""Synchronous advantage actor-critic (A2C; Mnih et al. 2016, synchronous form): one gradient
step per rollout on −log π(a|s)·A + c_v·(V − R)² / 2 − c_e·H, where R are n-step returns
bootstrapped at the rollout's end (`gae_lambda=1`, the default) or GAE(λ) targets. The rollout
and returns are `jaxrl.onpolicy`'s, truncation bootstrapping from V(final_obs) included."""

from __future__ import annotations

from agents.configs import A2CConfig
from jaxrl.datatypes import Agent, Array
from jaxrl.distributions import Distribution
from jaxrl.env import Env
from jaxrl.onpolicy import (
    Algorithm,
    Sample,
    make_on_policy,
    policy_gradient_loss,
)


def a2c_loss(
    cfg: A2CConfig, dist: Distribution, value: Array, sample: Sample
) -> tuple[Array, dict[str, Array]]:
    """Per-sample A2C loss."""
    return policy_gradient_loss(dist, value, sample, cfg.vf_coef, cfg.ent_coef)


def make_a2c(cfg: A2CConfig, env: Env, total_env_steps: float) -> Agent:
    algorithm = Algorithm(
        loss=lambda dist, value, sample: a2c_loss(cfg, dist, value, sample),
        num_steps=cfg.num_steps,
        gae_lambda=cfg.gae_lambda,
    )
    return make_on_policy(cfg, env, algorithm, total_env_steps)
