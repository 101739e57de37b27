"""Every agent's config: its hyperparameters, their defaults and their checks, importable
without JAX.

Each agent's module (`agents/<name>.py`) holds its algorithm and imports its config from here; the
registry (`agents/__init__.py`) finds the config here without importing the agent. Why: the CLI
checks a run's settings before anything else, and a refused command should not pay for importing
JAX, flax and the agent's machinery (about a second). What the families share
(`OnPolicyConfig`, `OffPolicyConfig`, `DeterministicConfig`, `ImitationConfig`, ...) is in
`jaxrl/agent_config.py`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import ClassVar

from jaxrl import hyper
from jaxrl.agent_config import (
    DDPG_KEYS,
    KERNEL_INIT_NAMES,
    DeterministicConfig,
    EpsilonGreedyConfig,
    ImitationConfig,
    MixtureConfig,
    OffPolicyConfig,
    OnPolicyConfig,
    check_activation,
    check_mlp,
    check_prioritization,
    check_torso,
    require_clipped_update_settings,
)
from jaxrl.config import require

# How DQN may store frame-stacked observations: the keys of `agents/dqn.py`'s FRAME_STORAGE.
FRAME_STORAGE_NAMES = ("full", "compact", "once")


# Evolution Strategies (agents/es.py)

FITNESS_SHAPINGS = ("centered_ranks", "zscore")


@dataclass(frozen=True)
class ESConfig:
    # The trainer's env batch (unused: ES batches its members' episodes itself, as
    # `OWN_ENV_BATCHES` says, and `env.num_envs` is refused).
    NUM_ENVS: ClassVar[int] = 1
    OWN_ENV_BATCHES: ClassVar[str] = "agent.population_size x agent.episodes_per_member episodes"
    # Values a grid may vary in one program (jaxrl/hyper.py): they change no array shape.
    HYPERPARAMETERS: ClassVar[tuple[str, ...]] = (
        "sigma",
        "sigma_decay",
        "sigma_min",
        "learning_rate",
        "lr_decay",
        "lr_min",
        "adam_eps",
        "weight_decay",
        "obs_clip",
    )
    name: str = "es"
    population_size: int = 64  # members; antithetic pairs, so it must be even
    sigma: float = 0.02  # perturbation std
    sigma_decay: float = 1.0  # sigma multiplied by this every generation...
    sigma_min: float = 0.0  # ...down to this
    learning_rate: float = 0.02
    lr_decay: float = 1.0  # learning rate multiplied by this every generation...
    lr_min: float = 0.0  # ...down to this
    adam_b1: float = 0.9
    adam_b2: float = 0.999
    adam_eps: float = 1e-8
    weight_decay: float = 0.0  # L2 coefficient added to the (negated) gradient, as OpenAI ES did
    fitness_shaping: str = "centered_ranks"
    episodes_per_member: int = 5
    hidden_sizes: tuple[int, ...] = (64, 64)
    activation: str = "tanh"
    obs_normalization: bool = True
    obs_clip: float = 5.0
    virtual_batch_norm: bool = False
    vbn_reference_size: int = 128  # observations in the VBN reference batch
    # Noise regenerated at once for the gradient estimate.
    chunk_megabytes: float = 256.0
    # Perturbed parameters of the members evaluated together. Members of a chunk step in lockstep
    # until the slowest episode ends: small nets want the whole population at once, large nets
    # small chunks (benchmarks/results/es_memory.md).
    eval_chunk_megabytes: float = 16.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "hidden_sizes", tuple(self.hidden_sizes))
        pop = self.population_size
        require(pop >= 2, f"agent.population_size={pop} must be >= 2")
        require(
            pop % 2 == 0,
            f"agent.population_size={pop} must be even: members come in antithetic pairs "
            f"(try {pop + 1})",
        )
        require(self.sigma > 0, f"agent.sigma={self.sigma} must be > 0")
        require(self.learning_rate > 0, f"agent.learning_rate={self.learning_rate} must be > 0")
        require(
            0 < self.sigma_decay <= 1, f"agent.sigma_decay={self.sigma_decay} must be in (0, 1]"
        )
        require(0 < self.lr_decay <= 1, f"agent.lr_decay={self.lr_decay} must be in (0, 1]")
        require(self.weight_decay >= 0, f"agent.weight_decay={self.weight_decay} must be >= 0")
        require(
            self.fitness_shaping in FITNESS_SHAPINGS,
            f"agent.fitness_shaping='{self.fitness_shaping}' is not one of: "
            f"{', '.join(FITNESS_SHAPINGS)}",
        )
        require(
            self.episodes_per_member >= 1,
            f"agent.episodes_per_member={self.episodes_per_member} must be >= 1",
        )
        require(
            all(h >= 1 for h in self.hidden_sizes),
            f"agent.hidden_sizes={list(self.hidden_sizes)} must be positive",
        )
        check_activation(self.activation)
        require(self.obs_clip > 0, f"agent.obs_clip={self.obs_clip} must be > 0")
        require(self.vbn_reference_size >= 2, "agent.vbn_reference_size must be >= 2")
        require(self.chunk_megabytes > 0, "agent.chunk_megabytes must be > 0")
        require(self.eval_chunk_megabytes > 0, "agent.eval_chunk_megabytes must be > 0")


# On-policy: PPO, A2C, REINFORCE (agents/ppo.py, a2c.py, reinforce.py)


@dataclass(frozen=True)
class PPOConfig(OnPolicyConfig):
    NUM_ENVS: ClassVar[int] = 4  # PureJaxRL's CartPole setting
    HYPERPARAMETERS: ClassVar[tuple[str, ...]] = (
        *OnPolicyConfig.HYPERPARAMETERS,
        "gae_lambda",
        "clip_eps",
    )
    name: str = "ppo"
    learning_rate: float = 2.5e-4
    num_steps: int = 128  # rollout length per env and iteration
    gae_lambda: float = 0.95
    num_minibatches: int = 4  # must divide num_steps
    update_epochs: int = 4
    clip_eps: float = 0.2
    clip_value: bool = True  # clip the value change to ±clip_eps, as in the PPO2 baselines
    ent_coef: float = 0.01

    def __post_init__(self) -> None:
        super().__post_init__()
        require_clipped_update_settings(self)


@dataclass(frozen=True)
class A2CConfig(OnPolicyConfig):
    NUM_ENVS: ClassVar[int] = 8
    HYPERPARAMETERS: ClassVar[tuple[str, ...]] = (*OnPolicyConfig.HYPERPARAMETERS, "gae_lambda")
    name: str = "a2c"
    learning_rate: float = 1e-3
    num_steps: int = 16  # rollout length per env: the n of the n-step returns
    gae_lambda: float = 1.0  # 1.0: n-step returns; below: GAE(λ)
    ent_coef: float = 0.01
    normalize_advantages: bool = False

    def __post_init__(self) -> None:
        super().__post_init__()
        require(self.num_steps >= 1, f"agent.num_steps={self.num_steps} must be >= 1")
        require(0 <= self.gae_lambda <= 1, f"agent.gae_lambda={self.gae_lambda} must be in [0, 1]")


BASELINES = ("learned", "mean", "none")


@dataclass(frozen=True)
class REINFORCEConfig(OnPolicyConfig):
    NUM_ENVS: ClassVar[int] = 8  # episodes per update
    name: str = "reinforce"
    learning_rate: float = 1e-2
    anneal_lr: bool = False
    baseline: str = "learned"
    ent_coef: float = 0.0
    hidden_sizes: tuple[int, ...] = (128,)
    return_normalization: bool = False  # returns are normalised per batch instead

    def __post_init__(self) -> None:
        super().__post_init__()
        require(
            self.baseline in BASELINES,
            f"agent.baseline='{self.baseline}' is not one of: {', '.join(BASELINES)}",
        )


# Off-policy: DQN, TD3, DDPG, SAC (agents/dqn.py, td3.py, ddpg.py, sac.py)

LOSSES = ("huber", "mse")


@dataclass(frozen=True)
class DQNConfig(EpsilonGreedyConfig):
    # 4 envs × train_freq 64: the 256 env steps per round of the Zoo's CartPole setting.
    NUM_ENVS: ClassVar[int] = 4
    # Values a grid may vary in one program (jaxrl/hyper.py): they change no array shape.
    HYPERPARAMETERS: ClassVar[tuple[str, ...]] = (
        "learning_rate",
        "adam_eps",
        "eps_start",
        "eps_end",
        "tau",
        "max_grad_norm",
        "gamma",
        "priority_exponent",
        "importance_exponent",
        "priority_epsilon",
    )
    name: str = "dqn"
    learning_rate: float = 2e-3
    anneal_lr: bool = True  # linearly to 0 over the updates the run's env-step budget allows
    adam_eps: float = 1e-8
    buffer_size: int = 100_000
    batch_size: int = 64
    learning_starts: int = 1_000
    train_freq: int = 64  # × 4 envs: 256 env steps per round of updates
    gradient_steps: int = 128
    iteration_steps: int = 1_024
    eps_start: float = 1.0
    eps_end: float = 0.04
    exploration_steps: int = 8_000  # env steps (all envs) over which ε falls linearly
    target_update_period: int = 128  # gradient updates between target refreshes
    tau: float = 1.0  # 1: hard copy; < 1: Polyak averaging at each refresh
    double_q: bool = True  # the online net picks the next action, the target net values it
    loss: str = "mse"  # huber (δ = 1) or mse (½ squared error)
    max_grad_norm: float = 10.0  # global-norm gradient clipping; 0 turns it off
    torso: str = "auto"  # auto: Nature CNN for [H, W, C] observations, MLP otherwise
    # How frame-stacked images are stored (FRAME_STORAGE_NAMES, `agents/dqn.py`'s FRAME_STORAGE;
    # full also for any other observation)
    frame_storage: str = "full"
    n_step: int = 1  # rewards summed before the bootstrap (Rainbow's multi-step targets: 3)
    dueling: bool = False  # Q = V + A − mean A, two linear heads on the torso (Wang et al. 2016)
    # Prioritised replay (jaxrl/prioritized.py; Schaul et al. 2016's proportional variant): α,
    # β at the start (annealed to 1 over the budget) and ε, the paper's Atari values.
    prioritized: bool = False
    priority_exponent: float = 0.6
    importance_exponent: float = 0.4
    priority_epsilon: float = 1e-6
    hidden_sizes: tuple[int, ...] = (128, 128)
    # The MLP layers' and the heads' weights (jaxrl.networks.KERNEL_INITS); the Nature CNN keeps
    # its own. lecun_normal is what PureJaxRL's and CleanRL's DQN networks use.
    kernel_init: str = "orthogonal"

    def __post_init__(self) -> None:
        super().__post_init__()
        require(self.learning_rate > 0, f"agent.learning_rate={self.learning_rate} must be > 0")
        require(self.adam_eps > 0, f"agent.adam_eps={self.adam_eps} must be > 0")
        require(
            self.target_update_period >= 1,
            f"agent.target_update_period={self.target_update_period} must be >= 1",
        )
        require(0 < self.tau <= 1, f"agent.tau={self.tau} must be in (0, 1]")
        require(self.loss in LOSSES, f"agent.loss='{self.loss}' is not one of: {', '.join(LOSSES)}")
        require(self.max_grad_norm >= 0, f"agent.max_grad_norm={self.max_grad_norm} must be >= 0")
        require(self.n_step >= 1, f"agent.n_step={self.n_step} must be >= 1")
        check_torso(self.torso)
        check_prioritization(
            self.priority_exponent, self.importance_exponent, self.priority_epsilon
        )
        require(
            self.kernel_init in KERNEL_INIT_NAMES,
            f"agent.kernel_init='{self.kernel_init}' is not one of: {', '.join(KERNEL_INIT_NAMES)}",
        )
        require(
            self.frame_storage in FRAME_STORAGE_NAMES,
            f"agent.frame_storage='{self.frame_storage}' is not one of: "
            f"{', '.join(FRAME_STORAGE_NAMES)}",
        )


@dataclass(frozen=True)
class TD3Config(DeterministicConfig):
    """The deterministic learner's keys at TD3's published defaults."""

    name: str = "td3"


@dataclass(frozen=True)
class DDPGConfig(DeterministicConfig):
    """The deterministic learner's keys with TD3's changes off (`DDPG_KEYS`); setting them back
    turns it into TD3."""

    name: str = "ddpg"
    twin_critics: bool = False
    policy_delay: int = 1
    target_noise: float = 0.0


@dataclass(frozen=True)
class SACConfig(OffPolicyConfig):
    """SAC's keys on top of `OffPolicyConfig`; defaults follow Haarnoja et al. (2018b):
    256-256 ReLU, Adam 3e-4 for actor, critics and α, batch 256, τ 0.005, α₀ = 1, H̄ = −|A|."""

    # Values a grid may vary in one program (jaxrl/hyper.py): they change no array shape.
    HYPERPARAMETERS: ClassVar[tuple[str, ...]] = (
        "gamma",
        "actor_lr",
        "critic_lr",
        "alpha_lr",
        "tau",
        "init_alpha",
        "reward_scale",
    )

    name: str = "sac"
    buffer_size: int = 1_000_000
    learning_starts: int = 5_000
    actor_lr: float = 3e-4
    critic_lr: float = 3e-4
    alpha_lr: float = 3e-4
    tau: float = 0.005
    init_alpha: float = 1.0
    learn_alpha: bool = True  # False: α stays init_alpha
    target_entropy: float | None = None  # H̄; null: −|A|
    reward_scale: float = 1.0  # c: × the reward in the critics' target

    def __post_init__(self) -> None:
        super().__post_init__()
        require(self.actor_lr > 0, f"agent.actor_lr={self.actor_lr} must be > 0")
        require(self.critic_lr > 0, f"agent.critic_lr={self.critic_lr} must be > 0")
        require(self.alpha_lr > 0, f"agent.alpha_lr={self.alpha_lr} must be > 0")
        require(0 < self.tau <= 1, f"agent.tau={self.tau} must be in (0, 1]")
        require(self.init_alpha > 0, f"agent.init_alpha={self.init_alpha} must be > 0")
        require(self.reward_scale > 0, f"agent.reward_scale={self.reward_scale} must be > 0")


# ERL (agents/erl.py)

LEARNERS = ("ddpg", "td3")


@dataclass(frozen=True)
class ERLConfig:
    # ERL sizes its own env batch from its population (members x episodes + the learner's), as
    # `OWN_ENV_BATCHES` says; `env.num_envs` is refused.
    NUM_ENVS: ClassVar[int] = 1
    OWN_ENV_BATCHES: ClassVar[str] = (
        "agent.population_size x agent.episodes_per_member + agent.rl_episodes episodes"
    )
    # Values a grid may vary in one program (jaxrl/hyper.py): they change no array shape.
    HYPERPARAMETERS: ClassVar[tuple[str, ...]] = (
        "mutation_prob",
        "mutation_frac",
        "mutation_strength",
        "super_mutation_prob",
        "super_mutation_strength",
        "reset_prob",
        "gamma",
        "actor_lr",
        "critic_lr",
        "tau",
        "exploration_noise",
    )
    name: str = "erl"
    # GA (jaxrl/ga.py)
    population_size: int = 10
    # elites = int(elite_fraction × population_size), at least 1 (and, as the fraction is < 1,
    # at most population_size - 1: one slot at least is an offspring)
    elite_fraction: float = 0.1
    tournament_size: int = 3
    mutation_prob: float = 0.9  # chance each non-elite is mutated
    mutation_frac: float = 0.1  # chance each weight-matrix entry of a mutated member changes
    mutation_strength: float = 0.1  # std of a normal mutation, relative to |w|
    super_mutation_prob: float = 0.05
    super_mutation_strength: float = 10.0  # relative to |w|: 100 × mutation_strength
    reset_prob: float = 0.05  # entry redrawn from N(0, 1)
    episodes_per_member: int = 1  # fitness = mean return over these episodes
    # Learner and its coupling to the population
    learner: str = "ddpg"  # ddpg | td3 (TD3's smoothing, delay and twin critics at TD3's defaults)
    rl_episodes: int = 1  # exploring episodes of the learner's actor per generation
    sync_period: int = 10  # generations between copies of the learner's actor into the population
    updates_per_step: float = 1.0  # learner updates per env step collected (all rollouts)
    buffer_size: int = 1_000_000
    batch_size: int = 128
    learning_starts: int = 640  # transitions in the buffer before updates begin (5 batches)
    gamma: float = 0.99
    hidden_sizes: tuple[int, ...] = (128, 128)
    activation: str = "tanh"
    layer_norm: bool = True
    actor_lr: float = 5e-5
    critic_lr: float = 5e-4
    tau: float = 0.001
    exploration_noise: float = 0.1  # Gaussian σ on the learner's actor, in half-ranges

    def __post_init__(self) -> None:
        object.__setattr__(self, "hidden_sizes", tuple(self.hidden_sizes))
        k = self.population_size
        require(k >= 2, f"agent.population_size={k} must be >= 2")
        require(
            0 < self.elite_fraction < 1,
            f"agent.elite_fraction={self.elite_fraction} must be in (0, 1)",
        )
        require(self.tournament_size >= 1, "agent.tournament_size must be >= 1")
        for key in ("mutation_prob", "mutation_frac", "super_mutation_prob", "reset_prob"):
            value = getattr(self, key)
            require(0 <= value <= 1, f"agent.{key}={value} must be in [0, 1]")
        require(
            self.super_mutation_prob + self.reset_prob <= 1,
            "agent.super_mutation_prob + agent.reset_prob must be <= 1",
        )
        require(self.mutation_strength >= 0, "agent.mutation_strength must be >= 0")
        require(self.super_mutation_strength >= 0, "agent.super_mutation_strength must be >= 0")
        require(self.episodes_per_member >= 1, "agent.episodes_per_member must be >= 1")
        require(
            self.learner in LEARNERS,
            f"agent.learner='{self.learner}' is not one of: {', '.join(LEARNERS)}",
        )
        require(self.rl_episodes >= 1, "agent.rl_episodes must be >= 1")
        require(self.sync_period >= 1, f"agent.sync_period={self.sync_period} must be >= 1")
        require(
            self.updates_per_step >= 0,
            f"agent.updates_per_step={self.updates_per_step} must be >= 0",
        )
        self.learner_config()  # the learner's own checks (sizes, activation, rates, τ ...)

    @property
    def num_elites(self) -> int:
        return max(1, int(self.elite_fraction * self.population_size))

    def learner_config(self) -> DeterministicConfig:
        """The learner's config: DDPG's or TD3's defaults, with the keys ERL shares set."""
        base = DeterministicConfig(**(DDPG_KEYS if self.learner == "ddpg" else {}))
        shared = {f.name for f in dataclasses.fields(base)} & {
            f.name for f in dataclasses.fields(self)
        }
        values = {name: getattr(self, name) for name in shared - {"name"}}
        # Grid values are traced scalars, checked already: set without the range checks.
        traced = {name: v for name, v in values.items() if hyper.is_array(v)}
        constants = {name: v for name, v in values.items() if name not in traced}
        learner = dataclasses.replace(base, name=f"erl ({self.learner})", **constants)
        return hyper.traced_config(learner, traced)


