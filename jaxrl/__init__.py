"""jaxrl: JAX-accelerated functional reinforcement learning.

Python entry points (the CLI is `python -m jaxrl.run`):

    result = jaxrl.train("agent=es", "env=CartPole-v1", "num_seeds=4")
    result = jaxrl.train(agent="ppo", num_seeds=4, grid={"agent": {"learning_rate": [1e-3, 3e-4]}})
    policy = jaxrl.load(result.run_dir)
    action = policy(obs)
    scores = jaxrl.evaluate(result.run_dir, episodes=100)  # every run, 100 fresh episodes each

Importing `jaxrl` imports neither JAX nor any agent or env: they load when first used.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from jaxrl.evaluation import Evaluation
    from jaxrl.loop import RunResult
    from jaxrl.policy import Policy

__all__ = ["Policy", "evaluate", "load", "train"]


def train(
    *overrides: str,
    run_dir: str | Path | None = None,
    progress_fn: Callable[[dict[str, Any]], None] | None = None,
    **config: Any,
) -> RunResult:
    """Train from Hydra-style overrides, exactly as the CLI would; returns the run's result.

    Keyword arguments are overrides too: `num_seeds=4`, `budget={"env_steps": 1e5}`,
    `grid={"agent": {"learning_rate": [1e-3, 3e-4]}}`; `agent` and `env` take a name or a dict
    whose `name` / `id` picks it (`agent={"name": "ppo", "ent_coef": 0.0}`). `run_dir` is
    `log.dir` (a new directory under `runs/` when neither is given). `progress_fn`, when given,
    is called after every evaluation with the iteration, the env steps of the slowest run, the
    mean eval return and each run's latest eval return."""
    from jaxrl import cli, loop

    not_strings = [o for o in overrides if not isinstance(o, str)]
    if not_strings:
        raise TypeError(
            f"jaxrl.train takes overrides as separate strings, jaxrl.train('agent=ppo', "
            f"'num_seeds=4'), or as keywords; got {not_strings[0]!r} (unpack a list with *)"
        )
    cfg, directory = cli.plan([*overrides, *keyword_overrides(config)], run_dir)
    return loop.train(cfg, directory, progress_fn)


def keyword_overrides(config: dict[str, Any]) -> list[str]:
    """Keyword arguments as override strings (nested dicts become dotted keys)."""

    def value(v: Any) -> str:
        if isinstance(v, bool):
            return "true" if v else "false"
        if v is None:
            return "null"
        if isinstance(v, list | tuple):
            return "[" + ",".join(value(x) for x in v) + "]"
        return str(v)

    def flatten(prefix: str, v: Any) -> list[str]:
        if not isinstance(v, dict):
            return [f"{prefix}={value(v)}"]
        out = []
        for key, item in v.items():
            if prefix in ("agent", "env") and key == {"agent": "name", "env": "id"}[prefix]:
                out.insert(0, f"{prefix}={item}")  # the group choice, before its keys
            else:
                out += flatten(f"{prefix}.{key}", item)
        return out

    return [o for key, v in config.items() for o in flatten(key, v)]


def load(run_dir: str | Path, seed: int | None = None, grid_point: int | None = None) -> Policy:
    """The deterministic policy of one run of a run directory (default: the first seed of the
    first grid point), from its latest checkpoint."""
    from jaxrl.policy import load_policy

    return load_policy(run_dir, seed, grid_point)


def evaluate(
    run_dir: str | Path,
    episodes: int = 100,
    seed: int | None = None,
    grid_point: int | None = None,
    checkpoint: int | None = None,
    eval_seed: int = 0,
    deterministic: bool = True,
    env_options: Sequence[str] = (),
) -> Evaluation:
    """Score a run directory's runs (every seed and grid point, or the one `seed` and
    `grid_point` pick) on `episodes` fresh episodes each, the same episodes for every run, from
    checkpoint `checkpoint` (an iteration; default: the latest), acting deterministically or,
    with `deterministic=False`, as the agent explores, on the run's env or with `env_options`
    (`("env.max_episode_steps=1000",)`, as on the command line). The result's
    `report()` is what `python -m jaxrl.evaluate` prints; `runs` hold each run's per-episode
    returns, lengths and whether a time limit cut them."""
    from jaxrl.evaluation import Request, evaluate_run

    return evaluate_run(
        Request(
            Path(run_dir),
            episodes=episodes,
            seed=seed,
            grid_point=grid_point,
            checkpoint=checkpoint,
            eval_seed=eval_seed,
            deterministic=deterministic,
            env_options=tuple(env_options),
        )
    )


def __getattr__(name: str) -> object:
    if name == "Policy":
        from jaxrl.policy import Policy

        return Policy
    raise AttributeError(f"module 'jaxrl' has no attribute '{name}'")
