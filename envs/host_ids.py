"""Host env names, checked when a command is read: a `gym/`, `bullet/`, `pixel/` or `ALE/` id is
looked up in Gymnasium's registry (ALE's games in ale-py's) without importing JAX or the host
bridge, so a misspelt name or a host env setting is refused in a fraction of a second."""

from __future__ import annotations

import functools
import importlib

import gymnasium

from jaxrl.config import ConfigError, did_you_mean, install_hint

GYM_PREFIX = "gym/"
# Our Gymnasium namespaces: the module whose import registers them (in every worker too).
NAMESPACES = {"bullet": "envs.bullet", "pixel": "envs.pixel"}
EXTRAS = {"bullet": "bullet", "pixel": "host", "ALE": "atari"}
ALE_PREFIX = "ALE/"


def gymnasium_id(env_id: str) -> str:
    """Our name -> the id `gymnasium.make` takes, with the registering module for our namespaces
    (`bullet/CartPole-v0` -> `envs.bullet:bullet/CartPole-v0`) so workers can make it too."""
    gym_id = env_id.removeprefix(GYM_PREFIX)
    namespace = gym_id.partition("/")[0] if "/" in gym_id else ""
    if namespace in NAMESPACES:
        return f"{NAMESPACES[namespace]}:{gym_id}"
    return gym_id


def extra_of(env_id: str) -> str:
    """The optional dependency group a host env id needs (`host`: Gymnasium's own envs)."""
    return EXTRAS.get(env_id.removeprefix(GYM_PREFIX).partition("/")[0], "host")


def check_gymnasium_id(env_id: str) -> None:
    """ConfigError unless `env_id` names a Gymnasium env this process can make."""
    gym_id = gymnasium_id(env_id)
    module, _, bare = gym_id.rpartition(":")
    namespace = bare.partition("/")[0] if "/" in bare else ""
    try:
        if module:
            importlib.import_module(module)
        elif namespace == "ALE":
            _register_ale()
    except ImportError as e:
        raise ConfigError(
            f"env '{env_id}' needs {e.name or 'a missing module'}: {install_hint(extra_of(env_id))}"
        ) from None
    try:
        gymnasium.spec(bare)
    except gymnasium.error.Error as e:
        raise ConfigError(f"unknown env '{env_id}': {e}") from None


@functools.cache
def _register_ale() -> None:
    """ale_py's games in Gymnasium's registry (ImportError without ale_py)."""
    import ale_py

    gymnasium.register_envs(ale_py)


@functools.cache
def atari_games() -> dict[str, str]:
    """`ALE/<Game>-v5` id -> ALE ROM name, for every image-observation v5 id ale_py registers
    with Gymnasium (empty without ale_py)."""
    try:
        _register_ale()
    except ImportError:
        return {}
    return {
        env_id: spec.kwargs["game"]
        for env_id, spec in gymnasium.registry.items()
        if env_id.startswith(ALE_PREFIX)
        and env_id.endswith("-v5")
        and spec.kwargs.get("obs_type", "rgb") == "rgb"
    }


def rom(env_id: str) -> str:
    """The ROM name of an `ALE/<Game>-v5` id; ConfigError (with close matches) otherwise."""
    games = atari_games()
    if not games:
        raise ConfigError(f"env '{env_id}' needs ale_py: {install_hint('atari')}")
    if env_id not in games:
        raise ConfigError(
            f"env '{env_id}' is not an Atari game; {did_you_mean(env_id, games)}valid: "
            f"ALE/<Game>-v5 for the "
            f"{len(games)} games of envs.host_ids.atari_games(), e.g. ALE/Breakout-v5, ALE/Pong-v5"
        )
    return games[env_id]