# Options: Option-Critic, PPOC (agents/option_critic.py, ppoc.py)

NETWORKS = ("linear", "deep")


OPTION_POLICIES = ("egreedy", "softmax")


# The keys left null take their network's default: the linear agent's are the paper's, the deep
# one's those of the CartPole-v1 runs of tests/agents/test_option_critic.py.
NETWORK_DEFAULTS: dict[str, dict[str, float | str]] = {
    "linear": {
        "critic_lr": 0.5,
        "intra_lr": 0.25,
        "termination_lr": 0.25,
        "option_policy": "softmax",
        "epsilon": 0.01,
        "temperature": 0.01,
        "deliberation_cost": 0.0,
    },
    "deep": {
        "critic_lr": 3e-3,
        "intra_lr": 5e-4,
        "termination_lr": 1e-3,
        "option_policy": "egreedy",
        "epsilon": 0.1,
        "temperature": 1.0,
        "deliberation_cost": 1.0,
    },
}


DEEP_NUM_ENVS = 16


@dataclass(frozen=True)
class OptionCriticConfig:
    """The linear network's defaults are those of the run behind the paper's four-rooms figure,
    the command in the authors' fourrooms/README.md: 4 options, critic lr 0.5, intra-option and
    termination lr 0.25, with baseline, γ 0.99, and transfer.py's defaults for the rest: a
    Boltzmann policy over options and temperature 0.01. The paper's text says ε-greedy (ε 0.01)
    and temperature 0.001: `agent.option_policy=egreedy agent.temperature=0.001`, which learns
    more slowly (benchmarks/results/option_critic_fourrooms.md).

    `agent.network=deep` reads the keys below `iteration_steps` instead of it, and takes other
    defaults for the keys that are null here (`NETWORK_DEFAULTS`): Adam learning rates, ε-greedy
    options with ε 0.1 (A2OC's), temperature 1, deliberation cost 1, and an env batch of
    `DEEP_NUM_ENVS`. Its defaults solve CartPole-v1 in 250k env steps with `lr_decay_steps` at
    the budget (tests/agents/test_option_critic.py); with constant rates the greedy policy dips
    now and then for an evaluation."""

    HYPERPARAMETERS: ClassVar[tuple[str, ...]] = (
        "gamma",
        "critic_lr",
        "intra_lr",
        "termination_lr",
        "epsilon",
        "temperature",
        "deliberation_cost",
    )
    name: str = "option_critic"
    network: str = "linear"  # linear (tabular on one-hot observations) or deep
    num_options: int = 4
    gamma: float = 0.99
    # Step sizes: SGD's on the linear weights, Adam's for the deep groups. Null: the network's.
    critic_lr: float | None = None
    intra_lr: float | None = None
    termination_lr: float | None = None
    # Over options: softmax (the authors' tabular code) or egreedy. Null: the network's.
    option_policy: str | None = None
    epsilon: float | None = None  # egreedy's exploration; null: the network's
    # Of the Boltzmann intra-option policies and policy over options; null: the network's.
    temperature: float | None = None
    baseline: bool = True  # Q_U − Q_Ω (linear), G − Q_Ω (deep) in the intra-option gradient
    # ξ, added to the termination advantage: longer options. Null: the network's.
    deliberation_cost: float | None = None
    iteration_steps: int = 1_000  # linear: env steps (all envs) per train_step
    # Deep network only.
    hidden_sizes: tuple[int, ...] = (64, 64)  # the MLP torso's
    activation: str = "relu"
    torso: str = "auto"  # auto: Nature CNN for [H, W, C] observations, MLP otherwise
    shared_torso: bool = False  # one torso under all heads (A2OC's) instead of actor and critic
    num_steps: int = 8  # rollout length per env and iteration: the n of the n-step returns
    ent_coef: float = 0.01
    max_grad_norm: float = 1.0  # per head group; 0 turns it off
    target_update_period: int = 5  # updates between copies of the target network
    # Env steps (all envs) over which the learning rates fall linearly to 0; 0: constant.
    lr_decay_steps: int = 0

    @property
    def NUM_ENVS(self) -> int:
        """One env per seed for the linear agent, as in the paper; a batch for the deep one."""
        return 1 if self.network == "linear" else DEEP_NUM_ENVS

    def __post_init__(self) -> None:
        object.__setattr__(self, "hidden_sizes", tuple(self.hidden_sizes))
        require(
            self.network in NETWORKS,
            f"agent.network='{self.network}' is not one of: {', '.join(NETWORKS)}",
        )
        for key, value in NETWORK_DEFAULTS[self.network].items():
            if getattr(self, key) is None:
                object.__setattr__(self, key, value)
        require(self.num_options >= 1, f"agent.num_options={self.num_options} must be >= 1")
        require(0 <= self.gamma <= 1, f"agent.gamma={self.gamma} must be in [0, 1]")
        for key in ("critic_lr", "intra_lr", "termination_lr"):
            value = getattr(self, key)
            require(value > 0, f"agent.{key}={value} must be > 0")
        require(
            self.option_policy in OPTION_POLICIES,
            f"agent.option_policy='{self.option_policy}' is not one of: "
            f"{', '.join(OPTION_POLICIES)}",
        )
        require(0 <= self.epsilon <= 1, f"agent.epsilon={self.epsilon} must be in [0, 1]")
        require(self.temperature > 0, f"agent.temperature={self.temperature} must be > 0")
        require(
            self.deliberation_cost >= 0,
            f"agent.deliberation_cost={self.deliberation_cost} must be >= 0",
        )
        require(
            self.iteration_steps >= 1,
            f"agent.iteration_steps={self.iteration_steps} must be >= 1",
        )
        check_mlp(self.hidden_sizes, self.activation)
        check_torso(self.torso)
        require(self.num_steps >= 1, f"agent.num_steps={self.num_steps} must be >= 1")
        require(self.ent_coef >= 0, f"agent.ent_coef={self.ent_coef} must be >= 0")
        require(self.max_grad_norm >= 0, f"agent.max_grad_norm={self.max_grad_norm} must be >= 0")
        require(
            self.target_update_period >= 1,
            f"agent.target_update_period={self.target_update_period} must be >= 1",
        )
        require(
            self.lr_decay_steps >= 0, f"agent.lr_decay_steps={self.lr_decay_steps} must be >= 0"
        )


