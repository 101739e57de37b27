"""The host bridge: envs that run on the host (Gymnasium, ALE, PyBullet) behind the compiled `Env`.

A host env family provides a *pool* (`HostPool`): n env instances stepped together in numpy, with
same-step auto-reset and episode statistics. `HostEnv` turns a pool factory into the functional,
batched `Env` (docs/architecture.md, Environments) that compiled training loops `lax.scan`
over like any JAX env:

* The env state is an int32 *handle* naming a pool in this process. `reset(key)` is one host call
  that readies a pool seeded from the key's data and returns its handle and first observations;
  `step(state, action, key)` is one host call for the whole batch. Every call returns the handle
  again and the next call consumes it, so the calls run in the order the data flows.
* The call is `jax.custom_batching.custom_vmap`-ed: under `vmap` (over seeds, nested or not) the
  handles are batched and the rule issues ONE wider host call that steps every named pool, never
  a loop of calls. `lax.map`, `scan`, `while_loop` and `shard_map` see an ordinary side effect.
* The callback is `buffer_callback(has_side_effect=True)` on CPU (the host writes XLA's output
  buffers in place, an order of magnitude cheaper than `io_callback`:
  benchmarks/results/host_bridge.md) and unordered `io_callback` elsewhere (its buffers are on
  the device).
  Never `pure_callback`: XLA may drop or hoist it.
* Pools are kept per *reset site* (where in the traced code `reset` was called: a retrace of the
  same code is the same site): a site's next reset restarts the pools
  of its previous one (reseeding them) once those have been stepped, instead of creating new ones,
  so an evaluation that resets every chunk reuses its pools. A handle whose pool was restarted by a
  later reset names nothing any more: stepping it raises `HostEnvError`, never a silent mix-up.
* Failures (the env raising, an async worker dying, no answer within `env.timeout`) stop the
  compiled program; run it inside `host_errors()` to get a `HostEnvError` carrying the env's own
  message instead of XLA's runtime error (`jaxrl.loop` does).
* Host env state cannot be checkpointed: a checkpoint holds the handle, and a resumed run starts
  fresh episodes (`jaxrl.loop` keeps the freshly reset env state).
* A pool is seeded with `seed_from_key(key)`, a hash of the reset key's data (Gymnasium seeds its
  env i with seed + i), so the same key gives the same episodes.
* Limitation: a reset inside a multi-device `shard_map` is one site run by several devices, whose
  pools would restart each other's (reported as stale handles). Learners keep host envs on one
  device (`spec.vmappable` is False).
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import hashlib
import itertools
import logging
import math
import os
import threading
import traceback
import weakref
from collections.abc import Callable, Hashable, Iterator, Sequence
from typing import Any, NamedTuple, Protocol

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import io_callback
from jax.experimental.buffer_callback import buffer_callback

from envs.configs import CALLBACKS
from jaxrl.config import require
from jaxrl.datatypes import Action, Array, EnvSpec, Key, TimeStep
from jaxrl.env import episode_info


class HostStep(NamedTuple):
    """One step of a pool as numpy arrays; the leading axis is the pool's envs."""

    obs: np.ndarray
    reward: np.ndarray  # float32[n]
    terminated: np.ndarray  # bool[n]
    truncated: np.ndarray  # bool[n]
    # Dense, same dtype/shape as obs: last obs of the episode that ended (= obs elsewhere).
    final_obs: np.ndarray
    # Of the episode that ended at this step (meaningful where episode_done).
    episode_return: np.ndarray
    episode_length: np.ndarray
    episode_done: np.ndarray


class HostPool(Protocol):
    """n host env instances stepped together, with same-step auto-reset."""

    num_envs: int

    # First observations [n, ...], in the pool's layout (`HostEnv.obs_axes`). Env i is seeded
    # as env `env_offset + i` of a pool reset with `seed` would be: pools that are slices of one
    # (a Ray pool's actors) replay it exactly.
    def reset(self, seed: int, env_offset: int = 0) -> np.ndarray: ...

    # actions: [n, ...], or (choices [n], parameters [n, P]) for a Hybrid action space
    def step(self, actions: Any) -> HostStep: ...

    def close(self) -> None: ...


