"""`networks.batch_matmul` / `Dense`: the hand-written weight gradient against hand-computed
numbers and against flax's own Dense, inside a `scan` as every update runs it; the
`JAXRL_SPEEDUPS` switch."""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl import networks, speedups
from jaxrl.config import ConfigError
from jaxrl.networks import Dense, batch_matmul

X = jnp.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])  # [batch 3, in 2]
W = jnp.array([[1.0, 0.0, -1.0], [2.0, 1.0, 0.0]])  # [in 2, out 3]
C = jnp.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 2.0]])  # d loss / d y


def test_batch_matmul_gradients_by_hand():
    """loss = Σ C ⊙ (X W): dW = Xᵀ C, dX = C Wᵀ, computed in a scan body like an update's."""

    def grads(_, __):
        return None, jax.grad(lambda x, w: jnp.sum(C * batch_matmul(x, w)), argnums=(0, 1))(X, W)

    _, (dx, dw) = jax.jit(lambda: jax.lax.scan(grads, None, None, length=2))()
    # dW[i, o] = Σ_b X[b, i] C[b, o]: column o of C picks rows b = o (twice for o = 2).
    np.testing.assert_allclose(dw[0], [[1.0, 3.0, 10.0], [2.0, 4.0, 12.0]])
    # dX[b, i] = Σ_o C[b, o] W[i, o]
    np.testing.assert_allclose(dx[0], [[1.0, 2.0], [0.0, 1.0], [-2.0, 0.0]])
    np.testing.assert_allclose(batch_matmul(X, W), X @ W)


def test_dense_matches_flax_dense_batched_and_per_sample():
    """Same parameter names (checkpoints unchanged), outputs and gradients as `nn.Dense`, for a
    batch and for single inputs under vmap (which take the plain path)."""
    ours, theirs = Dense(3), nn.Dense(3)
    params = ours.init(jax.random.key(0), X)
    assert jax.tree.structure(params) == jax.tree.structure(theirs.init(jax.random.key(0), X))

    def loss(module, p, x):
        return jnp.sum(jnp.tanh(module.apply(p, x)) * jnp.arange(3.0))

    batched = lambda m, p: loss(m, p, X)
    per_sample = lambda m, p: jax.vmap(lambda x: loss(m, p, x))(X).sum()
    for apply in (batched, per_sample):
        ours_fn = jax.value_and_grad(lambda p, f=apply: f(ours, p))
        flax_fn = jax.value_and_grad(lambda p, f=apply: f(theirs, p))
        value_ours, grad_ours = jax.jit(ours_fn)(params)
        value_flax, grad_flax = jax.jit(flax_fn)(params)
        np.testing.assert_allclose(value_ours, value_flax, rtol=1e-6)
        jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-5), grad_ours, grad_flax)


def dense_gradient_text(platform: str = "cpu") -> str:
    """The weight gradient's program as lowered for `platform`, whatever this machine runs."""
    layer = Dense(3)
    params = layer.init(jax.random.key(0), X)
    loss = lambda p: jnp.sum(C * layer.apply(p, X))
    traced = jax.jit(jax.grad(loss)).trace(params)
    return str(traced.lower(lowering_platforms=(platform,)).as_text())


def test_speedups_switch_turns_the_cpu_weight_gradient_off(monkeypatch):
    """`JAXRL_SPEEDUPS` is read at trace time: on (the default) the CPU weight gradient is the
    form this machine's plan names (here the materialised transpose behind an optimisation
    barrier); off it is autodiff's plain form. A GPU never gets the barrier."""
    monkeypatch.setattr(networks, "weight_grad_form", lambda *shapes: "transposed")
    monkeypatch.delenv("JAXRL_SPEEDUPS", raising=False)
    assert "optimization_barrier" in dense_gradient_text()
    assert "optimization_barrier" not in dense_gradient_text("cuda")
    monkeypatch.setenv("JAXRL_SPEEDUPS", "off")
    assert "optimization_barrier" not in dense_gradient_text()


