"""The run's TensorBoard logs: what `RunLogger` writes, read back from the event files."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest
from cli_helpers import tensorboard_events

from jaxrl.outputs import RunLogger, per_episode_mean


def scalars(run_dir: Path, label: str) -> list[tuple[int, dict[str, float]]]:
    """Each summary event of a run's TensorBoard directory: (step, {tag: value})."""
    from tensorboardX.proto.event_pb2 import Event

    (path,) = (run_dir / "tb" / label).glob("events.out.tfevents.*")
    events = [Event.FromString(r) for r in tensorboard_events(path)]
    return [
        (e.step, {v.tag: v.simple_value for v in e.summary.value})
        for e in events
        if e.HasField("summary")
    ]


def test_each_iteration_is_one_event_with_every_metric_at_its_env_steps(tmp_path: Path) -> None:
    """Two runs, a chunk of 3 iterations of which the second run ran 2 (its budget reached):
    run a logs 3 events, run b 2, each at its cumulative env steps and holding both metrics'
    values of that run and iteration; the third column of b is never logged."""
    logger = RunLogger(tmp_path, [{"seed": 0}, {"seed": 1}], ["a", "b"], tensorboard=True)
    metrics = {
        "loss": np.array([[1.5, 2.5, 3.5], [-4.0, -5.0, 99.0]], np.float32),
        "entropy": np.array([[0.25, 0.5, 0.75], [1.0, 2.0, 99.0]], np.float32),
    }
    env_steps = np.array([[128, 256, 384], [100, 200, 200]])
    logger.log_iterations(metrics, env_steps, np.array([3, 2]))
    logger.close()
    assert scalars(tmp_path, "a") == [
        (128, {"train/loss": 1.5, "train/entropy": 0.25}),
        (256, {"train/loss": 2.5, "train/entropy": 0.5}),
        (384, {"train/loss": 3.5, "train/entropy": 0.75}),
    ]
    assert scalars(tmp_path, "b") == [
        (100, {"train/loss": -4.0, "train/entropy": 1.0}),
        (200, {"train/loss": -5.0, "train/entropy": 2.0}),
    ]


def test_without_tensorboard_nothing_is_written(tmp_path: Path) -> None:
    logger = RunLogger(tmp_path, [{"seed": 0}], ["a"], tensorboard=False)
    logger.log_iterations({"loss": np.ones((1, 2))}, np.array([[1, 2]]), np.array([2]))
    logger.close()
    assert not (tmp_path / "tb").exists()


def test_an_iteration_that_ended_no_episode_logs_no_episode_return(tmp_path: Path) -> None:
    """`episode_return` is the mean over the episodes an iteration ended; one that ended none
    reports 0 (a NaN would stop the run), which TensorBoard drew as a return of 0 (PPO CartPole at
    500 zigzagged to 0 whenever 4 envs x 128 steps ended no 500-step episode). Such an
    iteration's event keeps its other metrics."""
    logger = RunLogger(tmp_path, [{"seed": 0}], ["a"], tensorboard=True)
    metrics = {
        "episodes": np.array([[2, 0, 1]], np.int32),
        "episode_return": np.array([[10.0, 0.0, 40.0]], np.float32),
        "loss": np.array([[0.5, 0.25, 0.125]], np.float32),
    }
    logger.log_iterations(metrics, np.array([[128, 256, 384]]), np.array([3]))
    logger.close()
    assert scalars(tmp_path, "a") == [
        (128, {"train/episodes": 2.0, "train/episode_return": 10.0, "train/loss": 0.5}),
        (256, {"train/episodes": 0.0, "train/loss": 0.25}),
        (384, {"train/episodes": 1.0, "train/episode_return": 40.0, "train/loss": 0.125}),
    ]


def test_a_tensorboard_write_that_fails_stops_tensorboard_in_one_line_and_hangs_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A full disk under tb/ (every event write raising EFBIG, as RLIMIT_FSIZE makes it): before,
    tensorboardX's writer thread died with a traceback and the 11th event waited forever on its
    queue of 10 (a CI run hung so). Now 100 iterations and an evaluation log within the time
    limit, one warning line names the error, and evals.csv still gets its row; the file's
    close failing too, tensorboardX's exit hook closing it again writes nothing (before: a
    "flush of closed file" traceback as the process ended)."""
    logger = RunLogger(tmp_path, [{"seed": 0}], ["a"], tensorboard=True)

    def too_large(data: bytes) -> None:
        raise OSError(27, "File too large")

    event_writer = logger.writers[0].file_writer.event_writer
    records = event_writer._ev_writer._py_recordio_writer
    records.write = too_large

    def close_too_large() -> None:  # as a file's close does when its last flush fails
        if not records._writer.closed:
            records._writer.close()
            too_large(b"")

    records.close = close_too_large
    iterations = 100
    metrics = {"loss": np.ones((1, iterations), np.float32)}
    env_steps = np.arange(1, iterations + 1)[None] * 128

    def log() -> None:
        logger.log_iterations(metrics, env_steps, np.array([iterations]))
        logger.log_eval(
            {
                0: {
                    "iteration": 100,
                    "env_steps": 12800,
                    "eval_return": 1.5,
                    "eval_return_std": 0.0,
                    "elapsed_seconds": 1.0,
                }
            }
        )
        logger.close()

    worker = threading.Thread(target=log, daemon=True)
    worker.start()
    worker.join(timeout=60)
    assert not worker.is_alive(), "logging hung on tensorboardX's queue"
    err = capsys.readouterr().err
    warnings = [line for line in err.splitlines() if line.strip()]
    assert warnings == [
        f"warning: TensorBoard logging stopped: could not write to {tmp_path / 'tb'} "
        "([Errno 27] File too large)"
    ], err
    assert logger.writers == []
    rows = (tmp_path / "evals.csv").read_text().splitlines()
    assert len(rows) == 2 and rows[1].startswith("0,100,12800,1.5"), rows
    # tensorboardX's exit hook closes the writer once more: no "flush of closed file" traceback.
    event_writer.close()


def test_the_progress_lines_episode_return_is_over_the_chunks_episodes() -> None:
    """Two runs' chunk of 3 iterations: run 0 ended 2 episodes of mean 10, none, 1 of 40; run 1
    ended one of 70 in its second iteration. All of them: (2·10 + 40 + 70) / 4 = 32.5; where run
    0 ran one iteration and run 1 none, 10; where no counted iteration ended one, None."""
    metrics = {
        "episodes": np.array([[2, 0, 1], [0, 1, 0]]),
        "episode_return": np.array([[10.0, 0.0, 40.0], [0.0, 70.0, 0.0]]),
    }
    assert per_episode_mean(metrics, "episode_return", np.array([3, 3])) == 32.5
    assert per_episode_mean(metrics, "episode_return", np.array([1, 0])) == 10.0
    assert per_episode_mean(metrics, "episode_return", np.array([0, 1])) is None
