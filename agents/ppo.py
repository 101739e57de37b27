"""Proximal Policy Optimization (Schulman et al. 2017) with the usual implementation details:
GAE(λ), clipped surrogate, optional value clipping, entropy bonus, global-norm gradient clipping,
minibatch epochs, learning-rate annealing, observation and return normalisation, and truncated
episodes bootstrapped from V(final_obs). The rollout, advantages and update loop are
`jaxrl.onpolicy`'s; this module is the loss.

The env batch is `env.num_envs` (default 4, PureJaxRL's CartPole setting).
"""

from __future__ import annotations

import chex

from agents.configs import PPOConfig
from jaxrl.datatypes import Agent, Array
from jaxrl.distributions import Distribution
from jaxrl.env import Env
from jaxrl.onpolicy import (
    Algorithm,
    Sample,
    clipped_surrogate,
    clipped_value_loss,
    make_on_policy,
    ratio_metrics,
)


def ppo_loss(
    cfg: PPOConfig, dist: Distribution, value: Array, sample: Sample
) -> tuple[Array, dict[str, Array]]:
    """Per-sample PPO loss: −min(ρA, clip(ρ, 1±ε)A) + c_v·value loss − c_e·entropy."""
    chex.assert_rank([value, sample.advantage, sample.target, sample.log_prob], 0)
    log_ratio = dist.log_prob(sample.raw_action) - sample.log_prob
    policy_loss = clipped_surrogate(log_ratio, sample.advantage, cfg.clip_eps)
    value_loss = clipped_value_loss(value, sample, cfg.clip_eps, cfg.clip_value)
    entropy = dist.entropy()
    loss = policy_loss + cfg.vf_coef * value_loss - cfg.ent_coef * entropy
    return loss, {
        "policy_loss": policy_loss,
        "value_loss": value_loss,
        "entropy": entropy,
        **ratio_metrics(log_ratio, cfg.clip_eps),
    }


def make_ppo(cfg: PPOConfig, env: Env, total_env_steps: float) -> Agent:
    algorithm = Algorithm(
        loss=lambda dist, value, sample: ppo_loss(cfg, dist, value, sample),
        num_steps=cfg.num_steps,
        gae_lambda=cfg.gae_lambda,
        epochs=cfg.update_epochs,
        minibatches=cfg.num_minibatches,
    )
    return make_on_policy(cfg, env, algorithm, total_env_steps)
