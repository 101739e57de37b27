"""What TensorBoard logging costs a run: the training metrics of PPO CartPole-v1 in PureJaxRL's
configuration (977 iterations of 12 metrics, logged after each of 20 chunks) written as one
event per value (tensorboardX's `add_scalar`, what `RunLogger` did) against one event per
iteration holding all of them (`RunLogger.log_iterations`), each side in a fresh TensorBoard
directory, alternating in one process; then the whole run's wall time beside it with
`log.tensorboard` on and off (compile left out: `train`'s wall minus its `compile_seconds`).

    python benchmarks/tensorboard_logging.py [--repeats 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
from common import (
    PUREJAXRL_PPO_CARTPOLE,
    PUREJAXRL_SETTINGS,
    RESULTS,
    load_note,
    machine,
    markdown_table,
    median_range,
    write_report,
)

from jaxrl import parallel
from jaxrl.outputs import RunLogger

ITERATIONS, CHUNKS = 977, 20
METRICS = [f"metric_{k}" for k in range(12)]


def chunks() -> list[tuple[dict[str, np.ndarray], np.ndarray, np.ndarray]]:
    """The chunks' (metrics [1 run, iterations], cumulative env steps, iterations ran)."""
    rng = np.random.default_rng(0)
    out, done = [], 0
    for sizes in np.array_split(np.arange(ITERATIONS), CHUNKS):
        n = len(sizes)
        metrics = {name: rng.normal(size=(1, n)).astype(np.float32) for name in METRICS}
        steps = (done + np.arange(1, n + 1))[None] * 512
        out.append((metrics, steps, np.array([n])))
        done += n
    return out


def per_value(logger: RunLogger, data: list) -> None:
    """The previous form: one `add_scalar` (one event) per metric value."""
    for metrics, steps, ran in data:
        for name, values in metrics.items():
            for j in range(int(ran[0])):
                logger.writers[0].add_scalar(f"train/{name}", float(values[0, j]), int(steps[0, j]))


def per_iteration(logger: RunLogger, data: list) -> None:
    for metrics, steps, ran in data:
        logger.log_iterations(metrics, steps, ran)


def time_logging(form: object, data: list) -> float:
    with tempfile.TemporaryDirectory() as run_dir:
        logger = RunLogger(Path(run_dir), [{"seed": 0}], ["seed_0"], tensorboard=True)
        t0 = time.perf_counter()
        form(logger, data)
        logger.close()  # the events reach the file
        return time.perf_counter() - t0


def time_run(tensorboard: bool) -> float:
    from jaxrl.cli import compose
    from jaxrl.loop import train

    overrides = [*PUREJAXRL_PPO_CARTPOLE, *PUREJAXRL_SETTINGS, "log.progress=false"]
    cfg = compose([*overrides, f"log.tensorboard={str(tensorboard).lower()}"])
    with tempfile.TemporaryDirectory() as run_dir:
        t0 = time.perf_counter()
        result = train(cfg, Path(run_dir))
        return time.perf_counter() - t0 - result.summary["compile_seconds"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, default=RESULTS / "tensorboard_logging.md")
    args = parser.parse_args()
    parallel.use_cores_as_devices()
    before = os.getloadavg()[0]
    data = chunks()
    forms = {
        "one event per value (add_scalar)": per_value,
        "one event per iteration": per_iteration,
    }
    logged: dict[str, list[float]] = {name: [] for name in forms}
    runs: dict[bool, list[float]] = {True: [], False: []}
    time_run(True)  # compiles (and fills the persistent cache)
    for _ in range(args.repeats):
        for name, form in forms.items():
            logged[name].append(time_logging(form, data))
        for tensorboard in runs:
            runs[tensorboard].append(time_run(tensorboard))
    after = os.getloadavg()[0]

    values = ITERATIONS * len(METRICS)
    log_rows = [
        [name, median_range(ts, 3), f"{statistics.median(ts) / values * 1e6:.1f}"]
        for name, ts in logged.items()
    ]
    run_rows = [[f"log.tensorboard={str(tb).lower()}", median_range(ts)] for tb, ts in runs.items()]
    text = (
        "# What TensorBoard logging costs a run\n\n"
        f"`python benchmarks/tensorboard_logging.py --repeats {args.repeats}` on {machine()}; "
        "medians with min-max of runs alternating in one process.\n\n"
        f"Logging PPO CartPole-v1's training metrics ({ITERATIONS} iterations x {len(METRICS)} "
        f"metrics in {CHUNKS} chunks, then closing the writer):\n\n"
        + markdown_table(["form", "s", "µs per value"], log_rows)
        + "\n\nThe run (PureJaxRL's PPO CartPole-v1 config, 500k env steps, default evaluations "
        "and checkpoints), wall time without the compile:\n\n"
        + markdown_table(["setting", "s"], run_rows)
        + "\n\n"
        + load_note(before, after)
        + "\n"
    )
    write_report(text, args.out)


if __name__ == "__main__":
    main()
