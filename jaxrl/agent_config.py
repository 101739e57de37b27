"""The settings every agent family shares (on-policy, off-policy, deterministic, imitation) and
their checks, importable without JAX.

Why a module of its own: the CLI checks a run's settings before anything else, and a refusal
should not pay for importing JAX, flax and the agents' machinery (about a second of every bad
command). Each agent's own config builds on these in `agents/configs.py`; the machinery
(`jaxrl/onpolicy.py`, `offpolicy.py`, `deterministic.py`, `imitation.py`) imports them from here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from jaxrl.config import ConfigError, require

# The names `agent.activation` may take: the keys of `jaxrl.networks.ACTIVATIONS`.
ACTIVATION_NAMES = ("tanh", "relu", "elu", "gelu")
# The names `agent.kernel_init` may take: the keys of `jaxrl.networks.KERNEL_INITS`.
KERNEL_INIT_NAMES = ("orthogonal", "lecun_normal")
# The names `agent.layer_init` may take (`jaxrl.networks.layer_init`).
LAYER_INIT_NAMES = ("lecun_normal", "pytorch")
# The names `agent.torso` may take (`jaxrl.networks.resolve_torso`): auto is the Nature CNN for
# image observations and an MLP otherwise.
TORSO_NAMES = ("auto", "mlp", "nature_cnn")


def check_mlp(hidden_sizes: tuple[int, ...], activation_name: str) -> None:
    """ConfigError unless `agent.hidden_sizes` / `agent.activation` describe a buildable MLP."""
    if not (len(hidden_sizes) >= 1 and all(h >= 1 for h in hidden_sizes)):
        raise ConfigError(
            f"agent.hidden_sizes={list(hidden_sizes)} must be one or more positive sizes"
        )
    check_activation(activation_name)


def check_activation(name: str) -> None:
    """ConfigError unless `agent.activation` names an activation."""
    require(
        name in ACTIVATION_NAMES,
        f"agent.activation='{name}' is not one of: {', '.join(ACTIVATION_NAMES)}",
    )


def check_torso(torso: str) -> None:
    """ConfigError unless `agent.torso` names a torso."""
    require(torso in TORSO_NAMES, f"agent.torso='{torso}' is not one of: {', '.join(TORSO_NAMES)}")


def check_prioritization(exponent: float, importance_start: float, epsilon: float) -> None:
    """One line for a bad setting (the agent's config calls it with its keys)."""
    require(exponent >= 0, f"agent.priority_exponent={exponent} must be >= 0")
    require(
        0 <= importance_start <= 1,
        f"agent.importance_exponent={importance_start} must be in [0, 1]",
    )
    require(epsilon > 0, f"agent.priority_epsilon={epsilon} must be > 0")


@dataclass(frozen=True)
class OnPolicyConfig:
    """Hyperparameters every on-policy agent has; agents subclass it with their own defaults."""

    # The env batch per seed when `env.num_envs` is not given.
    NUM_ENVS: ClassVar[int] = 1

    # Values a grid may vary in one program (jaxrl/hyper.py): they change no array shape.
    HYPERPARAMETERS: ClassVar[tuple[str, ...]] = (
        "learning_rate",
        "max_grad_norm",
        "adam_eps",
        "gamma",
        "vf_coef",
        "ent_coef",
        "obs_clip",
        "reward_clip",
    )

    name: str = "onpolicy"
    learning_rate: float = 3e-4
    anneal_lr: bool = True  # linearly to 0 over the run's env-step budget
    max_grad_norm: float = 0.5  # global-norm gradient clipping; 0 turns it off
    adam_eps: float = 1e-5
    gamma: float = 0.99
    vf_coef: float = 0.5
    ent_coef: float = 0.01
    normalize_advantages: bool = True  # per minibatch
    hidden_sizes: tuple[int, ...] = (64, 64)
    activation: str = "tanh"
    torso: str = "auto"  # auto: Nature CNN for [H, W, C] observations, MLP otherwise
    shared_torso: bool = False
    squash_actions: bool = False  # Box actions: tanh-squash (True) or clip (False) the Gaussian
    log_std_init: float = 0.0
    obs_normalization: bool = True  # vector observations; images are scaled by the CNN instead
    obs_clip: float = 10.0
    return_normalization: bool = True  # scale rewards by the std of the discounted return
    reward_clip: float = 10.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "hidden_sizes", tuple(self.hidden_sizes))
        require(self.learning_rate > 0, f"agent.learning_rate={self.learning_rate} must be > 0")
        require(self.max_grad_norm >= 0, f"agent.max_grad_norm={self.max_grad_norm} must be >= 0")
        require(self.adam_eps > 0, f"agent.adam_eps={self.adam_eps} must be > 0")
        require(0 <= self.gamma <= 1, f"agent.gamma={self.gamma} must be in [0, 1]")
        require(self.vf_coef >= 0, f"agent.vf_coef={self.vf_coef} must be >= 0")
        require(self.ent_coef >= 0, f"agent.ent_coef={self.ent_coef} must be >= 0")
        check_mlp(self.hidden_sizes, self.activation)
        check_torso(self.torso)
        require(self.obs_clip > 0, f"agent.obs_clip={self.obs_clip} must be > 0")
        require(self.reward_clip > 0, f"agent.reward_clip={self.reward_clip} must be > 0")


