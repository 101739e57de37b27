"""jaxrl: JAX-accelerated functional reinforcement learning.

Python entry points (the CLI is `python -m jaxrl.run`):

    result = jaxrl.train("agent=es", "env=CartPole-v1", "num_seeds=4")
    policy = jaxrl.load(result.run_dir)
    action = policy(obs)
"""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import jax

from jaxrl.prng import make_key

if TYPE_CHECKING:
    from jaxrl.loop import RunResult

__all__ = ["Policy", "load", "train"]


def train(*overrides: str, run_dir: str | Path | None = None) -> RunResult:
    """Train from Hydra-style overrides, exactly as the CLI would; returns the run's result."""
    from jaxrl.loop import train as train_loop
    from jaxrl.run import compose, resolve_run

    cfg = compose(list(overrides))
    if run_dir is None:
        stamp = datetime.datetime.now().strftime("%Y-%m-%d_%H-%M-%S-%f")
        run_dir = Path("runs") / cfg.agent.name / cfg.env.id / stamp
    elif not cfg.resume:
        cfg = compose([*overrides, f"log.dir={run_dir}"])
    return train_loop(*resolve_run(cfg, Path(run_dir)))


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
        key = make_key(0) if key is None else key
        return self._act(self.agent_state, jax.numpy.asarray(obs, jax.numpy.float32), key)


def load(run_dir: str | Path, seed: int | None = None) -> Policy:
    """The policy from a run directory's latest checkpoint; `seed` picks one of a sweep's seeds
    (default: the first)."""
    from jaxrl.checkpoint import Checkpointer
    from jaxrl.loop import Trainer
    from jaxrl.run import resumed_config

    cfg = resumed_config(str(run_dir))
    trainer = Trainer(cfg)
    seeds = cfg.seeds
    seed = seeds[0] if seed is None else seed
    if seed not in seeds:
        raise ValueError(f"seed {seed} was not trained in {run_dir}; its seeds are {seeds}")
    like = jax.eval_shape(trainer.init, trainer.seed_keys())
    ckpt = Checkpointer(
        Path(run_dir) / "checkpoints", cfg.checkpoint.keep, cfg.checkpoint.replay_buffer
    )
    carry, _ = ckpt.restore(like)
    ckpt.close()
    index = seeds.index(seed)
    agent_state = jax.tree.map(lambda x: x[index], carry.agent_state)
    return Policy(trainer, agent_state, seed)
