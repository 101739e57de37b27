"""DDPG (Lillicrap et al. 2016), the learner of ERL (Khadka & Tumer 2018): the deterministic
learner of `jaxrl.deterministic` with one critic, no target policy smoothing and no delay.

Defaults follow the re-tuned DDPG that Fujimoto et al. (2018) compare TD3 against ("OurDDPG":
256-256 ReLU, Adam 3e-4, batch 256, τ 0.005, exploration σ 0.1); Lillicrap et al.'s values
(actor lr 1e-4, critic lr 1e-3, τ 0.001, 400-300) are overrides away. `layer_norm=true` adds the
layer norm ERL's code uses in actor and critic.
"""

from __future__ import annotations

from agents.configs import DDPGConfig
from jaxrl.datatypes import Agent
from jaxrl.deterministic import make_deterministic_learner
from jaxrl.env import Env
from jaxrl.offpolicy import make_off_policy


def make_ddpg(cfg: DDPGConfig, env: Env, total_env_steps: float) -> Agent:
    """DDPG on `env`'s batch through the off-policy driver; `total_env_steps` is the run's
    budget (the annealing horizon with `anneal_lr`)."""
    return make_off_policy(cfg, env, make_deterministic_learner(cfg, env.spec, total_env_steps))