def test_speedups_switch_refuses_other_values(monkeypatch):
    monkeypatch.setenv("JAXRL_SPEEDUPS", "fast")
    with pytest.raises(ConfigError, match=r"JAXRL_SPEEDUPS='fast' is not one of: on, off"):
        speedups.enabled()


# Random123's known answers for threefry2x32 with 20 rounds (Salmon et al. 2011, kat_vectors):
# (key, counter) -> output, each a pair of uint32.
THREEFRY_ANSWERS = [
    ((0, 0), (0, 0), (0x6B200159, 0x99BA4EFE)),
    ((0xFFFFFFFF, 0xFFFFFFFF), (0xFFFFFFFF, 0xFFFFFFFF), (0x1CB996FC, 0xBB002BE7)),
]


def threefry_lowered(key: tuple[int, int], counter: tuple[int, int]) -> tuple[str, list[int]]:
    """The CPU lowering of a jitted threefry2x32 hash and its output for (key, counter), on a
    GPU machine too (the arguments committed to the CPU): GPUs never take the rolled form."""
    from jax.extend.random import threefry_2x32

    fn = jax.jit(lambda k, c: threefry_2x32(k, c))
    args = jax.device_put((np.uint32(key), np.uint32(counter)), jax.devices("cpu")[0])
    return fn.lower(*args).as_text(), [int(v) for v in fn(*args)]


@pytest.mark.parametrize(("key", "counter", "answer"), THREEFRY_ANSWERS)
def test_host_programs_take_the_unrolled_threefry_with_the_same_bits(
    monkeypatch, key, counter, answer
):
    """`speedups.unrolled_threefry` lowers the hash without CPU's five-round loop; both forms give
    Random123's published answer. With the speed-ups off, or not wanted, the loop stays."""
    monkeypatch.delenv("JAXRL_SPEEDUPS", raising=False)
    rolled_text, rolled = threefry_lowered(key, counter)
    with speedups.unrolled_threefry():
        unrolled_text, unrolled = threefry_lowered(key, counter)
    assert rolled == unrolled == list(answer)
    assert "stablehlo.while" in rolled_text and "stablehlo.while" not in unrolled_text
    with speedups.unrolled_threefry(wanted=False):
        assert "stablehlo.while" in threefry_lowered(key, counter)[0]
    monkeypatch.setenv("JAXRL_SPEEDUPS", "off")
    with speedups.unrolled_threefry():
        assert "stablehlo.while" in threefry_lowered(key, counter)[0]


def test_ppo_with_speedups_off_matches_on_to_float_rounding(monkeypatch):
    """Two PPO iterations with the speed-ups on and off (flat against tree optimiser state,
    both weight-gradient forms): the same parameters up to float rounding."""
    import envs
    from agents.ppo import PPOConfig, make_ppo
    from jaxrl.config import EnvConfig

    env = envs.make(EnvConfig("CartPole-v1", num_envs=4))
    cfg = PPOConfig(num_steps=16, num_minibatches=2, update_epochs=2)

    def params_after_two_iterations() -> tuple[list[np.ndarray], object]:
        agent = make_ppo(cfg, env, 1e4)
        state, env_state = agent.init(jax.random.key(0)), env.reset(jax.random.key(1))
        step = jax.jit(agent.train_step)
        for i in range(2):
            state, env_state, _ = step(state, env_state, jax.random.key(2 + i))
        return [np.asarray(x) for x in jax.tree.leaves(state.params)], state.opt_state

    monkeypatch.setenv("JAXRL_SPEEDUPS", "on")
    fast, fast_opt = params_after_two_iterations()
    monkeypatch.setenv("JAXRL_SPEEDUPS", "off")
    plain, plain_opt = params_after_two_iterations()
    for a, b in zip(fast, plain, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)
    assert jax.tree.leaves(fast_opt)[1].ndim == 1  # one flat vector
    assert len(jax.tree.leaves(plain_opt)) > len(jax.tree.leaves(fast_opt))  # per weight array
