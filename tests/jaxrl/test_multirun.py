"""`-m` sweeps as a cluster runs them: jobs through Hydra's submitit launcher (its local executor
here, the SLURM one's twin), every job run to its end, the failed ones listed, and `python -m
jaxrl.sweep` gathering the jobs' run directories into one report (numbers checked by hand)."""

from __future__ import annotations

import csv
import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from jaxrl.multirun import unfinished_jobs
from jaxrl.sweep import read_sweep, skipped_jobs, summarize
from tests.cli_helpers import (
    TINY_ES,
    cli,
    error_lines,
    pythonpath,
    read_evals,
    start,
    wait_for_evals,
)
from tests.jaxrl.test_sweep import write_evals


def make_job(
    sweep_dir: Path,
    num: int,
    overrides: list[str],
    rows: list[tuple],
    status: str = "completed",
    run_columns: tuple[str, ...] = ("seed",),
) -> Path:
    """A job directory as Hydra and a run leave it: `.hydra/overrides.yaml`, evals.csv, summary."""
    job = sweep_dir / str(num)
    (job / ".hydra").mkdir(parents=True)
    OmegaConf.save(OmegaConf.create(overrides), job / ".hydra" / "overrides.yaml")
    OmegaConf.save(
        OmegaConf.create({"hydra": {"job": {"id": f"77{num}"}}}), job / ".hydra" / "hydra.yaml"
    )
    write_evals(job, rows, run_columns)
    summary = {"agent": "ppo", "env": "CartPole-v1", "status": status}
    (job / "summary.json").write_text(json.dumps(summary))
    return job


def test_jobs_that_differ_in_seed_gather_into_one_point(tmp_path: Path) -> None:
    """4 jobs (2 learning rates x seeds 0, 1), each with 2 evaluations, and a job that diverged
    before its first: two points of two seeds, means by hand, the diverged one left out."""
    finals = {("1e-3", 0): 100.0, ("1e-3", 1): 300.0, ("3e-4", 0): 50.0, ("3e-4", 1): 70.0}
    for num, ((lr, seed), final) in enumerate(finals.items()):
        rows = [(seed, 1, 512, final / 2, 0.0, 1.0), (seed, 2, 1024, final, 0.0, 2.0)]
        make_job(tmp_path, num, ["agent=ppo", f"agent.learning_rate={lr}", f"seed={seed}"], rows)
    make_job(tmp_path, 4, ["agent=ppo", "agent.learning_rate=1e9", "seed=0"], [], status="nan")

    points = summarize(tmp_path)
    assert [p.values for p in points] == [
        {"agent.learning_rate": 1e-3},
        {"agent.learning_rate": 3e-4},
    ]
    assert [p.curves.seeds for p in points] == [[0, 1], [0, 1]]
    assert [p.final_mean for p in points] == [200.0, 60.0]
    # area under the mean curve per env step: (100 + 200) / 2 and (30 + 60) / 2
    assert [p.auc for p in points] == pytest.approx([150.0, 45.0])
    with open(tmp_path / "ranking.csv") as f:
        ranking = list(csv.DictReader(f))
    assert [(r["rank"], r["agent.learning_rate"], r["seeds"]) for r in ranking] == [
        ("1", "0.001", "2"),
        ("2", "0.0003", "2"),
    ]
    assert skipped_jobs(tmp_path) == ["4: no evaluations (nan)"]
    assert (tmp_path / "sweep.png").read_bytes()[:4] == b"\x89PNG"


def test_grid_points_inside_jobs_keep_their_values(tmp_path: Path) -> None:
    """A swept override outside and a grid inside each job: a point per combination."""
    columns = ("grid_point", "clip_eps", "seed")
    for num, steps in enumerate((64, 128)):
        rows = [
            (0, 0.1, 0, 1, 512, 10.0 * num, 0.0, 1.0),
            (1, 0.3, 0, 1, 512, 20.0 + num, 0.0, 1.0),
        ]
        make_job(
            tmp_path,
            num,
            [f"agent.num_steps={steps}", "grid.agent.clip_eps=[0.1,0.3]"],
            rows,
            run_columns=columns,
        )
    values = [values for values, _ in read_sweep(tmp_path)]
    assert values == [
        {"agent.num_steps": 64.0, "clip_eps": 0.1},
        {"agent.num_steps": 64.0, "clip_eps": 0.3},
        {"agent.num_steps": 128.0, "clip_eps": 0.1},
        {"agent.num_steps": 128.0, "clip_eps": 0.3},
    ]
    [best, *_] = sorted(summarize(tmp_path), key=lambda p: -p.final)
    assert best.name == "agent.num_steps=128,clip_eps=0.3" and best.final == 21.0


def test_two_jobs_with_the_same_seed_of_a_point_are_refused(tmp_path: Path) -> None:
    """`-m seed=0,1 num_seeds=2`: job 0 runs seeds 0 and 1, job 1 seeds 1 and 2."""
    for num in (0, 1):
        rows = [(seed, 1, 512, 1.0, 0.0, 1.0) for seed in (num, num + 1)]
        make_job(tmp_path, num, ["num_seeds=2", f"seed={num}"], rows)
    with pytest.raises(ValueError, match="jobs 0 and 1 both ran seed 1 of the sweep"):
        read_sweep(tmp_path)


