"""The imitation driver (jaxrl/imitation.py) against hand-computed numbers: mixture schedules,
the roll-in's expert share and labels, BC's episode quota, the supervised losses, the KL of the
natural gradient, the experts' critics (Q* = min of twin critics); and its refusals of bad
experts, through the Python API and through the CLI (one line, exit status 2)."""

from __future__ import annotations

import json
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from cli_helpers import cli

import agents.bc
import envs
import jaxrl
from agents.aggrevated import AggreVaTeDConfig, normalized
from agents.bc import BCConfig, make_bc
from agents.dagger import DAggerConfig, make_dagger
from agents.sac import sac_networks
from jaxrl.cli import compose
from jaxrl.config import ConfigError, EnvConfig
from jaxrl.distributions import Categorical, TanhGaussian
from jaxrl.imitation import (
    Expert,
    Labels,
    MixtureConfig,
    Setup,
    expert_share,
    kl_divergence,
    learner_policy,
    load_expert,
    optimizer,
    supervised_loss,
)
from jaxrl.loop import Trainer
from jaxrl.policy import load_policy
from jaxrl.prng import make_key

EXPERT_ACTION = 1.5  # the stand-in expert's constant action on Pendulum's Box [-2, 2]


@pytest.fixture(scope="module")
def pendulum():
    return envs.make(EnvConfig("Pendulum-v1"))


def constant_expert(spec) -> Expert:
    """An expert that always pushes with EXPERT_ACTION and has no critic."""
    return Expert(
        run_dir="",
        agent="none",
        spec=spec,
        act=lambda obs: jnp.full((obs.shape[0], 1), EXPERT_ACTION, jnp.float32),
        action_value=None,
        state_value=None,
        gamma=0.99,
        eval_return=math.nan,
    )


@pytest.mark.parametrize(
    ("schedule", "expected"),
    [
        ("constant", [0.8, 0.8, 0.8, 0.8]),
        ("linear", [0.8, 0.6, 0.4, 0.0]),  # to 0 over 4 iterations, then 0
        ("exponential", [0.8, 0.4, 0.2, 0.8 / 32]),  # × 0.5 per iteration
        ("inverse", [0.8, 0.4, 0.8 / 3, 0.8 / 6]),  # 0.8 / (n + 1)
    ],
)
def test_mixture_schedules_by_hand(schedule, expected):
    cfg = MixtureConfig(
        mixture=0.8, mixture_schedule=schedule, mixture_decay=0.5, mixture_iterations=4
    )
    got = [float(expert_share(cfg, jnp.asarray(n))) for n in (0, 1, 2, 5)]
    np.testing.assert_allclose(got, expected, rtol=1e-6)


def setup_of(cfg, env, policy) -> Setup:
    return Setup(cfg, env, constant_expert(env.spec), policy, optimizer(cfg))


def train_steps(agent, env, iterations: int, seed: int = 0):
    """`iterations` train steps from a fresh state: the final state and each step's metrics."""
    state = agent.init(make_key(seed))
    env_state = env.reset(make_key(seed + 1))
    step = jax.jit(agent.train_step)
    history = []
    for i in range(iterations):
        state, env_state, metrics = step(state, env_state, make_key(100 + i))
        history.append(jax.tree.map(np.asarray, metrics))
    return state, history


def test_dagger_rolls_in_with_the_expert_at_rate_beta_and_labels_every_state(monkeypatch):
    """β = 0.3 constant, 64 envs × 50 steps = 3,200 choices: the expert's share is 0.3 within 4
    standard deviations (0.032); every stored label is the expert's action; the dataset holds
    every visited state."""
    env = envs.make(EnvConfig("Pendulum-v1"), num_envs=64)
    monkeypatch.setattr(agents.dagger, "load_expert", lambda cfg, spec: constant_expert(spec))
    cfg = DAggerConfig(
        expert="stand-in",
        mixture=0.3,
        mixture_schedule="constant",
        rollin_steps=50,
        hidden_sizes=(8,),
        gradient_steps=1,
    )
    state, (metrics,) = train_steps(make_dagger(cfg, env), env, 1)
    assert abs(float(metrics["expert_share"]) - 0.3) < 4 * math.sqrt(0.3 * 0.7 / 3200)
    assert int(metrics["dataset_size"]) == int(metrics["labelled_steps"]) == 3200
    labels = np.asarray(state.dataset.data.expert_action[:3200])
    np.testing.assert_array_equal(labels, EXPERT_ACTION)


