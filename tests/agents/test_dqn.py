"""DQN: TD targets, losses, ε schedule and target-network refreshes against hand-computed numbers;
what the driver stores at truncations; the CLI refusing Box actions; learning CartPole-v1."""

from __future__ import annotations

import dataclasses
import itertools
import subprocess
import sys
from pathlib import Path

import gymnasium
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from gymnasium.envs.classic_control.cartpole import CartPoleEnv
from trees import assert_arrays_equal, tree_equal

import envs
import jaxrl
from agents.dqn import (
    DQNConfig,
    QNetwork,
    dueling_q,
    make_dqn,
    make_learner,
    td_loss,
    td_target,
)
from envs.configs import HostEnvConfig
from jaxrl.cli import compose
from jaxrl.config import ConfigError, EnvConfig
from jaxrl.datatypes import Box, Discrete, EnvSpec, Transition
from jaxrl.env import random_actions
from jaxrl.networks import MLPTorso
from jaxrl.offpolicy import epsilon, num_updates
from jaxrl.prng import make_key

REPO = Path(__file__).resolve().parents[2]
QUIET = ("log.progress=false", "log.tensorboard=false")


def vector_spec(num_actions: int = 2, obs_size: int = 3) -> EnvSpec:
    inf = np.full((obs_size,), np.inf, np.float32)
    return EnvSpec("fake", "jax", Box(-inf, inf, (obs_size,)), Discrete(num_actions), 1, 10)


def test_yaml_composes_onto_the_schema():
    cfg = compose(["agent=dqn", "agent.tau=0.005", "agent.target_update_period=1"])
    assert isinstance(cfg.agent, DQNConfig)
    a = cfg.agent
    assert (a.learning_rate, a.batch_size, a.train_freq, a.gradient_steps) == (2e-3, 64, 64, 128)
    assert a.hidden_sizes == (128, 128) and a.double_q and a.loss == "mse" and a.anneal_lr
    assert cfg.env.num_envs is None  # DQNConfig.NUM_ENVS: 4 envs
    assert a.tau == 0.005 and a.target_update_period == 1


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({"loss": "l1"}, "agent.loss='l1' is not one of: huber, mse"),
        ({"tau": 0.0}, r"agent.tau=0.0 must be in \(0, 1\]"),
        ({"eps_end": 1.5}, r"agent.eps_end=1.5 must be in \[0, 1\]"),
        ({"target_update_period": 0}, "agent.target_update_period=0 must be >= 1"),
        ({"torso": "resnet"}, "agent.torso='resnet' is not one of"),
        (
            {"kernel_init": "xavier"},
            "agent.kernel_init='xavier' is not one of: orthogonal, lecun_normal",
        ),
    ],
)
def test_bad_config_is_a_config_error(kwargs: dict, fragment: str) -> None:
    with pytest.raises(ConfigError, match=fragment):
        make_learner(DQNConfig(**kwargs), vector_spec(), 1e6)


def test_dqn_solves_cartpole_two_seeds(tmp_path):
    """The default config (4 envs, lr 2e-3 annealed over the budget), two vmapped seeds: the
    mean greedy evaluation (10 episodes per seed) must reach 475 within 60k env steps; the run
    stops there (`budget.target_return`). Why "reach" and not "end at": DQN on CartPole can
    fall back after solving it, as seeds of the sweep behind the defaults did at the end
    (benchmarks/results/learning_tests.md)."""
    result = jaxrl.train(
        "agent=dqn",
        "env=CartPole-v1",
        "num_seeds=2",
        "budget.env_steps=60000",
        "budget.target_return=475",
        "eval.every=3",
        *QUIET,
        run_dir=tmp_path,
    )
    assert result.status == "completed"
    summary = result.summary
    assert summary["final_eval_return"] >= 475, summary["runs"]
    assert summary["env_steps"] < 60000, summary  # stopped early: reached, not timed out


