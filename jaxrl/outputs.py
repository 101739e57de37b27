"""Run outputs: TensorBoard events per run, the eval-curve CSV, summary.json, the live console."""

from __future__ import annotations

import contextlib
import csv
import io
import json
import math
import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn


def summary_writer_class() -> type:
    """tensorboardX's `SummaryWriter`, imported only when a run logs to TensorBoard and without
    torch: tensorboardX imports torch whenever it is installed, only to accept torch tensors (we
    pass numbers), and that import is seconds at the start of every run. Where torch is already
    loaded it costs nothing and is left as it is."""
    if "torch" in sys.modules:
        from tensorboardX import SummaryWriter
    else:
        sys.modules["torch"] = None  # `import torch` raises ImportError while this stands
        try:
            from tensorboardX import SummaryWriter
        finally:
            del sys.modules["torch"]
    return SummaryWriter


# After the columns that name the run: `seed`, or `grid_point`, its values and `seed` for a grid.
EVAL_COLUMNS = (
    "iteration",
    "env_steps",
    "eval_return",
    "eval_return_std",
    "elapsed_seconds",
)
# After them, for envs that report success: the share of the evaluation's episodes that succeeded.
SUCCESS_COLUMN = "eval_success_rate"


def write_json_atomic(path: Path, data: Any) -> None:
    """Write to a temporary file and rename: readers never see half a file."""
    write_text_atomic(path, json.dumps(data, indent=2, default=_json_default) + "\n")


def write_text_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        os.fchmod(fd, 0o644)  # mkstemp's 0600 would make the run's files private
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _json_default(x: Any) -> Any:
    if isinstance(x, np.generic):
        return x.item()
    raise TypeError(f"not JSON serialisable: {type(x).__name__}")


def finite_or_none(x: float) -> float | None:
    return None if x is None or not math.isfinite(x) else float(x)