def test_bc_keeps_exactly_its_expert_episodes(monkeypatch):
    """5 episodes with 2 envs of 200-step episodes and 200-step roll-ins: env 0 records the
    dataset's episodes 0, 2, 4 and env 1 episodes 1, 3, so the dataset grows 400, 800, 1000 and
    stays; the expert acts in both envs, then in env 0 alone (share 0.5), then in neither."""
    env = envs.make(EnvConfig("Pendulum-v1"), num_envs=2)
    monkeypatch.setattr(agents.bc, "load_expert", lambda cfg, spec: constant_expert(spec))
    cfg = BCConfig(expert="stand-in", expert_episodes=5, hidden_sizes=(8,), gradient_steps=1)
    _, history = train_steps(make_bc(cfg, env), env, 4)
    assert [int(m["dataset_size"]) for m in history] == [400, 800, 1000, 1000]
    assert [float(m["expert_share"]) for m in history] == [1.0, 1.0, 0.5, 0.0]
    assert [int(m["labelled_steps"]) for m in history] == [400, 800, 1000, 1000]


def test_supervised_losses_by_hand(pendulum):
    """nll: −log π(a*|s) of the tanh-Gaussian with a* = 1.5 on [−2, 2] → u = atanh(0.75);
    mse: (tanh μ − 0.75)²; both from the network's own (μ, log σ)."""
    cfg = BCConfig(hidden_sizes=(8,))
    policy = learner_policy(cfg, pendulum.spec)
    obs = jax.random.normal(make_key(0), (5, 3))
    params = policy.actor.init(make_key(1), obs[0])
    mean, log_std = (np.asarray(x, np.float64)[:, 0] for x in policy.actor.apply(params, obs))
    u = np.arctanh(0.75)
    log_normal = -0.5 * ((u - mean) / np.exp(log_std)) ** 2 - log_std - 0.5 * np.log(2 * np.pi)
    log_det = np.log(1 - np.tanh(u) ** 2)  # the box is [−1, 1] before the env's scaling
    labels = Labels(obs, jnp.full((5, 1), EXPERT_ACTION))
    setup = setup_of(cfg, pendulum, policy)
    nll = float(supervised_loss(setup, "nll", params, labels))
    mse = float(supervised_loss(setup, "mse", params, labels))
    np.testing.assert_allclose(nll, np.mean(-(log_normal - log_det)), rtol=1e-5)
    np.testing.assert_allclose(mse, np.mean((np.tanh(mean) - 0.75) ** 2), rtol=1e-5)


def test_cross_entropy_for_discrete_actions():
    cartpole = envs.make(EnvConfig("CartPole-v1"))
    policy = learner_policy(BCConfig(hidden_sizes=(8,)), cartpole.spec)
    obs = jax.random.normal(make_key(0), (4, 4))
    params = policy.actor.init(make_key(1), obs[0])
    logits = np.asarray(policy.actor.apply(params, obs), np.float64)
    actions = np.array([0, 1, 1, 0])
    log_p = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    labels = Labels(obs, jnp.asarray(actions, jnp.int32))
    setup = setup_of(BCConfig(), cartpole, policy)
    got = float(supervised_loss(setup, "nll", params, labels))
    np.testing.assert_allclose(got, -log_p[np.arange(4), actions].mean(), rtol=1e-5)


def test_kl_divergence_by_hand():
    """KL(N(0, 1) ‖ N(1, 2²)) = log 2 + (1 + 1)/8 − 1/2; KL([½, ½] ‖ [¼, ¾]) = ½ log 2 +
    ½ log ⅔."""
    unit = jnp.ones(1)
    old = TanhGaussian(jnp.zeros(1), jnp.zeros(1), -unit, unit)
    new = TanhGaussian(jnp.ones(1), jnp.log(2.0) * unit, -unit, unit)
    np.testing.assert_allclose(float(kl_divergence(old, new)), math.log(2) + 0.25 - 0.5, rtol=1e-6)
    p = Categorical(jnp.log(jnp.array([0.5, 0.5])))
    q = Categorical(jnp.log(jnp.array([0.25, 0.75])))
    expected = 0.5 * math.log(2) + 0.5 * math.log(2 / 3)
    np.testing.assert_allclose(float(kl_divergence(p, q)), expected, rtol=1e-6)


