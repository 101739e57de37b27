"""A trained policy as a plain callable: `jaxrl.load(run_dir)(obs) -> action`.

Loading builds only the policy: the agent is made on the run's saved env spec (`SpecOnlyEnv`: no
simulator, no host workers, no training program) and only its state is read from the latest
checkpoint (no env states, no replay buffer)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

import agents
from jaxrl import hyper
from jaxrl.config import ConfigError, own_checkpoint_config
from jaxrl.datatypes import Agent, Discrete, EnvSpec, Hybrid, Space
from jaxrl.env import SpecOnlyEnv
from jaxrl.prng import make_key
from jaxrl.rundir import CHECKPOINTS, ENV_SPEC


class Policy:
    """A trained policy of one run: `policy(obs)` gives the deterministic action for one
    observation or a batch of them."""

    def __init__(
        self,
        agent: Agent,
        agent_state: Any,
        spec: EnvSpec,
        seed: int,
        hyperparameters: dict[str, float],
    ) -> None:
        self.agent = agent  # built with the run's hyperparameter values
        self.agent_state = agent_state
        self.spec = spec
        self.seed = seed
        self.hyperparameters = hyperparameters  # its grid point's values; {} without a grid
        self._act = jax.jit(lambda state, obs, key: agent.act(state, obs, key, True))

    @property
    def params(self) -> jax.Array:
        """The policy's parameters as one flat vector (the agent's `params`)."""
        return self.agent.params(self.agent_state)

    def __call__(self, obs: Any, key: jax.Array | None = None) -> jax.Array:
        space = self.spec.observation_space
        obs = np.asarray(obs)
        if obs.shape != space.shape and obs.shape[1:] != space.shape:
            raise ValueError(
                f"the policy of {self.spec.name} takes an observation of shape {space.shape} or "
                f"a batch of shape (n, {', '.join(map(str, space.shape))}); got shape {obs.shape}"
            )
        key = make_key(0) if key is None else key
        return self._act(self.agent_state, jnp.asarray(obs, space.dtype), key)


class SavedRun:
    """A run directory read for acting: its config, env spec and grid, which of its runs a
    (seed, grid point) is, and its agents' states from one checkpoint (only `agent_states`
    reads one): what `jaxrl.load` and `jaxrl.evaluate` read."""

    def __init__(self, run_dir: str | Path, origin: str | None = None) -> None:
        """`origin` starts the line of a refusal (what named the run; default `resume=<dir>`)."""
        from jaxrl.cli import resumed_config

        self.run_dir = Path(run_dir)
        self.cfg = resumed_config(str(run_dir), origin=origin)
        self.points = hyper.grid_points(self.cfg.agent, self.cfg.grid.agent)
        self.spec = EnvSpec.from_json(json.loads((self.run_dir / ENV_SPEC).read_text()))
        self.entry = agents.REGISTRY[self.cfg.agent.name]
        # Every run's state has the structure of the config's own agent: grid values change no
        # shape.
        self.agent_cfg = own_checkpoint_config(self.cfg.agent)

    @property
    def seeds(self) -> list[int]:
        return self.cfg.seeds

    @property
    def num_runs(self) -> int:
        return max(len(self.points), 1) * len(self.seeds)

    def check_seed(self, seed: int) -> None:
        if seed not in self.seeds:
            raise ValueError(
                f"seed {seed} was not trained in {self.run_dir}; its seeds are {self.seeds}"
            )

    def check_grid_point(self, grid_point: int | None) -> None:
        if not self.points and grid_point is not None:
            raise ValueError(f"{self.run_dir} trained no grid: leave grid_point out")
        if self.points and grid_point is not None and not 0 <= grid_point < len(self.points):
            raise ValueError(
                f"grid_point {grid_point} is not one of {self.run_dir}'s: 0 to "
                f"{len(self.points) - 1} (summary.json lists their values)"
            )

    def run_index(self, seed: int, grid_point: int | None) -> int:
        """The index of a run in the checkpoint's run axis: runs are point-major (jaxrl.loop),
        run r is point r // num_seeds, seed index r % num_seeds."""
        return (grid_point or 0) * len(self.seeds) + self.seeds.index(seed)

    def values(self, grid_point: int | None) -> dict[str, float]:
        """A grid point's hyperparameter values; {} without a grid."""
        return self.points[grid_point or 0] if self.points else {}

    def agent(self, env: Any, values: dict[str, Any]) -> Agent:
        """The agent on `env` with a run's grid values (Python floats, or traced under vmap)."""
        agent_cfg = self.agent_cfg
        if values:
            agent_cfg = hyper.traced_config(
                agent_cfg, {k: jnp.asarray(v, jnp.float32) for k, v in values.items()}
            )
        return self.entry.build(agent_cfg, env, self.cfg.budget.env_steps)

    def checkpoints(self) -> list[int]:
        """The iterations of the run's finished checkpoints, oldest first."""
        from jaxrl.checkpoint import saved_steps

        return saved_steps(self.run_dir / CHECKPOINTS)

    def agent_states(self, checkpoint: int | None = None) -> Any:
        """Every run's agent state (run axis first) from checkpoint `checkpoint` (default: the
        latest), without replay buffer items."""
        from jaxrl.checkpoint import restore_agent_states

        shapes = jax.eval_shape(
            self.entry.build(
                self.agent_cfg, SpecOnlyEnv(self.spec), self.cfg.budget.env_steps
            ).init,
            make_key(self.seeds[0]),
        )
        like = jax.tree.map(
            lambda x: jax.ShapeDtypeStruct((self.num_runs, *x.shape), x.dtype), shapes
        )
        return restore_agent_states(self.run_dir / CHECKPOINTS, like, checkpoint)


