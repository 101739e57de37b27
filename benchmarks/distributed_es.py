"""ES generation time for one run across 1, 2 and 4 processes (`distributed.*`) on this machine.

Each row is one ES run on CartPole-v1 through the CLI: P processes joined over 127.0.0.1, each
with one CPU device (or one process with P forced devices, the same split without processes
between them). ES gives every row the same generations, bit for bit (tests/jaxrl/
test_distributed.py), so the rows time the same work: seconds per generation is the run's
seconds (evaluations every 10 generations included) over its generations.

On a 2-core machine this measures overhead, not speed-up: 2 or 4 processes share the 2 cores
that one process already uses, and their collectives go through Gloo over loopback TCP. The
scaling model for many machines is on paper in docs/distributed.md.

    python benchmarks/distributed_es.py [--population 256] [--env-steps 3e6] [--out PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import RESULTS, fmt, load_note, machine, markdown_table, repo_env, write_report

DEFAULT_OUT = RESULTS / "distributed_es.md"
LIMIT = 1800  # seconds one run may take


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(processes: int, devices: int, args: list[str], run_dir: Path) -> dict[str, float]:
    """One run of `processes` processes with `devices` CPU devices each; its summary's numbers
    and the wall time of the slowest process."""
    env = repo_env(
        XLA_FLAGS=f"--xla_force_host_platform_device_count={devices}", JAX_PLATFORMS="cpu"
    )
    joined = []
    if processes > 1:
        joined = [f"distributed.coordinator=127.0.0.1:{free_port()}"]
        joined.append(f"distributed.num_processes={processes}")
    t0 = time.perf_counter()
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "jaxrl.run", *args, f"log.dir={run_dir}", *joined]
            + ([f"distributed.process_id={i}"] if processes > 1 else []),
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(processes)
    ]
    for proc in procs:
        _, stderr = proc.communicate(timeout=LIMIT)
        if proc.returncode != 0:
            raise RuntimeError(f"{processes} x {devices}: exit {proc.returncode}\n{stderr}")
    wall = time.perf_counter() - t0
    summary = json.loads((run_dir / "summary.json").read_text())
    return {
        "generations": summary["iterations"],
        "env_steps": summary["env_steps"],
        "compile_s": summary["compile_seconds"],
        "run_s": summary["run_seconds"],
        "wall_s": wall,
        "final_return": summary["final_eval_return"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--population", type=int, default=256)
    parser.add_argument("--env-steps", type=float, default=3e6)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    options = parser.parse_args()
    args = [
        "agent=es",
        "env=CartPole-v1",
        f"agent.population_size={options.population}",
        "agent.episodes_per_member=1",
        "agent.hidden_sizes=[32,32]",
        f"budget.env_steps={options.env_steps:g}",
        "eval.every=10",
        "eval.episodes=1",
        "log.progress=false",
        "log.tensorboard=false",
    ]
    layouts = [(1, 1), (2, 1), (4, 1), (1, 2), (1, 4)]  # (processes, devices per process)
    load_before = os.getloadavg()[0]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for processes, devices in layouts:
            what = (
                f"{processes} process{'es' if processes > 1 else ''} x {devices} "
                f"device{'s' if devices > 1 else ''}"
            )
            result = run(processes, devices, args, Path(tmp) / f"{processes}x{devices}")
            print(what, result, flush=True)
            per_generation = result["run_s"] / result["generations"]
            rows.append(
                [
                    what,
                    fmt(result["generations"], 0),
                    fmt(result["env_steps"], 0),
                    f"{per_generation:.3f}",
                    fmt(result["compile_s"]),
                    fmt(result["run_s"]),
                    fmt(result["wall_s"]),
                    fmt(result["final_return"]),
                ]
            )
    header = [
        "layout",
        "generations",
        "env steps",
        "s / generation",
        "compile s",
        "run s",
        "process wall s",
        "final return",
    ]
    command = "python benchmarks/distributed_es.py " + " ".join(sys.argv[1:])
    text = "\n\n".join(
        [
            "# ES across processes (`distributed.*`) on one machine",
            markdown_table(header, rows),
            f"`{command.strip()}` on {machine()}: ES on CartPole-v1, population "
            f"{options.population}, 1 episode per member, 32-32 tanh MLP, budget "
            f"{options.env_steps:,.0f} env steps, an evaluation (1 episode) every 10 "
            f"generations. Processes are joined over 127.0.0.1 with one CPU device each; the "
            f"last two rows split the same work over forced devices of one process. Every row "
            f"runs the same generations (ES is exact across layouts), so s / generation "
            f"compares like with like. {load_note(load_before, os.getloadavg()[0])}",
            "This machine has 2 cores: the rows measure what the processes cost (Gloo over "
            "loopback TCP, one more Python process and XLA client each), not a speed-up, "
            "which needs more cores than processes. docs/distributed.md has the model for "
            "many machines.",
        ]
    )
    write_report(text + "\n", options.out)


if __name__ == "__main__":
    main()