@dataclass(frozen=True)
class PPOCConfig(OnPolicyConfig):
    """The PPO settings of the authors' run_mujoco.py (2 options, 10 epochs, lr 3e-4, γ 0.99,
    λ 0.95, clip 0.2, no entropy bonus on the actions), in this repo's on-policy path (env batch,
    observation and return normalisation, lr annealing); an entropy bonus 0.01 on π_Ω (theirs
    is 0.1, summed where the losses are means); no deliberation cost."""

    NUM_ENVS: ClassVar[int] = 8
    HYPERPARAMETERS: ClassVar[tuple[str, ...]] = (
        *OnPolicyConfig.HYPERPARAMETERS,
        "gae_lambda",
        "clip_eps",
        "option_ent_coef",
        "deliberation_cost",
    )
    name: str = "ppoc"
    num_options: int = 2
    learning_rate: float = 3e-4
    num_steps: int = 256  # rollout length per env and iteration
    gae_lambda: float = 0.95
    num_minibatches: int = 8  # must divide num_steps
    update_epochs: int = 10
    clip_eps: float = 0.2
    clip_value: bool = True  # clip the change of Q_Ω(s, ω) to ±clip_eps, as PPO does V's
    ent_coef: float = 0.0
    option_ent_coef: float = 0.01  # entropy bonus of the policy over options
    deliberation_cost: float = 0.0  # ξ, added to the termination advantage: longer options

    def __post_init__(self) -> None:
        super().__post_init__()
        require(self.num_options >= 1, f"agent.num_options={self.num_options} must be >= 1")
        require_clipped_update_settings(self)
        require(
            self.option_ent_coef >= 0,
            f"agent.option_ent_coef={self.option_ent_coef} must be >= 0",
        )
        require(
            self.deliberation_cost >= 0,
            f"agent.deliberation_cost={self.deliberation_cost} must be >= 0",
        )


