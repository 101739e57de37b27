"""Our PPO and SAC against Brax's own trainers (`brax.training.agents.{ppo,sac}.train`) on Brax
envs: the same env, physics backend, budget, network and hyperparameters, each trainer in its
own process, one after the other on this machine (issue 18, item 3). Reports the return at the
budget and the mean of the last quarter's evaluations (`common.last_quarter_mean`), env steps/s
and the wall time from process start (imports and compiles included) to a return that needs
locomotion (`Comparison.target`).

Settings: Brax's training notebook (google/brax, commit 0b96d05, `notebooks/training.ipynb`,
the `train_fn` table): its Ant row for PPO (reward scaling 10, episode length 1000, observation
normalisation, unroll length 5, 32 minibatches, 4 updates per batch, discount 0.97, Adam 3e-4,
entropy cost 1e-2, 4,096 envs, batch size 2,048) and its Hopper row for SAC (reward scaling 30,
discount 0.997, Adam 6e-4, 128 envs, batch 512, 64 gradient updates per step of the env batch, a
replay of 1,048,576, 8,192 transitions before learning). On both sides:

* the `spring` backend, the cheapest of Brax's own pipelines, and budgets a 2-core CPU affords:
  9,830,400 env steps for PPO (30 iterations, about 13 minutes per trainer; 50M would take over
  an hour each) and 131,072 for SAC (about 10 minutes each: 64 updates of batch 512 per 128 env
  steps, 8 ms an update; the notebook's 6.5M would take hours);
* PPO: 2,048 envs instead of 4,096, so that one iteration's 327,680 steps split into the same 128
  minibatches of 10,240 samples on both sides (our minibatch is a slice of time steps of every
  env: 160 steps per env and iteration, 32 minibatches of 5 steps); one network for both, our
  PPO's default 64-64 tanh policy and value MLPs with a state-independent std starting at 1 and
  a tanh-squashed Gaussian — Brax's `make_ppo_networks` with those sizes and activation (its
  default 4×32 policy and 5×256 value swish MLPs cost several times the compute per sample);
* SAC: Brax's 256-256 ReLU networks and tanh-squashed Gaussian, with a state-dependent std as
  ours (`state_dependent_std=True`; Brax 0.14's default is one std for all states); no
  observation normalisation (our SAC has none; the notebook turns Brax's on); H̄ = −0.5·|A|, α₀ = 1,
  the notebook's learning rate for actor and critics and Brax's fixed Adam 3e-4 for α
  (`brax/training/agents/sac/train.py`: `alpha_optimizer = optax.adam(learning_rate=3e-4)`);
* evaluation: 128 noise-free episodes (Brax: `deterministic_eval=True`, 128 eval envs), every two
  PPO iterations and every 8,192 SAC env steps.

What still differs, by design of each trainer: PPO — ours computes GAE over an iteration's 160
steps per env, Brax's over each 5-step unroll, bootstrapping from the value at its end; Brax
scales rewards by 10 where ours (`agent.return_normalization=false`) uses them as they are (with
separate policy and value networks and Adam, a constant factor on the value loss changes
little); Brax shuffles samples across envs and time into its minibatches, ours takes time
slices. SAC — Brax's prefill acts with the initial policy, ours with uniformly random actions.

Brax 0.14.2 calls `jax.device_put_replicated`, which jax 0.10 removed; the Brax worker restores
it (a copy of the tree per device along a new leading axis, what `pmap` takes).

Each (trainer, seed) run's curve is kept in benchmarks/results/brax_trainers.json as soon as the
run ends, so seeds can be added over several sessions (a run is skipped when its curve is stored;
an interrupted run starts again, as its directory under `--runs` is not kept between sessions)
and the report always covers every stored seed:

    python benchmarks/brax_trainers.py [--algo ppo sac] [--seeds 1 2 3] [--budget N] [--runs DIR]
                                       [--retrain]  # stored seeds trained again, here
    python benchmarks/brax_trainers.py --report      # the tables and plots from what is stored
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import os
import resource
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from common import (
    RESULTS,
    eval_curves,
    finished_cli_run,
    fmt,
    last_quarter_mean,
    load_note,
    machine,
    markdown_table,
    repo_env,
    run_process,
    welch_p,
    write_report,
)

from jaxrl.presets import PPO_BRAX_ANT

STEPS_PER_ITERATION = 327_680  # PPO, Brax: batch size 2,048 × 32 minibatches × unroll 5
WARMUP = 8192  # SAC: Brax's min_replay_size, our learning_starts and iteration_steps
UNRECORDED_MACHINE = "AMD EPYC, 2 cores (CPU generation not recorded)"  # curves stored before it
EVAL_EPISODES = 128
STORE = RESULTS / "brax_trainers.json"
QUIET = ("log.tensorboard=false", "log.progress=false")


@dataclass(frozen=True)
class Comparison:
    """One agent on one Brax env, run by both trainers."""

    algo: str  # "ppo" or "sac": the Brax trainer module and our agent
    env: str  # Brax's name
    budget: int  # default env steps
    budget_unit: int  # budgets are multiples of it: one evaluation's env steps on both sides
    brax: dict[str, Any]  # keyword arguments of Brax's train
    ours: tuple[str, ...]  # our CLI overrides, without budget and log.dir
    # A return that needs locomotion: standing still earns about 1,000 in 1,000 steps on Ant
    # and Hopper (a healthy reward of 1 per step), so a target below it says nothing.
    target: float = 1500.0

    def num_evals(self, budget: int) -> int:
        """Brax's num_evals that evaluates every `budget_unit` env steps, counting the one
        before training (PPO) or after the prefill (SAC, whose prefill is one unit)."""
        return budget // self.budget_unit + (1 if self.algo == "ppo" else 0)


BACKEND = "spring"
PPO_HIDDEN = (64, 64)
PPO = Comparison(
    algo="ppo",
    env="ant",
    budget=30 * STEPS_PER_ITERATION,
    budget_unit=2 * STEPS_PER_ITERATION,
    brax={
        "reward_scaling": 10,
        "episode_length": 1000,
        "normalize_observations": True,
        "action_repeat": 1,
        "unroll_length": 5,
        "num_minibatches": 32,
        "num_updates_per_batch": 4,
        "discounting": 0.97,
        "learning_rate": 3e-4,
        "entropy_cost": 1e-2,
        "num_envs": 2048,
        "batch_size": 2048,
        "clipping_epsilon": 0.3,  # Brax's default, named because ours must match it
        "gae_lambda": 0.95,
    },
    ours=(
        "agent=ppo",
        "env=brax/ant",
        f"env.backend={BACKEND}",
        "preset=none",  # the settings below are the ppo/ant preset's, spelled out
        *PPO_BRAX_ANT,
        "agent.update_epochs=4",  # these four are our PPO's defaults, named as Brax's
        "agent.ent_coef=0.01",
        f"agent.hidden_sizes=[{','.join(map(str, PPO_HIDDEN))}]",
        "agent.activation=tanh",
        "eval.every=2",
    ),
)
SAC = Comparison(
    algo="sac",
    env="hopper",
    budget=16 * WARMUP,
    budget_unit=WARMUP,
    brax={
        "reward_scaling": 30,
        "episode_length": 1000,
        "normalize_observations": False,  # our SAC has no observation normalisation
        "action_repeat": 1,
        "discounting": 0.997,
        "learning_rate": 6e-4,
        "num_envs": 128,
        "batch_size": 512,
        "grad_updates_per_step": 64,
        "max_devices_per_host": 1,
        "max_replay_size": 1_048_576,
        "min_replay_size": WARMUP,
    },
    ours=(
        "agent=sac",
        "env=brax/hopper",
        f"env.backend={BACKEND}",
        "env.num_envs=128",
        "agent.batch_size=512",
        "agent.train_freq=1",
        "agent.gradient_steps=64",
        f"agent.learning_starts={WARMUP}",
        f"agent.iteration_steps={WARMUP}",
        "agent.buffer_size=1048576",
        "agent.gamma=0.997",
        "agent.actor_lr=6e-4",
        "agent.critic_lr=6e-4",
        "agent.alpha_lr=3e-4",
        "agent.reward_scale=30",
        "agent.target_entropy=-1.5",  # Brax: −0.5 × the action size
        "eval.every=1",
    ),
)
COMPARISONS = {c.algo: c for c in (PPO, SAC)}


@dataclass
class Curve:
    trainer: str
    seed: int
    command: str
    steps: np.ndarray  # [evaluations]: env steps trained at each
    returns: np.ndarray  # [evaluations]: mean return of the noise-free evaluation episodes
    wall_s: np.ndarray  # [evaluations]: seconds from process start
    process_s: float  # the whole process, start to exit
    env_steps: int
    peak_rss_gb: float
    load: str  # the load average around the run: other work makes its seconds loose
    # Where it ran (`common.machine`): sessions land on CPUs of different speed, so only curves
    # from one machine compare in seconds.
    machine: str = UNRECORDED_MACHINE

    def to_json(self) -> dict[str, Any]:
        fields = dataclasses.asdict(self)
        return {k: v.tolist() if isinstance(v, np.ndarray) else v for k, v in fields.items()}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Curve:
        arrays = {k: np.asarray(data[k]) for k in ("steps", "returns", "wall_s")}
        return cls(**{**data, **arrays})


def store_key(algo: str, trainer: str, budget: int, seed: int) -> str:
    return f"{algo} | {trainer} | budget {budget} | seed {seed}"


def brax_network(algo: str) -> Callable[..., Any]:
    """Brax's network factory made to match our agent's networks (module docstring)."""
    import jax.numpy as jnp

    if algo == "ppo":
        from brax.training.agents.ppo import networks as ppo_networks

        return functools.partial(
            ppo_networks.make_ppo_networks,
            policy_hidden_layer_sizes=PPO_HIDDEN,
            value_hidden_layer_sizes=PPO_HIDDEN,
            activation=jnp.tanh,
        )
    from brax.training.agents.sac import networks as sac_networks

    return functools.partial(sac_networks.make_sac_networks, state_dependent_std=True)


def brax_worker(comparison: Comparison, budget: int, seed: int, out: Path) -> None:
    """Brax's trainer with the comparison's settings; writes its evaluations to `out`."""
    start = time.perf_counter()
    import jax
    import jax.numpy as jnp

    if not hasattr(jax, "device_put_replicated"):  # module docstring
        jax.device_put_replicated = lambda tree, devices: jax.tree.map(
            lambda leaf: jnp.repeat(jnp.asarray(leaf)[None], len(devices), axis=0), tree
        )
    from brax import envs

    if comparison.algo == "ppo":
        from brax.training.agents.ppo.train import train
    else:
        from brax.training.agents.sac.train import train

    evaluations: list[tuple[int, float, float]] = []

    def progress(steps: int, metrics: dict) -> None:
        wall_s = time.perf_counter() - start
        evaluations.append((int(steps), float(metrics["eval/episode_reward"]), wall_s))
        print(f"brax {comparison.algo}: {steps:,} steps, eval {evaluations[-1][1]:.1f}", flush=True)

    train(
        environment=envs.get_environment(comparison.env, backend=BACKEND),
        num_timesteps=budget,
        num_evals=comparison.num_evals(budget),
        seed=seed,
        network_factory=brax_network(comparison.algo),
        progress_fn=progress,
        deterministic_eval=True,
        num_eval_envs=EVAL_EPISODES,
        **comparison.brax,
    )
    peak_rss_gb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    out.write_text(json.dumps({"evaluations": evaluations, "peak_rss_gb": peak_rss_gb}))


def run_brax(comparison: Comparison, budget: int, seed: int, runs: Path) -> Curve:
    out = run_dir(comparison, "brax", seed, runs) / "evals.json"
    args = ["--algo", comparison.algo, "--budget", str(budget), "--seeds", str(seed)]
    cmd = [sys.executable, __file__, "--brax-worker", *args, "--out", str(out)]
    process_file = out.parent / "process.json"
    if not out.exists():
        out.parent.mkdir(parents=True, exist_ok=True)
        print(f"running Brax's {comparison.algo}.train, seed {seed}", flush=True)
        load_before = os.getloadavg()[0]
        _, process_s = run_process(f"brax {comparison.algo}.train", cmd, env=repo_env())
        load = load_note(load_before, os.getloadavg()[0])
        process_file.write_text(json.dumps({"process_s": process_s, "load": load}))
    process = json.loads(process_file.read_text())
    data = json.loads(out.read_text())
    steps, returns, wall_s = map(np.asarray, zip(*data["evaluations"], strict=True))
    return Curve(
        trainer_name(comparison, "brax"),
        seed,
        f"python benchmarks/brax_trainers.py --brax-worker {' '.join(args)}",
        steps,
        returns,
        wall_s,
        process["process_s"],
        int(steps[-1]),
        data["peak_rss_gb"],
        process["load"],
        machine(),
    )


def ours_args(comparison: Comparison, budget: int, seed: int) -> list[str]:
    """Our run's CLI overrides, but its directory."""
    settings = [*comparison.ours, f"eval.episodes={EVAL_EPISODES}", f"seed={seed}", *QUIET]
    return [*settings, f"budget.env_steps={budget}"]


