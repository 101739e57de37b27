"""Helpers shared by the benchmark scripts: machine description, markdown tables, number
formatting, load-average notes, worker subprocesses and writing the results file.

The scripts run as `python benchmarks/<name>.py`, so this directory is `sys.path[0]` and they
import it as `from common import ...`.
"""

from __future__ import annotations

import json
import os
import statistics
import struct
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

REPO = Path(__file__).resolve().parent.parent
# This checkout's packages, not the installed ones: comparing two commits runs each checkout's
# scripts (the scripts import this module before anything of jaxrl's).
sys.path.insert(0, str(REPO))

from jaxrl.config import install_hint  # noqa: E402
from jaxrl.sweep import read_evals  # noqa: E402

RESULTS = REPO / "benchmarks" / "results"
# PPO on CartPole-v1 in PureJaxRL's configuration (purejaxrl/ppo.py's __main__), for jaxrl's CLI;
# PUREJAXRL_SETTINGS turns off the normalisations PureJaxRL does not have.
PUREJAXRL_PPO_CARTPOLE = [
    "agent=ppo",
    "env=CartPole-v1",
    "env.num_envs=4",
    "agent.num_steps=128",
    "agent.num_minibatches=4",
    "agent.update_epochs=4",
]
PUREJAXRL_SETTINGS = ["agent.obs_normalization=false", "agent.return_normalization=false"]
# DQN on CartPole-v1 in PureJaxRL's configuration (purejaxrl/dqn.py's `main`): one update per 10
# env steps, the target copied every 500 env steps = 50 updates, flax's default weight init (its
# QNetwork's); 10,000 env steps per iteration.
PUREJAXRL_DQN_CARTPOLE = [
    "agent=dqn",
    "env=CartPole-v1",
    "env.num_envs=10",
    "budget.env_steps=500000",
    "agent.buffer_size=10000",
    "agent.batch_size=128",
    "agent.learning_starts=10000",
    "agent.train_freq=1",
    "agent.gradient_steps=1",
    "agent.iteration_steps=10000",
    "agent.target_update_period=50",
    "agent.tau=1.0",
    "agent.eps_start=1.0",
    "agent.eps_end=0.05",
    "agent.exploration_steps=250000",
    "agent.learning_rate=2.5e-4",
    "agent.anneal_lr=false",
    "agent.gamma=0.99",
    "agent.double_q=false",
    "agent.loss=mse",
    "agent.max_grad_norm=0",
    "agent.hidden_sizes=[120,84]",
    "agent.kernel_init=lecun_normal",
]


def machine(load: bool = False) -> str:
    """CPU model (`autotune.cpu_model`), usable cores and JAX backend (and the accelerator's name,
    if any), e.g. 'AMD EPYC (family 26, model 2, AVX-512), 2 cores, jax 0.10.2 cpu'; with `load`,
    the current 1-minute load average appended (', load 1.0')."""
    import jax

    from jaxrl.autotune import cpu_model

    model = cpu_model()
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    where = f"{model}, {cores} cores, jax {jax.__version__} {jax.default_backend()}"
    if jax.default_backend() != "cpu":
        where += f" ({jax.devices()[0].device_kind})"
    return f"{where}, load {os.getloadavg()[0]:.1f}" if load else where


def markdown_table(header: list[str], rows: list[list[str]]) -> str:
    """A markdown table: the header row, the `|---|` separator, then one line per row."""
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def median_range(xs: list[float], digits: int = 2) -> str:
    """The median of interleaved runs' seconds and their range: "median (min-max)"."""
    return f"{statistics.median(xs):.{digits}f} ({min(xs):.{digits}f}-{max(xs):.{digits}f})"


class PendulumLearner(NamedTuple):
    """SAC's or TD3's off-policy driver on Pendulum-v1 after one driver step."""

    setup: Any  # jaxrl.offpolicy.OffPolicySetup (its `learner` is the agent's update)
    driver: Any  # the Agent of `offpolicy.off_policy_agent(setup)`
    state: Any  # the driver's state: the buffer filled to the batch size, one update made
    env_state: Any
    batch: Any  # a minibatch drawn from `state.buffer`


