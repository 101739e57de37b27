"""`python -m jaxrl.sweep`: seed curves aligned, IQM, rliable's bands and performance profiles
right (checked by hand), files written; the objective a `-m` job returns to its sweeper."""

from __future__ import annotations

import csv
import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from rliable import metrics

from jaxrl.outputs import EVAL_COLUMNS
from jaxrl.sweep import (
    iqm,
    iqm_interval,
    objective,
    performance_profile,
    profile_thresholds,
    summarize,
)

REPO = Path(__file__).resolve().parents[2]


def write_evals(run_dir: Path, rows: list[tuple], run_columns: tuple[str, ...] = ("seed",)) -> None:
    """An evals.csv of `rows`: the run's columns (a grid's point and value, then the seed), then
    the loop's eval columns."""
    with open(run_dir / "evals.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow([*run_columns, *EVAL_COLUMNS])
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
    np.testing.assert_allclose(curves.iqm, curves.mean)  # below four seeds the IQM is the mean
    assert np.all(curves.ci_low <= curves.iqm) and np.all(curves.iqm <= curves.ci_high)
    assert curves.ci_low[1] >= 40.0 and curves.ci_high[1] <= 60.0
    assert (point.final, point.final_mean) == pytest.approx((50.0, 50.0))
    with open(tmp_path / "sweep.csv") as f:
        rows = list(csv.DictReader(f))
    assert list(rows[0]) == [
        "env_steps",
        "seed_0",
        "seed_1",
        "seed_2",
        "mean",
        "iqm",
        "iqm_ci95_low",
        "iqm_ci95_high",
    ]
    assert float(rows[0]["seed_1"]) == 21.0
    for name in ("sweep.png", "profile.png"):
        assert (tmp_path / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


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


def test_iqm_is_the_mean_of_the_middle_half():
    # 1..8: the middle half is 3, 4, 5, 6; 0, 10, 20, 1000: the middle half is 10, 20
    assert iqm(np.arange(1.0, 9.0)[:, None]) == pytest.approx([4.5])
    assert iqm(np.array([[0.0], [10.0], [20.0], [1000.0]])) == pytest.approx([15.0])
    # and per point it is rliable's own aggregate_iqm, run x task matrices included
    scores = np.random.default_rng(3).normal(size=(7, 2, 5))
    expected = [metrics.aggregate_iqm(scores[..., j]) for j in range(5)]
    np.testing.assert_allclose(iqm(scores), expected)


def test_stratified_bootstrap_interval_by_hand():
    """Two seeds, 10 and 30: a resample is {10, 10}, {10, 30} or {30, 30} (probability 1/4, 1/2,
    1/4), whose IQM (the mean below four seeds) is 10, 20 or 30, so the 2.5% and 97.5% quantiles
    are 10 and 30. Four seeds 0, 10, 20, 1000: the IQM is 0 when at least three draws are 0,
    probability (4·3 + 1)/4⁴ = 5.1% > 2.5%, so the band starts at 0, and likewise ends at 1000."""
    point, low, high = iqm_interval(np.array([[10.0], [30.0]]))
    assert (point[0], low[0], high[0]) == (20.0, 10.0, 30.0)
    point, low, high = iqm_interval(np.array([[0.0], [10.0], [20.0], [1000.0]]))
    assert (point[0], low[0], high[0]) == (15.0, 0.0, 1000.0)
    point, low, high = iqm_interval(np.full((5, 1), 7.0))  # seeds that agree: no width
    assert (point[0], low[0], high[0]) == (7.0, 7.0, 7.0)


def test_bootstrap_band_is_reproducible_and_scales_with_the_spread():
    rng = np.random.default_rng(1)
    spread = rng.normal(0, 10, size=(16, 3))
    state = np.random.get_state()
    _, low, high = iqm_interval(spread)
    # rliable draws from numpy's global generator: it is seeded and given back
    assert np.random.get_state()[1].tolist() == state[1].tolist()
    _, low_again, high_again = iqm_interval(spread)
    np.testing.assert_array_equal(low, low_again)
    np.testing.assert_array_equal(high, high_again)
    # the same resamples of seeds that agree ten times more: a band ten times narrower
    _, tight_low, tight_high = iqm_interval(spread * 0.1)
    np.testing.assert_allclose(tight_high - tight_low, 0.1 * (high - low))
    assert np.all(high - low > 0)


def test_performance_profile_by_hand():
    """Final returns 10, 20, 30, 40: the fraction above 5, 15, …, 45 is 1, ¾, ½, ¼, 0; where all
    seeds are above (or none) every resample agrees, so the band has no width."""
    profile, low, high = performance_profile(
        np.array([10.0, 20.0, 30.0, 40.0]), np.array([5.0, 15.0, 25.0, 35.0, 45.0])
    )
    np.testing.assert_allclose(profile, [1.0, 0.75, 0.5, 0.25, 0.0])
    assert (low[0], high[0], low[-1], high[-1]) == (1.0, 1.0, 0.0, 0.0)
    assert np.all(low <= profile) and np.all(profile <= high)
    assert low[2] < 0.5 < high[2]


def test_cli_reports_missing_run_dir(tmp_path):
    """A path that is not there, and a directory that holds no run: one line each, exit 2."""
    (tmp_path / "empty").mkdir()
    for name, says in (("nowhere", "no such directory"), ("empty", "holds neither evals.csv")):
        out = subprocess.run(
            [sys.executable, "-m", "jaxrl.sweep", str(tmp_path / name)],
            capture_output=True,
            text=True,
            cwd=REPO,
            timeout=120,
        )
        assert out.returncode == 2
        [line] = out.stderr.splitlines()
        assert line.startswith(f"error: {tmp_path / name}") and says in line, line


def test_cli_names_the_extra_when_rliable_is_missing(tmp_path):
    write_evals(tmp_path, [(0, 5, 100, 10.0, 1.0, 1.0)])
    hide = "import sys; sys.modules['rliable'] = None; from jaxrl.sweep import main; main()"
    out = subprocess.run(
        [sys.executable, "-c", hide, str(tmp_path)],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
    )
    assert out.returncode == 2
    assert out.stderr.splitlines() == [
        'error: sweep reports need rliable: pip install -e ".[sweep]"'
    ]


def test_grid_points_are_summarised_and_ranked_apart(tmp_path):
    """Two grid points x two seeds: each point gets its own band and row; the ranking puts the
    higher final return first and breaks a tie by the area under the mean curve."""
    write_evals(
        tmp_path,
        [
            (0, 0.001, 0, 5, 100, 10.0, 0.0, 1.0),
            (0, 0.001, 1, 5, 100, 30.0, 0.0, 1.0),
            (1, 0.0003, 0, 5, 100, 40.0, 0.0, 1.0),
            (1, 0.0003, 1, 5, 100, 60.0, 0.0, 1.0),
            (0, 0.001, 0, 10, 300, 100.0, 0.0, 2.0),
            (0, 0.001, 1, 10, 300, 100.0, 0.0, 2.0),
            (1, 0.0003, 0, 10, 300, 90.0, 0.0, 2.0),
            (1, 0.0003, 1, 10, 300, 70.0, 0.0, 2.0),
        ],
        ("grid_point", "learning_rate", "seed"),
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
    assert float(ranking[1]["final_iqm"]) == 80.0  # two seeds: the IQM is the mean
    with open(tmp_path / "sweep.csv") as f:
        rows = list(csv.DictReader(f))
    assert list(rows[0])[:3] == ["grid_point", "learning_rate", "env_steps"]
    assert [(r["grid_point"], r["env_steps"], r["mean"]) for r in rows] == [
        ("0", "100", "20"),
        ("0", "300", "100"),
        ("1", "100", "50"),
        ("1", "300", "80"),
    ]


def test_ranking_by_iqm_is_not_dragged_by_one_seed(tmp_path):
    """Four seeds each: point 0 has one seed at 1000 (mean 257.5, IQM of 10 and 20: 15), point 1
    ends at 30..60 (mean and IQM 45). The IQM ranks point 1 first; the mean would not."""
    finals = {0: [0.0, 10.0, 20.0, 1000.0], 1: [30.0, 40.0, 50.0, 60.0]}
    rows = [
        (point, 0.1 * (point + 1), seed, 5, 100, value, 0.0, 1.0)
        for point, values in finals.items()
        for seed, value in enumerate(values)
    ]
    write_evals(tmp_path, rows, ("grid_point", "clip_eps", "seed"))
    points = summarize(tmp_path)
    assert [(p.final, p.final_mean) for p in points] == pytest.approx([(15.0, 257.5), (45.0, 45.0)])
    with open(tmp_path / "ranking.csv") as f:
        ranking = list(csv.DictReader(f))
    assert [r["grid_point"] for r in ranking] == ["1", "0"]
    assert list(ranking[0])[3:] == [
        "final_iqm",
        "final_iqm_ci95_low",
        "final_iqm_ci95_high",
        "final_mean",
        "best_mean",
        "auc",
        "seeds",
    ]
    # four seeds 0, 10, 20, 1000: the band is [0, 1000] (test_stratified_bootstrap_interval_by_hand)
    row = ranking[1]
    assert (float(row["final_iqm_ci95_low"]), float(row["final_iqm_ci95_high"])) == (0.0, 1000.0)
    # profile.png's thresholds: every seed's final return, a twentieth of the range beyond both
    taus = profile_thresholds(points)
    assert (taus[0], taus[-1]) == pytest.approx((-50.0, 1050.0))


def test_objective_is_the_best_points_value(tmp_path):
    """What a `-m` job returns to its sweeper: the best grid point's mean final (or best) return
    from summary.json, or the area under its mean curve from evals.csv; a point without a finite
    value is passed over."""
    summary = {
        "final_eval_return": 30.0,
        "best_eval_return": 50.0,
        "grid": [
            {"grid_point": 0, "final_eval_return": 20.0, "best_eval_return": 70.0},
            {"grid_point": 1, "final_eval_return": 40.0, "best_eval_return": 45.0},
            {"grid_point": 2, "final_eval_return": None, "best_eval_return": None},
        ],
    }
    (tmp_path / "summary.json").write_text(json.dumps(summary))
    assert objective(tmp_path) == objective(tmp_path, "final") == 40.0
    assert objective(tmp_path, "best") == 70.0
    del summary["grid"]  # without a grid: the run's own mean over seeds
    (tmp_path / "summary.json").write_text(json.dumps(summary))
    assert (objective(tmp_path, "final"), objective(tmp_path, "best")) == (30.0, 50.0)
    summary["final_eval_return"] = None
    (tmp_path / "summary.json").write_text(json.dumps(summary))
    assert math.isnan(objective(tmp_path, "final"))

    # area under the mean curve per env step: point 0's mean goes 10 → 30 over env steps 100..300
    # (20), point 1's 45 → 5 (25), though its final mean is the lower one
    rows = [
        (0, 0.1, 0, 1, 100, 0.0, 0.0, 1.0),
        (0, 0.1, 1, 1, 100, 20.0, 0.0, 1.0),
        (0, 0.1, 0, 2, 300, 20.0, 0.0, 2.0),
        (0, 0.1, 1, 2, 300, 40.0, 0.0, 2.0),
        (1, 0.2, 0, 1, 100, 40.0, 0.0, 1.0),
        (1, 0.2, 1, 1, 100, 50.0, 0.0, 1.0),
        (1, 0.2, 0, 2, 300, 10.0, 0.0, 2.0),
        (1, 0.2, 1, 2, 300, 0.0, 0.0, 2.0),
    ]
    write_evals(tmp_path, rows, ("grid_point", "clip_eps", "seed"))
    assert objective(tmp_path, "auc") == pytest.approx(25.0)
    with pytest.raises(ValueError, match="valid: final, best, auc"):
        objective(tmp_path, "median")
