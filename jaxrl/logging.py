"""Run outputs: TensorBoard events per seed, the eval-curve CSV, summary.json, the live console."""

from __future__ import annotations

import csv
import json
import math
import os
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from tensorboardX import SummaryWriter

EVAL_COLUMNS = (
    "seed",
    "iteration",
    "env_steps",
    "eval_return",
    "eval_return_std",
    "elapsed_seconds",
)


def write_json_atomic(path: Path, data: Any) -> None:
    """Write to a temporary file and rename: readers never see half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "w") as f:
        json.dump(data, f, indent=2, default=_json_default)
        f.write("\n")
    os.replace(tmp, path)


def _json_default(x: Any) -> Any:
    if isinstance(x, np.generic):
        return x.item()
    raise TypeError(f"not JSON serialisable: {type(x).__name__}")


def finite_or_none(x: float) -> float | None:
    return None if x is None or not math.isfinite(x) else float(x)


class RunLogger:
    """One TensorBoard run per seed (`tb/seed_<n>`) and `evals.csv` with every evaluation."""

    def __init__(self, run_dir: Path, seeds: list[int], tensorboard: bool) -> None:
        self.run_dir = run_dir
        self.seeds = seeds
        self.writers = (
            [SummaryWriter(str(run_dir / "tb" / f"seed_{s}")) for s in seeds] if tensorboard else []
        )
        self.csv_path = run_dir / "evals.csv"
        if not self.csv_path.exists():
            with open(self.csv_path, "w", newline="") as f:
                csv.writer(f).writerow(EVAL_COLUMNS)

    def log_iterations(self, metrics: dict[str, np.ndarray], env_steps: np.ndarray) -> None:
        """metrics[k]: [seeds, iterations]; env_steps: cumulative per seed and iteration."""
        for i, writer in enumerate(self.writers):
            for name, values in metrics.items():
                for j, value in enumerate(values[i]):
                    writer.add_scalar(f"train/{name}", float(value), int(env_steps[i, j]))

    def log_eval(self, rows: list[dict[str, float]]) -> None:
        for i, writer in enumerate(self.writers):
            writer.add_scalar("eval/return", rows[i]["eval_return"], int(rows[i]["env_steps"]))
            writer.flush()
        with open(self.csv_path, "a", newline="") as f:
            w = csv.writer(f)
            for row in rows:
                w.writerow([row[c] for c in EVAL_COLUMNS])

    def close(self) -> None:
        for writer in self.writers:
            writer.close()


class LiveDisplay:
    """A progress bar over the env-step budget with the latest numbers beside it; on a non-terminal
    (CI, pipes) one plain line per evaluation instead."""

    def __init__(self, enabled: bool, budget: float, title: str) -> None:
        self.console = Console(stderr=True)
        self.enabled = enabled
        self.live = enabled and self.console.is_terminal
        self.progress = None
        if self.live:
            self.progress = Progress(
                TextColumn(f"[bold]{title}[/]"),
                BarColumn(),
                TextColumn("{task.fields[line]}"),
                TimeElapsedColumn(),
                console=self.console,
            )
            self.task = self.progress.add_task("train", total=budget, line="compiling...")
            self.progress.start()

    def update(self, env_steps: float, line: str) -> None:
        if self.progress is not None:
            self.progress.update(self.task, completed=env_steps, line=line)
        elif self.enabled:
            self.console.print(line, highlight=False, soft_wrap=True)

    def message(self, text: str) -> None:
        if self.enabled or text.startswith("error"):
            self.console.print(text, highlight=False, soft_wrap=True)

    def close(self) -> None:
        if self.progress is not None:
            self.progress.stop()