def test_td_target_by_hand():
    """γ = 0.9, r = 1. Rows: terminated, truncated, neither. Double DQN: the online net picks
    a' = [1, 0, 0], the target net values it: [2, 4, 7]; vanilla takes the target's max
    [10, 6, 8]. A terminated row is r alone; a truncated one bootstraps like the third."""
    q_next_online = jnp.array([[1.0, 3.0], [2.0, 0.0], [5.0, 4.0]])
    q_next_target = jnp.array([[10.0, 2.0], [4.0, 6.0], [7.0, 8.0]])
    reward = jnp.ones(3)
    terminated = jnp.array([True, False, False])
    double = td_target(q_next_online, q_next_target, reward, terminated, 0.9, True)
    vanilla = td_target(q_next_online, q_next_target, reward, terminated, 0.9, False)
    np.testing.assert_allclose(double, [1.0, 1 + 0.9 * 4, 1 + 0.9 * 7], rtol=1e-6)
    np.testing.assert_allclose(vanilla, [1.0, 1 + 0.9 * 6, 1 + 0.9 * 8], rtol=1e-6)


def test_huber_and_mse_by_hand():
    errors = jnp.array([0.5, -3.0, 1.0])
    np.testing.assert_allclose(td_loss(errors, "huber"), [0.125, 2.5, 0.5])
    np.testing.assert_allclose(td_loss(errors, "mse"), [0.125, 4.5, 0.5])


def constant_q(state, online: list[float], target: list[float]):
    """Q(s, ·) = the given values for every s: zero weights, head bias set."""
    zero = lambda tree: jax.tree.map(jnp.zeros_like, tree)

    def with_bias(values: list[float]):
        params = zero(state.params)
        head = max(k for k in params["params"] if k.startswith("Dense"))
        params["params"][head]["bias"] = jnp.array(values)
        return params

    return state._replace(params=with_bias(online), target_params=with_bias(target))


@pytest.mark.parametrize(
    ("loss", "double_q", "expected"),
    [
        # q_taken = [1, 3, 1]; double targets [1, 2.8, 2.8] -> errors [0, 0.2, -1.8]
        ("huber", True, (0 + 0.02 + 1.3) / 3),
        ("mse", True, (0 + 0.02 + 1.62) / 3),
        # vanilla targets [1, 10, 10] -> errors [0, -7, -9]
        ("huber", False, (0 + 6.5 + 8.5) / 3),
        ("mse", False, (0 + 24.5 + 40.5) / 3),
    ],
)
def test_update_loss_uses_terminated_only(loss: str, double_q: bool, expected: float):
    """Online Q = [1, 3], target Q = [10, 2] everywhere; γ = 0.9, r = 1, actions [0, 1, 0].
    Rows terminated / truncated / neither: the truncated row bootstraps exactly like the last."""
    cfg = DQNConfig(gamma=0.9, loss=loss, double_q=double_q, hidden_sizes=(8,))
    learner = make_learner(cfg, vector_spec(), 1e6)
    state = constant_q(learner.init(make_key(0)), [1.0, 3.0], [10.0, 2.0])
    batch = Transition(
        obs=jax.random.normal(jax.random.key(1), (3, 3)),
        action=jnp.array([0, 1, 0], jnp.int32),
        reward=jnp.ones(3),
        terminated=jnp.array([True, False, False]),
        truncated=jnp.array([False, True, False]),
        next_obs=jax.random.normal(jax.random.key(2), (3, 3)),
    )
    _, metrics = learner.update(state, batch, make_key(3))
    np.testing.assert_allclose(metrics["loss"], expected, rtol=1e-5)
    np.testing.assert_allclose(metrics["q_mean"], 5.0 / 3, rtol=1e-6)


