"""Every env family's settings, checked when a command is read: `envs.config_for` builds them
with neither JAX nor a simulator imported, so a bad env setting is refused in a fraction of a
second (the family modules, which do import them, take their config classes from here)."""

from __future__ import annotations

import dataclasses
from typing import Any

from envs import FOURROOMS, HARDMOVE
from jaxrl.config import EnvConfig, require

POOL_MODES = ("sync", "async", "ray")
CALLBACKS = ("auto", "buffer", "io")

# Frames per episode before truncation, as in Gymnasium's v5 ids and Machado et al. (2018).
MAX_EPISODE_FRAMES = 108_000

BACKENDS = ("generalized", "positional", "spring", "mjx")
# Brax's own defaults: every env is built with the `generalized` pipeline, and
# `brax.envs.create` cuts every episode at 1000 steps (Gymnasium's Reacher-v5: 50, Pusher-v5: 100).
DEFAULT_BACKEND = "generalized"
DEFAULT_EPISODE_STEPS = 1000

FOURROOMS_OBSERVATIONS = ("onehot", "grid")
SLIP_RULES = ("other_direction", "empty_neighbor")
PAPER_GOAL_SWITCH_EPISODES = 1000

HARDMOVE_KWARGS = ("num_actuators",)
DEFAULT_NUM_ACTUATORS = 4
MAX_NUM_ACTUATORS = 16  # 65,536 choices: any more and the choice table itself is the problem


@dataclasses.dataclass(frozen=True)
class RayConfig:
    """Where `env.pool=ray` puts its workers (envs/ray_pool.py): `env.ray.num_workers=4`."""

    # null: the cluster this machine knows of (RAY_ADDRESS, or one `ray start` began here), else
    # a new local one; `auto`: such a cluster or an error; `local`: always a new local cluster;
    # `HOST:PORT`: that cluster's head.
    address: str | None = None
    num_workers: int = 2  # Ray actors per pool; the pool's envs are split evenly among them
    # CPUs each actor reserves. 0: none reserved, actors are spread over the cluster's nodes
    # regardless of its CPUs; 1: at most one actor per CPU (one that cannot be placed within
    # env.timeout is reported).
    cpus_per_worker: float = 0.0

    def __post_init__(self) -> None:
        require(self.num_workers >= 1, f"env.ray.num_workers={self.num_workers} must be >= 1")
        require(
            self.cpus_per_worker >= 0,
            f"env.ray.cpus_per_worker={self.cpus_per_worker} must be >= 0",
        )


@dataclasses.dataclass(frozen=True)
class HostPoolConfig(EnvConfig):
    """How a host family's pools are run, shared by `gym/`, `bullet/`, `pixel/` and `ALE/` ids."""

    # sync: the pool's envs step in this process (ALE's pool: on ALE's own threads); async: one
    # worker process per env; ray: the envs split among Ray actors (envs/ray_pool.py), on this
    # machine or a cluster.
    pool: str = "sync"
    # async and ray pools: seconds to wait for the workers' answer before raising HostEnvError;
    # null: wait forever. A dead worker is reported at once either way.
    timeout: float | None = 60.0
    ray: RayConfig = dataclasses.field(default_factory=RayConfig)
    # How the compiled program calls the pool: auto (buffer_callback on CPU, io_callback on GPU
    # and TPU), buffer or io (benchmarks/results/host_bridge.md compares them; io on a CPU runs
    # the accelerators' path).
    callback: str = "auto"

    def pool_modes(self) -> tuple[str, ...]:
        """The `env.pool` values this family runs."""
        return POOL_MODES

    def __post_init__(self) -> None:
        super().__post_init__()
        modes = self.pool_modes()
        require(
            self.pool in modes,
            f"env.pool='{self.pool}' is not a pool mode of env '{self.id}'; valid: "
            f"{', '.join(modes)}",
        )
        require(
            self.timeout is None or self.timeout > 0,
            f"env.timeout={self.timeout} must be > 0 seconds (or null: wait forever)",
        )
        require(
            self.callback in CALLBACKS,
            f"env.callback='{self.callback}' is not one of: {', '.join(CALLBACKS)}",
        )