def require_clipped_update_settings(cfg: Any) -> None:
    """ConfigError unless a PPO-style config's rollout, minibatch, epoch and clip settings
    (`num_steps`, `gae_lambda`, `num_minibatches`, `update_epochs`, `clip_eps`) can run."""
    require(cfg.num_steps >= 1, f"agent.num_steps={cfg.num_steps} must be >= 1")
    require(0 <= cfg.gae_lambda <= 1, f"agent.gae_lambda={cfg.gae_lambda} must be in [0, 1]")
    require(cfg.num_minibatches >= 1, f"agent.num_minibatches={cfg.num_minibatches} must be >= 1")
    require(
        cfg.num_steps % cfg.num_minibatches == 0,
        f"agent.num_minibatches={cfg.num_minibatches} must divide "
        f"agent.num_steps={cfg.num_steps}: a minibatch is num_steps/num_minibatches steps "
        f"of every env",
    )
    require(cfg.update_epochs >= 1, f"agent.update_epochs={cfg.update_epochs} must be >= 1")
    require(cfg.clip_eps > 0, f"agent.clip_eps={cfg.clip_eps} must be > 0")


@dataclass(frozen=True)
class OffPolicyConfig:
    """Hyperparameters every off-policy agent has; agents subclass it with their own defaults."""

    # The env batch per seed when `env.num_envs` is not given.
    NUM_ENVS: ClassVar[int] = (
        1  # one env per seed, as in the papers and the Zoo's Pendulum settings
    )

    name: str = "offpolicy"
    buffer_size: int = 100_000  # transitions kept (per seed)
    batch_size: int = 256
    learning_starts: int = 1_000  # env steps of uniformly random actions before learning
    train_freq: int = 1  # batched env steps between rounds of updates
    gradient_steps: int = 1  # updates per round
    iteration_steps: int = 1_000  # env steps (all envs) per train_step, i.e. per logged iteration
    gamma: float = 0.99
    hidden_sizes: tuple[int, ...] = (256, 256)
    activation: str = "relu"
    # Every learning rate linearly to 0 over the updates the run's budget allows (each optimiser
    # over its own steps), as Stable-Baselines3's linear schedules: the policy settles as the run
    # ends. Agents whose references keep the rates constant leave it off.
    anneal_lr: bool = False
    # A finished run of the same agent whose learner (networks, target networks, optimiser and
    # temperature states; its first seed's) every seed starts from, with an empty buffer and the
    # warm-up as usual: fine-tuning, e.g. on a harder env of the same spaces, or at a lower or
    # annealed rate (`anneal_lr` may differ: its schedule's count starts at 0). "": a fresh learner.
    init_from: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "hidden_sizes", tuple(self.hidden_sizes))
        require(self.buffer_size >= 1, f"agent.buffer_size={self.buffer_size} must be >= 1")
        require(self.batch_size >= 1, f"agent.batch_size={self.batch_size} must be >= 1")
        require(
            self.learning_starts >= 0, f"agent.learning_starts={self.learning_starts} must be >= 0"
        )
        require(self.train_freq >= 1, f"agent.train_freq={self.train_freq} must be >= 1")
        require(
            self.gradient_steps >= 1, f"agent.gradient_steps={self.gradient_steps} must be >= 1"
        )
        require(
            self.iteration_steps >= 1, f"agent.iteration_steps={self.iteration_steps} must be >= 1"
        )
        require(0 <= self.gamma <= 1, f"agent.gamma={self.gamma} must be in [0, 1]")
        require(
            self.batch_size <= self.buffer_size,
            f"agent.batch_size={self.batch_size} must be <= agent.buffer_size="
            f"{self.buffer_size}: minibatches are drawn from the buffer",
        )
        require(
            self.learning_starts <= self.buffer_size,
            f"agent.learning_starts={self.learning_starts} must be <= agent.buffer_size="
            f"{self.buffer_size}: the random warm-up fills the buffer once",
        )
        check_mlp(self.hidden_sizes, self.activation)