def pendulum_learner(agent: str, hidden_sizes: tuple[int, ...], batch_size: int) -> PendulumLearner:
    """SAC (`agent="sac"`) or TD3 on Pendulum-v1, traced in the caller's context (speed-up
    switches), after one jitted driver step."""
    import jax

    import envs
    from agents.sac import SACConfig, make_sac_learner
    from agents.td3 import TD3Config
    from jaxrl import offpolicy, replay
    from jaxrl.config import EnvConfig
    from jaxrl.deterministic import make_deterministic_learner

    env = envs.make(EnvConfig("Pendulum-v1"))
    config, make_learner = {
        "sac": (SACConfig, make_sac_learner),
        "td3": (TD3Config, make_deterministic_learner),
    }[agent]
    cfg = config(hidden_sizes=hidden_sizes, learning_starts=batch_size, buffer_size=20_000)
    setup = offpolicy.off_policy_setup(cfg, env, make_learner(cfg, env.spec))
    driver = offpolicy.off_policy_agent(setup)
    key = jax.random.key(0)
    state, env_state = driver.init(key), env.reset(key)
    state, env_state, _ = jax.jit(driver.train_step)(state, env_state, key)
    batch = replay.sample(state.buffer, key, batch_size)
    return PendulumLearner(setup, driver, state, env_state, batch)


def best_of(compiled: Any, *args: Any, repeats: int = 3) -> float:
    """Seconds of the fastest of `repeats` calls of a compiled JAX program: ms per step of a
    1,000-step program."""
    import jax

    best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        jax.block_until_ready(compiled(*args))
        best = min(best, time.perf_counter() - t)
    return best  # seconds per 1,000 steps = ms per step


def eval_curves(
    run_dir: Path, columns: Sequence[str]
) -> tuple[list[int], dict[str, list[list[float]]]]:
    """A gridless run directory's evaluations (`evals.csv`, read by `jaxrl.sweep.read_evals`):
    the env steps evaluated at, and for each of `columns` one list per seed of its values."""
    curves = {}
    for column in columns:
        _, per_seed = read_evals(run_dir / "evals.csv", column)[None]
        curves[column] = [values.tolist() for _, values in per_seed.values()]
    steps = sorted({int(step) for steps, _ in per_seed.values() for step in steps})
    return steps, curves


@dataclass(frozen=True)
class LongRun:
    """What the report of a long CLI run (trained in pieces with `resume=`; one seed or several,
    in one run directory or several) says beside the numbers of its run directories."""

    title: str  # the report's heading; the plot's title, with the seeds
    episodes: str  # what its evaluation episodes are called ("games")
    y_axis: tuple[str, float, float]  # the plot's return axis: label, lowest, highest
    references: tuple[tuple[float, str, str], ...]  # lines across the plot: value, style, label
    reference_text: str  # the sentence that cites them
    smooth: int  # iterations in the moving mean of the training-episode curve


@dataclass(frozen=True)
class SeedCurves:
    """One seed of a long run: its evaluations by env steps and its logged training returns."""

    seed: int
    run_dir: Path
    evals: dict[int, tuple[float, float, float]]  # env steps -> (return, std, seconds so far)
    training: tuple[Any, Any]  # (env steps, mean training-episode return) per iteration


def logged_training_returns(run_dir: Path, seed: int) -> tuple[Any, Any]:
    """(env steps, mean return of the training episodes that ended) per iteration that ended any,
    from one seed of a gridless CLI run's TensorBoard events (what CleanRL's
    `charts/episodic_return` logs); a resumed run's repeated iterations: the last value wins."""
    import numpy as np
    from tensorboardX.proto.event_pb2 import Event

    by_step: dict[str, dict[int, float]] = {"train/episode_return": {}, "train/episodes": {}}
    for path in sorted((run_dir / "tb").glob(f"seed_{seed}/events.out.tfevents.*")):
        data, offset = path.read_bytes(), 0
        while offset + 12 <= len(data):
            (length,) = struct.unpack("<Q", data[offset : offset + 8])
            event = Event.FromString(data[offset + 12 : offset + 12 + length])
            offset += 12 + length + 4
            for value in event.summary.value:
                if value.tag in by_step:
                    by_step[value.tag][event.step] = value.simple_value
    returns, episodes = by_step["train/episode_return"], by_step["train/episodes"]
    steps = np.array(sorted(s for s in returns if episodes.get(s, 0) > 0))
    return steps, np.array([returns[s] for s in steps])