@dataclasses.dataclass(frozen=True)
class HostEnvConfig(HostPoolConfig):
    """Env options of the Gymnasium families: `env=gym/Hopper-v5 env.pool=async env.num_envs=8`.

    async suits envs whose step costs more than the inter-process round trip (MuJoCo, Box2D,
    PyBullet, pixels); sync suits cheap ones (classic control)."""

    id: str = "gym/CartPole-v1"
    # Keyword arguments for `gymnasium.make`, e.g. `+env.kwargs.continuous=true`.
    kwargs: dict[str, Any] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class AtariConfig(HostPoolConfig):
    """Preprocessing options of the Atari family: `env=ALE/Pong-v5 env.episodic_life=false`.

    `env.pool=sync` steps the games on ALE's threads in this process, `ray` splits them among Ray
    actors (each with ALE's threads)."""

    id: str = "ALE/Breakout-v5"
    frame_skip: int = 4  # emulator frames per agent step; the observation max-pools the last two
    frame_stack: int = 4  # grey frames per observation (the channel axis)
    screen_size: int = 84  # frames are resized to screen_size × screen_size
    noop_max: int = 30  # a reset plays a random number (< noop_max) of no-ops
    fire_reset: bool = True  # press FIRE on reset where the game has it
    episodic_life: bool = True  # a life loss is `terminated` for the learner (training only)
    clip_rewards: bool = True  # the learner's reward is the sign of the game's (training only)
    repeat_action_probability: float = 0.25  # sticky actions; 0 for the DQN papers' setting
    full_action_space: bool = False  # all 18 joystick actions instead of the game's minimal set
    threads: int = 0  # ALE worker threads; 0: one per env up to the core count

    def pool_modes(self) -> tuple[str, ...]:
        return ("sync", "ray")

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in ("frame_skip", "frame_stack", "screen_size"):
            value = getattr(self, name)
            require(value >= 1, f"env.{name}={value} must be >= 1")
        require(self.noop_max >= 0, f"env.noop_max={self.noop_max} must be >= 0")
        require(
            0.0 <= self.repeat_action_probability <= 1.0,
            f"env.repeat_action_probability={self.repeat_action_probability} must be in [0, 1]",
        )
        require(self.threads >= 0, f"env.threads={self.threads} must be >= 0 (0: automatic)")

    @property
    def episode_steps(self) -> int:
        """The agent-step cap: `max_episode_steps`, or 108,000 frames' worth of steps."""
        return self.max_episode_steps or MAX_EPISODE_FRAMES // self.frame_skip


@dataclasses.dataclass(frozen=True)
class BraxEnvConfig(EnvConfig):
    """Env options of the Brax family; `env=brax/hopper env.backend=positional`."""

    id: str = "brax/hopper"
    # Physics pipeline: generalized (Brax's default, closest to MuJoCo among Brax's own), positional
    # and spring (cheaper approximations, faster on CPU), mjx (MuJoCo's own solver in JAX).
    backend: str = DEFAULT_BACKEND

    def __post_init__(self) -> None:
        super().__post_init__()
        check_backend(self.backend)


def check_backend(backend: str) -> None:
    require(
        backend in BACKENDS,
        f"env.backend='{backend}' is not a Brax physics backend; valid: {', '.join(BACKENDS)}",
    )


@dataclasses.dataclass(frozen=True)
class FourRoomsConfig(EnvConfig):
    """Env options of four-rooms; `env=FourRooms-v0 env.goal_switch_episodes=1000` is the paper's
    transfer experiment."""

    id: str = FOURROOMS
    observation: str = "onehot"  # onehot: float32[104]; grid: float32[13, 13, 3]
    slip_prob: float = 1 / 3  # chance that a move goes astray (see slip_rule)
    slip_rule: str = "other_direction"  # other_direction (the paper's text) | empty_neighbor
    goal_switch_episodes: int = 0  # from this episode on the goal moves; 0: never; paper: 1000

    def __post_init__(self) -> None:
        super().__post_init__()
        require(
            self.observation in FOURROOMS_OBSERVATIONS,
            f"env.observation='{self.observation}' is not a four-rooms observation; valid: "
            f"{', '.join(FOURROOMS_OBSERVATIONS)}",
        )
        require(
            0.0 <= self.slip_prob <= 1.0,
            f"env.slip_prob={self.slip_prob} must be a probability in [0, 1]",
        )
        require(
            self.slip_rule in SLIP_RULES,
            f"env.slip_rule='{self.slip_rule}' is not a slip rule; valid: {', '.join(SLIP_RULES)}",
        )
        require(
            self.goal_switch_episodes >= 0,
            f"env.goal_switch_episodes={self.goal_switch_episodes} must be >= 0 (0: the goal "
            f"never moves; the paper's transfer: {PAPER_GOAL_SWITCH_EPISODES})",
        )


@dataclasses.dataclass(frozen=True)
class HardMoveConfig(EnvConfig):
    """Env options of Hard Move, as keywords (as HyAR passes them to its env):
    `env.kwargs.num_actuators=n` (or `+env.kwargs...`) gives 2^n choices (default 4; HyAR's paper
    ran 4 to 10)."""

    id: str = HARDMOVE
    kwargs: dict[str, Any] = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        super().__post_init__()
        for key in self.kwargs:
            require(
                key in HARDMOVE_KWARGS,
                f"env.kwargs.{key} is not an option of {HARDMOVE}; valid: "
                f"{', '.join(HARDMOVE_KWARGS)}",
            )
        n = self.num_actuators
        whole = isinstance(n, int) and not isinstance(n, bool)  # Hydra reads `true` as a bool
        require(
            whole and 1 <= n <= MAX_NUM_ACTUATORS,
            f"env.kwargs.num_actuators={n!r} must be a whole number of actuators in "
            f"[1, {MAX_NUM_ACTUATORS}] (default {DEFAULT_NUM_ACTUATORS}; "
            f"HyAR's paper: 4 to 10)",
        )

    @property
    def num_actuators(self) -> int:
        return self.kwargs.get("num_actuators", DEFAULT_NUM_ACTUATORS)