# Imitation: BC, DAgger, AggreVaTeD (agents/bc.py, dagger.py, aggrevated.py)


@dataclass(frozen=True)
class BCConfig(ImitationConfig):
    """BC's keys on top of `ImitationConfig`."""

    HYPERPARAMETERS: ClassVar[tuple[str, ...]] = ("learning_rate", "max_grad_norm")

    name: str = "bc"
    expert_episodes: int = 10  # the dataset: this many whole expert episodes
    loss: str = "nll"  # nll: −log π(a*|s) (cross-entropy for Discrete); mse: Box only

    def __post_init__(self) -> None:
        super().__post_init__()
        require(
            self.expert_episodes >= 1, f"agent.expert_episodes={self.expert_episodes} must be >= 1"
        )


@dataclass(frozen=True)
class DAggerConfig(MixtureConfig):
    """DAgger's keys on top of `MixtureConfig` (β = `mixture`)."""

    HYPERPARAMETERS: ClassVar[tuple[str, ...]] = (
        "learning_rate",
        "max_grad_norm",
        "mixture",
        "mixture_decay",
    )

    name: str = "dagger"
    dataset_size: int = 100_000  # labelled states kept (per seed)
    loss: str = "nll"  # nll: −log π(a*|s) (cross-entropy for Discrete); mse: Box only

    def __post_init__(self) -> None:
        super().__post_init__()
        require(self.dataset_size >= 1, f"agent.dataset_size={self.dataset_size} must be >= 1")


