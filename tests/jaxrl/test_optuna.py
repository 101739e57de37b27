"""Hydra's Optuna sweeper drives `python -m jaxrl.run -m` as it is (examples/optuna_ppo.sh): each
trial is a grid x seeds program whose objective, read from its summary.json, the job returns."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from cli_helpers import REPO, cli, error_lines

EXAMPLE = REPO / "examples" / "optuna_ppo.sh"
LOW, HIGH = 1e-4, 3e-3  # the example's learning-rate interval


def test_the_example_study_returns_each_trials_objective(tmp_path: Path) -> None:
    """Two trials of the example, each 2 clip ε x 2 seeds of PPO for 4 iterations: Optuna's best
    learning rate lies in the interval and its best value is what that trial's summary.json says
    its best grid point's mean final return was, the larger of the two trials'."""
    pytest.importorskip("hydra_plugins.hydra_optuna_sweeper")
    tiny = (
        "hydra.sweeper.n_trials=2",
        "agent.num_steps=32",
        "agent.num_minibatches=2",
        "grid.agent.clip_eps=[0.1,0.2]",
        "num_seeds=2",
        "budget.env_steps=512",
        "log.tensorboard=false",
        f"hydra.sweep.dir={tmp_path}",
    )
    env = {**os.environ, "PYTHONPATH": str(REPO), "PYTHON": sys.executable}
    result = subprocess.run(
        ["bash", str(EXAMPLE), *tiny], capture_output=True, text=True, env=env, timeout=300
    )
    assert result.returncode == 0, result.stderr

    study = yaml.safe_load((tmp_path / "optimization_results.yaml").read_text())
    [(key, best_lr)] = study["best_params"].items()
    assert key == "agent.learning_rate" and LOW <= best_lr <= HIGH

    objectives = {}
    for trial in ("0", "1"):
        config = json.loads((tmp_path / trial / "config.json").read_text())
        summary = json.loads((tmp_path / trial / "summary.json").read_text())
        assert len(summary["runs"]) == 4 and [g["clip_eps"] for g in summary["grid"]] == [0.1, 0.2]
        best_point = max(g["final_eval_return"] for g in summary["grid"])
        objectives[config["agent"]["learning_rate"]] = best_point
    assert len(objectives) == 2  # two trials, two learning rates
    assert study["best_value"] == objectives[best_lr] == max(objectives.values())


@pytest.mark.parametrize(
    ("override", "message"),
    [
        (
            "agent.learning_rate=interval(-1e-3,1e-3)",  # Optuna might sample a negative rate
            "error: agent.learning_rate=-0.001 must be > 0",
        ),
        (
            "agent.update_epochs=interval(1,5)",  # floats for an int: int(interval(1,5)) is right
            "error: invalid value for 'agent.update_epochs': Value '1.0' of type 'float' could "
            "not be converted to Integer",
        ),
        (
            "sweep_objective=median",
            "error: sweep_objective=median: valid objectives: final, best, auc",
        ),
    ],
)
def test_a_bad_search_space_is_refused_before_any_trial(
    tmp_path: Path, override: str, message: str
) -> None:
    """An interval is checked at both ends before the study starts, not at the trial that
    happens to sample a bad value."""
    pytest.importorskip("hydra_plugins.hydra_optuna_sweeper")
    result = cli("-m", "hydra/sweeper=optuna", "agent=ppo", override, f"hydra.sweep.dir={tmp_path}")
    assert result.returncode == 2
    assert error_lines(result.stderr) == [message]
    assert not list(tmp_path.iterdir())  # no trial ran


def test_sweep_objective_needs_a_sweep() -> None:
    result = cli("agent=ppo", "sweep_objective=best")
    assert result.returncode == 2
    assert error_lines(result.stderr) == [
        "error: sweep_objective= is what each -m job returns to its sweeper "
        "(hydra/sweeper=optuna); a single run has none"
    ]


def test_the_optuna_sweeper_without_the_extra_is_one_line() -> None:
    """As on a machine without the `optuna` extra: the plugin module made unimportable."""
    hide = (
        "import sys; sys.modules['hydra_plugins.hydra_optuna_sweeper'] = None; "
        "from jaxrl.cli import main; main()"
    )
    result = subprocess.run(
        [sys.executable, "-c", hide, "-m", "hydra/sweeper=optuna", "agent=ppo"],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
    )
    assert result.returncode == 2
    assert error_lines(result.stderr) == [
        'error: hydra/sweeper=optuna needs Hydra\'s Optuna sweeper: pip install -e ".[optuna]"'
    ]
