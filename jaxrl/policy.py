"""A trained policy as a plain callable: `jaxrl.load(run_dir)(obs) -> action`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxrl.prng import make_key


class Policy:
    """A trained policy of one run: `policy(obs)` gives the deterministic action for one
    observation or a batch of them."""

    def __init__(self, trainer: Any, agent_state: Any, run: Any) -> None:
        self.trainer = trainer
        self.agent_state = agent_state
        self.run = run  # jaxrl.loop.Run: its seed and grid point
        self.seed = run.seed
        self.hyperparameters = {} if run.grid_point is None else trainer.points[run.grid_point]
        self.spec = trainer.env.spec
        values = {k: jnp.float32(v) for k, v in self.hyperparameters.items()}
        self._act = jax.jit(
            lambda state, obs, key: trainer.agent_for(values).act(state, obs, key, True)
        )

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
    from jaxrl.checkpoint import Checkpointer
    from jaxrl.cli import resumed_config
    from jaxrl.loop import Run, Trainer

    cfg = resumed_config(str(run_dir))
    seeds = cfg.seeds
    seed = seeds[0] if seed is None else seed
    if seed not in seeds:
        raise ValueError(f"seed {seed} was not trained in {run_dir}; its seeds are {seeds}")
    trainer = Trainer(cfg)
    if trainer.points:
        grid_point = 0 if grid_point is None else grid_point
        if not 0 <= grid_point < len(trainer.points):
            raise ValueError(
                f"grid_point {grid_point} is not one of {run_dir}'s: 0 to "
                f"{len(trainer.points) - 1} (summary.json lists their values)"
            )
    elif grid_point is not None:
        raise ValueError(f"{run_dir} trained no grid: leave grid_point out")
    like = jax.eval_shape(trainer.init, trainer.run_keys(), trainer.hyper)
    ckpt = Checkpointer(
        Path(run_dir) / "checkpoints", cfg.checkpoint.keep, cfg.checkpoint.replay_buffer
    )
    carry, _ = ckpt.restore(like)
    ckpt.close()
    run = Run(seed, grid_point)
    index = trainer.runs.index(run)
    agent_state = jax.tree.map(lambda x: x[index], carry.agent_state)
    return Policy(trainer, agent_state, run)