NORMALIZATIONS = ("baseline", "minmax")


ESTIMATORS = ("likelihood_ratio", "reparameterized")


@dataclass(frozen=True)
class AggreVaTeDConfig(MixtureConfig):
    """AggreVaTeD's keys on top of `MixtureConfig` (α = `mixture`); defaults follow the
    original experiment's suggested settings (`../shared/reference/original-experiments.md`)."""

    HYPERPARAMETERS: ClassVar[tuple[str, ...]] = (
        "learning_rate",
        "max_grad_norm",
        "mixture",
        "mixture_decay",
        "entropy_coef",
        "kl_step",
    )

    name: str = "aggrevated"
    mixture_decay: float = 0.9
    learner_samples: bool = True  # a policy gradient rolls the learner's own π in
    log_std_max: float = 1.0
    learning_rate: float = 3e-4
    rollin_steps: int = 50  # many small iterations: each keeps only its own states
    gradient_steps: int = 50
    action_samples: int = 8  # Box actions scored per state by a Q* expert
    normalization: str = "baseline"
    estimator: str = "reparameterized"  # Box actions with a Q* expert, or "likelihood_ratio"
    entropy_coef: float = 0.0
    natural_gradient: bool = False
    kl_step: float = 0.01  # the natural-gradient step's KL size
    # Keep every iteration's states (AggreVaTe's follow-the-leader) instead of the paper's
    # online step on the iteration's own; null: wherever the expert scores actions by Q*.
    aggregate: bool | None = None
    dataset_size: int = 100_000  # states kept when aggregating (per seed)

    def __post_init__(self) -> None:
        super().__post_init__()
        require(
            self.normalization in NORMALIZATIONS,
            f"agent.normalization={self.normalization!r} is not one of {', '.join(NORMALIZATIONS)}",
        )
        require(
            self.estimator in ESTIMATORS,
            f"agent.estimator={self.estimator!r} is not one of {', '.join(ESTIMATORS)}",
        )
        require(
            self.action_samples >= 2 or self.normalization != "baseline",
            f"agent.action_samples={self.action_samples}: the baseline is the mean over a "
            f"state's sampled actions, so it needs >= 2 (or normalization=minmax)",
        )
        require(
            self.action_samples >= 1, f"agent.action_samples={self.action_samples} must be >= 1"
        )
        require(self.entropy_coef >= 0, f"agent.entropy_coef={self.entropy_coef} must be >= 0")
        require(
            not (self.aggregate and self.natural_gradient),
            "agent.aggregate=true fits every kept state with Adam; "
            "agent.natural_gradient=true takes one step on the iteration's own states: pick one",
        )
        require(self.dataset_size >= 1, f"agent.dataset_size={self.dataset_size} must be >= 1")
        require(self.kl_step > 0, f"agent.kl_step={self.kl_step} must be > 0")


