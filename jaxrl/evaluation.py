"""A trained run scored on many fresh episodes: `python -m jaxrl.evaluate <run dir>` and
`jaxrl.evaluate(run_dir)`.

Why: a run's own evaluations are `eval.episodes` (10) episodes each, enough to follow training
but too few to report a policy by, and the published figures this library is measured against
(RL Baselines3 Zoo's, CleanRL's) score a final policy over many episodes. Every selected run
(seeds × grid points) plays the same episodes (the same reset keys, so runs are compared on
the same starts), all of them in one compiled program: the runs vmapped, each run's episodes
one env batch. Episodes cut by the env's time limit are counted apart from those the env ended
(terminated and truncated are different things). Reads only the agents' states of one
checkpoint, never a replay buffer, and writes nothing into the run directory: it can score a
run that is still training there.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np

from jaxrl.config import ConfigError, did_you_mean

USAGE = (
    "python -m jaxrl.evaluate <run dir> [episodes=100] [seed=S] [grid_point=K] "
    "[checkpoint=ITERATION] [eval_seed=0] [deterministic=true] [out=FILE.json] "
    "[env.<option>=VALUE ...]"
)
MAX_SEED = 2**32 - 1  # a seed makes its key as a uint32 does (jaxrl.prng.make_key)


@dataclasses.dataclass(frozen=True)
class Request:
    """What to score: which runs of a run directory, from which checkpoint, on how many
    episodes."""

    run_dir: Path
    episodes: int = 100
    seed: int | None = None  # one of the run's seeds; None: every seed
    grid_point: int | None = None  # one of the run's grid points; None: every point
    checkpoint: int | None = None  # a saved iteration; None: the latest
    eval_seed: int = 0  # the episodes' key: the same number gives the same episodes
    out: Path | None = None  # a JSON file for the report
    # False: act as the agent explores (sampled actions, DQN's final ε), as training episodes
    # (and CleanRL's reported returns) do
    deterministic: bool = True
    # `env.*` options the episodes are played with instead of the run's own (another time limit,
    # Atari's sticky actions off, `+env.kwargs.<k>=…`); the observation and action spaces must
    # stay the run's
    env_options: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not (self.run_dir / "config.json").is_file():
            raise ConfigError(
                f"{self.run_dir}: no config.json there (is it a jaxrl run directory?)"
            )
        if self.episodes < 1:
            raise ConfigError(f"episodes={self.episodes} must be >= 1")
        if not 0 <= self.eval_seed <= MAX_SEED:
            raise ConfigError(f"eval_seed={self.eval_seed} must be in 0 … {MAX_SEED}")
        if self.out is not None and not self.out.parent.is_dir():
            raise ConfigError(f"out={self.out}: the folder {self.out.parent} does not exist")


INT_KEYS = ("episodes", "seed", "grid_point", "checkpoint", "eval_seed")
KEYS = (*INT_KEYS, "deterministic", "out")
# Env options that an evaluation sets itself or that would make it another env.
FIXED_ENV_KEYS = ("env.id", "env.num_envs")


def parse(argv: list[str]) -> Request:
    """The request that `argv` (a run directory and `key=value` options) makes; ConfigError,
    one line, for anything else."""
    positional = [a for a in argv if "=" not in a]
    if len(positional) != 1:
        got = "none" if not positional else " ".join(positional)
        raise ConfigError(f"give one run directory (got {got}); usage: {USAGE}")
    options: dict[str, Any] = {}
    env_options: list[str] = []
    for arg in argv:
        if "=" not in arg:
            continue
        key, _, value = arg.partition("=")
        if key.startswith(("env.", "+env.")):
            if key.lstrip("+") in FIXED_ENV_KEYS:
                raise ConfigError(
                    f"{arg}: an evaluation plays the run's env ({key.lstrip('+')} stays the "
                    f"run's; episodes= sets the number of envs)"
                )
            env_options.append(arg)
            continue
        if key not in KEYS:
            raise ConfigError(
                f"unknown option '{key}'; {did_you_mean(key, KEYS)}valid: {', '.join(KEYS)}, "
                "env.<option>"
            )
        if key in options:
            raise ConfigError(f"'{key}' is given twice")
        if key == "out":
            options[key] = Path(value).expanduser()
            continue
        if key == "deterministic":
            if value.lower() not in ("true", "false"):
                raise ConfigError(f"deterministic={value} must be true or false")
            options[key] = value.lower() == "true"
            continue
        try:
            options[key] = int(value)
        except ValueError:
            raise ConfigError(f"{key}={value} must be a whole number") from None
    return Request(Path(positional[0]).expanduser(), **options, env_options=tuple(env_options))


@dataclasses.dataclass
class RunScores:
    """One run's episodes: per-episode arrays, in the order of the episodes' env indices."""

    seed: int
    grid_point: int | None
    values: dict[str, float]  # its grid point's hyperparameter values; {} without a grid
    env_steps: int | None  # the env steps it had trained when the checkpoint was written
    returns: np.ndarray
    lengths: np.ndarray
    truncated: np.ndarray  # bool: cut by the time limit
    successes: np.ndarray | None  # bool, for envs whose episodes report success

    @property
    def mean_return(self) -> float:
        return float(self.returns.astype(np.float64).mean())

    def summary(self) -> dict[str, Any]:
        returns = self.returns.astype(np.float64)
        out = {
            "seed": self.seed,
            "grid_point": self.grid_point,
            "values": self.values,
            "env_steps": self.env_steps,
            "return_mean": self.mean_return,
            "return_std": float(returns.std()),
            "return_median": float(np.median(returns)),
            "return_min": float(returns.min()),
            "return_max": float(returns.max()),
            "length_mean": float(self.lengths.mean()),
            "truncated_share": float(self.truncated.mean()),
        }
        if self.successes is not None:
            out["success_rate"] = float(self.successes.mean())
        return out


@dataclasses.dataclass
class Evaluation:
    """The scores of a run directory's selected runs at one checkpoint."""

    run_dir: Path
    agent: str
    env: str
    checkpoint: int  # the checkpoint's iteration
    episodes: int
    eval_seed: int
    deterministic: bool
    env_options: tuple[str, ...]
    runs: list[RunScores]
    compile_seconds: float
    run_seconds: float

    @property
    def mean_return(self) -> float:
        """The mean over runs of each run's mean return."""
        return float(np.mean([run.mean_return for run in self.runs]))

    def to_json(self) -> dict[str, Any]:
        return {
            "run_dir": str(self.run_dir),
            "agent": self.agent,
            "env": self.env,
            "checkpoint": self.checkpoint,
            "episodes": self.episodes,
            "eval_seed": self.eval_seed,
            "deterministic": self.deterministic,
            "env_options": list(self.env_options),
            "mean_return": self.mean_return,
            "compile_seconds": self.compile_seconds,
            "run_seconds": self.run_seconds,
            "runs": [
                {
                    **run.summary(),
                    "returns": run.returns.tolist(),
                    "lengths": run.lengths.tolist(),
                    "truncated": run.truncated.tolist(),
                }
                for run in self.runs
            ],
        }

    def report(self) -> str:
        """A table, one row per run, and a closing line over all of them; returns with two
        decimals where all are below 10 in size (returns on a [0, 1] scale), else one."""
        small = all(np.all(np.abs(run.returns) < 10) for run in self.runs)
        number = lambda value: f"{value:.2f}" if small else f"{value:.1f}"
        successes = self.runs[0].successes is not None
        header = ["seed"] + (["grid point"] if self.runs[0].grid_point is not None else [])
        header += ["env steps", "mean ± std", "median", "min", "max", "length", "time limit"]
        header += ["success"] if successes else []
        rows = [header]
        for run in self.runs:
            s = run.summary()
            row = [str(run.seed)]
            if run.grid_point is not None:
                row.append(", ".join(f"{k}={v:g}" for k, v in run.values.items()))
            row += [
                "?" if run.env_steps is None else f"{run.env_steps:,}",
                f"{number(s['return_mean'])} ± {number(s['return_std'])}",
                number(s["return_median"]),
                number(s["return_min"]),
                number(s["return_max"]),
                f"{s['length_mean']:.1f}",
                f"{s['truncated_share']:.2f}",
            ]
            row += [f"{s['success_rate']:.2f}"] if successes else []
            rows.append(row)
        widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
        lines = [
            "  ".join(cell.rjust(w) for cell, w in zip(row, widths, strict=True)) for row in rows
        ]
        means = [run.mean_return for run in self.runs]
        spread = f" (runs {number(min(means))} … {number(max(means))})" if len(means) > 1 else ""
        how = ", ".join(
            [f"eval_seed={self.eval_seed}", *self.env_options]
            + ([] if self.deterministic else ["stochastic"])
        )
        lines.append(
            f"{self.agent} on {self.env}, checkpoint {self.checkpoint}: mean return "
            f"{number(self.mean_return)}{spread} over {self.episodes} episodes × "
            f"{len(self.runs)} run{'s' if len(self.runs) > 1 else ''} ({how}) | compile "
            f"{self.compile_seconds:.1f}s, run "
            f"{self.run_seconds:.1f}s | {self.run_dir}"
        )
        return "\n".join(lines)