def test_aggrevated_normalisations_by_hand():
    """q [samples=2, batch=2] = [[1, 2], [3, 6]]: baseline subtracts each state's mean ([2, 4])
    and divides by the std of the centred batch, √2.5; minmax maps min 1 and max 6 to 0 and 1."""
    q = jnp.array([[1.0, 2.0], [3.0, 6.0]])
    baseline = normalized(AggreVaTeDConfig(), q, axis=0)
    s = math.sqrt(2.5)
    np.testing.assert_allclose(baseline, [[-1 / s, -2 / s], [1 / s, 2 / s]], rtol=1e-6)
    minmax = normalized(AggreVaTeDConfig(normalization="minmax"), q, axis=0)
    np.testing.assert_allclose(minmax, [[0.0, 0.2], [0.4, 1.0]], rtol=1e-6)


def test_the_expert_critic_is_the_minimum_of_its_twin_critics(pendulum_sac_expert):
    """Q*(s, a) of a SAC expert at env actions = min(Q₁, Q₂) at the normalised actions a / 2."""
    cfg = BCConfig(expert=str(pendulum_sac_expert.run_dir))
    expert = load_expert(cfg, envs.make(EnvConfig("Pendulum-v1")).spec)
    policy = load_policy(pendulum_sac_expert.run_dir)
    obs = jax.random.normal(make_key(0), (6, 3))
    action = jax.random.uniform(make_key(1), (6, 1), minval=-2.0, maxval=2.0)
    critics = policy.agent_state.learner.critic_params
    net = sac_networks(pendulum_sac_expert.cfg.agent, policy.spec).critics.net
    q1 = net.apply(jax.tree.map(lambda p: p[0], critics), obs, action / 2.0)
    q2 = net.apply(jax.tree.map(lambda p: p[1], critics), obs, action / 2.0)
    assert not np.allclose(q1, q2)
    np.testing.assert_allclose(expert.action_value(obs, action), np.minimum(q1, q2), rtol=1e-6)
    assert expert.gamma == 0.99


def test_bad_experts_are_refused_before_compiling(pendulum_sac_expert, tmp_path):
    expert = str(pendulum_sac_expert.run_dir)
    refusals = [
        (["agent=dagger", "env=Pendulum-v1"], r"agent 'dagger' needs agent.expert=<run directory>"),
        (["agent=dagger", "env=Pendulum-v1", f"agent.expert={tmp_path}"], r"no config.json there"),
        (
            ["agent=dagger", "env=MountainCarContinuous-v0", f"agent.expert={expert}"],
            r"was trained on env 'Pendulum-v1'; this run's env is 'MountainCarContinuous-v0'",
        ),
        (
            ["agent=bc", "env=Pendulum-v1", f"agent.expert={expert}", "agent.expert_seed=7"],
            r"seed 7 was not trained",
        ),
    ]
    for overrides, message in refusals:
        cfg = compose(overrides)
        with pytest.raises(ConfigError, match=message):
            Trainer(cfg)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            ["agent=aggrevated", "agent.expert={es}"],
            "agent 'aggrevated' needs an expert with a critic for its cost-to-go: "
            "agent.expert={es} is a 'es' run",
        ),
        (
            ["agent=dagger", "agent.expert={sac}", "agent.mixture=1.5"],
            "agent.mixture=1.5 must be in [0, 1]",
        ),
        (["agent=bc", "agent.expert={missing}"], "agent.expert={missing}: no config.json there"),
        (
            ["agent=bc", "agent.expert={sac}", "env=MountainCarContinuous-v0"],
            "agent.expert={sac} was trained on env 'Pendulum-v1'",
        ),
    ],
)
def test_bad_experts_through_the_cli(
    overrides, message, pendulum_sac_expert, es_pendulum_run, tmp_path
):
    """One line on stderr, exit status 2, no run directory written."""
    paths = {"sac": pendulum_sac_expert.run_dir, "es": es_pendulum_run, "missing": tmp_path / "no"}
    args = [o.format(**paths) for o in overrides]
    if not any(a.startswith("env=") for a in args):
        args.append("env=Pendulum-v1")
    proc = cli(*args, f"log.dir={tmp_path / 'run'}")
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and message.format(**paths) in lines[0], proc.stderr
    assert not (tmp_path / "run").exists()