# Hybrid actions: P-DQN, PA-DDPG, HyAR (agents/pdqn.py, paddpg.py, hyar.py)


@dataclass(frozen=True)
class PDQNConfig(EpsilonGreedyConfig):
    """P-DQN's keys on top of `EpsilonGreedyConfig`; defaults are the MP-DQN reference's Platform
    settings (`agents/pdqn.py`'s docstring)."""

    NUM_ENVS: ClassVar[int] = 1  # one env and one update per env step, as the reference
    # Values a grid may vary in one program (jaxrl/hyper.py): they change no array shape.
    HYPERPARAMETERS: ClassVar[tuple[str, ...]] = (
        "gamma",
        "q_lr",
        "actor_lr",
        "q_tau",
        "actor_tau",
        "eps_start",
        "eps_end",
        "exploration_noise",
        "max_grad_norm",
        "reward_scale",
    )

    name: str = "pdqn"
    multi_pass: bool = False  # MP-DQN: K passes, pass k seeing only choice k's parameters
    # HyAR's PDQN-TD3: two Q-networks, the target the smaller of their max over choices
    twin_q: bool = False
    # True: an unsquashed actor bounded by inverting gradients (the reference's); False: tanh
    inverting_gradients: bool = True
    buffer_size: int = 10_000
    batch_size: int = 128
    learning_starts: int = 500
    gamma: float = 0.9
    hidden_sizes: tuple[int, ...] = (128,)
    q_lr: float = 1e-3
    actor_lr: float = 1e-4
    q_tau: float = 0.1  # Polyak: target ← τ·online + (1 − τ)·target, after every update
    actor_tau: float = 0.001
    eps_start: float = 1.0
    eps_end: float = 0.01
    exploration_steps: int = 2_500  # env steps (all envs) over which ε falls linearly
    exploration_noise: float = 0.1  # σ of the Gaussian on the chosen parameters, [−1, 1] units
    max_grad_norm: float = 10.0  # global-norm clipping of each network's gradient; 0: off
    reward_scale: float = 1.0  # × the reward in the TD target (MP-DQN's Goal script: 1/50)
    # Add the env's hand-made parameter policy, a fixed linear map of the observation, to x(s)
    # (MP-DQN's passthrough layer; envs.hybrid.parameter_prior: Goal-v0 has one).
    parameter_prior: bool = False

    def __post_init__(self) -> None:
        super().__post_init__()
        require(self.q_lr > 0, f"agent.q_lr={self.q_lr} must be > 0")
        require(self.actor_lr > 0, f"agent.actor_lr={self.actor_lr} must be > 0")
        for key in ("q_tau", "actor_tau"):
            value = getattr(self, key)
            require(0 < value <= 1, f"agent.{key}={value} must be in (0, 1]")
        require(
            self.exploration_noise >= 0,
            f"agent.exploration_noise={self.exploration_noise} must be >= 0",
        )
        require(self.max_grad_norm >= 0, f"agent.max_grad_norm={self.max_grad_norm} must be >= 0")
        require(self.reward_scale > 0, f"agent.reward_scale={self.reward_scale} must be > 0")