def evaluate_run(request: Request) -> Evaluation:
    """Score the runs that `request` selects. ConfigError for a run directory, seed, grid
    point or checkpoint that is not there; the env's own failures as `HostEnvError`."""
    import time

    import jax
    import jax.numpy as jnp

    import envs
    from envs.host import HostEnv, host_errors
    from jaxrl.checkpoint import saved_meta
    from jaxrl.cli import with_env_options
    from jaxrl.env import SpecOnlyEnv
    from jaxrl.policy import SavedRun, check_same_spaces
    from jaxrl.prng import make_key
    from jaxrl.rollout import evaluate as evaluate_episodes
    from jaxrl.rundir import CHECKPOINTS

    where = str(request.run_dir)
    saved = SavedRun(request.run_dir, origin=where)
    try:
        if request.seed is not None:
            saved.check_seed(request.seed)
        saved.check_grid_point(request.grid_point)
    except ValueError as e:
        raise ConfigError(str(e)) from None
    steps = saved.checkpoints()
    if not steps:
        raise ConfigError(
            f"{where}: no checkpoint there yet (a run writes its first one once compiled)"
        )
    checkpoint = steps[-1] if request.checkpoint is None else request.checkpoint
    if checkpoint not in steps:
        raise ConfigError(
            f"checkpoint={checkpoint} is not saved in {where}; saved: {', '.join(map(str, steps))}"
        )
    seeds = saved.seeds if request.seed is None else [request.seed]
    points: list[int | None] = [None]
    if saved.points:
        points = (
            list(range(len(saved.points))) if request.grid_point is None else [request.grid_point]
        )
    selected = [(point, seed) for point in points for seed in seeds]
    indices = np.asarray([saved.run_index(seed, point) for point, seed in selected])

    # The agents are built as the run built them, on its env batch (their settings are checked
    # against it); they act on the evaluation's batch. Before any env is made: a refusal here
    # starts no host env workers.
    trained_on = SpecOnlyEnv(saved.spec)
    plain_agent = saved.agent(trained_on, {})
    if not request.deterministic and plain_agent.act_with_memory is not None:
        raise ConfigError(
            f"deterministic=false: {saved.cfg.agent.name} is evaluated with the options it "
            "carries from step to step, which it runs deterministically; leave it out"
        )
    env_cfg = saved.cfg.env
    if request.env_options:
        env_cfg = with_env_options(saved.cfg, request.env_options, where).env
    env = envs.make(env_cfg, num_envs=request.episodes)
    try:
        # "its" spaces are those of the env with the options, "this run's" the run's own.
        check_same_spaces(" ".join(["the env with", *request.env_options]), env.spec, saved.spec)
        try:
            states = jax.tree.map(lambda x: x[indices], saved.agent_states(checkpoint))
        except (ValueError, OSError) as e:  # removed meanwhile by the training writing there
            raise ConfigError(f"{where}: cannot read checkpoint {checkpoint}: {e}") from None
        values = {
            key: np.asarray([saved.values(point)[key] for point, _ in selected], np.float32)
            for key in saved.values(None)
        }

        def one_run(state: Any, run_values: dict[str, Any], key: jax.Array) -> Any:
            agent = saved.agent(trained_on, run_values) if run_values else plain_agent
            return evaluate_episodes(agent, state, env, key, request.deterministic)

        program = jax.jit(jax.vmap(one_run))
        # Every run meets the same episodes: one key, repeated (each run's own copy, as a host
        # env's pools are one per run).
        key = jnp.broadcast_to(make_key(request.eval_seed), (len(selected),))
        with host_errors():
            start = time.perf_counter()
            compiled = program.lower(states, values, key).compile()
            compiled_at = time.perf_counter()
            episodes = jax.device_get(compiled(states, values, key))
            done = time.perf_counter()
    finally:
        if isinstance(env, HostEnv):  # its pools' envs (a notebook lives on after this)
            env.close()
    meta = saved_meta(saved.run_dir / CHECKPOINTS, checkpoint).get("progress", {})
    trained = meta.get("env_steps", [])
    runs = [
        RunScores(
            seed=seed,
            grid_point=point,
            values=saved.values(point),
            env_steps=int(trained[index]) if index < len(trained) else None,
            returns=np.asarray(episodes.returns[i]),
            lengths=np.asarray(episodes.lengths[i]),
            truncated=np.asarray(episodes.truncated[i]),
            successes=None if episodes.successes is None else np.asarray(episodes.successes[i]),
        )
        for i, ((point, seed), index) in enumerate(zip(selected, indices.tolist(), strict=True))
    ]
    return Evaluation(
        run_dir=saved.run_dir,
        agent=saved.cfg.agent.name,
        env=saved.cfg.env.id,
        checkpoint=checkpoint,
        episodes=request.episodes,
        eval_seed=request.eval_seed,
        deterministic=request.deterministic,
        env_options=request.env_options,
        runs=runs,
        compile_seconds=compiled_at - start,
        run_seconds=done - compiled_at,
    )


def write_json(evaluation: Evaluation, path: Path) -> None:
    """The report as JSON, written atomically as a run's `summary.json` is."""
    from jaxrl.outputs import write_json_atomic

    write_json_atomic(path, evaluation.to_json())