def test_dueling_heads_by_hand():
    """Q = V + A − mean A: V = 1, A = (1, 2, 3) gives (0, 1, 2); in the network, the mean of the
    Q-values over actions is the value head's output."""
    np.testing.assert_allclose(dueling_q(jnp.array([[1.0]]), jnp.array([[1.0, 2, 3]])), [[0, 1, 2]])
    net = QNetwork(3, "mlp", (8,), "relu", dueling=True)
    obs = jax.random.normal(make_key(0), (5, 4))
    params = net.init(make_key(1), obs)
    assert set(params["params"]) == {"MLPTorso_0", "value", "advantage"}
    q = net.apply(params, obs)
    features = MLPTorso((8,), "relu").apply({"params": params["params"]["MLPTorso_0"]}, obs)
    value = params["params"]["value"]
    v = features @ value["kernel"] + value["bias"]
    np.testing.assert_allclose(q.mean(axis=-1), v[:, 0], rtol=1e-5, atol=1e-6)


def test_kernel_init_options_by_hand():
    """orthogonal (the default): a square hidden kernel W has WᵀW = 2·I (gain √2) and the head's
    columns are orthonormal (gain 1); lecun_normal (PureJaxRL's and CleanRL's DQN): entries of
    variance 1/fan_in, so a 256 × 256 kernel's standard deviation is 1/16 (65,536 draws: within
    2%). Biases start at zero either way."""
    obs = jnp.zeros((1, 4))
    ortho = QNetwork(2, "mlp", (256, 256), "relu").init(make_key(0), obs)["params"]
    w = np.asarray(ortho["MLPTorso_0"]["Dense_1"]["kernel"], np.float64)
    np.testing.assert_allclose(w.T @ w, 2 * np.eye(256), atol=1e-4)
    head = np.asarray(ortho["Dense_0"]["kernel"], np.float64)
    np.testing.assert_allclose(head.T @ head, np.eye(2), atol=1e-5)
    lecun = QNetwork(2, "mlp", (256, 256), "relu", kernel_init="lecun_normal")
    params = lecun.init(make_key(0), obs)["params"]
    w = np.asarray(params["MLPTorso_0"]["Dense_1"]["kernel"])
    assert abs(w.std() - 1 / 16) < 0.02 / 16 and abs(w.mean()) < 1e-3
    assert not np.asarray(params["MLPTorso_0"]["Dense_1"]["bias"]).any()
    cfg = compose(["agent=dqn", "agent.kernel_init=lecun_normal"]).agent
    assert cfg.kernel_init == "lecun_normal" and DQNConfig().kernel_init == "orthogonal"


def test_n_step_target_uses_the_transitions_discount():
    """With `Transition.discount` (γ^m of an m-step return) the target bootstraps with it in
    place of γ: 2 + 0.25·(1 − 0)·5 = 3.25; terminated still stops the bootstrap."""
    q_next = jnp.array([[5.0, 1.0], [5.0, 1.0]])
    target = td_target(
        q_next,
        q_next,
        jnp.array([2.0, 2.0]),
        jnp.array([False, True]),
        jnp.array([0.25, 0.25]),
        double_q=True,
    )
    np.testing.assert_allclose(target, [3.25, 2.0])


def test_epsilon_schedule_values():
    cfg = DQNConfig(eps_start=1.0, eps_end=0.1, exploration_steps=1000)
    steps = jnp.array([0, 250, 500, 1000, 5000])
    np.testing.assert_allclose(epsilon(cfg, steps), [1.0, 0.775, 0.55, 0.1, 0.1], rtol=1e-6)


def test_eps_greedy_deviates_at_the_expected_rate():
    """With 4 actions a uniform draw differs from the greedy action 3/4 of the time, so ε = 0.4
    acts non-greedily 30% of the time; ε = 0 never does."""
    cfg = DQNConfig(eps_start=0.4, eps_end=0.4, hidden_sizes=(8,))
    learner = make_learner(cfg, vector_spec(num_actions=4), 1e6)
    state = learner.init(make_key(0))
    obs = jax.random.normal(jax.random.key(1), (20_000, 3))
    greedy = learner.act(state, obs, make_key(2), True)
    explored = learner.explore(state, obs, make_key(3), jnp.asarray(0))
    assert abs(float(jnp.mean(explored != greedy)) - 0.3) < 0.015
    never = make_learner(DQNConfig(eps_start=0.0, hidden_sizes=(8,)), vector_spec(4), 1e6)
    assert bool(jnp.all(never.explore(state, obs, make_key(3), jnp.asarray(0)) == greedy))


