"""DDPG (Lillicrap et al. 2016), the learner of ERL (Khadka & Tumer 2018): TD3's learner
(`agents.td3.make_td3_learner`) with one critic, no target policy smoothing and no delay.

Defaults follow the re-tuned DDPG that Fujimoto et al. (2018) compare TD3 against ("OurDDPG":
256-256 ReLU, Adam 3e-4, batch 256, τ 0.005, exploration σ 0.1); Lillicrap et al.'s values
(actor lr 1e-4, critic lr 1e-3, τ 0.001, 400-300) are overrides away. `layer_norm=true` adds the
layer norm ERL's code uses in actor and critic.
"""

from __future__ import annotations

from dataclasses import dataclass

from agents.td3 import TD3Config, make_td3
from jaxrl.datatypes import Agent
from jaxrl.env import Env


@dataclass(frozen=True)
class DDPGConfig(TD3Config):
    """TD3's keys with DDPG's defaults; setting the TD3 ones back turns it into TD3."""

    name: str = "ddpg"
    twin_critics: bool = False
    policy_delay: int = 1
    target_noise: float = 0.0


def make_ddpg(cfg: DDPGConfig, env: Env) -> Agent:
    return make_td3(cfg, env)