def _seed_curves(run_dir: Path) -> list[SeedCurves]:
    """Every seed of a gridless run directory (`jaxrl.sweep.read_evals`: a resumed run's
    repeated iterations, the last row wins)."""
    path = run_dir / "evals.csv"
    returns, stds, seconds = (
        read_evals(path, column) for column in ("eval_return", "eval_return_std", "elapsed_seconds")
    )
    if None not in returns:
        raise SystemExit(f"{run_dir} is a grid run; a long-run report takes seeds only")
    return [
        SeedCurves(
            seed,
            run_dir,
            {
                int(step): (float(value), float(std), float(elapsed))
                for step, value, std, elapsed in zip(
                    steps, values, stds[None][1][seed][1], seconds[None][1][seed][1], strict=True
                )
            },
            logged_training_returns(run_dir, seed),  # read once: a 10M run's events are large
        )
        for seed, (steps, values) in returns[None][1].items()
    ]


def _seeds_label(seeds: Sequence[SeedCurves]) -> str:
    return ("seed " if len(seeds) == 1 else "seeds ") + ", ".join(str(s.seed) for s in seeds)


def _run_dir_text(run_dir: Path, config: dict[str, Any], seeds: Sequence[SeedCurves]) -> str:
    kwargs = config["env"].get("kwargs") or {}
    env_options = f", `env.kwargs` {kwargs}" if kwargs else ""
    return (
        f"`{run_dir}` ({_seeds_label(seeds)}; budget {config['budget']['env_steps']:,.0f} env "
        f"steps, preset `{config.get('preset')}`{env_options})"
    )


def _long_run_report(
    run: LongRun, configs: dict[Path, dict[str, Any]], seeds: list[SeedCurves], image: str
) -> str:
    """One seed: its return, std and seconds at each evaluation; several: a return column per
    seed, their mean where every seed has one, and each run directory's seconds."""
    import numpy as np

    dirs = list(configs)
    episodes_each = configs[dirs[0]]["eval"]["episodes"]
    if len(seeds) == 1:
        header = [
            "env steps",
            f"evaluation return ({episodes_each} {run.episodes})",
            "std",
            "training seconds so far",
        ]
        rows = [
            [fmt(step, 0), fmt(ret, 2), fmt(std, 2), fmt(seconds, 0)]
            for step, (ret, std, seconds) in seeds[0].evals.items()
        ]
    else:
        several_dirs = len(dirs) > 1
        header = [
            "env steps",
            *(f"seed {s.seed}" for s in seeds),
            "mean over seeds",
            *(f"training seconds so far{f' ({d.name})' if several_dirs else ''}" for d in dirs),
        ]
        rows = []
        for step in sorted({step for s in seeds for step in s.evals}):
            values = [s.evals[step][0] if step in s.evals else None for s in seeds]
            seconds = [
                next((s.evals[step][2] for s in seeds if s.run_dir == d and step in s.evals), None)
                for d in dirs
            ]
            mean = None if None in values else float(np.mean(values))
            rows.append([fmt(step, 0), *(fmt(v) for v in values), fmt(mean)])
            rows[-1] += [fmt(t, 0) for t in seconds]
    training = []
    for s in seeds:
        steps, returns = s.training
        if len(returns):
            which = f"seed {s.seed}, " if len(seeds) > 1 else ""
            last = returns[-run.smooth :]
            training.append(f"{np.mean(last):.1f} ({which}to {int(steps[-1]):,} env steps)")
    if training:
        last_n = min(run.smooth, min(len(s.training[1]) for s in seeds if len(s.training[1])))
        episodes = (
            f"Training episodes: mean return of the last {last_n} iterations that ended any: "
            + "; ".join(training)
            + "."
        )
    else:
        episodes = "No training episodes were logged (`log.tensorboard=false`)."
    each_dir = "; ".join(
        _run_dir_text(d, configs[d], [s for s in seeds if s.run_dir == d]) for d in dirs
    )
    evaluations = (
        ""
        if len(seeds) == 1
        else f" Each cell is a seed's evaluation return ({episodes_each} {run.episodes})."
    )
    return "\n\n".join(
        [
            f"# {run.title}",
            f"Run director{'ies' if len(dirs) > 1 else 'y'} {each_dir} on {machine()}. "
            "The seconds are compile and run seconds so far, summed over the pieces of a run "
            f"trained in pieces (`resume=`; the gaps between pieces are not in them).{evaluations}",
            markdown_table(header, rows),
            f"{episodes} {run.reference_text}",
            f"![{run.title}: training and evaluation returns against env steps]({image})",
        ]
    )


