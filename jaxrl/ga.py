"""Genetic-algorithm operators over a population of parameter pytrees stacked on a leading axis.

They follow the GA of ERL (Khadka & Tumer 2018, "Evolution-Guided Policy Gradient in
Reinforcement Learning", Algorithms 1-3, and the authors' code `core/mod_neuro_evo.py`):

* elitism: the `num_elites` fittest members survive unchanged, in their own slots;
* tournament selection with replacement (size 3 in the paper) fills the other slots; a member
  drawn again is replaced by the crossover of a random elite and a random selected member (the
  paper's "while |S| < k - e: crossover(elite, S)"; the code deduplicates S the same way);
* crossover swaps whole neurons: each output unit of a layer (its kernel column and its bias
  entry, flax layout) comes from exactly one parent, chosen by a fair coin, like the code's
  row swaps of PyTorch's [out, in] matrices;
* mutation, applied with probability `mutation_prob` (0.9) to every non-elite: each entry of a
  weight matrix (ndim >= 2; biases and layer-norm parameters are left alone, as in the paper's
  "for weight matrix M") is chosen with probability `frac` (0.1, the paper's mutation fraction)
  and then, from one uniform draw u, super-mutated for u < 0.05 (w += N(0, (10|w|)^2): 100x the
  normal strength 0.1, the paper's "100 * mut_strength"), reset for 0.05 <= u < 0.10
  (w = N(0, 1)), else perturbed with w += N(0, (0.1|w|)^2); every mutated weight is clipped to
  +-1e6 (the code's hard limit). The authors' code mutates less than the paper's text says: it
  skips each matrix with probability 1/4 and mutates a random count below 10% of its entries;
  this module follows the text (10% of every matrix of a mutated member, on average).

All functions are pure and jit/vmap-able; the population's shape never changes.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from jaxrl.datatypes import Array, Key, PyTree

WEIGHT_LIMIT = 1e6


class MutationRates(NamedTuple):
    """The mutation operator's numbers (defaults: the paper's)."""

    frac: float = 0.1  # chance each weight-matrix entry is mutated
    strength: float = 0.1  # normal mutation: std = strength * |w|
    super_prob: float = 0.05
    super_strength: float = 10.0  # std = super_strength * |w| (100 x the normal 0.1)
    reset_prob: float = 0.05  # w redrawn from N(0, 1)


class Generation(NamedTuple):
    """What a GA step decided, for diagnostics and the RL sync."""

    order: Array  # int32[k]: member indices, fittest first
    selected: Array  # int32[k - e]: tournament winners, in the order of the non-elite slots
    crossed: Array  # bool[k - e]: slot refilled by crossover because its winner was a repeat
    mutated: Array  # bool[k - e]


def take(pop: PyTree, index: Array) -> PyTree:
    """Members `index` (an int or int array) of a stacked population."""
    return jax.tree.map(lambda x: x[index], pop)


def put(pop: PyTree, index: Array, members: PyTree) -> PyTree:
    """The population with members `index` replaced by `members` (same leading shape as index)."""
    return jax.tree.map(lambda x, m: x.at[index].set(m), pop, members)


def rank(fitness: Array) -> Array:
    """Member indices, fittest first; ties keep the lower index first (a stable sort)."""
    return jnp.argsort(-fitness, stable=True).astype(jnp.int32)


def tournament(key: Key, fitness: Array, num: int, size: int) -> Array:
    """`num` winners of tournaments of `size` members drawn with replacement: each winner is the
    fittest of its draw (the first drawn among equals)."""
    draws = jax.random.randint(key, (num, size), 0, fitness.shape[0], jnp.int32)
    best = jnp.argmax(fitness[draws], axis=1)
    return jnp.take_along_axis(draws, best[:, None], axis=1)[:, 0]


def repeats(index: Array) -> Array:
    """bool[n]: entry i equals some earlier entry (the first occurrence is not a repeat)."""
    n = index.shape[0]
    same = index[:, None] == index[None, :]
    earlier = jnp.arange(n)[None, :] < jnp.arange(n)[:, None]
    return jnp.any(same & earlier, axis=1)


def _unit_coins(key: Key, params: PyTree) -> PyTree:
    """One fair coin per output unit, shared by the leaves of one module (a Dense layer's kernel
    and bias) that have the same number of units, so a neuron is inherited whole. All coins come
    from one draw (few random call sites keep XLA's compile time down)."""
    paths_leaves, treedef = jax.tree_util.tree_flatten_with_path(params)
    offsets: dict[tuple, int] = {}
    total = 0
    for path, leaf in paths_leaves:
        units = leaf.shape[-1] if leaf.ndim else 1
        group = (tuple(path[:-1]), units)
        if group not in offsets:
            offsets[group], total = total, total + units
    coins = jax.random.bernoulli(key, 0.5, (total,))
    out = []
    for path, leaf in paths_leaves:
        units = leaf.shape[-1] if leaf.ndim else 1
        start = offsets[(tuple(path[:-1]), units)]
        coin = coins[start : start + units]
        out.append(coin if leaf.ndim else coin[0])
    return jax.tree_util.tree_unflatten(treedef, out)


def crossover(key: Key, a: PyTree, b: PyTree) -> PyTree:
    """One child of parents `a` and `b` (single members): every output unit of every layer comes
    whole from one parent, picked by a fair coin."""
    coins = _unit_coins(key, a)
    return jax.tree.map(lambda c, x, y: jnp.where(c, x, y), coins, a, b)


class MutationDraws(NamedTuple):
    """The random choices of `mutate` for one weight matrix."""

    chosen: Array  # bool: entry is mutated
    super_: Array  # bool: super-mutation (only meaningful where chosen)
    reset: Array  # bool: reset (disjoint from super_)
    noise: Array  # float32 N(0, 1)


def mutation_draws(key: Key, shape: tuple[int, ...], rates: MutationRates) -> MutationDraws:
    uniform_key, noise_key = jax.random.split(key)
    choose, kind = jax.random.uniform(uniform_key, (2, *shape))
    return MutationDraws(
        chosen=choose < rates.frac,
        super_=kind < rates.super_prob,
        reset=(kind >= rates.super_prob) & (kind < rates.super_prob + rates.reset_prob),
        noise=jax.random.normal(noise_key, shape, jnp.float32),
    )


def apply_mutation(w: Array, draws: MutationDraws, rates: MutationRates) -> Array:
    """The paper's per-entry rule given the draws (see the module docstring)."""
    scale = jnp.where(draws.super_, rates.super_strength, rates.strength)
    perturbed = w + scale * jnp.abs(w) * draws.noise
    mutated = jnp.clip(jnp.where(draws.reset, draws.noise, perturbed), -WEIGHT_LIMIT, WEIGHT_LIMIT)
    return jnp.where(draws.chosen, mutated, w).astype(w.dtype)


def mutate(key: Key, params: PyTree, rates: MutationRates) -> PyTree:
    """Mutate one member's weight matrices (leaves with ndim >= 2); other leaves are unchanged.
    The draws for all matrices are made at once, on their concatenation."""
    leaves, treedef = jax.tree.flatten(params)
    weights = [i for i, w in enumerate(leaves) if w.ndim >= 2]
    if not weights:
        return params
    flat = jnp.concatenate([leaves[i].ravel().astype(jnp.float32) for i in weights])
    flat = apply_mutation(flat, mutation_draws(key, flat.shape, rates), rates)
    start = 0
    for i in weights:
        w = leaves[i]
        leaves[i] = flat[start : start + w.size].reshape(w.shape).astype(w.dtype)
        start += w.size
    return jax.tree.unflatten(treedef, leaves)


def next_generation(
    key: Key,
    pop: PyTree,
    fitness: Array,
    num_elites: int,
    tournament_size: int = 3,
    mutation_prob: float = 0.9,
    rates: MutationRates | None = None,
) -> tuple[PyTree, Generation]:
    """One GA step: elites stay in their slots unchanged; the other slots, in rank order (the
    weakest member's slot last), receive the tournament winners, repeats replaced by
    crossover(random elite, random winner), each mutated with probability `mutation_prob`."""
    rates = rates or MutationRates()
    k = fitness.shape[0]
    m = k - num_elites
    sel_key, pick_key, cross_key, mut_key = jax.random.split(key, 4)
    order = rank(fitness)
    selected = tournament(sel_key, fitness, m, tournament_size)
    crossed = repeats(selected)

    # One uniform draw per slot for each choice: the elite parent, the partner, mutate or not.
    u_elite, u_partner, u_mutate = jax.random.uniform(pick_key, (3, m))
    elite_parent = order[jnp.minimum((u_elite * num_elites).astype(jnp.int32), num_elites - 1)]
    partner = selected[jnp.minimum((u_partner * m).astype(jnp.int32), m - 1)]
    children = jax.vmap(crossover)(
        jax.random.split(cross_key, m), take(pop, elite_parent), take(pop, partner)
    )
    children = _where_members(crossed, children, take(pop, selected))

    mutated = u_mutate < mutation_prob
    mutants = jax.vmap(mutate, in_axes=(0, 0, None))(jax.random.split(mut_key, m), children, rates)
    children = _where_members(mutated, mutants, children)
    return put(pop, order[num_elites:], children), Generation(order, selected, crossed, mutated)


def replace_weakest(pop: PyTree, fitness: Array, member: PyTree) -> tuple[PyTree, Array]:
    """Copy `member` (e.g. the RL actor) over the least fit member's slot (the last in `rank`
    order, so never an elite); returns the new population and the slot."""
    weakest = rank(fitness)[-1]
    return put(pop, weakest, member), weakest


def _where_members(mask: Array, a: PyTree, b: PyTree) -> PyTree:
    """Per member (leading axis): a where mask else b."""
    return jax.tree.map(
        lambda x, y: jnp.where(mask.reshape(mask.shape + (1,) * (x.ndim - 1)), x, y), a, b
    )