def ours_command(comparison: Comparison, budget: int, seed: int) -> str:
    """The command stored with our run's curve: a stored curve with another is stale."""
    return "python -m jaxrl.run " + " ".join(ours_args(comparison, budget, seed))


def run_dir(comparison: Comparison, side: str, seed: int, runs: Path) -> Path:
    """Where a trainer's run of a seed keeps its files ("jaxrl" or "brax")."""
    return runs / comparison.algo / side / f"seed_{seed}"


def run_ours(comparison: Comparison, budget: int, seed: int, runs: Path) -> Curve:
    directory = run_dir(comparison, "jaxrl", seed, runs)
    cmd = [*ours_args(comparison, budget, seed), f"log.dir={directory}"]
    process_file = directory / "process.json"
    fresh = not (directory / "summary.json").exists()
    if fresh:  # an interrupted run starts again from nothing: its seconds must be a whole run's
        shutil.rmtree(directory, ignore_errors=True)
    load_before = os.getloadavg()[0]
    t0 = time.perf_counter()
    # A cold compile, as Brax's: our CLI's persistent XLA cache pointed at an empty directory.
    with tempfile.TemporaryDirectory() as cache:
        env = repo_env(JAXRL_CACHE_DIR=cache)
        summary = finished_cli_run(f"jaxrl {comparison.algo}", cmd, directory, env)
    if fresh:
        load = load_note(load_before, os.getloadavg()[0])
        process_file.write_text(json.dumps({"process_s": time.perf_counter() - t0, "load": load}))
    process = json.loads(process_file.read_text())
    process_s = process["process_s"]
    steps, curves = eval_curves(directory, ["eval_return", "elapsed_seconds"])
    # elapsed_seconds counts from the first compile; the rest of the process (imports, env and
    # agent construction, the run directory) is added so both trainers count from process start.
    startup_s = process_s - summary["compile_seconds"] - summary["run_seconds"]
    return Curve(
        trainer_name(comparison, "jaxrl"),
        seed,
        ours_command(comparison, budget, seed),
        np.asarray(steps),
        np.asarray(curves["eval_return"][0]),
        np.asarray(curves["elapsed_seconds"][0]) + startup_s,
        process_s,
        summary["env_steps"],
        summary["peak_rss_gb"],
        process["load"],
        machine(),
    )


