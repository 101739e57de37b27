"""TD3 (Fujimoto et al. 2018): twin critics, target policy smoothing and delayed actor updates on
top of DDPG. The learner is `jaxrl.deterministic`'s, shared with DDPG and ERL; this module names
the agent and gives it TD3's defaults, through the off-policy driver (`jaxrl.offpolicy`).
"""

from __future__ import annotations

from agents.configs import TD3Config
from jaxrl.datatypes import Agent
from jaxrl.deterministic import make_deterministic_learner
from jaxrl.env import Env
from jaxrl.offpolicy import make_off_policy


def make_td3(cfg: TD3Config, env: Env, total_env_steps: float) -> Agent:
    """TD3 on `env`'s batch through the off-policy driver; `total_env_steps` is the run's
    budget (the annealing horizon with `anneal_lr`)."""
    return make_off_policy(cfg, env, make_deterministic_learner(cfg, env.spec, total_env_steps))
