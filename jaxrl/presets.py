"""Settings and budgets per agent and env, picked for the user as RL Baselines3 Zoo's per-env
hyperparameter files are: `python -m jaxrl.run agent=dqn env=ALE/Pong-v5` trains with the Atari
settings, not the CartPole ones the agent's defaults are tuned for.

`preset=auto` (the default) picks the preset of the chosen agent whose env patterns match the
env; `preset=<name>` picks one by name (`preset=atari` on another pixel env); `preset=none`
keeps the agent's bare defaults and the 1e6-step budget. A preset is a list of overrides placed
before the user's own, so any key the user sets wins, key by key. The run's first output line
names the preset and the values it set (`announce`); `config.json` records its name.

Each preset says where its values come from and what they reach (a benchmark or test of this
repository, or the published source they follow); an agent × env without a preset runs at the
agent's defaults and says so.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass
from typing import Any

import yaml

from jaxrl.config import ConfigError, RunConfig, did_you_mean, flatten, to_dict

AUTO, NONE = "auto", "none"


@dataclass(frozen=True)
class Preset:
    name: str  # what `preset=<name>` selects, unique per agent
    agent: str
    envs: tuple[str, ...]  # env ids it is picked for, as shell patterns (`ALE/*`)
    settings: tuple[str, ...]  # overrides, `key=value`
    source: str  # where the values come from and what they reach

    @property
    def label(self) -> str:
        return f"{self.agent}/{self.name}"


def _preset(
    name: str,
    agents: tuple[str, ...],
    env_ids: tuple[str, ...],
    settings: tuple[str, ...],
    source: str,
) -> tuple[Preset, ...]:
    return tuple(Preset(name, agent, env_ids, settings, source) for agent in agents)


CARTPOLE = ("CartPole-v1",)
PENDULUM = ("Pendulum-v1",)
ATARI = ("ALE/*",)
# Gymnasium MuJoCo locomotion through the host bridge, any version.
MUJOCO = ("gym/HalfCheetah-v*", "gym/Hopper-v*", "gym/Walker2d-v*", "gym/Ant-v*")
# TD3 as Fujimoto et al. 2018 ran it for their published curves (the paper's appendix): 400-300
# networks, Adam 1e-3, batch 100; the agent's defaults are their repository's later ones.
TD3_PAPER = (
    "agent.hidden_sizes=[400,300]",
    "agent.actor_lr=1e-3",
    "agent.critic_lr=1e-3",
    "agent.batch_size=100",
)

# PPO on Pendulum-v1 as benchmarks/ppoc.py runs PPO and PPOC side by side.
PPO_PENDULUM = (
    "env.num_envs=8",
    "agent.num_steps=256",
    "agent.num_minibatches=8",
    "agent.update_epochs=10",
    "agent.gamma=0.9",
    "agent.learning_rate=1e-3",
    "agent.ent_coef=0.0",
    "agent.squash_actions=true",
)
# PPO on Brax's Ant as Brax's training notebook trains it (google/brax 0b96d05,
# notebooks/training.ipynb: discount 0.97, Adam 3e-4 constant, clip 0.3, no gradient clipping,
# tanh-squashed actions), its 4,096 envs × 16 unrolls of 5 steps as 2,048 envs × 160 steps in
# 32 minibatches of 5 steps, so that a minibatch holds Brax's 10,240 samples
# (benchmarks/brax_trainers.py runs it beside Brax's ppo.train).
PPO_BRAX_ANT = (
    "env.num_envs=2048",
    "agent.num_steps=160",
    "agent.num_minibatches=32",
    "agent.gamma=0.97",
    "agent.learning_rate=3e-4",
    "agent.clip_eps=0.3",
    "agent.clip_value=false",
    "agent.anneal_lr=false",
    "agent.max_grad_norm=0",
    "agent.adam_eps=1e-8",
    "agent.return_normalization=false",
    "agent.squash_actions=true",
)
# ERL's Pendulum learner, faster than the paper's MuJoCo DDPG (benchmarks/erl_pendulum.py's
# test config).
ERL_PENDULUM = (
    "agent.hidden_sizes=[64,64]",
    "agent.actor_lr=1e-3",
    "agent.critic_lr=1e-3",
    "agent.tau=0.005",
    "agent.sync_period=1",
    "agent.episodes_per_member=3",
    "agent.updates_per_step=0.5",
    "agent.buffer_size=100000",
)
# ERL's DDPG learner (Khadka & Tumer 2018's settings, the ERL agent's defaults) set on
# agent=ddpg: what benchmarks/erl_mujoco.py runs beside ERL.
DDPG_ERL_LEARNER = (
    "agent.hidden_sizes=[128,128]",
    "agent.activation=tanh",
    "agent.layer_norm=true",
    "agent.actor_lr=5e-5",
    "agent.critic_lr=5e-4",
    "agent.tau=0.001",
    "agent.batch_size=128",
    "agent.buffer_size=1000000",
    "agent.gamma=0.99",
    "agent.exploration_noise=0.1",
    "agent.learning_starts=640",
)
# MP-DQN's Goal settings (github.com/cycraig/MP-DQN, eec13eb, run_goal_pdqn.py): γ 0.95, replay
# 20,000, learning from 128 transitions, one hidden layer of 256, Adam 1e-5 for x(s), rewards
# / 50, gradient norms clipped at 1, its hand-made parameter policy as x(s)'s prior; its parameter
# noise (Ornstein-Uhlenbeck, σ 1e-4: stationary σ ~2e-4 in [-1, 1] units) as none: with the
# agent's Gaussian σ 0.1 instead, success fell from 0.51 at 45k to 0.22 at 300k env steps; without
# noise it stays at 0.59-0.67 from 90k on (benchmarks/results/hybrid.md).
PDQN_GOAL = (
    "agent.gamma=0.95",
    "agent.buffer_size=20000",
    "agent.learning_starts=128",
    "agent.hidden_sizes=[256]",
    "agent.actor_lr=1e-5",
    "agent.reward_scale=0.02",
    "agent.max_grad_norm=1",
    "agent.parameter_prior=true",
    "agent.exploration_noise=0",
)


def _episodes_schedule(episode_steps: int) -> tuple[str, ...]:
    """HyAR's Hard Move and Catch Point scripts (main_embedding_hard_move_td3.py,
    main_embedding_direction_catch_td3.py) count in episodes: 5,000 random ones, σ 1 → 0.1 over
    1,000, a VAE step every 10 from episode 1,000; here in env steps at the episode cap, the VAE
    step every 250 env steps (a divisor of the 1,000-step iteration, as it must be)."""
    return (
        f"agent.learning_starts={5000 * episode_steps}",
        f"agent.exploration_steps={1000 * episode_steps}",
        f"agent.vae_train_after={1000 * episode_steps}",
        "agent.vae_every=250",
    )


# HyAR's reference scripts: github.com/TJU-DRL-LAB/self-supervised-rl, commit ece9562,
# RL_with_Action_Representation/HyAR/HyAR_RL/main_embedding_*_td3.py.

PRESETS: tuple[Preset, ...] = (
    *_preset(
        "cartpole",
        ("es",),
        CARTPOLE,
        ("budget.env_steps=1000000",),
        "the reference ES CartPole experiment's settings (the agent's defaults): 500 from ~126k "
        "env steps (README benchmarks)",
    ),
    *_preset(
        "racecar",
        ("es",),
        ("bullet/RaceCar-v0",),
        (
            "budget.env_steps=200000",
            "agent.population_size=16",
            "agent.episodes_per_member=1",
            "env.max_episode_steps=600",
            "agent.sigma=0.05",
            "agent.learning_rate=0.03",
        ),
        "a full lap (45.1 m) at generation 13 on 3 of 3 seeds, 73k-100k env steps "
        "(benchmarks/results/es_racecar.md)",
    ),
    *_preset(
        "cartpole",
        ("dqn",),
        CARTPOLE,
        ("budget.env_steps=60000",),
        "the agent's defaults (RL Baselines3 Zoo's CartPole DQN, tuned here); 500 at 60k env "
        "steps (benchmarks/results/dqn_cartpole.md)",
    ),
    *_preset(
        "cartpole",
        ("ppo",),
        CARTPOLE,
        ("budget.env_steps=500000",),
        "PureJaxRL's CartPole PPO (the agent's defaults) at its budget; 500 "
        "(benchmarks/results/ppo_purejaxrl.md)",
    ),
    *_preset(
        "cartpole",
        ("a2c",),
        CARTPOLE,
        ("budget.env_steps=100000", "env.num_envs=8"),
        "mean final 352 over 4 seeds at 100k env steps (tests/agents/test_a2c.py)",
    ),
    *_preset(
        "cartpole",
        ("reinforce",),
        CARTPOLE,
        ("budget.env_steps=250000", "env.num_envs=8"),
        "the reference PyBullet cart-pole experiment's settings; mean final 415 over 4 seeds at "
        "250k env steps (benchmarks/results/learning_tests.md)",
    ),
    *_preset(
        "cartpole",
        ("option_critic",),
        CARTPOLE,
        (
            "budget.env_steps=250000",
            "agent.network=deep",
            "agent.lr_decay_steps=250000",
        ),
        "the deep option-critic on CartPole as the README runs it (8 seeds, 250k env steps)",
    ),
    *_preset(
        "pendulum",
        ("sac", "td3", "ddpg"),
        PENDULUM,
        ("budget.env_steps=20000",),
        "RL Baselines3 Zoo's Pendulum budget (SAC -157, TD3 -152 there); -134 to -131 at 20k "
        "env steps (benchmarks/results/offpolicy_pendulum.md)",
    ),
    *_preset(
        "halfcheetah",
        ("td3",),
        ("gym/HalfCheetah-v*",),
        ("budget.env_steps=1000000", *TD3_PAPER),
        "the TD3 paper's settings; mean 8,039 over 3 seeds at 300k env steps (paper 7,697), above "
        "the agent's defaults (benchmarks/results/offpolicy_mujoco.md)",
    ),
    *_preset(
        "hopper",
        ("td3",),
        ("gym/Hopper-v*",),
        ("budget.env_steps=1000000", *TD3_PAPER),
        "the TD3 paper's settings; mean 3,197 over 4 seeds at 300k env steps (paper 2,410), the "
        "agent's defaults 1,503 on the same seeds (benchmarks/results/"
        "offpolicy_mujoco_td3_hopper.md)",
    ),
    *_preset(
        "mujoco",
        ("sac", "td3"),
        MUJOCO,
        ("budget.env_steps=1000000",),
        "RL Baselines3 Zoo's MuJoCo budget with its SAC settings (the agents' defaults); at 300k "
        "env steps SAC 6,977 on HalfCheetah-v5 (3 seeds) and 2,187 on Hopper-v5 (3) "
        "(benchmarks/results/offpolicy_mujoco.md)",
    ),
    *_preset(
        "mujoco",
        ("ddpg",),
        MUJOCO,
        ("budget.env_steps=1000000", *DDPG_ERL_LEARNER),
        "ERL's DDPG learner settings (the ERL paper's) at RL Baselines3 Zoo's MuJoCo budget; "
        "mean 3,772 over 3 seeds on HalfCheetah-v5 at 154k env steps "
        "(benchmarks/results/erl_mujoco.md)",
    ),
    *_preset(
        "mujoco",
        ("erl",),
        MUJOCO,
        ("budget.env_steps=1000000",),
        "the ERL paper's settings (the agent's defaults) at RL Baselines3 Zoo's MuJoCo budget; "
        "mean 2,778 over 3 seeds on HalfCheetah-v5 at 154k env steps, below its DDPG learner "
        "alone (3,772; benchmarks/results/erl_mujoco.md)",
    ),
    *_preset(
        "pendulum",
        ("erl",),
        PENDULUM,
        ("budget.env_steps=62000", *ERL_PENDULUM),
        "a faster learner than the paper's MuJoCo DDPG; -134 at 62k env steps "
        "(benchmarks/results/erl_pendulum.md, test config)",
    ),
    *_preset(
        "pendulum",
        ("ppo", "ppoc"),
        PENDULUM,
        ("budget.env_steps=200000", *PPO_PENDULUM),
        "PPO -211, PPOC -264 (2 seeds) at 200k env steps (benchmarks/results/ppoc.md)",
    ),
    *_preset(
        "ant",
        ("ppo",),
        ("brax/ant",),
        ("budget.env_steps=50000000", *PPO_BRAX_ANT),
        "Brax's training notebook's Ant settings and budget; on the spring backend 1,776 at 9.8M "
        "env steps (mean of 3 seeds, each above 1,500), where Brax's ppo.train with the same "
        "settings reaches 905 (benchmarks/results/brax_trainers_ppo.md)",
    ),
    *_preset(
        "pendulum",
        ("bc", "dagger", "aggrevated"),
        PENDULUM,
        ("budget.env_steps=32000",),
        "DAgger and AggreVaTeD 0.94-0.95 of a SAC expert's score at 32k expert-labelled steps "
        "(benchmarks/results/imitation.md)",
    ),
    *_preset(
        "platform",
        ("pdqn", "paddpg"),
        ("Platform-v0",),
        ("budget.env_steps=100000",),
        "the agent's defaults (MP-DQN's Platform settings) at this CPU's budget "
        "(benchmarks/results/hybrid.md)",
    ),
    *_preset(
        "goal",
        ("pdqn",),
        ("Goal-v0",),
        ("budget.env_steps=100000", *PDQN_GOAL),
        "MP-DQN's Goal settings (run_goal_pdqn.py); success 0.58 at 100k env steps, 0.79 with "
        "agent.multi_pass=true (benchmarks/results/hybrid.md)",
    ),
    *_preset(
        "hybrid",
        ("pdqn", "paddpg"),
        ("Goal-v0", "HardMove-v0", "CatchPoint-v0"),
        ("budget.env_steps=200000",),
        "the agent's defaults at this CPU's budget (benchmarks/results/hybrid.md)",
    ),
    *_preset(
        "platform",
        ("hyar",),
        ("Platform-v0",),
        # Twice the reference's final exploration noise and a third of its actor learning rate:
        # its settings leave the greedy policy's success swinging between evaluations.
        ("budget.env_steps=200000", "agent.exploration_noise=0.2", "agent.actor_lr=0.0001"),
        "HyAR's Platform settings (the agent's defaults) at its budget, but for σ 0.2 and actor "
        "learning rate 1e-4; paper 0.98 (mean return); success over 15 seeds 0.94 at the final "
        "evaluation and 0.96 over the last quarter, against 0.69 and 0.83 with the reference's "
        "settings on 10 (benchmarks/results/hybrid.md)",
    ),
    *_preset(
        "goal",
        ("hyar",),
        ("Goal-v0",),
        # main_embedding_goal_td3.py: 20,000 random episodes (~1.04 env steps each here), then
        # 300k env steps of TD3, which its budget counts alone; TD3's buffer holds 1e5 of its own
        # steps, the VAE's every step of the run.
        (
            "budget.env_steps=321000",
            "agent.learning_starts=21000",
            "agent.buffer_size=321000",
            "agent.td3_buffer_size=100000",
        ),
        "HyAR's Goal warm-up, budget and buffer size, its other settings the agent's defaults; "
        "paper 0.78, 0.70 here (0.66 with one shared 100k buffer; benchmarks/results/"
        "hybrid.md)",
    ),
    *_preset(
        "hard-move",
        ("hyar",),
        ("HardMove-v0",),
        ("budget.env_steps=1000000", *_episodes_schedule(30)),
        "HyAR's Hard Move schedules and budget; paper n=8 0.89, 0.81 here at 650k env steps, "
        "0.89 over the last quarter; n=4 0.93 and n=6 0.92, 0.94 and 0.93 (5 seeds each) "
        "here at 400k; n=10 0.75, 0.73 here at 1M (5 seeds; benchmarks/results/hybrid.md)",
    ),
    *_preset(
        "catch-point",
        ("hyar",),
        ("CatchPoint-v0",),
        # main_embedding_direction_catch_td3.py: z_k of 2 × 2 and z_x of 2 × 1 + 2 dimensions
        # (the agent's 6 and 6 are every other env's).
        (
            "budget.env_steps=1000000",
            *_episodes_schedule(25),
            "agent.discrete_latent_size=4",
            "agent.parameter_latent_size=4",
        ),
        "HyAR's Catch Point latent sizes, schedules and budget; paper 0.90, 0.90 here at 500k "
        "env steps, 0.85 over the last quarter (benchmarks/results/hybrid.md)",
    ),
    *_preset(
        "pixel-cartpole",
        ("dqn",),
        ("pixel/CartPole-v1",),
        (
            "budget.env_steps=1000000",
            "agent.learning_rate=2.5e-4",
            "agent.anneal_lr=false",
            "agent.batch_size=32",
            "agent.learning_starts=5000",
            "agent.train_freq=1",
            "agent.gradient_steps=1",
            "agent.target_update_period=1000",
            "agent.exploration_steps=20000",
            "agent.eps_end=0.02",
            "agent.frame_storage=once",
            "agent.n_step=3",
            "agent.dueling=true",
        ),
        "the Nature DQN's network on 4 envs, one update per 4 env steps, with Rainbow's 3-step "
        "returns and dueling head; ~450 at best (449 over 200 greedy episodes after 1.5M env "
        "steps: benchmarks/results/dqn_pixel_cartpole_lowlr.md), as frames at frame skip 4 lack "
        "the last action; with env.kwargs={show_last_action:true} (it drawn in each frame's "
        "bottom row) 457 over 3 seeds (435-481, 100 greedy episodes each) at 143k env steps "
        "(benchmarks/results/dqn_pixel_cartpole_action_seeds.md)",
    ),
    *_preset(
        "atari",
        ("dqn",),
        ATARI,
        (
            "budget.env_steps=10000000",
            "env.num_envs=1",
            "agent.train_freq=4",
            "agent.gradient_steps=1",
            "agent.learning_rate=1e-4",
            "agent.batch_size=32",
            "agent.buffer_size=100000",
            "agent.learning_starts=100000",
            "agent.target_update_period=250",
            "agent.exploration_steps=1000000",
            "agent.eps_end=0.01",
            "agent.loss=huber",
            "agent.max_grad_norm=10",
            "agent.anneal_lr=false",
            "agent.double_q=false",
            "agent.iteration_steps=10000",
            "agent.frame_storage=once",
        ),
        "RL Baselines3 Zoo's Atari DQN (1e7 steps; its target refresh every 1,000 env steps is "
        "250 updates here)",
    ),
    *_preset(
        "atari",
        ("ppo",),
        ATARI,
        (
            "budget.env_steps=10000000",
            "env.num_envs=8",
            "agent.num_steps=128",
            "agent.num_minibatches=4",
            "agent.update_epochs=4",
            "agent.learning_rate=2.5e-4",
            "agent.clip_eps=0.1",
            "agent.ent_coef=0.01",
            "agent.shared_torso=true",
            "agent.return_normalization=false",
        ),
        "CleanRL's ppo_atari.py (8 envs x 128 steps, 4 minibatches x 4 epochs, clip 0.1, one "
        "Nature CNN for policy and value, 1e7 steps)",
    ),
)


def choose(agent: str, env_id: str, choice: str) -> Preset | None:
    """The preset `preset=<choice>` gives `agent` on `env_id`; None: the agent's defaults."""
    if choice == NONE:
        return None
    mine = [p for p in PRESETS if p.agent == agent]
    if choice == AUTO:
        return next((p for p in mine if any(fnmatch.fnmatchcase(env_id, e) for e in p.envs)), None)
    named = next((p for p in mine if p.name == choice), None)
    if named is None:
        names = [AUTO, NONE, *dict.fromkeys(p.name for p in mine)]
        raise ConfigError(
            f"preset={choice} is not a preset of agent={agent}; {did_you_mean(choice, names)}"
            f"valid: {', '.join(names)}"
        )
    return named


