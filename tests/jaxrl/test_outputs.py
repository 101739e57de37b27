"""The run's TensorBoard logs: what `RunLogger` writes, read back from the event files."""

from __future__ import annotations

from pathlib import Path

import numpy as np
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
