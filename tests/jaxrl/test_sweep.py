"""`python -m jaxrl.sweep`: seed curves aligned, mean and bootstrap band right, files written."""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from jaxrl.outputs import EVAL_COLUMNS
from jaxrl.sweep import bootstrap_ci, summarize

REPO = Path(__file__).resolve().parents[2]


def write_evals(run_dir: Path, rows: list[tuple]) -> None:
    with open(run_dir / "evals.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["seed", *EVAL_COLUMNS])
        w.writerows(rows)


def test_sweep_writes_csv_and_png(tmp_path):
    # three seeds, two evaluations each; seed 1 re-logged iteration 5 after a resume
    write_evals(
        tmp_path,
        [
            (0, 5, 100, 10.0, 1.0, 1.0),
            (1, 5, 100, 20.0, 1.0, 1.0),
            (2, 5, 100, 30.0, 1.0, 1.0),
            (0, 10, 200, 40.0, 1.0, 2.0),
            (1, 10, 200, 50.0, 1.0, 2.0),
            (2, 10, 200, 60.0, 1.0, 2.0),
            (1, 5, 100, 21.0, 1.0, 3.0),
        ],
    )
    [point] = summarize(tmp_path)
    curves = point.curves
    np.testing.assert_array_equal(curves.env_steps, [100, 200])
    np.testing.assert_allclose(curves.mean, [61 / 3, 50.0])
    assert np.all(curves.ci_low <= curves.mean) and np.all(curves.mean <= curves.ci_high)
    assert curves.ci_low[1] >= 40.0 and curves.ci_high[1] <= 60.0
    with open(tmp_path / "sweep.csv") as f:
        rows = list(csv.DictReader(f))
    assert list(rows[0]) == [
        "env_steps",
        "seed_0",
        "seed_1",
        "seed_2",
        "mean",
        "ci95_low",
        "ci95_high",
    ]
    assert float(rows[0]["seed_1"]) == 21.0
    assert (tmp_path / "sweep.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_seeds_with_different_steps_are_interpolated(tmp_path):
    write_evals(
        tmp_path,
        [
            (0, 1, 100, 0.0, 0.0, 1.0),
            (1, 1, 150, 10.0, 0.0, 1.0),
            (0, 2, 200, 20.0, 0.0, 2.0),
            (1, 2, 250, 30.0, 0.0, 2.0),
        ],
    )
    [point] = summarize(tmp_path)
    curves = point.curves
    # From the latest first evaluation (150) over the union of steps; seed 0 at 150 is halfway
    # between 0 and 20, and it holds its final 20 at 250, after it stopped.
    np.testing.assert_array_equal(curves.env_steps, [150, 200, 250])
    np.testing.assert_allclose(curves.returns, [[10.0, 20.0, 20.0], [10.0, 20.0, 30.0]])


def test_es_like_seeds_that_evaluate_at_unrelated_steps(tmp_path):
    """ES counts whole episodes: one seed's evaluations can all come before another's first
    (the sweep crashed on this); the later seed's first step starts the common axis."""
    write_evals(
        tmp_path,
        [
            (0, 5, 300, 100.0, 0.0, 1.0),
            (1, 5, 700, 300.0, 0.0, 1.0),
            (0, 10, 600, 200.0, 0.0, 2.0),
            (1, 10, 900, 500.0, 0.0, 2.0),
        ],
    )
    [point] = summarize(tmp_path)
    curves = point.curves
    np.testing.assert_array_equal(curves.env_steps, [700, 900])
    np.testing.assert_allclose(curves.returns, [[200.0, 200.0], [300.0, 500.0]])
    np.testing.assert_allclose(curves.mean, [250.0, 350.0])


def test_bootstrap_band_narrows_with_agreement():
    rng = np.random.default_rng(1)
    spread = rng.normal(0, 10, size=(16, 1))
    low, high = bootstrap_ci(spread)
    tight_low, tight_high = bootstrap_ci(spread * 0.1)
    assert (tight_high - tight_low) < (high - low)
    # about ±1.96·σ/√n for a normal sample
    assert (high - low)[0] == pytest.approx(2 * 1.96 * spread.std() / 4, rel=0.3)


def test_cli_reports_missing_run_dir(tmp_path):
    out = subprocess.run(
        [sys.executable, "-m", "jaxrl.sweep", str(tmp_path / "nowhere")],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
    )
    assert out.returncode != 0
    assert "evals.csv" in out.stderr and "Traceback" not in out.stderr


def test_grid_points_are_summarised_and_ranked_apart(tmp_path):
    """Two grid points x two seeds: each point gets its own band and row; the ranking puts the
    higher final return first and breaks a tie by the area under the mean curve."""
    with open(tmp_path / "evals.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["grid_point", "learning_rate", "seed", *EVAL_COLUMNS])
        w.writerows(
            [
                (0, 0.001, 0, 5, 100, 10.0, 0.0, 1.0),
                (0, 0.001, 1, 5, 100, 30.0, 0.0, 1.0),
                (1, 0.0003, 0, 5, 100, 40.0, 0.0, 1.0),
                (1, 0.0003, 1, 5, 100, 60.0, 0.0, 1.0),
                (0, 0.001, 0, 10, 300, 100.0, 0.0, 2.0),
                (0, 0.001, 1, 10, 300, 100.0, 0.0, 2.0),
                (1, 0.0003, 0, 10, 300, 90.0, 0.0, 2.0),
                (1, 0.0003, 1, 10, 300, 70.0, 0.0, 2.0),
            ]
        )
    first, second = summarize(tmp_path)
    assert (first.grid_point, first.values) == (0, {"learning_rate": 0.001})
    np.testing.assert_allclose(first.curves.mean, [20.0, 100.0])
    np.testing.assert_allclose(second.curves.mean, [50.0, 80.0])
    # area under the mean curve / its span: (20 + 100) / 2 and (50 + 80) / 2
    assert (first.auc, second.auc) == pytest.approx((60.0, 65.0))
    assert (first.best, second.best) == pytest.approx((100.0, 80.0))  # (90 + 70) / 2
    with open(tmp_path / "ranking.csv") as f:
        ranking = list(csv.DictReader(f))
    assert [(r["rank"], r["grid_point"], r["learning_rate"]) for r in ranking] == [
        ("1", "0", "0.001"),
        ("2", "1", "0.0003"),
    ]
    assert float(ranking[1]["final_mean"]) == 80.0
    with open(tmp_path / "sweep.csv") as f:
        rows = list(csv.DictReader(f))
    assert list(rows[0])[:3] == ["grid_point", "learning_rate", "env_steps"]
    assert [(r["grid_point"], r["env_steps"], r["mean"]) for r in rows] == [
        ("0", "100", "20"),
        ("0", "300", "100"),
        ("1", "100", "50"),
        ("1", "300", "80"),
    ]