def test_unfinished_jobs_name_their_submitit_logs(tmp_path: Path) -> None:
    ok = make_job(tmp_path, 0, ["agent.learning_rate=1e-3", "seed=0"], [(0, 1, 512, 1.0, 0.0, 1.0)])
    make_job(tmp_path, 1, ["agent.learning_rate=1e9", "seed=0"], [], status="nan")
    died = make_job(tmp_path, 2, ["agent.learning_rate=1e-2", "seed=1"], [])
    (died / "summary.json").unlink()
    log = tmp_path / ".submitit" / "771" / "771_0_log.err"
    log.parent.mkdir(parents=True)
    log.write_text("error: non-finite parameters\n")
    launcher = OmegaConf.create(
        {
            "_target_": "hydra_plugins.hydra_submitit_launcher.submitit_launcher.LocalLauncher",
            "submitit_folder": f"{tmp_path}/.submitit/%j",
        }
    )
    assert unfinished_jobs(tmp_path, launcher) == [
        f"job 1 (agent.learning_rate=1e9 seed=0): nan, its error in {log}",
        f"job 2 (agent.learning_rate=1e-2 seed=1): no summary, its error in "
        f"{tmp_path}/.submitit/772",
    ]
    assert unfinished_jobs(tmp_path, None)[0] == "job 1 (agent.learning_rate=1e9 seed=0): nan"
    assert ok.name == "0"


def test_a_basic_sweep_runs_past_a_failed_job(tmp_path: Path) -> None:
    """Hydra's basic launcher (jobs one after another in the sweep's process): the diverged
    first job is reported when it fails and at the end; the second job still runs."""
    result = cli(
        "-m",
        f"hydra.sweep.dir={tmp_path}",
        "agent.learning_rate=1e38,0.05",
        *TINY_ES,
        "budget.env_steps=2e3",
        "log.tensorboard=false",
        "log.progress=false",
    )
    assert result.returncode == 1, result.stderr
    errors = [line for line in error_lines(result.stderr) if not line.startswith("[")]
    assert errors[0].startswith("error: non-finite parameters")
    assert errors[1:] == [
        "error: 1 of 2 jobs did not complete:",
        "  job 0 (agent.learning_rate=1e+38): nan",
    ]
    assert json.loads((tmp_path / "1" / "summary.json").read_text())["status"] == "completed"