@dataclass(frozen=True)
class EpsilonGreedyConfig(OffPolicyConfig):
    """Keys of agents whose discrete choice is ε-greedy, ε falling linearly in env steps (DQN,
    P-DQN); subclasses set their own defaults."""

    eps_start: float = 1.0
    eps_end: float = 0.05
    exploration_steps: int = 10_000  # env steps (all envs) over which ε falls linearly

    def __post_init__(self) -> None:
        super().__post_init__()
        for key in ("eps_start", "eps_end"):
            value = getattr(self, key)
            require(0 <= value <= 1, f"agent.{key}={value} must be in [0, 1]")
        require(
            self.exploration_steps >= 0,
            f"agent.exploration_steps={self.exploration_steps} must be >= 0",
        )


# DDPG is this learner with TD3's three changes off (agents/ddpg.py, ERL's default learner).
DDPG_KEYS: dict[str, Any] = {"twin_critics": False, "policy_delay": 1, "target_noise": 0.0}


@dataclass(frozen=True)
class DeterministicConfig(OffPolicyConfig):
    """The learner's keys on top of `OffPolicyConfig`; defaults follow Fujimoto et al.'s published
    TD3 code (256-256 ReLU, Adam 3e-4, batch 256, τ 0.005, σ 0.2, c 0.5, delay 2, exploration
    0.1)."""

    # Values a grid may vary in one program (jaxrl/hyper.py): they change no array shape.
    HYPERPARAMETERS: ClassVar[tuple[str, ...]] = (
        "gamma",
        "actor_lr",
        "critic_lr",
        "tau",
        "target_noise",
        "target_noise_clip",
        "exploration_noise",
    )

    name: str = "td3"
    buffer_size: int = 1_000_000
    learning_starts: int = 10_000
    actor_lr: float = 3e-4
    critic_lr: float = 3e-4
    tau: float = 0.005  # Polyak: target ← τ·online + (1 − τ)·target
    policy_delay: int = 2  # critic updates per actor and target update
    target_noise: float = 0.2  # σ of the target policy smoothing, normalised action units
    target_noise_clip: float = 0.5  # c: the smoothing noise is clipped to [−c, c]
    exploration_noise: float = 0.1  # σ of the Gaussian added to μ(s) when collecting
    twin_critics: bool = True  # False: one critic (DDPG)
    layer_norm: bool = False  # layer norm after every hidden layer (ERL's DDPG uses it)
    # True: an unsquashed actor bounded by inverting gradients instead of a tanh
    inverting_gradients: bool = False
    max_grad_norm: float = 0.0  # global-norm clipping of each network's gradient; 0: off
    # How the actor's and critics' layers start (`jaxrl.networks.layer_init`): flax's default,
    # or "pytorch" (nn.Linear's) as the PyTorch references' networks start.
    layer_init: str = "lecun_normal"

    def __post_init__(self) -> None:
        super().__post_init__()
        require(
            self.layer_init in LAYER_INIT_NAMES,
            f"agent.layer_init='{self.layer_init}' is not one of: {', '.join(LAYER_INIT_NAMES)}",
        )
        require(self.actor_lr > 0, f"agent.actor_lr={self.actor_lr} must be > 0")
        require(self.critic_lr > 0, f"agent.critic_lr={self.critic_lr} must be > 0")
        require(0 < self.tau <= 1, f"agent.tau={self.tau} must be in (0, 1]")
        require(self.policy_delay >= 1, f"agent.policy_delay={self.policy_delay} must be >= 1")
        require(self.target_noise >= 0, f"agent.target_noise={self.target_noise} must be >= 0")
        require(
            self.target_noise_clip >= 0,
            f"agent.target_noise_clip={self.target_noise_clip} must be >= 0",
        )
        require(
            self.exploration_noise >= 0,
            f"agent.exploration_noise={self.exploration_noise} must be >= 0",
        )
        require(self.max_grad_norm >= 0, f"agent.max_grad_norm={self.max_grad_norm} must be >= 0")