def run_updates(cfg: DQNConfig, n: int):
    learner = make_learner(cfg, vector_spec(), 1e6)
    state = learner.init(make_key(0))
    batch = Transition(
        jax.random.normal(jax.random.key(1), (8, 3)),
        jnp.zeros(8, jnp.int32),
        jnp.ones(8),
        jnp.zeros(8, bool),
        jnp.zeros(8, bool),
        jax.random.normal(jax.random.key(2), (8, 3)),
    )
    update = jax.jit(learner.update)
    states = [state]
    for _ in range(n):
        state, _ = update(state, batch, make_key(0))
        states.append(state)
    return states


def test_hard_target_update_exactly_every_period():
    states = run_updates(DQNConfig(target_update_period=3, hidden_sizes=(8,)), 7)
    for count in range(1, 8):
        state, previous = states[count], states[count - 1]
        assert int(state.updates) == count
        assert not tree_equal(state.params, previous.params)
        if count % 3 == 0:
            assert tree_equal(state.target_params, state.params), count
        else:
            assert tree_equal(state.target_params, previous.target_params), count


def test_polyak_target_update():
    """τ = 0.25 every update: target ← 0.25·online + 0.75·target."""
    states = run_updates(DQNConfig(target_update_period=1, tau=0.25, hidden_sizes=(8,)), 3)
    for previous, state in itertools.pairwise(states):
        expected = jax.tree.map(
            lambda o, t: 0.25 * o + 0.75 * t, state.params, previous.target_params
        )
        for x, y in zip(
            jax.tree.leaves(state.target_params), jax.tree.leaves(expected), strict=True
        ):
            np.testing.assert_allclose(x, y, rtol=1e-6, atol=1e-7)
        assert not tree_equal(state.target_params, state.params)


def test_truncated_steps_are_stored_with_their_final_observation():
    """CartPole capped at 5 steps, random actions (before learning starts): every 5th stored
    step is truncated, not terminated, and its next_obs is the physics successor of its obs
    (CartPole's Euler step: x' = x + 0.02·ẋ, θ' = θ + 0.02·θ̇), not the next episode's reset
    observation."""
    env = envs.make(EnvConfig("CartPole-v1", max_episode_steps=5), num_envs=1)
    cfg = DQNConfig(iteration_steps=20, train_freq=4, learning_starts=1000, hidden_sizes=(8,))
    agent = make_dqn(cfg, env, total_env_steps=20)
    state = agent.init(make_key(0))
    state, _, metrics = jax.jit(agent.train_step)(state, env.reset(make_key(1)), make_key(2))
    data = jax.tree.map(lambda x: np.asarray(x[:20]), state.buffer.data)
    assert int(state.buffer.size) == 20 and int(metrics["episodes"]) == 4
    ends = np.arange(20) % 5 == 4
    np.testing.assert_array_equal(data.truncated, ends)
    assert not data.terminated.any()
    np.testing.assert_allclose(
        data.next_obs[:, 0], data.obs[:, 0] + 0.02 * data.obs[:, 1], atol=1e-6
    )
    np.testing.assert_allclose(
        data.next_obs[:, 2], data.obs[:, 2] + 0.02 * data.obs[:, 3], atol=1e-6
    )
    # Inside an episode the successor is the next stored obs; at a truncation it is not.
    np.testing.assert_array_equal(data.next_obs[:-1][~ends[:-1]], data.obs[1:][~ends[:-1]])
    assert (np.abs(data.next_obs[:-1][ends[:-1]] - data.obs[1:][ends[:-1]]).max(axis=1) > 0).all()


