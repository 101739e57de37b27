"""How a `-m` sweep ends, whichever launcher ran its jobs.

Hydra's basic launcher runs the jobs one after another in this process; its submitit launcher
(`hydra/launcher=submitit_slurm` on a SLURM cluster, `submitit_local` here) submits them all at
once as jobs of their own. Either way every job runs to its end: a job whose run fails (NaN,
an env that raised) keeps its run directory and the sweep goes on, and when the last job is
done `SweepOutcome` lists the jobs that did not complete, each with where its error went, and
the sweep exits 1. A sweep driven by Optuna's sweeper is left as it was: a failed trial ends the
study (its sweeper cannot take a failed objective).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

from hydra.core.hydra_config import HydraConfig
from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

from jaxrl.sweep import DEFAULT_VALUE, job_dirs, job_overrides, varying_keys

EXIT_FAILED = 1
SUBMITIT_LAUNCHER = "hydra_plugins.hydra_submitit_launcher"


def _target(node: Any) -> str:
    return str(OmegaConf.select(node, "_target_", default="") or "") if node else ""


def failed_job_ends_sweep() -> bool:
    """Inside a `-m` job: whether a failed run stops the sweep at once (Optuna's sweeper) rather
    than being listed at the sweep's end."""
    return "optuna" in _target(HydraConfig.get().sweeper)


def job_log(job: Path, launcher: DictConfig | None) -> Path | None:
    """Where a submitit job's stderr went (the run's error line is there); None for jobs that
    ran in the sweep's own process, whose errors the terminal showed as they came."""
    if SUBMITIT_LAUNCHER not in _target(launcher):
        return None
    job_id = OmegaConf.load(job / ".hydra" / "hydra.yaml").hydra.job.id
    folder = Path(str(launcher.submitit_folder).replace("%j", str(job_id)))
    logs = sorted(folder.glob(f"{job_id}_*_log.err"))
    return logs[0] if logs else folder


def unfinished_jobs(sweep_dir: Path, launcher: DictConfig | None, since: float = 0.0) -> list[str]:
    """`job <n> (<its values of what varies>): <status>[, its error in <log>]` for each job
    whose run did not complete: its summary's status (nan, failed, interrupted) or `no summary`
    (it died, or its directory held a run already). Only jobs launched at `since` (a time.time())
    or later count: a sweep directory reused by another sweep keeps the earlier jobs."""
    jobs = [j for j in job_dirs(sweep_dir) if _written_at(j / ".hydra" / "overrides.yaml") >= since]
    overrides = {job: job_overrides(job) for job in jobs}
    varying = varying_keys(list(overrides.values()))
    varying += ["seed"] if any("seed" in o for o in overrides.values()) else []
    lines = []
    for job in jobs:
        summary = job / "summary.json"
        ours = summary.is_file() and _written_at(summary) >= since
        status = json.loads(summary.read_text())["status"] if ours else "no summary"
        if status == "completed":
            continue
        values = " ".join(f"{k}={overrides[job].get(k, DEFAULT_VALUE)}" for k in varying)
        log = job_log(job, launcher)
        lines.append(
            f"job {job.name}"
            + (f" ({values})" if values else "")
            + f": {status}"
            + (f", its error in {log}" if log else "")
        )
    return lines


def _written_at(path: Path) -> float:
    return path.stat().st_mtime if path.exists() else 0.0


class SweepOutcome(Callback):
    """Registered in conf/config.yaml: at the end of every `-m` sweep, the jobs that did not
    complete, one line each, and exit status 1 when there is any."""

    def __init__(self) -> None:
        self.started = 0.0

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        self.started = time.time() - 1.0  # file times can trail the clock by a tick

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        sweep_dir = Path(str(config.hydra.sweep.dir))
        if not sweep_dir.is_dir():
            return
        failed = unfinished_jobs(sweep_dir, config.hydra.get("launcher"), self.started)
        if not failed:
            return
        total = sum(
            _written_at(j / ".hydra" / "overrides.yaml") >= self.started
            for j in job_dirs(sweep_dir)
        )
        print(f"error: {len(failed)} of {total} jobs did not complete:", file=sys.stderr)
        for line in failed:
            print(f"  {line}", file=sys.stderr)
        sys.exit(EXIT_FAILED)
