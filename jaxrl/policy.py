"""A trained policy as a plain callable: `jaxrl.load(run_dir)(obs) -> action`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxrl.prng import make_key


class Policy:
    """A trained policy of one seed: `policy(obs)` gives the deterministic action for one
    observation or a batch of them."""

    def __init__(self, trainer: Any, agent_state: Any, seed: int) -> None:
        self.trainer = trainer
        self.agent_state = agent_state
        self.seed = seed
        self.spec = trainer.env.spec
        self._act = jax.jit(lambda state, obs, key: trainer.agent.act(state, obs, key, True))

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


def load_policy(run_dir: str | Path, seed: int | None = None) -> Policy:
    """The policy from a run directory's latest checkpoint; `seed` picks one of a sweep's seeds
    (default: the first)."""
    from jaxrl.checkpoint import Checkpointer
    from jaxrl.cli import resumed_config
    from jaxrl.loop import Trainer

    cfg = resumed_config(str(run_dir))
    seeds = cfg.seeds
    seed = seeds[0] if seed is None else seed
    if seed not in seeds:
        raise ValueError(f"seed {seed} was not trained in {run_dir}; its seeds are {seeds}")
    trainer = Trainer(cfg)
    like = jax.eval_shape(trainer.init, trainer.seed_keys())
    ckpt = Checkpointer(
        Path(run_dir) / "checkpoints", cfg.checkpoint.keep, cfg.checkpoint.replay_buffer
    )
    carry, _ = ckpt.restore(like)
    ckpt.close()
    index = seeds.index(seed)
    agent_state = jax.tree.map(lambda x: x[index], carry.agent_state)
    return Policy(trainer, agent_state, seed)
