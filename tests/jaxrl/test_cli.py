"""The command line as a user meets it: `python -m jaxrl.run ...` in a subprocess."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from jaxrl.cli import compose, main

TINY = ("agent.population_size=8", "agent.episodes_per_member=1", "agent.hidden_sizes=[8]")


def cli(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "jaxrl.run", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["agent=foo"], "error: unknown agent 'foo'; valid agents: es"),
        (["env=Foo-v0"], "error: unknown env 'Foo-v0'; valid envs: CartPole-v1"),
        (["agent.foo=1"], "error: unknown config key 'agent.foo'; valid keys under 'agent':"),
        (["foo=1"], "error: unknown config key 'foo'; valid keys: agent, env, seed"),
        (["seed=abc"], "error: invalid value for 'seed'"),
        (["agent.population_size=63"], "error: agent.population_size=63 must be even"),
        (["agent.sigma=-0.1"], "error: agent.sigma=-0.1 must be > 0"),
        (["budget.env_steps=0"], "error: budget.env_steps=0.0 must be a number of env steps"),
        (
            ["agent.fitness_shaping=raw"],
            "error: agent.fitness_shaping='raw' is not one of: centered_ranks, zscore",
        ),
    ],
)
def test_bad_input_is_one_clear_line_and_exit_2(
    args: list[str], message: str, capsys: pytest.CaptureFixture
) -> None:
    """Through the CLI's entry point in-process (the subprocess test below covers `python -m`)."""
    with pytest.raises(SystemExit) as exit_info:
        main(args)
    assert exit_info.value.code == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1, captured.err
    assert lines[0].startswith(message), lines[0]


def test_bad_input_through_python_m_has_no_traceback() -> None:
    result = cli("agent.population_size=63")
    assert result.returncode == 2
    assert result.stderr.strip() == (
        "error: agent.population_size=63 must be even: members come in antithetic pairs (try 64)"
    )
    assert result.stdout == ""


def test_overrides_compose_hydra_style() -> None:
    cfg = compose(
        [
            "agent=es",
            "env=Pendulum-v1",
            "seed=3",
            "agent.population_size=256",
            "agent.sigma=0.05",
            "budget.env_steps=2e6",
        ]
    )
    assert (cfg.env.id, cfg.seed, cfg.agent.population_size) == ("Pendulum-v1", 3, 256)
    assert cfg.agent.sigma == 0.05 and cfg.budget.env_steps == 2e6
    assert cfg.agent.learning_rate == 0.02  # untouched defaults stay the YAML's


def test_nan_stops_the_run_and_keeps_the_last_good_checkpoint(tmp_path: Path) -> None:
    """σ = 3e38 overflows the perturbed weights: the run must stop with a message and exit 1,
    leaving only the finite initial checkpoint."""
    run_dir = tmp_path / "nan"
    result = cli("env=Pendulum-v1", "agent.sigma=3e38", *TINY, "eval.every=1", f"log.dir={run_dir}")
    assert result.returncode == 1
    assert "error: non-finite parameters" in result.stderr
    assert "last good checkpoint (iteration 0) is kept" in result.stderr
    assert sorted(p.name for p in (run_dir / "checkpoints").iterdir()) == ["0"]
    assert json.loads((run_dir / "summary.json").read_text())["status"] == "nan"


def test_seed_sweep_writes_a_run_per_seed(tmp_path: Path) -> None:
    run_dir = tmp_path / "sweep"
    result = cli("num_seeds=3", "seed=5", *TINY, "budget.env_steps=2e3", f"log.dir={run_dir}")
    assert result.returncode == 0, result.stderr
    summary = json.loads((run_dir / "summary.json").read_text())
    assert [row["seed"] for row in summary["seeds"]] == [5, 6, 7]
    assert sorted(p.name for p in (run_dir / "tb").iterdir()) == ["seed_5", "seed_6", "seed_7"]
    # Different seeds really are different runs.
    assert len({row["env_steps"] for row in summary["seeds"]}) > 1


def test_ctrl_c_writes_a_checkpoint_and_exits_130(tmp_path: Path) -> None:
    run_dir = tmp_path / "interrupted"
    args = ["-m", "jaxrl.run", *TINY, "budget.env_steps=1e9", "eval.every=1", f"log.dir={run_dir}"]
    proc = subprocess.Popen([sys.executable, *args], stderr=subprocess.PIPE, text=True)
    evals = run_dir / "evals.csv"
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        if evals.exists() and len(evals.read_text().splitlines()) > 2:
            break
        time.sleep(0.2)
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, stderr
    assert "interrupted: checkpoint at iteration" in stderr
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "interrupted"
    steps = sorted(int(p.name) for p in (run_dir / "checkpoints").iterdir() if p.name.isdigit())
    assert steps[-1] == summary["iterations"] > 0


def test_hydra_multirun_composes_with_num_seeds(tmp_path: Path) -> None:
    """`-m` sweeps a hyperparameter; each job is its own run with all its seeds."""
    result = cli(
        "-m",
        "agent.sigma=0.02,0.05",
        "num_seeds=2",
        *TINY,
        "budget.env_steps=2e3",
        "log.progress=false",
        f"hydra.sweep.dir={tmp_path}",
    )
    assert result.returncode == 0, result.stderr
    sigmas = []
    for job in ("0", "1"):
        summary = json.loads((tmp_path / job / "summary.json").read_text())
        assert [row["seed"] for row in summary["seeds"]] == [0, 1]
        sigmas.append(json.loads((tmp_path / job / "config.json").read_text())["agent"]["sigma"])
    assert sigmas == [0.02, 0.05]