MIXTURE_SCHEDULES = ("constant", "linear", "exponential", "inverse")


@dataclass(frozen=True)
class ImitationConfig:
    """What every imitation learner has: the expert, the roll-in, the learner and its optimiser."""

    NUM_ENVS: ClassVar[int] = 8  # the env batch per seed when `env.num_envs` is not given

    name: str = "imitation"
    expert: str = ""  # a jaxrl run directory (required)
    expert_seed: int | None = None  # which of its seeds; null: its first
    expert_grid_point: int | None = None  # which of its grid points; null: the first
    rollin_steps: int = 200  # batched env steps per iteration (× env.num_envs env steps)
    learner_samples: bool = False  # roll-in: the learner samples π (True) or acts with its mode
    hidden_sizes: tuple[int, ...] = (256, 256)
    activation: str = "relu"
    log_std_min: float = -5.0
    log_std_max: float = 2.0
    learning_rate: float = 1e-3
    max_grad_norm: float = 1.0  # global-norm gradient clipping
    batch_size: int = 256
    gradient_steps: int = 500  # minibatch updates per iteration

    def __post_init__(self) -> None:
        object.__setattr__(self, "hidden_sizes", tuple(self.hidden_sizes))
        require(self.rollin_steps >= 1, f"agent.rollin_steps={self.rollin_steps} must be >= 1")
        require(
            self.log_std_min < self.log_std_max,
            f"agent.log_std_min={self.log_std_min} must be < agent.log_std_max={self.log_std_max}",
        )
        require(self.learning_rate > 0, f"agent.learning_rate={self.learning_rate} must be > 0")
        require(self.max_grad_norm > 0, f"agent.max_grad_norm={self.max_grad_norm} must be > 0")
        require(self.batch_size >= 1, f"agent.batch_size={self.batch_size} must be >= 1")
        require(
            self.gradient_steps >= 1, f"agent.gradient_steps={self.gradient_steps} must be >= 1"
        )
        check_mlp(self.hidden_sizes, self.activation)


@dataclass(frozen=True)
class MixtureConfig(ImitationConfig):
    """The expert/learner mixture of DAgger (β) and AggreVaTeD (α): at iteration n the expert
    acts at each env step with probability p_n, p_0 = `mixture`, decaying by
    `mixture_schedule`: constant; linear (to 0 over `mixture_iterations`); exponential
    (× `mixture_decay` per iteration); inverse (p_0 / (n + 1))."""

    mixture: float = 1.0
    mixture_schedule: str = "exponential"
    mixture_decay: float = 0.5
    mixture_iterations: int = 10

    def __post_init__(self) -> None:
        super().__post_init__()
        require(0 <= self.mixture <= 1, f"agent.mixture={self.mixture} must be in [0, 1]")
        require(
            self.mixture_schedule in MIXTURE_SCHEDULES,
            f"agent.mixture_schedule={self.mixture_schedule!r} is not one of "
            f"{', '.join(MIXTURE_SCHEDULES)}",
        )
        require(
            0 <= self.mixture_decay <= 1,
            f"agent.mixture_decay={self.mixture_decay} must be in [0, 1]",
        )
        require(
            self.mixture_iterations >= 1,
            f"agent.mixture_iterations={self.mixture_iterations} must be >= 1",
        )