def test_annealing_horizon_counts_the_updates_the_driver_makes():
    """2 envs × train_freq 4 = 8 steps a round; learning starts at 20 steps, i.e. after round 3
    (24 steps); 80 steps = 10 rounds, so rounds 3..10 learn: 8 rounds × 2 updates = 16, the
    horizon over which the learning rate falls to 0."""
    env = envs.make(EnvConfig("CartPole-v1"), num_envs=2)
    cfg = DQNConfig(
        iteration_steps=40,
        train_freq=4,
        gradient_steps=2,
        learning_starts=20,
        batch_size=8,
        anneal_lr=True,
        hidden_sizes=(8,),
    )
    assert num_updates(cfg, 2, 80, cfg.n_step) == 16
    agent = make_dqn(cfg, env, total_env_steps=80)
    step = jax.jit(agent.train_step)
    state, env_state = agent.init(make_key(0)), env.reset(make_key(1))
    for i in range(2):
        state, env_state, _ = step(state, env_state, make_key(2 + i))
    assert int(state.learner.updates) == 16
    # Past the horizon the learning rate is 0: more updates leave the parameters as they are.
    later, _, _ = step(state, env_state, make_key(9))
    assert int(later.learner.updates) == 26
    assert tree_equal(later.learner.params, state.learner.params)


def test_cli_refuses_box_actions_before_compiling(tmp_path):
    out = subprocess.run(
        [sys.executable, "-m", "jaxrl.run", "agent=dqn", "env=Pendulum-v1", f"log.dir={tmp_path}"],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=300,
    )
    assert out.returncode == 2, out.stderr
    lines = out.stderr.strip().splitlines()
    assert lines[-1].startswith("error: agent 'dqn' needs a Discrete action space"), out.stderr
    assert "Traceback" not in out.stderr


class ReplayCartPole(CartPoleEnv):
    """Gymnasium's CartPole (float64 physics) whose resets start from given states in turn."""

    def __init__(self, initial_states: np.ndarray) -> None:
        super().__init__()
        self._starts = iter(np.asarray(initial_states, np.float64))

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self.state = next(self._starts)
        return np.array(self.state, dtype=np.float32), {}


REPLAY_ID = "jaxrltest/ReplayCartPole-v1"


def run_dqn(env, cfg: DQNConfig, iterations: int):
    """`iterations` train steps from fixed keys: (final agent state, env state, metrics)."""
    agent = make_dqn(cfg, env, total_env_steps=iterations * cfg.iteration_steps)
    step = jax.jit(agent.train_step)
    state, env_state = agent.init(make_key(0)), env.reset(make_key(1))
    metrics = []
    for i in range(iterations):
        state, env_state, m = step(state, env_state, make_key(10 + i))
        metrics.append(jax.device_get(m))
    return state, env_state, metrics