@dataclass(frozen=True)
class PADDPGConfig(DeterministicConfig, EpsilonGreedyConfig):
    """The deterministic learner's keys and the ε schedule, at the PA-DDPG reference's Platform
    settings (`agents/paddpg.py`'s docstring)."""

    NUM_ENVS: ClassVar[int] = 1  # one env and one update per env step, as the reference
    # Values a grid may vary in one program (jaxrl/hyper.py): they change no array shape.
    HYPERPARAMETERS: ClassVar[tuple[str, ...]] = (
        *DeterministicConfig.HYPERPARAMETERS,
        "eps_start",
        "eps_end",
    )

    name: str = "paddpg"
    twin_critics: bool = False
    policy_delay: int = 1
    target_noise: float = 0.0
    inverting_gradients: bool = True
    max_grad_norm: float = 10.0
    buffer_size: int = 10_000
    batch_size: int = 32
    learning_starts: int = 128
    gamma: float = 0.9
    hidden_sizes: tuple[int, ...] = (256, 128)
    actor_lr: float = 1e-4
    critic_lr: float = 1e-3
    tau: float = 0.01
    eps_start: float = 1.0
    eps_end: float = 0.01
    exploration_steps: int = 2_500
    exploration_noise: float = 0.1


SCHEDULE_UNITS = ("env_steps", "episodes")
# Where the relabelling check decodes a stored z_x from (agents/hyar.py's departure (4)).
RELABEL_CHECK_RANGES = ("encoder", "actor")


