"""PureJaxRL's own scripts, imported unchanged from a checkout, with stand-ins for what they
import that does not import with today's packages (read each in the checkout):

* `distrax` (ppo.py; not a jaxrl dependency): a `Categorical` with the three methods ppo.py
  calls, sample, log_prob and entropy, from a log-softmax;
* PureJaxRL's `wrappers` (ppo.py; it imports brax and navix at the top) and gymnax's
  `gymnax.wrappers.purerl` (dqn.py): `FlattenObservationWrapper` and `LogWrapper` as there, over
  gymnax ≥ 1.0's step, which returns terminated and truncated apart; PureJaxRL's `done` is either;
* `wandb` (dqn.py; used only when its config asks for online logging): an empty module;
* `jax.tree_map` (dqn.py; removed from JAX): `jax.tree.map`.

dqn.py also imports `flashbax` (its replay buffer), which is real: `pip install flashbax`.
"""

from __future__ import annotations

import importlib.util
import sys
import types
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp


class _Categorical:
    """distrax.Categorical's sample, log_prob and entropy, the three methods ppo.py calls."""

    def __init__(self, logits: jax.Array) -> None:
        self.log_probs = jax.nn.log_softmax(logits)

    def sample(self, seed: jax.Array) -> jax.Array:
        return jax.random.categorical(seed, self.log_probs)

    def log_prob(self, value: jax.Array) -> jax.Array:
        return jnp.take_along_axis(self.log_probs, value[..., None], axis=-1)[..., 0]

    def entropy(self) -> jax.Array:
        return -jnp.sum(jnp.exp(self.log_probs) * self.log_probs, axis=-1)


class _FlattenObservationWrapper:
    """PureJaxRL's wrapper: observations flattened (CartPole's are flat already)."""

    def __init__(self, env: Any) -> None:
        self._env = env

    def __getattr__(self, name: str) -> Any:
        return getattr(self._env, name)

    def reset(self, key: jax.Array, params: Any = None) -> tuple[jax.Array, Any]:
        obs, state = self._env.reset(key, params)
        return obs.reshape(-1), state


class _LogWrapper(_FlattenObservationWrapper):
    """PureJaxRL's LogWrapper over gymnax ≥ 1.0 (done = terminated or truncated)."""

    def reset(self, key: jax.Array, params: Any = None) -> tuple[jax.Array, Any]:
        obs, env_state = self._env.reset(key, params)
        zero = jnp.zeros((), jnp.float32)
        return obs, (env_state, zero, zero, zero, zero, jnp.zeros((), jnp.int32))

    def step(self, key: jax.Array, state: Any, action: jax.Array, params: Any = None) -> tuple:
        env_state, ep_return, ep_length, done_return, done_length, timestep = state
        obs, env_state, reward, terminated, truncated, info = self._env.step(
            key, env_state, action, params
        )
        done = jnp.logical_or(terminated, truncated).astype(jnp.float32)
        ep_return, ep_length = ep_return + reward, ep_length + 1
        done_return = done_return * (1 - done) + ep_return * done
        done_length = done_length * (1 - done) + ep_length * done
        state = (env_state, ep_return * (1 - done), ep_length * (1 - done), done_return,
                 done_length, timestep + 1)  # fmt: skip
        info = {"returned_episode_returns": done_return, "returned_episode": done > 0}
        return obs, state, reward, done, info


def load_make_train(checkout: Path, script: str) -> Any:
    """`make_train` of `checkout/purejaxrl/<script>` (e.g. "ppo.py", "dqn.py"), imported with the
    stand-ins; its module as the second value, for the classes it defines."""
    source = checkout / "purejaxrl" / script
    if not source.is_file():
        sys.exit(
            f"--purejaxrl {checkout}: no purejaxrl/{script} there (clone luchris429/purejaxrl)"
        )
    # Imported here, not at the top: gymnax starts JAX's backends on import, and a benchmark
    # first gives jaxrl's runs their devices (`parallel.use_cores_as_devices`).
    import gymnax.wrappers  # noqa: F401 (imported before the stand-in for its purerl module)

    wrappers = types.SimpleNamespace(
        LogWrapper=_LogWrapper, FlattenObservationWrapper=_FlattenObservationWrapper
    )
    sys.modules["distrax"] = types.SimpleNamespace(Categorical=_Categorical)
    sys.modules["wrappers"] = wrappers
    sys.modules["gymnax.wrappers.purerl"] = wrappers
    sys.modules.setdefault("wandb", types.ModuleType("wandb"))
    if not hasattr(jax, "tree_map"):
        jax.tree_map = jax.tree.map
    spec = importlib.util.spec_from_file_location(f"purejaxrl_{source.stem}", source)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.make_train, module