PoolFactory = Callable[[int, int], HostPool]  # (num_envs, seed) -> a new pool


class HostEnvError(RuntimeError):
    """A host env failed: it raised, its worker process died, or it did not answer in time. The
    message names the env and carries the env's own message."""


SEED_MODULUS = 2**30  # pools get seeds below this (headroom for seed + env index in int32)


def seed_from_key_data(data: np.ndarray) -> int:
    """The pool seed a reset derives from one key's raw data (any PRNG implementation)."""
    digest = hashlib.blake2b(np.ascontiguousarray(data, np.uint32).tobytes(), digest_size=8)
    return int.from_bytes(digest.digest(), "little") % SEED_MODULUS


def seed_from_key(key: Key) -> int:
    """`seed_from_key_data` of a concrete key, typed or raw: the seed `HostEnv.reset(key)` uses."""
    return seed_from_key_data(np.asarray(_key_data(key)))


def _key_data(key: Key) -> Array:
    if jnp.issubdtype(key.dtype, jax.dtypes.prng_key):
        return jax.random.key_data(key)
    return jnp.asarray(key, jnp.uint32)


@dataclasses.dataclass
class _Slot:
    pool: HostPool
    owner: int  # the HostEnv that made it
    stepped: bool = False  # stepped since its last reset: the site's next reset may restart it


