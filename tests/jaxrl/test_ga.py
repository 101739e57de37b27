"""ERL's GA operators (`jaxrl/ga.py`) against hand-computed values and their stated rates."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl import ga
from jaxrl.prng import make_key

# One compile for every test (the mutation probability is traced).
NEXT_GENERATION = jax.jit(ga.next_generation, static_argnums=(3, 4))


def member_tree(value: float) -> dict:
    """A two-layer Dense parameter tree (flax layout) filled with `value`."""
    return {
        "Dense_0": {"kernel": jnp.full((3, 4), value), "bias": jnp.full((4,), value)},
        "Dense_1": {"kernel": jnp.full((4, 2), value), "bias": jnp.full((2,), value)},
    }


def population(k: int) -> dict:
    """Member i's leaves are all i."""
    return jax.tree.map(lambda *xs: jnp.stack(xs), *[member_tree(float(i)) for i in range(k)])


def test_rank_is_fittest_first_with_stable_ties() -> None:
    order = ga.rank(jnp.array([3.0, -2.0, 5.0, -2.0]))
    np.testing.assert_array_equal(order, [2, 0, 1, 3])


def test_tournament_winner_is_the_fittest_drawn() -> None:
    fitness = jnp.array([0.5, 4.0, -1.0, 2.0, 3.0])
    key = make_key(1)
    winners = ga.tournament(key, fitness, 200, 3)
    draws = np.asarray(jax.random.randint(key, (200, 3), 0, 5, jnp.int32))  # ga's own draw
    f = np.asarray(fitness)
    expected = draws[np.arange(200), np.argmax(f[draws], axis=1)]
    np.testing.assert_array_equal(winners, expected)
    assert np.all(f[np.asarray(winners)][:, None] >= f[draws])


def test_tournament_selection_rates() -> None:
    # 10 distinct fitnesses, size 3 with replacement: P(best wins) = 1 - 0.9^3 = 0.271,
    # P(worst wins) = 0.1^3 = 0.001, P(rank r wins) = ((10 - r)^3 - (9 - r)^3) / 1000.
    fitness = jnp.arange(10.0)
    winners = np.asarray(ga.tournament(make_key(2), fitness, 100_000, 3))
    freq = np.bincount(winners, minlength=10) / winners.size
    expected = np.array([((i + 1) ** 3 - i**3) / 1000 for i in range(10)])
    np.testing.assert_allclose(freq, expected, atol=0.006)
    assert abs(freq[9] - 0.271) < 0.005 and freq[0] < 0.003


def test_repeats_marks_later_occurrences() -> None:
    np.testing.assert_array_equal(
        ga.repeats(jnp.array([2, 5, 2, 2, 5, 1])), [False, False, True, True, True, False]
    )


def test_crossover_takes_each_neuron_whole_from_one_parent() -> None:
    a, b = member_tree(0.0), member_tree(1.0)
    keys = jax.random.split(make_key(6), 200)
    children = jax.jit(jax.vmap(ga.crossover, in_axes=(0, None, None)))(keys, a, b)
    from_b = []
    for layer in ("Dense_0", "Dense_1"):
        kernel = np.asarray(children[layer]["kernel"])  # [children, in, out]
        bias = np.asarray(children[layer]["bias"])  # [children, out]
        # every output unit (kernel column) is all-a or all-b, and its bias goes with it
        assert np.all(kernel == kernel[:, :1])
        np.testing.assert_array_equal(kernel[:, 0], bias)
        from_b.extend(bias.ravel().tolist())
    assert abs(np.mean(from_b) - 0.5) < 0.06  # fair coins: 1,200 of them, σ = 0.014
    # and children do mix their parents (a child's two output units from different parents)
    assert np.any(np.asarray(children["Dense_1"]["bias"]).mean(axis=1) == 0.5)


def test_mutation_draw_rates() -> None:
    rates = ga.MutationRates()
    d = jax.jit(ga.mutation_draws, static_argnums=(1, 2))(make_key(3), (1000, 1000), rates)
    assert abs(float(d.chosen.mean()) - 0.1) < 0.002
    # super and reset are decided by one uniform, so they are disjoint: 5% each.
    assert abs(float(d.super_.mean()) - 0.05) < 0.002
    assert abs(float(d.reset.mean()) - 0.05) < 0.002
    assert not bool(jnp.any(d.super_ & d.reset))
    assert abs(float(d.noise.std()) - 1.0) < 0.01