@pytest.fixture(scope="module")
def submitit_sweep(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[Path, subprocess.CompletedProcess]:
    """2 learning rates x 2 seeds of a tiny ES as 4 submitit jobs (processes of their own); the
    learning rate 1e38 diverges in its first generation."""
    sweep_dir = tmp_path_factory.mktemp("submitit")
    result = cli(
        "-m",
        "hydra/launcher=submitit_local",
        f"hydra.sweep.dir={sweep_dir}",
        "agent.learning_rate=1e38,0.05",
        "seed=0,1",
        *TINY_ES,
        "budget.env_steps=3e3",
        "log.tensorboard=false",
        "log.progress=false",
        timeout=400,
    )
    return sweep_dir, result


def test_submitit_jobs_all_run_and_the_failed_are_listed(submitit_sweep) -> None:
    sweep_dir, result = submitit_sweep
    assert result.returncode == 1, result.stderr
    errors = [line for line in error_lines(result.stderr) if not line.startswith("[")]
    assert errors[0] == "error: 2 of 4 jobs did not complete:"
    for job, line in zip((0, 1), errors[1:], strict=True):
        assert line.startswith(
            f"  job {job} (agent.learning_rate=1e+38 seed={job}): nan, its error in "
        )
        assert "non-finite parameters" in Path(line.rpartition(" ")[2]).read_text()
    for job in (2, 3):
        summary = json.loads((sweep_dir / str(job) / "summary.json").read_text())
        assert summary["status"] == "completed" and summary["runs"][0]["seed"] == job - 2


def test_sweep_report_gathers_the_submitit_jobs(submitit_sweep) -> None:
    sweep_dir, _ = submitit_sweep
    report = subprocess.run(
        [sys.executable, "-m", "jaxrl.sweep", str(sweep_dir)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": pythonpath()},
    )
    assert report.returncode == 0, report.stderr
    lines = report.stdout.splitlines()
    assert lines[:2] == [
        "left out job 0: no evaluations (nan)",
        "left out job 1: no evaluations (nan)",
    ]
    finals = [
        json.loads((sweep_dir / str(j) / "summary.json").read_text())["final_eval_return"]
        for j in (2, 3)
    ]
    with open(sweep_dir / "ranking.csv") as f:
        [row] = list(csv.DictReader(f))
    assert row["agent.learning_rate"] == "0.05" and row["seeds"] == "2"
    assert float(row["final_mean"]) == pytest.approx(sum(finals) / 2, rel=1e-5)


def test_a_job_that_dies_without_a_result_is_one_line(tmp_path: Path) -> None:
    """A job killed outright (out of memory, past its time limit) leaves submitit no result: one
    line naming the job and the end of its error stream, exit 1, not Hydra's traceback."""
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "sitecustomize.py").write_text(
        "import os, sys\n"
        "if os.environ.get('SUBMITIT_LOCAL_GLOBALID'):  # a task, not its controller\n"
        "    print('killed by the test', file=sys.stderr)\n"
        "    os._exit(9)\n"
    )
    result = cli(
        "-m",
        "hydra/launcher=submitit_local",
        f"hydra.sweep.dir={tmp_path / 'sweep'}",
        *TINY_ES,
        extra_env={"PYTHONPATH": f"{tmp_path / 'site'}:{pythonpath()}"},
        timeout=200,
    )
    assert result.returncode == 1
    [line] = [line for line in error_lines(result.stderr) if not line.startswith("[")]
    assert line.startswith("error: Job ") and "has not produced any output" in line
    assert line.endswith("its error stream ended: killed by the test"), line
    assert "Traceback" not in result.stderr


def submitit_task(proc: subprocess.Popen) -> int:
    """The process of the sweep's submitit job that runs it (under submitit's local controller)."""
    pending = [proc.pid]
    while pending:
        pid = pending.pop()
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        if "submitit.core._submit" in cmdline:
            return pid
        for task in Path(f"/proc/{pid}/task").iterdir():
            pending += [int(c) for c in (task / "children").read_text().split()]
    raise AssertionError("no submitit job process")


def test_a_preempted_job_is_requeued_and_continues_its_run(tmp_path: Path) -> None:
    """SLURM's preemption signal (USR2, what submitit_slurm asks SLURM to send) as submitit's
    local executor forwards it: the run stops after the chunk in flight with a checkpoint of it
    (checkpoint.every=1000 would otherwise have kept only iteration 0), then submitit requeues
    the job, and the requeued job finds its run directory holding the same run and continues it
    from that checkpoint to the budget, every iteration logged once; the sweep completes."""
    proc = start(
        "-m",
        "hydra/launcher=submitit_local",
        f"hydra.sweep.dir={tmp_path}",
        *TINY_ES,
        "budget.env_steps=1e5",
        "eval.every=1",
        "checkpoint.every=1000",
        "log.tensorboard=false",
        "log.progress=false",
    )
    run_dir = tmp_path / "0"
    wait_for_evals(run_dir, 3, proc)
    os.kill(submitit_task(proc), signal.SIGUSR2)
    _, stderr = proc.communicate(timeout=300)
    assert proc.returncode == 0, stderr
    [log] = (tmp_path / ".submitit").glob("*/*_0_log.err")
    text = log.read_text()
    assert "this job is preempted" in text
    [stopped] = re.findall(r"by SIGUSR2 \(preemption\): checkpoint at iteration (\d+)", text)
    [resumed] = re.findall(r"^resumed from iteration (\d+)", text, re.MULTILINE)
    assert int(stopped) >= 3 and resumed == stopped, text[-2000:]
    iterations = [int(row["iteration"]) for row in read_evals(run_dir)]
    assert iterations == list(range(1, len(iterations) + 1))
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "completed" and summary["env_steps"] >= 100_000


def test_a_sweep_launched_again_continues_its_jobs_and_refuses_others(tmp_path: Path) -> None:
    """The same sweep into the same directory with a larger budget: each job continues its run
    (`resume=` semantics, the new budget); a job whose directory holds a different run is bad
    input: one line, exit 2, that run untouched."""
    args = (*TINY_ES, "log.tensorboard=false", "log.progress=false", f"hydra.sweep.dir={tmp_path}")
    first = cli("-m", "agent.sigma=0.02,0.05", "budget.env_steps=2e3", *args)
    assert first.returncode == 0, first.stderr
    # Hydra's job logging prints INFO records: JAX's (its backend probing) are kept off.
    assert "][jax" not in first.stdout + first.stderr, first.stdout
    steps = json.loads((tmp_path / "1" / "summary.json").read_text())["env_steps"]
    done = json.loads((tmp_path / "0" / "summary.json").read_text())["iterations"]
    again = cli("-m", "agent.sigma=0.02,0.1", "budget.env_steps=4e3", *args)
    assert again.returncode == 2, again.stderr
    errors = [line for line in error_lines(again.stderr) if line.startswith("error:")]
    assert errors == [
        f"error: log.dir={tmp_path / '1'} already holds another run (it differs in "
        f"agent.sigma); launch the sweep into another hydra.sweep.dir"
    ]
    assert f"resumed from iteration {done} in {tmp_path / '0'}" in again.stderr
    continued = json.loads((tmp_path / "0" / "summary.json").read_text())
    assert continued["status"] == "completed" and continued["env_steps"] >= 4000
    assert json.loads((tmp_path / "1" / "summary.json").read_text())["env_steps"] == steps
