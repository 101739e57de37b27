"""REINFORCE (Williams 1992): Monte-Carlo policy gradient with reward-to-go.

Every iteration runs each env of the batch for exactly one whole episode (envs that finish early
wait at their next episode's start), then takes one step on −log π(a_t|s_t)·(G_t − b_t) over all
the episodes' steps. The baseline b is a learned V(s) (trained on G by regression), the batch
mean of G, or none; returns are normalised over the batch by default (the reference experiment's
"normalised returns"). A truncated episode's return is completed with γ·V(final_obs) when a
critic is learned; without one it is cut (the Monte-Carlo estimate of a time-limited episode).
"""

from __future__ import annotations

from agents.configs import REINFORCEConfig
from jaxrl.datatypes import Agent, Array
from jaxrl.distributions import Distribution
from jaxrl.env import Env
from jaxrl.onpolicy import (
    Algorithm,
    Sample,
    make_on_policy,
    policy_gradient_loss,
)


def reinforce_loss(
    cfg: REINFORCEConfig, dist: Distribution, value: Array, sample: Sample
) -> tuple[Array, dict[str, Array]]:
    """Per-sample loss: −log π(a|s)·advantage, plus the baseline's regression when learned."""
    vf_coef = cfg.vf_coef if cfg.baseline == "learned" else 0.0
    return policy_gradient_loss(dist, value, sample, vf_coef, cfg.ent_coef)


def make_reinforce(cfg: REINFORCEConfig, env: Env, total_env_steps: float) -> Agent:
    algorithm = Algorithm(
        loss=lambda dist, value, sample: reinforce_loss(cfg, dist, value, sample),
        num_steps=None,
        critic=cfg.baseline == "learned",
        mean_baseline=cfg.baseline == "mean",
    )
    return make_on_policy(cfg, env, algorithm, total_env_steps)