def test_mutation_rule_hand_computed() -> None:
    rates = ga.MutationRates()
    w = jnp.array([[2.0, -1.0, 3.0, 0.5, 4e5]])
    draws = ga.MutationDraws(
        chosen=jnp.array([[True, True, True, False, True]]),
        super_=jnp.array([[True, False, False, False, True]]),
        reset=jnp.array([[False, False, True, False, False]]),
        noise=jnp.array([[0.5, 2.0, -0.7, 1.0, 1.0]]),
    )
    out = ga.apply_mutation(w, draws, rates)
    # super: 2 + 10·|2|·0.5 = 12; normal: −1 + 0.1·|−1|·2 = −0.8; reset: the noise −0.7;
    # not chosen: unchanged; super on 4e5: 4e5 + 10·4e5 = 4.4e6, clipped to the 1e6 limit.
    np.testing.assert_allclose(out, [[12.0, -0.8, -0.7, 0.5, 1e6]], rtol=1e-6)


def test_mutate_changes_a_tenth_of_weight_matrices_and_no_biases() -> None:
    params = {
        "Dense_0": {"kernel": jnp.ones((400, 500)), "bias": jnp.ones((500,))},
        "LayerNorm_0": {"scale": jnp.ones((500,))},
    }
    out = jax.jit(ga.mutate, static_argnums=2)(make_key(4), params, ga.MutationRates())
    changed = np.asarray(out["Dense_0"]["kernel"] != 1.0)
    assert abs(changed.mean() - 0.1) < 0.003  # 200,000 entries
    np.testing.assert_array_equal(out["Dense_0"]["bias"], params["Dense_0"]["bias"])
    np.testing.assert_array_equal(out["LayerNorm_0"]["scale"], params["LayerNorm_0"]["scale"])
    # Large changes (|Δ| > 1 at w = 1) come from super-mutation (Δ ~ N(0, 10²): P = 0.92) or a
    # reset (w' ~ N(0, 1): P(|w' − 1| > 1) = 0.52); normal mutation never gets there (σ 0.1).
    delta = np.abs(np.asarray(out["Dense_0"]["kernel"]) - 1.0)[changed]
    expected = 0.05 * 0.920 + 0.05 * 0.5224
    assert abs((delta > 1.0).mean() - expected) < 0.01


@pytest.mark.parametrize("mutation_prob", [0.0, 1.0])
def test_next_generation_keeps_elites_and_fills_the_rest(mutation_prob: float) -> None:
    k, elites = 6, 2
    pop = population(k)
    fitness = jnp.array([3.0, 9.0, 1.0, 7.0, 5.0, 0.0])
    new, info = NEXT_GENERATION(make_key(5), pop, fitness, elites, 3, mutation_prob)
    new, info = jax.device_get((new, info))
    np.testing.assert_array_equal(info.order, [1, 3, 4, 0, 2, 5])
    for slot in (1, 3):  # the two fittest stay in their slots, unchanged (never mutated)
        kept, orig = jax.tree.leaves(ga.take(new, slot)), jax.tree.leaves(ga.take(pop, slot))
        for leaf, before in zip(kept, orig, strict=True):
            np.testing.assert_array_equal(leaf, before)
    assert bool(jnp.all(info.mutated == (mutation_prob == 1.0)))
    slots = np.asarray(info.order[elites:])
    for j, slot in enumerate(slots):
        child = ga.take(new, int(slot))
        bias = np.asarray(child["Dense_1"]["bias"])
        if mutation_prob == 0.0 and not info.crossed[j]:
            # a first-time winner is copied as is
            winner = int(info.selected[j])
            for leaf in jax.tree.leaves(child):
                np.testing.assert_array_equal(leaf, winner)
        elif mutation_prob == 0.0:
            # a repeat: a crossover of an elite (1 or 3) and a winner; biases are never mutated
            parents = {1.0, 3.0} | {float(s) for s in np.asarray(info.selected)}
            assert set(bias.tolist()) <= parents
        else:
            assert set(bias.tolist()) <= set(range(k))  # biases only ever come from parents


def test_next_generation_repeats_are_crossed_and_rates_hold() -> None:
    # Over many generations: the share mutated is 0.9; slots are crossed exactly where the
    # tournament winner repeated an earlier one.
    k = 10
    pop = population(k)
    fitness = jnp.arange(10.0)
    step = jax.jit(lambda key: ga.next_generation(key, pop, fitness, 1)[1])
    infos = [step(make_key(100 + i)) for i in range(300)]
    mutated = np.concatenate([np.asarray(i.mutated) for i in infos])
    assert abs(mutated.mean() - 0.9) < 0.025  # 2,700 draws, σ = 0.006
    for info in infos:
        np.testing.assert_array_equal(info.crossed, ga.repeats(info.selected))


def test_replace_weakest() -> None:
    pop = population(4)
    actor = member_tree(42.0)
    new, slot = ga.replace_weakest(pop, jnp.array([3.0, -2.0, 5.0, -2.0]), actor)
    assert int(slot) == 3  # the last of the tied weakest in rank order
    for i in range(4):
        expected = 42.0 if i == 3 else float(i)
        for leaf in jax.tree.leaves(ga.take(new, i)):
            np.testing.assert_array_equal(leaf, expected)
