"""Environments of every family behind one constructor: `envs.make(cfg) -> Env`.

The family is read off the name: bare ids are JAX-native (gymnax's, our `FourRooms-v0` and our
hybrid-action envs `Platform-v0`, `Goal-v0`, `HardMove-v0`, `CatchPoint-v0`),
`brax/<name>` Brax, `gym/<any Gymnasium id>`, `bullet/<id>`, `pixel/<id>` and `ALE/<Game>-v5`
run on the host through `envs.host`. Families are imported when used, so `import envs` stays
light: async host pools start worker processes that import it without JAX.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

from jaxrl.config import ConfigError, EnvConfig, did_you_mean

if TYPE_CHECKING:
    from jaxrl.datatypes import Array
    from jaxrl.env import Env

GYM, ALE = "gym/", "ALE/"
# Our Gymnasium namespaces (registered by `import envs.bullet` / `envs.pixel`); listed without
# importing them (pybullet prints a banner on import). Any other id they register works too.
BULLET = (
    "bullet/CartPole-v0",
    "bullet/BalancingPlate-v0",
    "bullet/BalancingPlateContinuous-v0",
    "bullet/RaceCar-v0",
)
PIXEL = ("pixel/CartPole-v1",)
# Brax's envs (all but its `fast` test double), listed here so that listing names imports neither
# JAX nor Brax; listed whether or not Brax is installed: without it, `make` says how to install it.
BRAX = tuple(
    f"brax/{name}"
    for name in (
        "ant",
        "halfcheetah",
        "hopper",
        "humanoid",
        "humanoidstandup",
        "inverted_double_pendulum",
        "inverted_pendulum",
        "pusher",
        "reacher",
        "swimmer",
        "walker2d",
    )
)
OPEN_ENDED = ("gym/<any Gymnasium id>", "ALE/<Game>-v5")
# The JAX-native family (gymnax) with Gymnasium's own episode caps (gymnax's params carry them
# too, but `VectorEnv` enforces the cap so that truncation is reported apart from termination).
# Listed here so that naming an env, or refusing a bad one, imports neither gymnax nor JAX.
GYMNAX_MAX_EPISODE_STEPS = {
    "CartPole-v1": 500,
    "Acrobot-v1": 500,
    "MountainCar-v0": 200,
    "MountainCarContinuous-v0": 999,
    "Pendulum-v1": 200,
}

# Our own JAX-native envs (envs/fourrooms.py), with their episode caps: four-rooms cuts episodes
# at 1000 steps as Bacon, Harb & Precup's transfer experiment did.
FOURROOMS = "FourRooms-v0"
FOURROOMS_MAX_EPISODE_STEPS = {FOURROOMS: 1000}

# Our JAX-native envs with hybrid (parameterised) actions (envs/hybrid.py), with the episode caps
# HyAR (Li et al. 2022) ran them with; each env's module says where its cap comes from.
HARDMOVE = "HardMove-v0"
HYBRID_MAX_EPISODE_STEPS = {"Platform-v0": 200, "Goal-v0": 99, HARDMOVE: 30, "CatchPoint-v0": 25}


def scaled_state(features: Array, low: Array | float, high: Array | float) -> Array:
    """Features in [low, high] mapped onto [−1, 1]: the `ScaledStateWrapper` (`common/wrappers.py`)
    that the MP-DQN and HyAR scripts put on gym-platform and gym-goal, so that `Platform-v0` and
    `Goal-v0` observe what the references' agents saw."""
    return 2 * (features - low) / (high - low) - 1


def _jax_native() -> tuple[str, ...]:
    return (
        tuple(GYMNAX_MAX_EPISODE_STEPS)
        + tuple(FOURROOMS_MAX_EPISODE_STEPS)
        + tuple(HYBRID_MAX_EPISODE_STEPS)
    )


def registered() -> tuple[str, ...]:
    """Every env name that can be listed; `gym/<id>` and `ALE/<Game>-v5` take any id of
    Gymnasium's (and ale_py's) registry on top of these (see `check_id`)."""
    return _jax_native() + BRAX + BULLET + PIXEL


def _host_namespace(env_id: str) -> str | None:
    """`gym`, `bullet`, `pixel` or `ALE` for a host env name, else None."""
    namespace, slash, rest = env_id.partition("/")
    if slash and rest and namespace in ("gym", "bullet", "pixel", "ALE"):
        return namespace
    return None