@pytest.fixture(scope="module")
def es_pendulum_run(tmp_path_factory):
    """A finished ES run on Pendulum: an expert without a critic."""
    import jaxrl

    run_dir = tmp_path_factory.mktemp("es_expert")
    jaxrl.train(
        "agent=es",
        "env=Pendulum-v1",
        "agent.population_size=8",
        "agent.hidden_sizes=[8]",
        "budget.env_steps=1",
        "log.progress=false",
        "log.tensorboard=false",
        run_dir=run_dir,
    )
    return run_dir


def test_a_ppo_experts_state_value_is_in_reward_units():
    """PPO's critic learns the return scaled by 1/σ_R where return_normalization is on:
    `state_value` scales it back, V·√(σ_R² + ε) — here σ_R² = 4 (count 10, m2 40)."""
    from agents.ppo import PPOConfig, make_ppo
    from jaxrl.normalize import RunningStats
    from jaxrl.onpolicy import STD_EPS

    env = envs.make(EnvConfig("CartPole-v1"), num_envs=4)
    obs = jax.random.normal(make_key(0), (3, 4))
    values = {}
    for normalise in (False, True):
        agent = make_ppo(PPOConfig(return_normalization=normalise), env, 1e4)
        state = agent.init(make_key(1))
        state = state._replace(
            return_stats=RunningStats(jnp.float32(10), jnp.zeros(()), jnp.float32(40))
        )
        values[normalise] = np.asarray(agent.state_value(state, obs))
    assert np.all(values[False] != 0)
    np.testing.assert_allclose(values[True], values[False] * math.sqrt(4 + STD_EPS), rtol=1e-6)


def test_a_grid_experts_return_is_its_first_points_by_default(tmp_path):
    """summary.json rows of a grid run carry grid_point: a null expert_grid_point reads point 0."""
    from jaxrl.imitation import _final_eval_return

    rows = [
        {"grid_point": 0, "seed": 0, "final_eval_return": -100.0},
        {"grid_point": 1, "seed": 0, "final_eval_return": -200.0},
    ]
    (tmp_path / "summary.json").write_text(json.dumps({"runs": rows}))
    assert _final_eval_return(tmp_path, 0, None) == -100.0
    assert _final_eval_return(tmp_path, 0, 1) == -200.0
    (tmp_path / "summary.json").write_text('{"runs": [{"seed": 0, "final_eval_return": -5.0}]}')
    assert _final_eval_return(tmp_path, 0, None) == -5.0


def test_a_grid_of_an_imitator_trains_through_the_cli(pendulum_sac_expert, tmp_path):
    """`grid.agent.*` of an imitator through the CLI (the expert's checks once ran on the traced
    values and crashed before compiling): each point trains with its own value. Adam moves each
    parameter by about the learning rate a step, so the point at 1e-9 stays within 1e-6 of the
    initial policy (8 iterations of 50 gradient steps) and the one at 1e-3 leaves it."""
    run_dir = tmp_path / "grid"
    overrides = [
        "agent=aggrevated",
        f"agent.expert={pendulum_sac_expert.run_dir}",
        "env=Pendulum-v1",
        "agent.hidden_sizes=[8]",
        "env.num_envs=1",  # iterations of 50 env steps
        "budget.env_steps=400",
        "eval.episodes=2",
    ]
    quiet = ("log.progress=false", "log.tensorboard=false", f"log.dir={run_dir}")
    proc = cli(*overrides, "grid.agent.learning_rate=[1e-3,1e-9]", *quiet)
    assert proc.returncode == 0, proc.stderr
    summary = json.loads((run_dir / "summary.json").read_text())
    points = [(p["grid_point"], p["learning_rate"]) for p in summary["grid"]]
    assert points == [(0, 1e-3), (1, 1e-9)]
    assert [r["iterations"] for r in summary["runs"]] == [8, 8]
    moved, kept = (jaxrl.load(run_dir, grid_point=p) for p in (0, 1))
    assert kept.hyperparameters == {"learning_rate": 1e-9}
    alone = Trainer(compose([*overrides, "agent.learning_rate=1e-9"]))
    initial = alone.initial_carry().agent_state
    initial_params = np.asarray(alone.agent.params(jax.tree.map(lambda x: x[0], initial)))
    np.testing.assert_allclose(np.asarray(kept.params), initial_params, rtol=0, atol=1e-6)
    assert np.max(np.abs(np.asarray(moved.params) - initial_params)) > 1e-3
