"""ES against evosax's OpenAI-ES on CartPole-v1, each stopping when solved, each from a cold
persistent compilation cache: the wall time a user waits for a solved CartPole, process start
included.

Each pair is one jaxrl process (`python -m jaxrl.run agent=es env=CartPole-v1
budget.target_return=475`, a fresh empty `JAXRL_CACHE_DIR`) and one evosax process
(benchmarks/evosax_cartpole.py's worker with `--until-solved` and a fresh empty cache with jaxrl's
cache settings), the same problem on both sides (population 64, sigma 0.02, Adam 0.02, 64-64 tanh,
5 episodes per member, an evaluation of 10 episodes after every generation; the stop: the first
evaluation at or above 475). Pairs run interleaved, their order alternating, seeds 0, 1, ...;
the two libraries' seeds are unrelated streams, so the env steps to solve differ by seed as much
as by library: the medians over pairs are the comparison.

Needs evosax (`pip install evosax`, not a jaxrl dependency); skips without it.

    python benchmarks/es_solved.py [--pairs 5] [--out PATH]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
from pathlib import Path

from common import RESULTS, fmt, load_note, machine, markdown_table, median_range, write_report
from es_cartpole import TARGET, run_cli
from evosax_cartpole import evosax_or_skip, run_worker

DEFAULT_OUT = RESULTS / "es_solved.md"
BUDGET = 5e6  # env steps per seed: a cap that the stop at TARGET comes well before


def jaxrl_pair_side(seed: int, tmp: Path) -> dict[str, float | None]:
    what = f"jaxrl seed {seed}"
    row = run_cli(
        what,
        1,
        tmp / f"cache_jaxrl_{seed}",
        tmp,
        BUDGET,
        eval_every=1,
        extra=[f"seed={seed}", f"budget.target_return={TARGET:g}"],
    )
    return {
        "wall": row.wall_s,
        "compile": row.compile_s,
        "to_target": row.time_to_target_s,
        "steps": row.steps_to_target,
    }


def evosax_pair_side(seed: int, tmp: Path) -> dict[str, float | None]:
    result, wall = run_worker(
        f"evosax seed {seed}", 1, BUDGET, seed, tmp / f"cache_evosax_{seed}", until_solved=True
    )
    hit = next((c for c in result["curve"] if c["eval_return"] >= TARGET), None)
    return {
        "wall": wall,
        "compile": result["compile_s"],
        "to_target": hit and hit["elapsed_seconds"],
        "steps": hit and hit["env_steps"],
    }


def summary_row(name: str, sides: list[dict[str, float | None]]) -> list[str]:
    solved = [s for s in sides if s["to_target"] is not None]

    def med(key: str, digits: int = 1) -> str:
        values = [float(s[key]) for s in solved]  # type: ignore[arg-type]
        return median_range(values, digits) if values else "—"

    return [
        name,
        f"{len(solved)}/{len(sides)}",
        med("wall"),
        med("compile"),
        med("to_target"),
        fmt(statistics.median(float(s["steps"]) for s in solved), 0) if solved else "—",  # type: ignore[arg-type]
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args()
    version = evosax_or_skip("this comparison")
    if version is None:
        return

    load_before = os.getloadavg()[0]
    jaxrl_sides, evosax_sides, pair_rows = [], [], []
    with tempfile.TemporaryDirectory(prefix="jaxrl-bench-es-solved-") as tmp:
        tmp_path = Path(tmp)
        for seed in range(args.pairs):
            order = ("jaxrl", "evosax") if seed % 2 == 0 else ("evosax", "jaxrl")
            sides = {}
            for side in order:
                print(f"pair {seed}: {side} ...", flush=True)
                run = jaxrl_pair_side if side == "jaxrl" else evosax_pair_side
                sides[side] = run(seed, tmp_path)
            jaxrl_sides.append(sides["jaxrl"])
            evosax_sides.append(sides["evosax"])
            pair_rows.append(
                [
                    str(seed),
                    " then ".join(order),
                    *(
                        f"{fmt(sides[s]['wall'])} / {fmt(sides[s]['to_target'])} / "
                        f"{fmt(sides[s]['steps'], 0)}"
                        for s in ("jaxrl", "evosax")
                    ),
                ]
            )
    load_after = os.getloadavg()[0]

    header = [
        "side",
        "solved",
        "process wall s to the stop, median (min-max)",
        "compile s",
        f"compile + run s to the first evaluation ≥ {TARGET:g}",
        "env steps to it, median",
    ]
    table = markdown_table(
        header,
        [
            summary_row("jaxrl ES (`budget.target_return`)", jaxrl_sides),
            summary_row(f"evosax {version} OpenES (stops at the same evaluation)", evosax_sides),
        ],
    )
    pairs = markdown_table(
        ["seed", "order", "jaxrl: wall / to 475 / env steps", "evosax: wall / to 475 / env steps"],
        pair_rows,
    )
    text = (
        f"# ES against evosax on CartPole-v1: stopped when solved, cold caches\n\n"
        f"`python benchmarks/es_solved.py --pairs {args.pairs}` on {machine()}\n\n{table}\n\n"
        f"Every process starts with an empty persistent XLA cache (jaxrl's `JAXRL_CACHE_DIR`; "
        f"evosax's worker sets the same cache options), so compile time is paid in full on both "
        f"sides. 'process wall' is the whole process from start to exit (Python start-up, "
        f"imports, jaxrl's Hydra, run directory and checkpoints); the stop is the first "
        f"evaluation (10 episodes of the mean parameters after each generation) whose return "
        f"reaches {TARGET:g}. {load_note(load_before, load_after)}\n\nPairs, in the order run "
        f"(seconds, seconds, env steps):\n\n{pairs}\n"
    )
    write_report(text, args.out)


if __name__ == "__main__":
    main()