def _plot_long_run(
    run: LongRun, configs: dict[Path, dict[str, Any]], seeds: list[SeedCurves], out: Path
) -> None:
    """Each seed in its own colour: its training episodes' moving mean (a thin line) and its
    evaluations (dots and lines)."""
    import matplotlib
    import numpy as np

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    episodes_each = next(iter(configs.values()))["eval"]["episodes"]
    fig, ax = plt.subplots(figsize=(6, 4))
    training_label = f"training episodes ({run.smooth}-iteration mean)"
    evaluation_label = f"greedy evaluation ({episodes_each} {run.episodes})"
    several = len(seeds) > 1
    for index, s in enumerate(seeds):
        colour = f"C{index}"
        steps, returns = s.training
        if len(returns) >= run.smooth:
            mean = np.convolve(returns, np.ones(run.smooth) / run.smooth, mode="valid")
            label = None if several else training_label
            ax.plot(steps[run.smooth - 1 :], mean, color=colour, linewidth=0.8, label=label)
        eval_steps = list(s.evals)
        eval_returns = [s.evals[step][0] for step in eval_steps]
        label = f"seed {s.seed}" if several else evaluation_label
        ax.plot(eval_steps, eval_returns, "o-", color=colour, markersize=3, label=label)
    if several:  # one legend entry per seed, and one per kind of line in grey
        ax.plot([], [], color="gray", linewidth=0.8, label=training_label)
        ax.plot([], [], "o-", color="gray", markersize=3, label=evaluation_label)
    for value, style, name in run.references:
        ax.axhline(value, color="gray", linestyle=style, label=name)
    ax.set_xlabel("env steps")
    ax.set_ylabel(run.y_axis[0])
    ax.set_ylim(run.y_axis[1], run.y_axis[2])
    ax.set_title(f"{run.title}, {_seeds_label(seeds)}")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out, dpi=110)


def report_long_run(run: LongRun, description: str, default_out: Path) -> None:
    """The command line of a long run's report: `--run-dir DIR [DIR ...] [--out PATH]` writes the
    report and its curve (a PNG beside it) from the run directories (the same settings, other
    seeds: a run's seeds may come from several)."""
    import argparse

    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--run-dir", type=Path, nargs="+", required=True)
    parser.add_argument("--out", type=Path, default=default_out)
    args = parser.parse_args()
    configs = {d: json.loads((d / "config.json").read_text()) for d in args.run_dir}
    seeds = sorted((s for d in args.run_dir for s in _seed_curves(d)), key=lambda s: s.seed)
    if len({s.seed for s in seeds}) < len(seeds):
        raise SystemExit("the run directories share a seed; give each seed once")
    image = args.out.with_suffix(".png")
    write_report(_long_run_report(run, configs, seeds, image.name) + "\n", args.out)
    _plot_long_run(run, configs, seeds, image)


def last_quarter_mean(steps: Sequence[int], values: Any) -> Any:
    """The mean of `values` ([..., evaluations]) over the evaluations of the last quarter of the
    run (at or past 3/4 of its last evaluation's steps): steadier than the final evaluation
    alone, whose single policy snapshot swings from one evaluation to the next."""
    import numpy as np

    steps = np.asarray(steps)
    return np.asarray(values)[..., steps >= 0.75 * steps[-1]].mean(axis=-1)


def welch_p(a: Sequence[float], b: Sequence[float]) -> float:
    """Two-sided p-value of Welch's t-test (unequal variances) between two trainers' per-seed
    figures: whether a gap between their means stands out from the spread across seeds."""
    from scipy import stats

    return float(stats.ttest_ind(a, b, equal_var=False).pvalue)


def fmt(x: float | None, digits: int = 1) -> str:
    """`x` with thousands separators and `digits` decimals; '—' for None."""
    return "—" if x is None else f"{x:,.{digits}f}"


@dataclass
class TrainingRow:
    """One training run of a throughput table (off-policy benchmarks, the SB3 comparison)."""

    what: str
    env_steps: int
    compile_s: float | None  # None: nothing compiled (a PyTorch reference)
    run_s: float
    final_return: float | None