class RunLogger:
    """One TensorBoard run per run (`tb/<label>`) and `evals.csv` with every evaluation.

    `runs`: the columns naming each run (`{"seed": 3}`; with a grid, its point's index and values
    too), `labels` its TensorBoard directory. `resumed_at`: the progress of the checkpoint a
    resumed run starts from. What the previous process logged after that checkpoint (it was
    killed before the next one) is dropped, since the resumed run logs those iterations again:
    `evals.csv` keeps each run's rows up to its checkpointed iteration, and TensorBoard hides
    later events (`purge_step`). `success_rate`: the env reports success, so each evaluation
    has its success rate too (`SUCCESS_COLUMN`)."""

    def __init__(
        self,
        run_dir: Path,
        runs: list[dict[str, Any]],
        labels: list[str],
        tensorboard: bool,
        resumed_at: Any = None,
        success_rate: bool = False,
    ) -> None:
        self.run_dir = run_dir
        self.runs = runs
        success_columns = (SUCCESS_COLUMN,) if success_rate else ()
        self.columns = (*runs[0], *EVAL_COLUMNS, *success_columns)
        self.csv_path = run_dir / "evals.csv"
        if resumed_at is not None and self.csv_path.exists():
            self._keep_rows_up_to(resumed_at.iterations)
        if not self.csv_path.exists():
            write_text_atomic(self.csv_path, ",".join(self.columns) + "\n")
        purge = [None] * len(runs) if resumed_at is None else [s + 1 for s in resumed_at.env_steps]
        self.writers = []
        self.tensorboard_error: OSError | None = None
        if tensorboard:
            writer_class = summary_writer_class()
            self.writers = [
                writer_class(str(run_dir / "tb" / label), purge_step=p)
                for label, p in zip(labels, purge, strict=True)
            ]
            for writer in self.writers:
                self._catch_write_errors(writer)

    def _catch_write_errors(self, writer: Any) -> None:
        """tensorboardX writes events on a thread of its own: a write that fails (a full disk)
        would end that thread with a traceback, and the run's next events would then wait
        forever on its bounded queue. The thread keeps running instead, the first error is kept,
        and `_check_tensorboard` stops TensorBoard logging with one warning line."""
        # tensorboardX 2.x's EventsWriter; another layout keeps tensorboardX's own behaviour.
        events = getattr(getattr(writer.file_writer, "event_writer", None), "_ev_writer", None)
        if events is None:
            return

        def guard(write: Any) -> Any:
            def guarded(*args: Any) -> Any:
                if self.tensorboard_error is not None:
                    # Nothing more is written: the file may be closed by now, and tensorboardX's
                    # exit hook flushes it once more (a "flush of closed file" traceback).
                    return None
                try:
                    return write(*args)
                except OSError as e:
                    self.tensorboard_error = self.tensorboard_error or e
                    return None

            return guarded

        events.write_event = guard(events.write_event)
        events.flush = guard(events.flush)

    def _check_tensorboard(self) -> None:
        """After a failed TensorBoard write: one warning, and no more TensorBoard (evals.csv,
        checkpoints and the run go on; a full disk stops them in their own way)."""
        if self.tensorboard_error is None or not self.writers:
            return
        writers, self.writers = self.writers, []
        for writer in writers:
            with contextlib.suppress(OSError):
                writer.close()
        print(
            f"warning: TensorBoard logging stopped: could not write to {self.run_dir / 'tb'} "
            f"({self.tensorboard_error})",
            file=sys.stderr,
        )

    def _run_key(self, values: dict[str, Any]) -> tuple[str, ...]:
        return tuple(str(values[c]) for c in self.runs[0])

    def _keep_rows_up_to(self, last_iteration: list[int]) -> None:
        """Rewrite evals.csv without the rows logged after each run's checkpointed iteration
        (and without a last line cut short by the kill)."""
        with open(self.csv_path, newline="") as f:
            rows = list(csv.DictReader(f))
        kept_up_to = {
            self._run_key(run): last for run, last in zip(self.runs, last_iteration, strict=True)
        }
        kept = [
            row
            for row in rows
            if None not in row.values()
            and None not in row
            and int(row["iteration"]) <= kept_up_to.get(self._run_key(row), -1)
        ]
        out = io.StringIO()
        writer = csv.DictWriter(out, self.columns, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(kept)
        write_text_atomic(self.csv_path, out.getvalue())

    def log_iterations(
        self, metrics: dict[str, np.ndarray], env_steps: np.ndarray, ran: np.ndarray
    ) -> None:
        """metrics[k]: [runs, iterations]; env_steps: cumulative per run and iteration; ran:
        how many of the iterations each run ran. One event per run and iteration holds all its
        metrics (`train/<name>`): tensorboardX pickles each event through a multiprocessing queue
        to its writer thread, and an event per value made TensorBoard a third of a short PPO run
        (benchmarks/results/tensorboard_logging.md)."""
        self._check_tensorboard()
        if not self.writers:
            return
        from tensorboardX.proto.summary_pb2 import Summary

        tags = [f"train/{name}" for name in metrics]
        no_episodes = _ended_no_episode(metrics)
        for i, writer in enumerate(self.writers):
            rows = np.stack([np.asarray(v[i, : int(ran[i])], np.float64) for v in metrics.values()])
            for j, values in enumerate(rows.T.tolist()):
                summary = Summary(
                    value=[
                        Summary.Value(tag=tag, simple_value=value)
                        for name, tag, value in zip(metrics, tags, values, strict=True)
                        if not (name in PER_EPISODE_METRICS and no_episodes[i, j])
                    ]
                )
                writer.file_writer.add_summary(summary, int(env_steps[i, j]))

    def log_eval(self, rows: dict[int, dict[str, float]]) -> None:
        """One evaluation row (EVAL_COLUMNS, and SUCCESS_COLUMN where the env reports success)
        per run index that trained in this chunk."""
        self._check_tensorboard()
        for i, row in rows.items():
            if self.writers:
                step = int(row["env_steps"])
                self.writers[i].add_scalar("eval/return", row["eval_return"], step)
                if SUCCESS_COLUMN in row:
                    self.writers[i].add_scalar("eval/success_rate", row[SUCCESS_COLUMN], step)
                self.writers[i].flush()
        with open(self.csv_path, "a", newline="") as f:
            w = csv.writer(f)
            for i, row in rows.items():
                w.writerow([{**self.runs[i], **row}[c] for c in self.columns])

    def close(self) -> None:
        self._check_tensorboard()
        for writer in self.writers:
            writer.close()


class NoLogger:
    """`RunLogger`'s place in the processes of a distributed run other than process 0, which
    alone writes evals.csv and TensorBoard."""

    def log_iterations(
        self, metrics: dict[str, np.ndarray], env_steps: np.ndarray, ran: np.ndarray
    ) -> None:
        pass

    def log_eval(self, rows: dict[int, dict[str, float]]) -> None:
        pass

    def close(self) -> None:
        pass


# Metrics that are means over the episodes an iteration ended (its `episodes` metric): an
# iteration that ended none reports 0 for them (a NaN would stop the run), which is no value.
PER_EPISODE_METRICS = ("episode_return", "episode_length")


def _ended_no_episode(metrics: dict[str, np.ndarray]) -> np.ndarray:
    """[runs, iterations]: True where the iteration ended no episode (never, without the
    `episodes` metric)."""
    shape = np.shape(next(iter(metrics.values())))
    if "episodes" not in metrics:
        return np.zeros(shape, bool)
    return np.asarray(metrics["episodes"]) == 0


def per_episode_mean(metrics: dict[str, np.ndarray], name: str, ran: np.ndarray) -> float | None:
    """A `PER_EPISODE_METRICS` metric over every episode the runs' iterations of a chunk ended
    (`ran` of them each): None where they ended none."""
    episodes = np.asarray(metrics["episodes"], np.float64)
    counted = np.arange(episodes.shape[1])[None, :] < np.asarray(ran)[:, None]
    total = float((episodes * counted).sum())
    if total == 0:
        return None
    return float((np.asarray(metrics[name], np.float64) * episodes * counted).sum() / total)


class LiveDisplay:
    """A progress bar over the env-step budget with the latest numbers beside it; on a non-terminal
    (CI, pipes) one plain line per evaluation instead."""

    def __init__(self, enabled: bool, budget: float, title: str) -> None:
        self.console = Console(stderr=True)
        self.enabled = enabled
        self.live = enabled and self.console.is_terminal
        self.budget = budget
        self.title = title
        self.progress: Progress | None = None

    @contextlib.contextmanager
    def compiling(self) -> Iterator[None]:
        """A terminal's status line while the program compiles; erased when it ends, so that a
        run refused after its compile shows its error line alone."""
        if not self.live:
            yield
            return
        with self.console.status(f"[bold]{self.title}[/] compiling...", spinner="line"):
            yield

    def start(self, first_line: str) -> None:
        """The run's first line (its preset), then the bar, once the run is known to start."""
        if not self.enabled:
            return
        print(first_line, file=sys.stderr, flush=True)
        if self.live:
            self.progress = Progress(
                TextColumn(f"[bold]{self.title}[/]"),
                BarColumn(),
                TextColumn("{task.fields[line]}"),
                TimeElapsedColumn(),
                console=self.console,
            )
            self.task = self.progress.add_task("train", total=self.budget, line="starting...")
            self.progress.start()

    def update(self, env_steps: float, line: str) -> None:
        if self.progress is not None:
            self.progress.update(self.task, completed=env_steps, line=line)
        elif self.enabled:
            self.console.print(line, highlight=False, soft_wrap=True)

    def message(self, text: str) -> None:
        """Errors, interruptions and resumptions: printed also with `log.progress=false`."""
        self.console.print(text, highlight=False, soft_wrap=True)

    def close(self) -> None:
        if self.progress is not None:
            self.progress.stop()
