"""TD3 (Fujimoto et al. 2018): twin critics, target policy smoothing and delayed actor updates on
top of DDPG. The learner is `jaxrl.deterministic`'s, shared with DDPG and ERL; this module names
the agent and gives it TD3's defaults, through the off-policy driver (`jaxrl.offpolicy`).
"""

from __future__ import annotations

from dataclasses import dataclass

from jaxrl.datatypes import Agent
from jaxrl.deterministic import DeterministicConfig, make_deterministic_learner
from jaxrl.env import Env
from jaxrl.offpolicy import make_off_policy


@dataclass(frozen=True)
class TD3Config(DeterministicConfig):
    """The deterministic learner's keys at TD3's published defaults."""

    name: str = "td3"


def make_td3(cfg: TD3Config, env: Env) -> Agent:
    """TD3 on `env`'s batch through the off-policy driver."""
    return make_off_policy(cfg, env, make_deterministic_learner(cfg, env.spec))