def training_table(rows: list[TrainingRow], where: str) -> str:
    """Env steps, env steps/s over run seconds, compile and run seconds, final return, machine."""
    header = ["what", "env steps", "env steps/s", "compile s", "run s", "final return", "machine"]
    cells = [
        [
            r.what,
            fmt(r.env_steps, 0),
            fmt(r.env_steps / r.run_s, 0),
            fmt(r.compile_s),
            f"{r.run_s:.1f}",
            fmt(r.final_return),
            where,
        ]
        for r in rows
    ]
    return markdown_table(header, cells)


Measured = tuple[TrainingRow, list[str]] | None  # a row and its notes; None: skipped


def training_rows(
    runs: Sequence[Callable[[], Measured]],
) -> tuple[list[TrainingRow], list[str], float, float]:
    """Run each side in turn, printing its row as it finishes: the rows, their notes and the
    1-minute load average before and after."""
    load_before = os.getloadavg()[0]
    rows: list[TrainingRow] = []
    notes: list[str] = []
    for run in runs:
        measured = run()
        if measured is not None:
            rows.append(measured[0])
            notes += measured[1]
            print(training_table([measured[0]], ""), flush=True)
    return rows, notes, load_before, os.getloadavg()[0]


def sb3_atari_env(env_id: str, n_envs: int, seed: int, sticky: float, **wrapper: Any) -> Any:
    """Stable-Baselines3's Atari env (its `AtariWrapper`: up to 30 no-ops at a reset, frame skip
    4 with a max-pool, FIRE reset, 84×84 grey, reward sign; `wrapper` adds its other options) on
    `frameskip=1` Gymnasium envs with ALE's sticky actions, 4 frames stacked: the SB3 side of the
    Atari comparisons. None, with a printed message, when SB3, torch or OpenCV is missing."""
    try:
        import ale_py
        import cv2  # noqa: F401  (SB3's WarpFrame resizes with OpenCV)
        import gymnasium
        import torch  # noqa: F401
        from stable_baselines3.common.env_util import make_atari_env
        from stable_baselines3.common.vec_env import VecFrameStack
    except ImportError as e:
        print(f"SB3 row skipped: {e.name} is not importable ({install_hint('sb3')})")
        return None
    gymnasium.register_envs(ale_py)
    env = make_atari_env(
        env_id,
        n_envs=n_envs,
        seed=seed,
        env_kwargs={"frameskip": 1, "repeat_action_probability": sticky},
        wrapper_kwargs={"noop_max": 30, "frame_skip": 4, "screen_size": 84, "clip_reward": True}
        | wrapper,
    )
    return VecFrameStack(env, n_stack=4)


def final_eval_key(seed: int, iterations: int) -> Any:
    """The key of the evaluation after `iterations` train steps of a one-chunk run; mirrors the
    key use of `jaxrl.loop.Trainer` (`_init`'s third key, one split per train step, then the
    second half of a split)."""
    import jax

    from jaxrl.prng import make_key

    key = jax.random.split(make_key(seed), 3)[2]
    for _ in range(iterations):
        key = jax.random.split(key)[0]
    return jax.random.split(key)[1]


def rerun_final_evaluation(result: Any, seed: int, games: str) -> tuple[float, str]:
    """Seconds of a one-seed, one-chunk run's final evaluation, and a note on it: the evaluation
    is run again on the final parameters with the run's own key (the same games; the returns are
    checked against the run's), so that a table can give training speed without it. Closes the
    run's envs."""
    import jax
    import numpy as np

    from envs.host import host_errors

    summary, trainer = result.summary, result.trainer
    agent_state = jax.tree.map(lambda x: x[0], result.carry.agent_state)
    evaluate = jax.jit(lambda state, key: trainer.evaluate(trainer.agent, state, key))
    key = final_eval_key(seed, summary["iterations"])
    with host_errors():
        compiled = evaluate.lower(agent_state, key).compile()
        start = time.perf_counter()
        episodes = jax.block_until_ready(compiled(agent_state, key))
        seconds = time.perf_counter() - start
    trainer.env.close()
    trainer.eval_env.close()
    returns = np.asarray(episodes.returns)
    same = bool(np.isclose(returns.mean(), summary["final_eval_return"]))
    note = (
        f"jaxrl's final evaluation ({len(returns)} greedy {games}, lengths "
        f"{', '.join(str(n) for n in np.asarray(episodes.lengths))} steps, scores "
        f"{', '.join(f'{r:g}' for r in returns)}) took {seconds:.1f} s when re-run on the final "
        f"parameters with the run's evaluation key; it is subtracted from the run's "
        f"{summary['run_seconds']:.1f} s. "
        + (
            "The re-run reproduced the run's evaluation return."
            if same
            else f"WARNING: the re-run's mean return {returns.mean():g} differs from the run's "
            f"{summary['final_eval_return']}, so the subtracted time is only an estimate."
        )
    )
    return seconds, note