def load_policy(
    run_dir: str | Path, seed: int | None = None, grid_point: int | None = None
) -> Policy:
    """The policy from a run directory's latest checkpoint; `seed` picks one of its seeds
    (default: the first), `grid_point` one of its grid's points (default: the first)."""
    return saved_policy(SavedRun(run_dir), seed, grid_point)


def saved_policy(saved: SavedRun, seed: int | None, grid_point: int | None) -> Policy:
    """The policy of one (seed, grid point) of `saved` from its latest checkpoint."""
    seed = saved.seeds[0] if seed is None else seed
    saved.check_seed(seed)
    saved.check_grid_point(grid_point)
    index = saved.run_index(seed, grid_point)
    agent_state = jax.tree.map(lambda x: x[index], saved.agent_states())
    values = saved.values(grid_point)
    agent = saved.agent(SpecOnlyEnv(saved.spec), values)
    return Policy(agent, agent_state, saved.spec, seed, values)


def load_named_run(
    run_dir: str, key: str, seed: int | None = None, grid_point: int | None = None
) -> tuple[Policy, dict[str, Any]]:
    """The policy and the config (config.json) of a run that the config key `key` names
    (`agent.expert`, `agent.init_from`): anything that stops it loading is one ConfigError line
    naming `key`, raised before anything compiles."""
    where = f"{key}={run_dir}"
    try:
        policy = saved_policy(SavedRun(run_dir, origin=where), seed, grid_point)
    except ConfigError as e:  # a refusal from further in (the checkpoint, the agent) named too
        message = str(e)
        raise ConfigError(message if message.startswith(where) else f"{where}: {message}") from None
    except (ValueError, OSError) as e:
        raise ConfigError(f"{where}: cannot load its policy: {e}") from None
    return policy, json.loads((Path(run_dir) / "config.json").read_text())


def check_same_spaces(where: str, trained: EnvSpec, spec: EnvSpec) -> None:
    """Refuse (one ConfigError line naming `where`) a run trained on other observation or action
    spaces than `spec`'s, compared as run directories record them."""
    for what in ("observation_space", "action_space"):
        if trained.to_json()[what] != spec.to_json()[what]:
            theirs = describe_space(getattr(trained, what))
            ours = describe_space(getattr(spec, what))
            if theirs == ours:
                theirs += " with other element-wise bounds"
            raise ConfigError(f"{where}: its {what} {theirs} is not this run's {ours}")


def describe_space(space: Space) -> str:
    """A space in one short line: its kind, shape, dtype and range (bounds may be arrays of
    thousands of elements)."""
    if isinstance(space, Discrete):
        return f"Discrete({space.n})"
    if isinstance(space, Hybrid):
        return f"Hybrid({space.choices.n} choices, {space.parameters.shape[0]} parameters)"
    return (
        f"Box of shape {space.shape} ({np.dtype(space.dtype).name} in "
        f"[{np.min(space.low):g}, {np.max(space.high):g}])"
    )
