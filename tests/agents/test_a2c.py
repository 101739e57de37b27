"""A2C (n-step returns) learns CartPole-v1 on a 2-core CPU budget."""

from __future__ import annotations

from learning import assert_mean_at_least

import jaxrl
from agents.a2c import A2CConfig
from jaxrl.cli import compose


def test_yaml_composes_onto_the_schema():
    cfg = compose(["agent=a2c"])
    assert isinstance(cfg.agent, A2CConfig)
    assert cfg.agent.gae_lambda == 1.0 and cfg.agent.num_steps == 16


def test_a2c_learns_cartpole(tmp_path):
    """4 seeds, 100k env steps each (8 envs). A2C's CartPole policy oscillates near the top, so
    one seed's last evaluation says little. Threshold: mean 200, well below the mean measured
    (benchmarks/results/learning_tests.md)."""
    result = jaxrl.train(
        "agent=a2c",
        "env=CartPole-v1",
        "env.num_envs=8",
        "num_seeds=4",
        "budget.env_steps=100000",
        "eval.every=50",
        "log.progress=false",
        "log.tensorboard=false",
        run_dir=tmp_path,
    )
    assert result.status == "completed"
    assert_mean_at_least(result.summary, 200)