def trainer_name(comparison: Comparison, side: str) -> str:
    if side == "brax":
        return f"Brax {comparison.algo}.train"
    return f"jaxrl {comparison.algo.upper()}"


RUNNERS = {"jaxrl": run_ours, "brax": run_brax}


def first_reaching(curve: Curve, target: float) -> tuple[int | None, float | None]:
    """(env steps, wall seconds) of the curve's first evaluation at or above `target`."""
    hits = np.flatnonzero(curve.returns >= target)
    if hits.size == 0:
        return None, None
    return int(curve.steps[hits[0]]), float(curve.wall_s[hits[0]])


def section(comparison: Comparison, curves: list[Curve], budget: int) -> str:
    """One comparison's report: a row per trainer over its stored seeds, with the time to the
    locomotion target and to the return both trainers reach (the lower of the two trainers'
    median best evaluations), and the commands."""
    target = comparison.target
    by_trainer: dict[str, list[Curve]] = {}
    for c in curves:
        by_trainer.setdefault(c.trainer, []).append(c)
    shared = min(float(np.median([c.returns.max() for c in cs])) for cs in by_trainer.values())
    header = [
        "trainer",
        "seeds",
        "return at budget: mean (each seed)",
        "last quarter's evaluations: mean (each seed)",
        "best return: mean",
        "env steps/s (whole process): median",
        f"wall s to {target:,.0f}: median (seeds reaching)",
        f"wall s to {shared:,.0f}: median (seeds reaching)",
        "process wall s: median",
        "peak RSS GB: max",
    ]

    def time_to(cs: list[Curve], value: float) -> str:
        walls = [wall for c in cs if (wall := first_reaching(c, value)[1]) is not None]
        if not walls:
            return f"not reached (0 of {len(cs)})"
        return f"{np.median(walls):,.1f} ({len(walls)} of {len(cs)})"

    rows = []
    per_seed: dict[str, tuple[list[float], list[float]]] = {}
    for trainer, cs in by_trainer.items():
        finals = [float(c.returns[-1]) for c in cs]
        lates = [float(last_quarter_mean(c.steps, c.returns)) for c in cs]
        per_seed[trainer] = (finals, lates)
        rows.append(
            [
                trainer,
                ", ".join(str(c.seed) for c in cs),
                f"{fmt(np.mean(finals))} ({', '.join(fmt(f) for f in finals)})",
                f"{fmt(np.mean(lates))} ({', '.join(fmt(late) for late in lates)})",
                fmt(np.mean([c.returns.max() for c in cs])),
                f"{np.median([c.env_steps / c.process_s for c in cs]):,.0f}",
                time_to(cs, target),
                time_to(cs, shared),
                fmt(np.median([c.process_s for c in cs])),
                fmt(max(c.peak_rss_gb for c in cs), 2),
            ]
        )
    significance = ""
    if len(per_seed) == 2 and all(len(finals) >= 2 for finals, _ in per_seed.values()):
        (finals_a, lates_a), (finals_b, lates_b) = per_seed.values()
        significance = (
            "Between the two trainers' per-seed figures, Welch's t-test gives p = "
            f"{welch_p(finals_a, finals_b):.2f} for the return at budget and p = "
            f"{welch_p(lates_a, lates_b):.2f} for the last quarter's mean (two-sided; a gap "
            "with p well above 0.05 is within the spread across seeds).\n\n"
        )
    commands = "\n".join(
        f"* {trainer} (seeds differ only in the seed): `{cs[0].command}`"
        for trainer, cs in by_trainer.items()
    )
    loads = "\n".join(f"* {c.trainer}, seed {c.seed}: {c.machine}; {c.load}" for c in curves)
    return (
        f"## {comparison.algo.upper()} on {comparison.env} ({BACKEND}), "
        f"`--algo {comparison.algo} --budget {budget}`\n\n"
        + markdown_table(header, rows)
        + f"\n\n{target:,.0f} needs locomotion: standing still for the 1,000 steps of an "
        f"episode earns about 1,000 (a healthy reward of 1 per step). {shared:,.0f} is the lower "
        "of the two trainers' median best evaluations, a return both reach.\n\n"
        f"{significance}{commands}\n\nThe machine of each run and the load on its CPU around "
        "the run (its seconds are loose when other work shared the two cores; seconds compare "
        f"between runs on one machine):\n\n{loads}\n\n"
        f"![return against env steps and wall time](brax_trainers_{comparison.algo}.png)\n"
    )