def test_host_cartpole_learns_exactly_like_the_jax_one():
    """`gym/CartPole-v1` through the host bridge against JAX-native CartPole-v1, same seed.

    The strongest honest form: Gymnasium draws its initial states from its own RNG, so the host
    env here is Gymnasium's CartPole whose resets replay the JAX run's initial states (taken from
    the JAX run's replay buffer); everything else (float64 physics, the 500-step TimeLimit,
    auto-reset through the bridge, float32 observations) is the host path's own. The agent's keys
    are the same, so ε-greedy draws and minibatches coincide. Over 3 iterations (1536 env steps,
    64 episodes) every action and end flag must be the same, observations equal up to the
    float32-vs-float64 drift, losses and returns equal to 1e-3 (relative): the same learning
    curve. The final Q-networks compute the same values on every visited observation to 2% of
    their scale. Not their weights one by one: Adam turns the drift into full steps of opposite
    sign on weights whose gradient is near zero. Why not longer: CartPole is unstable, so within
    an episode the drift grows until a near-tie between two Q-values flips. The drift and the
    differences measured: benchmarks/results/learning_tests.md.
    """
    if REPLAY_ID not in gymnasium.registry:
        gymnasium.register(REPLAY_ID, entry_point=ReplayCartPole, max_episode_steps=500)
    cfg = DQNConfig(
        iteration_steps=512,
        train_freq=128,
        gradient_steps=64,
        learning_starts=512,
        hidden_sizes=(64, 64),
        loss="mse",
        learning_rate=2e-3,
        anneal_lr=False,
    )
    iterations = 3
    jax_env = envs.make(EnvConfig("CartPole-v1"), num_envs=1)
    j_state, j_env_state, j_metrics = run_dqn(jax_env, cfg, iterations)
    steps = iterations * cfg.iteration_steps
    j = jax.tree.map(lambda x: np.asarray(x[:steps]), j_state.buffer.data)
    seen = np.concatenate([j.obs, np.asarray(j_env_state[1].obs)])  # + the obs after the last step
    starts = np.concatenate([seen[:1], seen[1:][j.terminated | j.truncated]])
    assert len(starts) > 20  # many episodes, both early (random) and learned ones

    host_cfg = HostEnvConfig(id=f"gym/{REPLAY_ID}", kwargs={"initial_states": starts})
    h_state, _, h_metrics = run_dqn(envs.make(host_cfg, num_envs=1), cfg, iterations)
    h = jax.tree.map(lambda x: np.asarray(x[:steps]), h_state.buffer.data)

    np.testing.assert_array_equal(h.action, j.action)
    np.testing.assert_array_equal(h.terminated, j.terminated)
    np.testing.assert_array_equal(h.truncated, j.truncated)
    np.testing.assert_allclose(h.obs, j.obs, atol=1e-3)
    np.testing.assert_allclose(h.next_obs, j.next_obs, atol=1e-3)
    for hm, jm in zip(h_metrics, j_metrics, strict=True):
        assert hm["episodes"] == jm["episodes"]
        for name in ("episode_return", "loss", "q_mean"):
            np.testing.assert_allclose(hm[name], jm[name], rtol=1e-3, err_msg=name)
    assert j_metrics[-1]["loss"] > 0 and int(j_state.learner.updates) == num_updates(
        cfg, 1, steps, cfg.n_step
    )
    net = QNetwork(2, "mlp", cfg.hidden_sizes, cfg.activation, kernel_init=cfg.kernel_init)
    q_host = net.apply(h_state.learner.params, j.obs)
    q_jax = net.apply(j_state.learner.params, j.obs)
    scale = float(jnp.abs(q_jax).max())
    assert scale > 1.0  # learned values, not the initial network's near-zero ones
    assert float(jnp.abs(q_host - q_jax).max()) <= 0.02 * scale


ATARI = DQNConfig(
    buffer_size=2048,
    batch_size=32,
    learning_starts=1024,
    train_freq=32,
    gradient_steps=4,
    iteration_steps=1024,
    learning_rate=1e-4,
    exploration_steps=2048,
    target_update_period=8,
    loss="huber",
)