def check_id(env_id: str) -> None:
    """ConfigError naming the valid envs unless `make` can build `env_id`; host names are looked up
    in Gymnasium's registry (importing the module that registers them)."""
    if env_id in registered() and _host_namespace(env_id) is None:
        return
    namespace = _host_namespace(env_id)
    if namespace == "ALE":
        from envs.host_ids import rom

        rom(env_id)  # ConfigError with close matches unless it is a game
        return
    if namespace is not None:
        from envs.host_ids import check_gymnasium_id

        check_gymnasium_id(env_id)
        return
    valid = ", ".join(registered() + OPEN_ENDED)
    hint = did_you_mean(env_id, registered())
    raise ConfigError(f"unknown env '{env_id}'; {hint}valid envs: {valid}{_gym_hint(env_id)}")


def _gym_hint(env_id: str) -> str:
    """A Gymnasium id given bare (`LunarLander-v3`) is a host env: say its name."""
    import gymnasium

    return f" (did you mean gym/{env_id}?)" if env_id in gymnasium.registry else ""


def config_for(env_id: str) -> EnvConfig:
    """The default env config of a name, of its family's config class."""
    namespace = _host_namespace(env_id)
    if namespace == "ALE":
        from envs.configs import AtariConfig

        return AtariConfig(id=env_id)
    if namespace is not None:
        from envs.configs import HostEnvConfig

        return HostEnvConfig(id=env_id)
    if env_id in BRAX:
        from envs.configs import BraxEnvConfig

        return BraxEnvConfig(id=env_id)
    if env_id in FOURROOMS_MAX_EPISODE_STEPS:
        from envs.configs import FourRoomsConfig

        return FourRoomsConfig(id=env_id)
    if env_id == HARDMOVE:
        from envs.configs import HardMoveConfig

        return HardMoveConfig(id=env_id)
    if env_id in _jax_native():
        return EnvConfig(id=env_id)
    check_id(env_id)  # raises, naming the valid envs
    raise AssertionError(env_id)


def make(cfg: EnvConfig, num_envs: int | None = None) -> Env:
    """Build the env that `cfg.id` names; options of the wrong family's config class are
    replaced by the family's defaults (`EnvConfig(id="gym/CartPole-v1")` works)."""
    n = num_envs or cfg.num_envs or 1
    check_id(cfg.id)
    namespace = _host_namespace(cfg.id)
    if cfg.id in FOURROOMS_MAX_EPISODE_STEPS:
        from envs.fourrooms import make_fourrooms

        return make_fourrooms(_as_family_config(cfg), n)
    if cfg.id in HYBRID_MAX_EPISODE_STEPS:
        from envs.hybrid import make_hybrid

        return make_hybrid(_as_family_config(cfg), n)
    if namespace is None and cfg.id in _jax_native():
        from envs.gymnax_envs import make_gymnax

        return make_gymnax(cfg.id, n, cfg.max_episode_steps)
    if namespace is None:
        from envs.brax_envs import make_brax
        from envs.configs import DEFAULT_BACKEND, BraxEnvConfig

        backend = cfg.backend if isinstance(cfg, BraxEnvConfig) else DEFAULT_BACKEND
        return make_brax(cfg.id, n, cfg.max_episode_steps, backend)
    family_cfg = _as_family_config(cfg)
    if namespace == "ALE":
        from envs.atari import POOL_OBS_AXES, atari_spec, make_atari_pool
        from envs.host import HostEnv
        from envs.ray_pool import pool_factory

        local = functools.partial(make_atari_pool, family_cfg)
        factory = pool_factory(family_cfg, local)
        return HostEnv(
            atari_spec(family_cfg, n), factory, family_cfg.callback, obs_axes=POOL_OBS_AXES
        )
    from envs.gym_pool import make_gymnasium

    return make_gymnasium(family_cfg, n)


def _as_family_config(cfg: EnvConfig) -> EnvConfig:
    """`cfg` as its family's config class, keeping the shared fields."""
    family_cls = type(config_for(cfg.id))
    if isinstance(cfg, family_cls):
        return cfg
    return family_cls(id=cfg.id, num_envs=cfg.num_envs, max_episode_steps=cfg.max_episode_steps)