def plot(comparison: Comparison, curves: list[Curve], out: Path) -> None:
    """Return against env steps and against wall time: a colour per trainer, a line per seed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (by_steps, by_wall) = plt.subplots(1, 2, figsize=(9, 3.2), sharey=True)
    colours: dict[str, str] = {}
    for c in curves:
        first_of_trainer = c.trainer not in colours
        colour = colours.setdefault(c.trainer, f"C{len(colours)}")
        label = c.trainer if first_of_trainer else None
        by_steps.plot(c.steps / 1e6, c.returns, marker=".", color=colour, alpha=0.8, label=label)
        by_wall.plot(c.wall_s / 60, c.returns, marker=".", color=colour, alpha=0.8)
    by_steps.set_xlabel("env steps (M)")
    by_wall.set_xlabel("wall minutes from process start")
    by_steps.set_ylabel("eval return")
    by_steps.legend()
    seeds = sorted({c.seed for c in curves})
    fig.suptitle(
        f"{comparison.algo.upper()} on Brax {comparison.env} ({BACKEND}), same settings, "
        f"seeds {', '.join(map(str, seeds))}"
    )
    fig.tight_layout()
    fig.savefig(out, dpi=100)
    plt.close(fig)


def stored_curves(store: dict[str, Any], comparison: Comparison, budget: int) -> list[Curve]:
    """The comparison's stored runs at `budget`: ours first, then Brax's, each by seed."""
    ours = trainer_name(comparison, "jaxrl")
    curves = [
        Curve.from_json(data)
        for key, data in store.items()
        if key.startswith(f"{comparison.algo} | ") and f" | budget {budget} | " in key
    ]
    return sorted(curves, key=lambda c: (c.trainer != ours, c.seed))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--algo", choices=sorted(COMPARISONS), nargs="+", default=["ppo", "sac"])
    parser.add_argument("--budget", type=int, help="env steps (default: each comparison's)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1], help="1 is the notebook's")
    parser.add_argument("--runs", type=Path, default=Path("/tmp/jaxrl_brax_trainers"))
    parser.add_argument("--report", action="store_true", help="only rewrite the reports")
    parser.add_argument(
        "--retrain",
        action="store_true",
        help="train the seeds again even where stored, replacing their curves (e.g. on the "
        "machine of the other seeds)",
    )
    parser.add_argument("--brax-worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)  # the worker's evaluations
    args = parser.parse_args()
    comparisons = [COMPARISONS[algo] for algo in args.algo]
    for c in comparisons:
        budget = args.budget or c.budget
        if budget % c.budget_unit or budget < 2 * c.budget_unit:
            parser.error(
                f"--budget for {c.algo} must be a multiple of {c.budget_unit:,}, at least twice it"
            )
    if args.brax_worker:
        brax_worker(comparisons[0], args.budget, args.seeds[0], args.out)
        return
    store = json.loads(STORE.read_text()) if STORE.exists() else {}
    for c in comparisons:
        budget = args.budget or c.budget
        for seed in [] if args.report else args.seeds:
            for side, runner in RUNNERS.items():
                key = store_key(c.algo, trainer_name(c, side), budget, seed)
                stored = store.get(key)
                stale = (
                    side == "jaxrl"
                    and stored is not None
                    and stored["command"] != ours_command(c, budget, seed)
                )
                if stale:
                    print(f"{key}: stored with other settings, trained again", flush=True)
                if stored is not None and (args.retrain or stale):
                    del store[key]
                    shutil.rmtree(run_dir(c, side, seed, args.runs), ignore_errors=True)
                if key not in store:
                    store[key] = runner(c, budget, seed, args.runs).to_json()
                    STORE.write_text(json.dumps(store, indent=1))
        curves = stored_curves(store, c, budget)
        if not curves:
            print(f"{c.algo}: nothing stored at budget {budget:,}")
            continue
        write_report(
            f"# Our {c.algo.upper()} on Brax {c.env} against Brax's {c.algo}.train\n\n"
            f"`python benchmarks/brax_trainers.py --algo {c.algo}`. For each seed both trainers "
            "ran in their own processes, one after the other on one machine (named below with "
            "each run); settings and what "
            "differs: the script's docstring. Wall seconds count from process start (imports, "
            "compiles and evaluations included). Returns: the mean of 128 noise-free evaluation "
            "episodes of up to 1,000 steps.\n\n" + section(c, curves, budget),
            RESULTS / f"brax_trainers_{c.algo}.md",
        )
        plot(c, curves, RESULTS / f"brax_trainers_{c.algo}.png")


if __name__ == "__main__":
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    main()
