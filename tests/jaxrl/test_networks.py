"""`networks.batch_matmul` / `Dense`: the hand-written weight gradient against hand-computed
numbers and against flax's own Dense, inside a `scan` as every update runs it."""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

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
