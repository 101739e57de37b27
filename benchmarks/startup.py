"""What a fresh process pays before it does any work: `import ml_dtypes`, `import jax`, the CLI
refusing a bad setting (`agent.gamma=1.5`: the agent module, and JAX with it, imported, nothing
compiled) and a tiny ES run with a warm compilation cache. Every CLI run, sweep job, notebook
kernel and test subprocess pays these.

With `--against DIR`, each command also runs with DIR first on PYTHONPATH (e.g. another
ml_dtypes installed there with `pip install --no-deps --target DIR ml_dtypes==0.7.0`), the two
sides interleaved, their order alternating; the table gives both and their difference.

    python benchmarks/startup.py [--repeats 5] [--against DIR] [--out PATH]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path

from common import (
    RESULTS,
    load_note,
    machine,
    markdown_table,
    median_range,
    repo_env,
    run_process,
    write_report,
)

DEFAULT_OUT = RESULTS / "startup.md"
TINY_RUN = "CLI tiny ES run (1k env steps, warm cache)"
REFUSAL = "CLI refuses agent.gamma=1.5 (exit 2)"
EXPECTED_EXIT = {REFUSAL: 2}  # rows not named here exit 0
TINY_ES = (
    "agent=es",
    "env=CartPole-v1",
    "budget.env_steps=1e3",
    "log.progress=false",
    "log.tensorboard=false",
)


def commands(run_root: Path) -> dict[str, list[str]]:
    """What each row runs; the tiny run logs under `run_root` (a fresh directory per call)."""
    py = sys.executable
    return {
        "import ml_dtypes": [py, "-c", "import ml_dtypes"],
        "import jax": [py, "-c", "import jax"],
        REFUSAL: [
            py,
            "-m",
            "jaxrl.run",
            "agent=ppo",
            "agent.gamma=1.5",
        ],
        TINY_RUN: [
            py,
            "-m",
            "jaxrl.run",
            *TINY_ES,
            f"hydra.run.dir={run_root}",
        ],
    }


def timed(what: str, cmd: list[str], env: dict[str, str]) -> float:
    """Wall seconds of one process, which must exit as its row expects (2 for the refusal)."""
    return run_process(what, cmd, EXPECTED_EXIT.get(what, 0), env=env)[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--against", type=Path, default=None)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args()

    sides = {"installed": repo_env()}
    if args.against is not None:
        against = repo_env()
        against["PYTHONPATH"] = os.pathsep.join([str(args.against), against["PYTHONPATH"]])
        sides[f"with {args.against} first"] = against
    before = os.getloadavg()[0]
    seconds: dict[tuple[str, str], list[float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        warm_up = commands(Path(tmp) / "warm_up")
        timed(TINY_RUN, warm_up[TINY_RUN], sides["installed"])  # fills the compilation cache
        for repeat in range(args.repeats):
            order = list(sides) if repeat % 2 == 0 else list(reversed(sides))
            for side in order:
                run_dir = Path(tmp) / f"run{repeat}_{list(sides).index(side)}"
                for name, cmd in commands(run_dir).items():
                    seconds.setdefault((name, side), []).append(timed(name, cmd, sides[side]))
    after = os.getloadavg()[0]

    versions = {
        side: run_process(
            "versions",
            [
                sys.executable,
                "-c",
                "import jax, ml_dtypes, numpy; print(f'jax {jax.__version__}, ml_dtypes "
                "{ml_dtypes.__version__}, numpy {numpy.__version__}')",
            ],
            env=env,
        )[0].strip()
        for side, env in sides.items()
    }
    header = ["process", *(f"{side}: s, median (min-max)" for side in sides)]
    if len(sides) == 2:
        header.append("second side − first, s (medians)")
    rows = []
    for name in commands(Path()):
        row = [name, *(median_range(seconds[(name, side)]) for side in sides)]
        if len(sides) == 2:
            first, second = (statistics.median(seconds[(name, side)]) for side in sides)
            row.append(f"{second - first:+.2f}")
        rows.append(row)
    text = "\n".join(
        [
            "# Process start-up",
            "",
            f"`python benchmarks/startup.py --repeats {args.repeats}"
            + (f" --against {args.against}`" if args.against else "`"),
            "",
            markdown_table(header, rows),
            "",
            f"{machine()}. "
            + "; ".join(f"{side}: {found}" for side, found in versions.items())
            + f". {args.repeats} interleaved repeats per side. "
            + load_note(before, after),
            "",
        ]
    )
    write_report(text, args.out)


if __name__ == "__main__":
    main()