@pytest.mark.slow
def test_atari_breakout_smoke_and_frame_storage():
    """ALE/Breakout-v5 (4 envs): uint8 [84, 84, 4] frames through the Nature CNN, 2048 env steps
    into a 2048-transition buffer, 36 updates (rounds 8..16 of 128 steps, 4 each): finite,
    positive losses. The same run with `frame_storage=compact` (next_obs stored as its newest
    frame) and `frame_storage=once` (each frame once) must store exactly the same transitions once
    rebuilt (the keys are the same), in 5/8 and about 1/8 of the frame memory, and give the same
    losses. Checked first on the full buffer: every stored next_obs is obs shifted by one frame,
    at life losses (terminated) and game ends too, which is what makes both layouts exact."""
    pytest.importorskip("ale_py")
    from envs.configs import AtariConfig
    from jaxrl import frame_replay
    from jaxrl.offpolicy import shift_in_newest_frame

    env = envs.make(AtariConfig(id="ALE/Breakout-v5"), num_envs=4)
    assert env.spec.observation_space.shape == (84, 84, 4) and env.spec.action_space.n == 4
    full_state, _, full_metrics = run_dqn(env, ATARI, 2)
    full = jax.tree.map(np.asarray, full_state.buffer.data)
    assert full.obs.dtype == np.uint8 and full.obs.shape == (2048, 84, 84, 4)
    assert int(full_state.learner.updates) == num_updates(ATARI, 4, 2048, ATARI.n_step) == 36
    assert full.terminated.sum() >= 5  # lives lost under near-random play
    assert_arrays_equal(full.next_obs[..., :-1], full.obs[..., 1:])
    loss = float(full_metrics[-1]["loss"])
    assert np.isfinite(loss) and loss > 0
    frame_bytes = full.obs.nbytes + full.next_obs.nbytes

    compact_state, _, compact_metrics = run_dqn(
        env, dataclasses.replace(ATARI, frame_storage="compact"), 2
    )
    stored = compact_state.buffer.data
    assert stored.next_obs.shape == (2048, 84, 84, 1)
    assert (stored.obs.nbytes + stored.next_obs.nbytes) / frame_bytes == 5 / 8
    rebuilt = jax.tree.map(np.asarray, shift_in_newest_frame(stored))
    for name, value in full._asdict().items():
        assert_arrays_equal(getattr(rebuilt, name), value, err_msg=name)
    np.testing.assert_allclose(compact_metrics[-1]["loss"], loss, rtol=1e-6)

    once_state, _, once_metrics = run_dqn(env, dataclasses.replace(ATARI, frame_storage="once"), 2)
    frames = once_state.buffer.frames
    # 2048 next frames and 4 for each episode begun (4 at the start, one after each end but the
    # last step's); the ring: 2048 + 128 + 2·4·25
    begun = 4 + int((full.terminated | full.truncated)[:-4].sum())
    assert int(frames.size) == 2048 + 4 * begun
    assert frames.data.nbytes / frame_bytes == (2048 + 128 + 200) / (8 * 2048)
    assert int(frame_replay.live_start(once_state.buffer)) == 0
    rebuilt = jax.tree.map(np.asarray, frame_replay.gather(once_state.buffer, jnp.arange(2048)))
    for name, value in full._asdict().items():
        assert_arrays_equal(getattr(rebuilt, name), value, err_msg=name)
    np.testing.assert_allclose(once_metrics[-1]["loss"], loss, rtol=1e-6)
    q = QNetwork(4, "nature_cnn").apply(once_state.learner.params, full.obs[:3])
    assert q.shape == (3, 4) and np.isfinite(q).all()


@pytest.mark.parametrize("storage", ["compact", "once"])
def test_frame_storage_needs_stacked_images(storage: str):
    env = envs.make(EnvConfig("CartPole-v1"), num_envs=1)
    with pytest.raises(ConfigError, match=f"frame_storage={storage} needs frame-stacked image"):
        make_dqn(DQNConfig(frame_storage=storage), env, total_env_steps=1e4)


def test_pixel_cartpole_frames_shift_as_the_compact_layout_needs():
    """pixel/CartPole-v1 under random actions (episodes of a few agent steps): every step's
    final_obs is its obs shifted by one frame, at episode ends too, so `frame_storage=compact`
    stores it exactly."""
    env = envs.make(HostEnvConfig(id="pixel/CartPole-v1"), num_envs=4)
    step = jax.jit(env.step)
    state, ts = env.reset(make_key(0))
    ends = 0
    for i in range(60):
        obs = np.asarray(ts.obs)
        state, ts = step(state, random_actions(env.spec, make_key(100 + i)), make_key(i))
        np.testing.assert_array_equal(np.asarray(ts.final_obs)[..., :-1], obs[..., 1:])
        ends += int(np.sum(ts.terminated | ts.truncated))
    assert ends >= 10
