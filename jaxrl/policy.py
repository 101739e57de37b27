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
from jaxrl.datatypes import Agent, EnvSpec
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


def load_policy(
    run_dir: str | Path, seed: int | None = None, grid_point: int | None = None
) -> Policy:
    """The policy from a run directory's latest checkpoint; `seed` picks one of its seeds
    (default: the first), `grid_point` one of its grid's points (default: the first)."""
    from jaxrl.checkpoint import restore_agent_states
    from jaxrl.cli import resumed_config

    cfg = resumed_config(str(run_dir))
    seeds = cfg.seeds
    seed = seeds[0] if seed is None else seed
    if seed not in seeds:
        raise ValueError(f"seed {seed} was not trained in {run_dir}; its seeds are {seeds}")
    points = hyper.grid_points(cfg.agent, cfg.grid.agent)
    if points:
        grid_point = 0 if grid_point is None else grid_point
        if not 0 <= grid_point < len(points):
            raise ValueError(
                f"grid_point {grid_point} is not one of {run_dir}'s: 0 to {len(points) - 1} "
                f"(summary.json lists their values)"
            )
    elif grid_point is not None:
        raise ValueError(f"{run_dir} trained no grid: leave grid_point out")
    spec = EnvSpec.from_json(json.loads((Path(run_dir) / ENV_SPEC).read_text()))
    entry = agents.REGISTRY[cfg.agent.name]
    env = SpecOnlyEnv(spec)
    # Runs are point-major (jaxrl.loop): run r is point r // num_seeds, seed index r % num_seeds.
    num_runs = max(len(points), 1) * len(seeds)
    index = (grid_point or 0) * len(seeds) + seeds.index(seed)
    # Every run's state has the structure of the config's own agent: grid values change no shape.
    agent_cfg = own_checkpoint_config(cfg.agent)
    one = jax.eval_shape(entry.build(agent_cfg, env, cfg.budget.env_steps).init, make_key(seed))
    like = jax.tree.map(lambda x: jax.ShapeDtypeStruct((num_runs, *x.shape), x.dtype), one)
    states = restore_agent_states(Path(run_dir) / CHECKPOINTS, like)
    agent_state = jax.tree.map(lambda x: x[index], states)
    values = points[grid_point] if points else {}
    agent_cfg = hyper.traced_config(agent_cfg, {k: jnp.float32(v) for k, v in values.items()})
    agent = entry.build(agent_cfg, env, cfg.budget.env_steps)
    return Policy(agent, agent_state, spec, seed, values)


def load_named_run(
    run_dir: str, key: str, seed: int | None = None, grid_point: int | None = None
) -> tuple[Policy, dict[str, Any]]:
    """The policy and the config (config.json) of a run that the config key `key` names
    (`agent.expert`, `agent.init_from`): anything that stops it loading is one ConfigError line
    naming `key`, raised before anything compiles."""
    where = f"{key}={run_dir}"
    if not (Path(run_dir) / "config.json").is_file():
        raise ConfigError(f"{where}: no config.json there (is it a jaxrl run directory?)")
    try:
        policy = load_policy(run_dir, seed, grid_point)
    except ConfigError as e:
        raise ConfigError(f"{where}: {str(e).split(': ', 1)[-1]}") from None
    except (ValueError, OSError) as e:
        raise ConfigError(f"{where}: cannot load its policy: {e}") from None
    return policy, json.loads((Path(run_dir) / "config.json").read_text())


def check_same_spaces(where: str, trained: EnvSpec, spec: EnvSpec) -> None:
    """Refuse (one ConfigError line naming `where`) a run trained on other observation or action
    spaces than `spec`'s, compared as run directories record them."""
    for what in ("observation_space", "action_space"):
        if trained.to_json()[what] != spec.to_json()[what]:
            raise ConfigError(
                f"{where}: its {what} {getattr(trained, what)} is not this run's "
                f"{getattr(spec, what)}"
            )