def key(setting: str) -> str:
    return setting.partition("=")[0].lstrip("+~")


def value(setting: str) -> Any:
    """The value as the config holds it (YAML reads `1e-4` as a string; Hydra as a float)."""
    text = setting.partition("=")[2]
    parsed = yaml.safe_load(text)
    if isinstance(parsed, str):
        try:
            return float(text)
        except ValueError:
            return parsed
    return parsed


def in_effect(preset: Preset, config: dict[str, Any]) -> list[str]:
    """The settings of `preset` that a run's flat config (`{"agent.gamma": 0.9}`) still holds:
    those the user did not override."""
    held = []
    for setting in preset.settings:
        mine = config.get(key(setting))
        wanted = value(setting)
        same = list(mine) == list(wanted) if isinstance(wanted, list) else mine == wanted
        if same and mine is not None:
            held.append(setting)
    return held


def announce(cfg: RunConfig) -> str:
    """A run's first output line: the preset, what it set, and how to change it."""
    agent, env_id, config = cfg.agent.name, cfg.env.id, flatten(to_dict(cfg))
    preset = None if cfg.preset == NONE else choose(agent, env_id, cfg.preset)
    if preset is None:
        fitting = choose(agent, env_id, AUTO)
        why = (
            f"preset=none (not {fitting.label})"
            if fitting
            else f"no preset for agent={agent} on env={env_id}"
        )
        return f"{why}: the agent's defaults, budget.env_steps={cfg.budget.env_steps:,.0f}"
    held = " ".join(in_effect(preset, config)) or "every setting overridden"
    return (
        f"preset {preset.label}: {held} -- {preset.source}; your overrides win, preset=none for "
        f"the agent's defaults"
    )