def time_to_target_header(target: float) -> list[str]:
    """Columns of the CartPole ES tables (es_cartpole.py and its evosax reference)."""
    return [
        "what",
        "env steps/s",
        "compile s",
        "run s",
        f"time to {target:g} s (compile+run)",
        f"env steps to {target:g}",
        "process wall s",
        "final return",
        f"seeds ≥ {target:g}",
        "machine",
    ]


def load_note(before: float, after: float) -> str:
    """The sentence on the 1-minute load average before and after the measurements."""
    return (
        f"1-minute load average: {before:.2f} before, {after:.2f} after (other processes share "
        f"the CPU when it is well above 0)."
    )


def repo_env(**extra: str) -> dict[str, str]:
    """This process's environment plus `extra`, with the repository first on PYTHONPATH, for
    subprocesses that import jaxrl from this checkout."""
    env = dict(os.environ, **extra)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    return env


def run_process(
    what: str, cmd: list[str], expected_exit: int = 0, **kwargs: Any
) -> tuple[str, float]:
    """Run `cmd` (extra `subprocess.run` arguments in `kwargs`) capturing its text output;
    returns (stdout, wall seconds). An exit status other than `expected_exit` raises
    RuntimeError naming `what`."""
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, **kwargs)
    wall = time.perf_counter() - t0
    if proc.returncode != expected_exit:
        raise RuntimeError(f"{what}: exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
    return proc.stdout, wall


def finished_cli_run(
    what: str, cmd: list[str], run_dir: Path, env: dict[str, str] | None = None
) -> dict[str, Any]:
    """The summary.json of the CLI run `python -m jaxrl.run *cmd` logging to `run_dir`, run
    first (in `env`, default `repo_env()`) unless the directory already holds a finished run: a
    benchmark's rows can then run side by side in separate processes and its report be written
    from their directories after."""
    if not (run_dir / "summary.json").exists():
        print(f"running {what}: python -m jaxrl.run {' '.join(cmd)}", flush=True)
        cli = [sys.executable, "-m", "jaxrl.run", *cmd]
        run_process(what, cli, cwd=REPO, env=env or repo_env())
    return json.loads((run_dir / "summary.json").read_text())


def last_json(stdout: str) -> dict[str, Any]:
    """The JSON object a worker process printed as the last line of its output."""
    return json.loads(stdout.strip().splitlines()[-1])


def write_report(text: str, out: Path | None) -> None:
    """Print the report and write it to `out` (creating its directory); None: print only."""
    print()
    print(text)
    if out is None:
        return
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    print(f"written to {out}")


def write_report_if_quiet(text: str, out: Path, load: float, limit: float) -> None:
    """`write_report` when the 1-minute load average `load` is below `limit` (timings on a shared
    machine say little); otherwise print the report and say why it was not written."""
    if load < limit:
        write_report(text, out)
        return
    print()
    print(text)
    print(f"not written to {out}: load average above {limit}; re-run when quiet")


def finish_imitation_plot(
    fig: Any, ax: Any, expert: float, title: str, ylabel: str, out: Path
) -> None:
    """The imitation plots' common ending: the expert's level and (for a positive one) 90% of it,
    labels, legend, saved to `out`."""
    ax.axhline(expert, color="k", linestyle="--", linewidth=1, label="expert")
    if expert > 0:  # 90% of a negative return would lie above the expert
        ax.axhline(
            0.9 * expert, color="gray", linestyle=":", linewidth=1, label="90% of the expert"
        )
    ax.set_xlabel("expert-labelled steps")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