class _Registry:
    """The pools of this process by handle. Host calls may come from XLA's threads: one lock."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.slots: dict[int, _Slot] = {}
        self.sites: dict[tuple[int, Hashable], list[int]] = {}  # (owner, site) -> last handles
        self.handles = itertools.count(1)
        # What the last failed host call raised: the cause of the runtime error XLA reports.
        self.error: BaseException | None = None

    def reset(
        self, owner: int, site: Hashable, name: str, factory: PoolFactory, num_envs: int, keys: Any
    ) -> tuple[np.ndarray, np.ndarray]:
        seeds = [seed_from_key_data(k) for k in keys]
        with self.lock:
            previous = self.sites.get((owner, site), [])
            reuse = len(previous) == len(seeds) and all(
                h in self.slots and self.slots[h].stepped for h in previous
            )
            handles, obs = [], []
            for i, seed in enumerate(seeds):
                if reuse:
                    slot = self.slots.pop(previous[i])  # the old handle names nothing from now
                    slot.stepped = False
                else:
                    slot = _Slot(
                        self._call(name, "creating its pool", factory, num_envs, seed), owner
                    )
                handle = next(self.handles)
                self.slots[handle] = slot
                handles.append(handle)
                obs.append(self._call(name, "reset", slot.pool.reset, seed, handle=handle))
            self.sites[owner, site] = handles
        return np.asarray(handles, np.int32), np.stack(obs)

    def step(self, owner: int, name: str, handles: np.ndarray, actions: Sequence[Any]) -> HostStep:
        """Step the pool of each handle with its actions (`actions[i]`: pool i's batch)."""
        ids = handles.tolist()
        with self.lock:
            if len(set(ids)) < len(ids):
                raise HostEnvError(
                    f"{name}: one host env state is stepped twice in one call; each vmapped "
                    f"instance needs its own state (its own env.reset)"
                )
            slots = [self._slot(owner, name, h) for h in ids]
            if len(slots) > 1 and all(hasattr(s.pool, "step_async") for s in slots):
                steps = self._overlapped(name, ids, slots, actions)
            else:
                steps = [
                    self._call(name, "step", s.pool.step, a, handle=h)
                    for h, s, a in zip(ids, slots, actions, strict=True)
                ]
            for slot in slots:
                slot.stepped = True
        if len(steps) == 1:  # the usual case (one seed): views, no copies
            return HostStep(*(field[None] for field in steps[0]))
        return HostStep(*(np.stack(field) for field in zip(*steps, strict=True)))

    def _slot(self, owner: int, name: str, handle: int) -> _Slot:
        slot = self.slots.get(handle)
        if slot is None or slot.owner != owner:
            raise HostEnvError(
                f"{name}: env state handle {handle} names no live pool of this env: it was "
                f"closed, restarted by a later reset of the same env, belongs to another env, "
                f"or was restored from a checkpoint (host env state cannot be saved; reset "
                f"the env)"
            )
        return slot

    def _overlapped(
        self, name: str, handles: list[int], slots: list[_Slot], actions: Sequence[Any]
    ) -> list[HostStep]:
        """Step pools that can start a step and finish it later (async workers) all at once. A
        failure closes every pool of the call: the others may be left mid-step."""
        try:
            for h, s, a in zip(handles, slots, actions, strict=True):
                self._call(name, "step", s.pool.step_async, a, handle=h)
            return [
                self._call(name, "step", s.pool.step_wait, handle=h)
                for h, s in zip(handles, slots, strict=True)
            ]
        except HostEnvError:
            for h in handles:
                self._discard(h)
            raise

    def _call(self, name: str, what: str, fn: Callable, *args: Any, handle: int = 0) -> Any:
        """`fn(*args)`, any failure raised as a HostEnvError naming the env; the failed pool is
        closed and forgotten (its state is unknown)."""
        try:
            return fn(*args)
        except Exception as e:
            if handle:
                self._discard(handle)
            if isinstance(e, HostEnvError):
                raise
            raise HostEnvError(f"{name}: {what} raised {type(e).__name__}: {e}") from e

    def _discard(self, handle: int) -> None:
        slot = self.slots.pop(handle, None)
        if slot is not None:
            with contextlib.suppress(Exception):
                slot.pool.close()

    def close_owner(self, owner: int) -> None:
        with self.lock:
            for handle in [h for h, s in self.slots.items() if s.owner == owner]:
                self._discard(handle)
            self.sites = {key: h for key, h in self.sites.items() if key[0] != owner}

    def close_all(self) -> None:
        with self.lock:
            for handle in list(self.slots):
                self._discard(handle)


_REGISTRY = _Registry()


def close_all_pools() -> None:
    """Close every host pool of this process (at exit; `envs.ray_pool` also runs it before Ray's
    own exit hook shuts the driver down, so that the actors close their envs)."""
    _REGISTRY.close_all()


atexit.register(close_all_pools)
_OWNERS = itertools.count(1)


def _reset_site() -> tuple[tuple[str, int], ...]:
    """Where `reset` is being traced: the (file, line) of the frames inside the outermost JAX
    transformation (all frames when called eagerly), JAX's own left out. Computed, not counted:
    tracing the same code again, from wherever, names the same site and reuses its pools."""
    stack = traceback.extract_stack()[:-2]
    in_jax = [f"{os.sep}jax{os.sep}" in frame.filename for frame in stack]
    first = in_jax.index(True) if True in in_jax else 0
    return tuple(
        (frame.filename, frame.lineno or 0)
        for frame, jax_frame in zip(stack[first:], in_jax[first:], strict=True)
        if not jax_frame
    )


@contextlib.contextmanager
def host_errors() -> Iterator[None]:
    """Run compiled code that steps host envs: a host env failure leaves as the `HostEnvError`
    it raised (with the env's exception as its cause), not as XLA's runtime error. Results must
    be waited for inside (`jax.block_until_ready`): on CPU, execution is asynchronous."""
    _REGISTRY.error = None  # only a failure of a host call made inside this block counts
    try:
        yield
    except jax.errors.JaxRuntimeError:
        error, _REGISTRY.error = _REGISTRY.error, None
        if error is not None:
            _forget_failed_tokens()
        if isinstance(error, HostEnvError):
            raise error.with_traceback(None) from error.__cause__
        if isinstance(error, KeyboardInterrupt):  # a Ctrl-C that landed in a host call
            raise KeyboardInterrupt from None
        raise


class _LoggedOnceFilter(logging.Filter):
    """JAX logs an io_callback's exception with its traceback before XLA fails the program; a
    host env's failure is reported once, as the `HostEnvError` that `host_errors` raises."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.exc_info is None or record.exc_info[1] is not _REGISTRY.error


logging.getLogger("jax._src.callback").addFilter(_LoggedOnceFilter())


def _forget_failed_tokens() -> None:
    """On GPU the failed program also fails the runtime token JAX keeps per device, and JAX's exit
    handlers wait on those tokens: each would print the failure again, as a traceback, at exit.
    The failure is reported, so the tokens are dropped (JAX has no public call for this; a JAX
    without it only prints more at exit)."""
    with contextlib.suppress(ImportError, AttributeError):
        from jax._src import dispatch

        dispatch.runtime_tokens.clear()


def _host_call(
    fn: Callable[..., tuple[np.ndarray, ...]],
    in_ndims: Sequence[int],
    outs: Sequence[jax.ShapeDtypeStruct],
    kind: str,
) -> Callable[..., tuple[Array, ...]]:
    """A host call `fn` over arrays whose leading axes are a batch of pools (the first argument is
    the handle or key of each pool; `in_ndims` are the argument ranks of one pool). Under vmap it
    becomes the same call over a wider batch: one host call, whatever the nesting."""
    use_buffers = kind == "buffer" or (kind == "auto" and jax.default_backend() == "cpu")
    dtypes = [np.dtype(o.dtype) for o in outs]

    def recorded(*args: np.ndarray) -> tuple[Any, ...]:
        """`fn(*args)`; what it raises is kept for `host_errors`, since XLA passes on only text."""
        try:
            return fn(*args)
        except BaseException as e:  # KeyboardInterrupt too: a Ctrl-C during a host call
            _REGISTRY.error = e
            raise

    def host(*args: np.ndarray) -> tuple[np.ndarray, ...]:
        return tuple(np.asarray(r, d) for r, d in zip(recorded(*args), dtypes, strict=True))

    def write(ctx: Any, out: Sequence[Any], *args: Any) -> None:
        for buffer, result in zip(out, recorded(*(np.asarray(a) for a in args)), strict=True):
            np.asarray(buffer)[...] = result  # casts to the buffer's dtype

    @jax.custom_batching.custom_vmap
    def call(*args: Array) -> tuple[Array, ...]:
        batch = args[0].shape[: args[0].ndim - in_ndims[0]]
        size = math.prod(batch)
        flat = [
            a.reshape(size, *a.shape[a.ndim - n :]) for a, n in zip(args, in_ndims, strict=True)
        ]
        shapes = tuple(jax.ShapeDtypeStruct((size, *o.shape), o.dtype) for o in outs)
        if use_buffers:
            results = buffer_callback(write, shapes, has_side_effect=True)(*flat)
        else:
            results = io_callback(host, shapes, *flat, ordered=False)
        return tuple(r.reshape(*batch, *r.shape[1:]) for r in results)

    @call.def_vmap
    def rule(axis_size: int, in_batched: Sequence[bool], *args: Array):
        if not in_batched[0]:
            raise HostEnvError(
                "vmapped instances share one host env state: env.reset got one unbatched key "
                "for all of them, so they would step a single pool. Give each instance its own "
                "reset key (a batched key; `jnp.broadcast_to(key, (n,))` keeps the seeds equal)"
            )
        args = tuple(
            a if b else jnp.broadcast_to(a, (axis_size, *a.shape))
            for a, b in zip(args, in_batched, strict=True)
        )
        return call(*args), (True,) * len(outs)

    return call


@dataclasses.dataclass(frozen=True, eq=False)
class HostEnv:
    """The batched functional `Env` over a pool of host envs; see the module docstring.

    `spec.num_envs` is the pool size; `spec.vmappable` is False (learners step the whole pool in
    one call and do not shard it). `callback` picks the host call: auto (buffer_callback on CPU,
    io_callback elsewhere), buffer or io.
    """

    spec: EnvSpec
    make_pool: PoolFactory
    callback: str = "auto"
    # A pool whose observations are laid out unlike the spec's (ALE's [stack, H, W] frames for
    # the Nature CNN's [H, W, stack]) returns them as they are, and XLA permutes them after the
    # host call: the spec's observation is `jnp.transpose(pool_obs, obs_axes)`. numpy's strided
    # copy of a frame batch costs more than the rest of the pool's step together.
    obs_axes: tuple[int, ...] | None = None
    _owner: int = dataclasses.field(init=False, repr=False)  # names this env's pools

    def __post_init__(self) -> None:
        require(
            self.callback in CALLBACKS,
            f"callback='{self.callback}' is not one of: {', '.join(CALLBACKS)}",
        )
        rank = len(self.spec.observation_space.shape)
        require(
            self.obs_axes is None or sorted(self.obs_axes) == list(range(rank)),
            f"obs_axes={self.obs_axes} must be a permutation of the observation's {rank} axes",
        )
        owner = next(_OWNERS)
        object.__setattr__(self, "_owner", owner)
        weakref.finalize(self, _REGISTRY.close_owner, owner)

    def with_num_envs(self, num_envs: int) -> HostEnv:
        """The same env (of the same class) with a pool of `num_envs` (pools of its own)."""
        return dataclasses.replace(self, spec=dataclasses.replace(self.spec, num_envs=num_envs))

    def close(self) -> None:
        """Close every pool this env made (they are also closed at exit)."""
        _REGISTRY.close_owner(self._owner)

    def _obs_struct(self) -> jax.ShapeDtypeStruct:
        """A pool's observations as the host call returns them (the pool's layout)."""
        space = self.spec.observation_space
        shape = list(space.shape)
        for spec_axis, pool_axis in enumerate(self.obs_axes or ()):
            shape[pool_axis] = space.shape[spec_axis]
        return jax.ShapeDtypeStruct((self.spec.num_envs, *shape), space.dtype)

    def _spec_layout(self, obs: Array) -> Array:
        if self.obs_axes is None:
            return obs
        return jnp.transpose(obs, (0, *(1 + axis for axis in self.obs_axes)))

    def reset(self, key: Key) -> tuple[Array, TimeStep]:
        n, owner, site = self.spec.num_envs, self._owner, _reset_site()

        def host(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            return _REGISTRY.reset(owner, site, self.spec.name, self.make_pool, n, keys)

        outs = (jax.ShapeDtypeStruct((), jnp.int32), self._obs_struct())
        handle, pool_obs = _host_call(host, (1,), outs, self.callback)(_key_data(key))
        obs = self._spec_layout(pool_obs)
        zeros_f, zeros_b = jnp.zeros((n,), jnp.float32), jnp.zeros((n,), bool)
        info = episode_info(zeros_f, jnp.zeros((n,), jnp.int32), zeros_b)
        return handle, TimeStep(obs, zeros_f, zeros_b, zeros_b, obs, info)

    def step(self, state: Array, action: Action, key: Key) -> tuple[Array, TimeStep]:
        """One host call for the whole pool; `key` is unused (host envs draw their own noise). A
        hybrid action's choices and parameters travel as two arrays, each pool getting its pair."""
        n, owner, name = self.spec.num_envs, self._owner, self.spec.name
        obs = self._obs_struct()
        per_env = lambda dtype: jax.ShapeDtypeStruct((n,), dtype)
        outs = (
            jax.ShapeDtypeStruct((), jnp.int32),
            obs,
            per_env(jnp.float32),
            per_env(jnp.bool_),
            per_env(jnp.bool_),
            obs,
            per_env(jnp.float32),
            per_env(jnp.int32),
            per_env(jnp.bool_),
        )

        def host(handles: np.ndarray, *actions: np.ndarray) -> tuple[np.ndarray, ...]:
            per_pool = actions[0] if len(actions) == 1 else list(zip(*actions, strict=True))
            return (handles, *_REGISTRY.step(owner, name, handles, per_pool))

        parts = [jnp.asarray(a) for a in (action if isinstance(action, tuple) else (action,))]
        call = _host_call(host, (0, *(a.ndim for a in parts)), outs, self.callback)
        handle, *fields = call(state, *parts)
        ts = HostStep(*fields)
        info = episode_info(ts.episode_return, ts.episode_length, ts.episode_done)
        obs, final_obs = self._spec_layout(ts.obs), self._spec_layout(ts.final_obs)
        return handle, TimeStep(obs, ts.reward, ts.terminated, ts.truncated, final_obs, info)
