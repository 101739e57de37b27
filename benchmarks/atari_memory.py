"""Replay memory of DQN on Atari for each `agent.frame_storage`: the buffer's bytes at the Zoo's
100k and the Nature DQN's 1M transitions (from shapes, nothing allocated), and the peak RSS of
short CLI runs of the `atari` preset (`ALE/Pong-v5`, one env, some updates) against their
buffer's bytes. The full and compact buffers of 1M transitions (56 and 35 GB) do not fit this
24 GiB machine, so they are computed only.

    python benchmarks/atari_memory.py [--env-steps 10000] [--learning-starts 8000]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

import jax
from common import (
    RESULTS,
    fmt,
    load_note,
    machine,
    markdown_table,
    repo_env,
    run_process,
    write_report,
)

import envs
from agents.dqn import DQNConfig, make_dqn
from envs.configs import AtariConfig
from jaxrl import frame_replay
from jaxrl.prng import make_key

ENV = "ALE/Pong-v5"
STORAGES = ("full", "compact", "once")
SIZES = (100_000, 1_000_000)
RUNS = (("once", 1_000_000), ("full", 100_000), ("compact", 100_000), ("once", 100_000))


def buffer_bytes(storage: str, size: int) -> int:
    """Bytes of one seed's replay buffer, from the agent's own state shapes."""
    env = envs.make(AtariConfig(id=ENV), num_envs=1)
    cfg = DQNConfig(frame_storage=storage, buffer_size=size, batch_size=32, learning_starts=1000)
    agent = make_dqn(cfg, env, total_env_steps=1e6)
    return frame_replay.nbytes(jax.eval_shape(agent.init, make_key(0)).buffer)


def run(storage: str, size: int, env_steps: int, learning_starts: int) -> dict:
    """A CLI run of the atari preset; its summary.json."""
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [
            sys.executable,
            "-m",
            "jaxrl.run",
            "agent=dqn",
            f"env={ENV}",
            f"agent.frame_storage={storage}",
            f"agent.buffer_size={size}",
            f"agent.learning_starts={learning_starts}",
            "agent.iteration_steps=1000",
            f"budget.env_steps={env_steps}",
            f"eval.every={env_steps}",  # more iterations than the run has: one, at the end
            "eval.episodes=1",
            f"log.dir={tmp}/run",
            "log.progress=false",
            "log.tensorboard=false",
        ]
        run_process(f"{storage} {size}", cmd, env=repo_env(), cwd=tmp)
        summary = json.loads((Path(tmp) / "run" / "summary.json").read_text())
        summary["command"] = " ".join(["python", *cmd[1:-3], "log.dir=<tmp>", *cmd[-2:]])
        return summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env-steps", type=int, default=10_000)
    parser.add_argument("--learning-starts", type=int, default=8_000)
    args = parser.parse_args()
    gb = lambda n: n / 1e9
    computed = {(s, n): buffer_bytes(s, n) for s in STORAGES for n in SIZES}
    bytes_rows = [
        [s, *(fmt(gb(computed[s, n]), 2) for n in SIZES), fmt(computed[s, SIZES[0]] / SIZES[0], 0)]
        for s in STORAGES
    ]
    before = os.getloadavg()[0]
    run_rows, commands = [], []
    for storage, size in RUNS:
        summary = run(storage, size, args.env_steps, args.learning_starts)
        peak, buffer = summary["peak_rss_gb"], gb(computed[storage, size])
        run_rows.append(
            [
                storage,
                fmt(size, 0),
                fmt(buffer, 2),
                fmt(peak, 2),
                f"{peak / buffer:.2f}",
                fmt(peak - buffer, 2),
                fmt(summary["compile_seconds"]),
                fmt(summary["run_seconds"]),
            ]
        )
        commands.append(f"* {storage}, {size:,}: `{summary['command']}`")
    after = os.getloadavg()[0]
    text = "\n".join(
        [
            "# DQN's Atari replay memory by frame storage",
            "",
            f"`python benchmarks/atari_memory.py --env-steps {args.env_steps} --learning-starts "
            f"{args.learning_starts}` on {machine()}; {load_note(before, after)}",
            "",
            "One seed's buffer, 84×84×4 uint8 stacks (from the agent's state shapes):",
            "",
            markdown_table(
                ["frame_storage", "100k transitions GB", "1M transitions GB", "bytes a transition"],
                bytes_rows,
            ),
            "",
            f"Short runs of the `atari` preset on `{ENV}` (one env, {args.env_steps:,} env steps, "
            f"updates from step {args.learning_starts:,}, one evaluation episode); peak RSS is the "
            "process's high-water mark (`summary.json`):",
            "",
            markdown_table(
                [
                    "frame_storage",
                    "transitions",
                    "buffer GB",
                    "peak RSS GB",
                    "peak RSS / buffer",
                    "rest GB",
                    "compile s",
                    "run s",
                ],
                run_rows,
            ),
            "",
            "Commands:",
            "",
            *commands,
            "",
        ]
    )
    write_report(text, RESULTS / "atari_memory.md")


if __name__ == "__main__":
    main()