@dataclass(frozen=True)
class HyARConfig(DeterministicConfig):
    """TD3's keys on latents plus the representation's; defaults are the HyAR reference's
    Platform settings (`agents/hyar.py`'s docstring), its episode counts turned into env steps."""

    NUM_ENVS: ClassVar[int] = 1  # one env and one update per env step, as the reference
    # Values a grid may vary in one program (jaxrl/hyper.py): they change no array shape.
    HYPERPARAMETERS: ClassVar[tuple[str, ...]] = (
        *DeterministicConfig.HYPERPARAMETERS,
        "exploration_noise_start",
        "vae_lr",
        "dynamics_weight",
        "reconstruction_weight",
        "kl_weight",
        "range_percent",
        "relabel_threshold",
        "relabel_noise",
    )

    name: str = "hyar"
    buffer_size: int = 200_000
    # 0: TD3 draws from the whole buffer, warm-up included. N: TD3 keeps its own buffer as the
    # reference does, drawing only from the newest N of its own transitions; the VAE still
    # draws from the whole buffer.
    td3_buffer_size: int = 0
    # True: one more TD3 update as each episode starts, besides one per env step, as the
    # reference's loop does (many more updates per env step where episodes are short: Goal).
    update_at_episode_start: bool = False
    # `anneal_lr` (OffPolicyConfig's) takes TD3's actor and critic rates to 0; the VAE's stays.
    batch_size: int = 128
    learning_starts: int = 11_000  # env steps of random actions: ~5,000 Platform episodes
    target_noise: float = 0.1
    inverting_gradients: bool = True  # on the actor's tanh outputs (the reference's)
    max_grad_norm: float = 10.0  # the actor's gradient only, as the reference; 0: off
    exploration_noise_start: float = 1.0  # σ on the latent when TD3 starts
    exploration_noise: float = 0.1  # σ after `exploration_steps`
    # What the exploration and VAE schedules count. "env_steps": `exploration_steps`,
    # `vae_train_after` and `vae_every` below. "episodes": the episodes TD3's policy has ended
    # since the VAE's pre-training, as the reference counts them (`exploration_episodes`,
    # `vae_train_after_episodes`, `vae_every_episodes`).
    schedule_unit: str = "env_steps"
    # env steps after the warm-up over which σ falls linearly: ~1,000 early Platform episodes
    exploration_steps: int = 3_000
    exploration_episodes: int = 1_000  # the same in episodes (the reference's)
    discrete_latent_size: int = 6  # z_k, the size of a choice embedding
    parameter_latent_size: int = 6  # z_x
    vae_hidden_size: int = 256
    vae_lr: float = 1e-4
    vae_batch_size: int = 64
    vae_pretrain_steps: int = 5_000  # VAE steps on the warm-up's transitions before TD3
    vae_train_after: int = 3_000  # env steps after the warm-up before the periodic VAE steps
    vae_every: int = 25  # env steps per periodic VAE step (~10 episodes); divides iteration_steps
    # In episodes (the reference's): one VAE step after every `vae_every_episodes`-th episode
    # from the `vae_train_after_episodes`-th on.
    vae_train_after_episodes: int = 1_000
    vae_every_episodes: int = 10
    # False: every VAE step is Adam's first, about vae_lr·sign(gradient) (the reference's)
    vae_adam_moments: bool = True
    dynamics_weight: float = 1.0
    reconstruction_weight: float = 2.0
    kl_weight: float = 0.5
    range_samples: int = 5_000  # stored transitions the latent range is measured on
    range_percent: float = 2.0  # the range: this percentile and 100 minus it, per dimension
    relabel_threshold: float = 5.0  # z_x is kept while its dynamics error < this × the VAE's
    relabel_noise: float = 0.1  # σ of the noise on a relabelled z_k's embedding
    # "encoder": the check decodes z_x mapped into the encoder's range, as when acting; "actor":
    # the actor's output as stored, unmapped (the reference's).
    relabel_check_range: str = "encoder"

    def __post_init__(self) -> None:
        super().__post_init__()
        for key in ("discrete_latent_size", "parameter_latent_size", "vae_hidden_size"):
            value = getattr(self, key)
            require(value >= 1, f"agent.{key}={value} must be >= 1")
        require(
            self.schedule_unit in SCHEDULE_UNITS,
            f"agent.schedule_unit='{self.schedule_unit}' is not one of: "
            f"{', '.join(SCHEDULE_UNITS)}",
        )
        require(
            self.relabel_check_range in RELABEL_CHECK_RANGES,
            f"agent.relabel_check_range='{self.relabel_check_range}' is not one of: "
            f"{', '.join(RELABEL_CHECK_RANGES)}",
        )
        for key in ("vae_batch_size", "vae_every", "vae_every_episodes"):
            value = getattr(self, key)
            require(value >= 1, f"agent.{key}={value} must be >= 1")
        require(
            self.learning_starts >= 1,
            f"agent.learning_starts={self.learning_starts} must be >= 1: the VAE pre-trains on "
            "the warm-up's transitions",
        )
        require(
            0 <= self.td3_buffer_size <= self.buffer_size,
            f"agent.td3_buffer_size={self.td3_buffer_size} must be in [0, agent.buffer_size="
            f"{self.buffer_size}] (0: TD3 draws from the whole buffer)",
        )
        require(self.range_samples >= 2, f"agent.range_samples={self.range_samples} must be >= 2")
        for key in (
            "vae_pretrain_steps",
            "vae_train_after",
            "exploration_steps",
            "exploration_episodes",
            "vae_train_after_episodes",
        ):
            value = getattr(self, key)
            require(value >= 0, f"agent.{key}={value} must be >= 0")
        require(
            self.schedule_unit == "episodes" or self.iteration_steps % self.vae_every == 0,
            f"agent.vae_every={self.vae_every} must divide agent.iteration_steps="
            f"{self.iteration_steps}: each iteration ends with its periodic VAE steps",
        )
        require(self.vae_lr > 0, f"agent.vae_lr={self.vae_lr} must be > 0")
        require(
            not (self.anneal_lr and self.update_at_episode_start),
            "agent.anneal_lr=true needs agent.update_at_episode_start=false: the annealing "
            "horizon counts one update per env step",
        )
        require(
            0 <= self.range_percent < 50,
            f"agent.range_percent={self.range_percent} must be in [0, 50)",
        )
        for key in (
            "exploration_noise_start",
            "dynamics_weight",
            "reconstruction_weight",
            "kl_weight",
            "relabel_threshold",
            "relabel_noise",
        ):
            value = getattr(self, key)
            require(value >= 0, f"agent.{key}={value} must be >= 0")
