"""A2C (n-step returns) learns CartPole-v1 on a 2-core CPU budget."""

from __future__ import annotations

import jaxrl
from agents.a2c import A2CConfig
from jaxrl.cli import compose


def test_yaml_composes_onto_the_schema():
    cfg = compose(["agent=a2c"])
    assert isinstance(cfg.agent, A2CConfig)
    assert cfg.agent.gae_lambda == 1.0 and cfg.agent.num_steps == 16


def test_a2c_learns_cartpole(tmp_path):
    result = jaxrl.train(
        "agent=a2c",
        "env=CartPole-v1",
        "env.num_envs=8",
        "budget.env_steps=100000",
        "eval.every=50",
        "log.progress=false",
        "log.tensorboard=false",
        run_dir=tmp_path,
    )
    assert result.status == "completed"
    assert result.summary["final_eval_return"] >= 400, result.summary
