"""DAgger against behaviour cloning on Pendulum-v1 with a SAC expert trained by jaxrl
(conftest.pendulum_sac_expert): DAgger reaches the expert, and BC from as many expert-labelled
steps does not beat it. How far below BC stays (the compounding error of Ross et al. 2011)
depends on the expert's demonstrations, not only on the seeds, and on how the forms round
(benchmarks/results/learning_tests.md). The driver's hand-computed checks are
tests/jaxrl/test_imitation.py's."""

from __future__ import annotations

import numpy as np
import pytest
from learning import normalized_scores, random_policy_return

import jaxrl

QUIET = ("log.progress=false", "log.tensorboard=false")
LABELLED_STEPS = 16_000  # DAgger labels every visited state: its env-step budget
LEARNER = ("env=Pendulum-v1", "num_seeds=4", "agent.hidden_sizes=[64,64]", "eval.every=5")


@pytest.fixture(scope="module")
def scores(pendulum_sac_expert, tmp_path_factory) -> dict[str, np.ndarray]:
    """Normalised final scores of DAgger and of BC from the same 16k expert-labelled steps (80
    episodes of 200 steps), each 4 seeds in one program with the same budget and updates."""
    expert = pendulum_sac_expert.run_dir
    expert_return = pendulum_sac_expert.summary["runs"][0]["final_eval_return"]
    random = random_policy_return("Pendulum-v1")
    runs = {
        "dagger": ("agent=dagger",),
        "bc": ("agent=bc", f"agent.expert_episodes={LABELLED_STEPS // 200}"),
    }
    out = {}
    for name, agent in runs.items():
        result = jaxrl.train(
            *agent,
            f"agent.expert={expert}",
            *LEARNER,
            f"budget.env_steps={LABELLED_STEPS}",
            *QUIET,
            run_dir=tmp_path_factory.mktemp(name),
        )
        assert result.summary["runs"][0]["final_eval_return"] is not None
        out[name] = normalized_scores(result.summary, expert_return, random)
    return out


@pytest.mark.slow
def test_dagger_reaches_the_expert(scores):
    """Mean over 4 seeds of (R − R_random)/(R_expert − R_random) ≥ 0.8, R_random ≈ −1195
    (uniform actions), R_expert the SAC expert's seed-0 final evaluation: below every seed
    measured (benchmarks/results/learning_tests.md, benchmarks/results/imitation.md)."""
    assert scores["dagger"].mean() >= 0.8, scores


@pytest.mark.slow
def test_bc_from_as_many_labels_does_not_beat_dagger(scores):
    """BC's mean score does not exceed DAgger's with the same 16k labelled steps."""
    assert scores["bc"].mean() <= scores["dagger"].mean(), scores
