"""`env.pool=ray`: host env pools split among Ray actors, on this machine or across a Ray cluster.

The pools of one env (the pools of vmapped seeds, an ES population's per-member pools, the
evaluation's) share `env.ray.num_workers` actors (`RayWorkers`). A pool's envs are split evenly
into slices that go round the actors; each slice is a local pool of the family (a sync
`GymnasiumPool`, or an `AtariPool` on ALE's threads) made by the same factory in the actor, and
seeded as those envs of the whole pool (`HostPool.reset(seed, env_offset)`), so a Ray pool steps
bit for bit like the sync pool whatever the number of actors. The bridge steps every pool of a
host call with `step_async` then `step_wait`: the pools queue their slices' calls, and the first
wait sends each actor ONE remote call with all of them, then each pool gathers its slices.

Failures raise `HostEnvError`: an env that raises in an actor (its own message), an actor that
dies (killed, or its node lost: reported as soon as Ray knows) and no answer within
`env.timeout` seconds, which also bounds the wait for actors the cluster cannot place
(`env.ray.cpus_per_worker` more than it has free); the last two end the env's actors.

Ray is imported only here and only when a Ray pool is made (the `[distributed]` extra). One
process joins one cluster: the first Ray pool's `env.ray.address` decides which.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import itertools
import logging
import os
import signal
import socket
import threading
import time
from typing import Any

import numpy as np

from envs.configs import HostPoolConfig, RayConfig
from envs.host import HostEnvError, HostStep, PoolFactory, close_all_pools
from jaxrl import interrupt
from jaxrl.config import ConfigError, install_hint


def _ray() -> Any:
    try:
        import ray
    except ImportError:
        raise ConfigError(f"env.pool=ray needs Ray: {install_hint('distributed')}") from None
    return ray


def connect(cfg: RayConfig, timeout: float | None) -> None:
    """Join (or start) the cluster `env.ray.address` names, once per process; ConfigError (bad
    input, before anything compiles) if there is none to join within `timeout` seconds."""
    ray = _ray()
    if ray.is_initialized():
        return
    _check_reachable(cfg.address)
    # A pool raises the first failure of a step as its HostEnvError; the other actors' failures
    # of the same step (often the same error) would otherwise be printed as tracebacks.
    os.environ.setdefault("RAY_IGNORE_UNHANDLED_ERRORS", "1")
    outcome: list[BaseException | None] = []
    answered = threading.Event()

    def join() -> None:
        try:
            ray.init(
                address=cfg.address,
                include_dashboard=False,
                log_to_driver=False,  # an actor's output stays in Ray's logs; errors come back
                logging_level=logging.ERROR,
            )
        except Exception as e:
            outcome.append(e)
        else:
            outcome.append(None)
        answered.set()
        if outcome[0] is None:
            # A local cluster's processes are told to die with the thread that started them
            # (PR_SET_PDEATHSIG): this one lives as long as the process.
            threading.Event().wait()

    # Ray retries a cluster that does not let it in (a token it does not accept) for many
    # minutes; the wait is bounded here instead. The thread never ends (see above): what is
    # waited for is its answer.
    thread = threading.Thread(target=join, name="jaxrl-ray-join", daemon=True)
    thread.start()
    answered.wait(None if timeout is None else max(timeout, MIN_JOIN_SECONDS))
    shown = "null" if cfg.address is None else cfg.address
    hint = (
        "is the cluster up (`ray status`)? With Ray's token authentication, set "
        "RAY_AUTH_MODE=token and the cluster's RAY_AUTH_TOKEN here too"
    )
    if not outcome:
        raise ConfigError(
            f"env.ray.address={shown}: not let into a Ray cluster within "
            f"{max(timeout or 0, MIN_JOIN_SECONDS):g} s (env.timeout); {hint}; valid: "
            f"{VALID_ADDRESSES}"
        )
    error = outcome[0]
    if error is not None:
        raise ConfigError(
            f"env.ray.address={shown}: {_first_line(error)}; {hint}; valid: {VALID_ADDRESSES}"
        ) from None
    # Exit hooks run last-registered first: this one, after Ray's (registered on importing it),
    # closes the pools while the driver is still connected.
    atexit.register(close_all_pools)
    interrupt.rebind_handlers()  # Ray's native SIGTERM handler would kill the run mid chunk


VALID_ADDRESSES = "null, auto, local or the HOST:PORT of a running Ray cluster's head"
CONNECT_SECONDS = 5.0
MIN_JOIN_SECONDS = 30.0  # starting a local cluster takes ~10 s on a busy 2-core machine


def _check_reachable(address: str | None) -> None:
    """ConfigError unless a HOST:PORT address accepts connections: `ray.init` would retry an
    address where nothing listens for minutes."""
    if address in (None, "auto", "local") or "://" in address:
        return
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise ConfigError(f"env.ray.address={address} is not an address; valid: {VALID_ADDRESSES}")
    try:
        with socket.create_connection((host, int(port)), timeout=CONNECT_SECONDS):
            pass
    except OSError as e:
        raise ConfigError(
            f"env.ray.address={address}: no Ray cluster answers there ({e.strerror or e}); "
            f"valid: {VALID_ADDRESSES}"
        ) from None


def pool_factory(cfg: HostPoolConfig, local: PoolFactory) -> PoolFactory:
    """`local` itself, or for `env.pool=ray` a factory of Ray pools sharing one set of actors,
    which make their slices with `local`."""
    if cfg.pool != "ray":
        return local
    connect(cfg.ray, cfg.timeout)
    return RayWorkers(local, cfg.ray, name=cfg.id, timeout=cfg.timeout).make_pool


class PoolWorker:
    """A Ray actor holding its slices of several pools (all those of one env, keyed by pool id),
    each a local pool stepped in the actor's process."""

    def __init__(self, make_pool: PoolFactory) -> None:
        # The terminal's Ctrl-C reaches the whole process group; the training loop's graceful
        # stop (finish the chunk, checkpoint) needs its workers alive.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        self.make_pool = make_pool
        self.pools: dict[int, Any] = {}

    def pid(self) -> int:
        return os.getpid()

    def run(self, calls: list[tuple[int, str, tuple[Any, ...]]]) -> list[tuple[bool, Any]]:
        """Each call `(pool id, method, args)` in order: `(True, its value)`, or `(False, (is a
        HostEnvError, exception type name, message))` (an env's exception may not pickle)."""
        answers: list[tuple[bool, Any]] = []
        for pool_id, method, args in calls:
            try:
                if method == "make":
                    self.pools[pool_id] = self.make_pool(*args)
                    value = None
                elif method == "close":
                    pool = self.pools.pop(pool_id, None)
                    value = None if pool is None else pool.close()
                else:
                    value = getattr(self.pools[pool_id], method)(*args)
                answers.append((True, value))
            except Exception as e:
                answers.append((False, (isinstance(e, HostEnvError), type(e).__name__, str(e))))
        return answers


@functools.cache
def _remote_worker() -> Any:
    return _ray().remote(PoolWorker)


def _slice(actions: Any, start: int, stop: int) -> Any:
    """Envs start..stop of a batch of actions (a Hybrid action is a (choices, parameters) pair)."""
    if isinstance(actions, tuple):
        return tuple(np.asarray(part)[start:stop] for part in actions)
    return np.asarray(actions)[start:stop]


class RayWorkers:
    """The actors that one env's pools share, and the queue of calls to them.

    Pools queue their calls (`submit`); the first answer asked for sends everything queued as ONE
    remote call per actor (`flush`). So when the bridge steps the pools of vmapped seeds, or an ES
    population's per-member pools, in one host call, each actor gets one call per step however
    many pools it holds slices of. The actors start with the first pool and are ended with the
    last one closed, or at the first failure.
    """

    def __init__(
        self, make_local: PoolFactory, cfg: RayConfig, *, name: str, timeout: float | None
    ) -> None:
        self.make_local = make_local
        self.cfg = cfg
        self.name = name
        self.timeout = timeout
        self.actors: list[Any] = []
        self.pids: list[int] = []
        self.live: set[int] = set()  # ids of the open pools
        self.pool_ids = itertools.count()
        self.next_actor = 0  # the first actor of the next pool: slices go round the actors
        self.queued: dict[int, list[tuple[int, str, tuple[Any, ...]]]] = {}  # actor -> calls
        self.sent: dict[tuple[int, int], tuple[Any, int]] = {}  # (pool, actor) -> (ref, index)
        self.answers: dict[Any, list[tuple[bool, Any]]] = {}  # ref -> its answers, once fetched

    def make_pool(self, num_envs: int, seed: int) -> RayPool:
        """A new pool of `num_envs` envs (an `envs.host.PoolFactory`)."""
        if not self.actors:
            self._start()
        count = min(len(self.actors), num_envs)
        bounds = np.linspace(0, num_envs, count + 1).astype(int)
        slices = [
            ((self.next_actor + j) % len(self.actors), int(a), int(b))
            for j, (a, b) in enumerate(itertools.pairwise(bounds))
        ]
        self.next_actor = (self.next_actor + count) % len(self.actors)
        pool = RayPool(self, next(self.pool_ids), num_envs, slices)
        self.live.add(pool.pool_id)
        for actor, start, stop in slices:
            self.submit(pool.pool_id, actor, "make", (stop - start, seed))
        pool.gather("creating its pool")
        return pool

    def _start(self) -> None:
        worker = _remote_worker().options(
            num_cpus=self.cfg.cpus_per_worker, scheduling_strategy="SPREAD", max_restarts=0
        )
        self.actors = [worker.remote(self.make_local) for _ in range(self.cfg.num_workers)]
        refs = [actor.pid.remote() for actor in self.actors]
        self.pids = [self.get(refs[i], "starting its workers", i) for i in range(len(refs))]

    def submit(self, pool_id: int, actor: int, method: str, args: tuple[Any, ...]) -> None:
        self.queued.setdefault(actor, []).append((pool_id, method, args))

    def flush(self) -> None:
        """Send each actor its queued calls as one remote call."""
        for actor, calls in self.queued.items():
            ref = self.actors[actor].run.remote(calls)
            for index, (pool_id, method, _) in enumerate(calls):
                if method != "close":  # nobody waits for a closing pool
                    self.sent[pool_id, actor] = (ref, index)
        self.queued = {}

    def answer(self, pool_id: int, actor: int, what: str, deadline: float | None) -> Any:
        """The answer of the pool's last call to `actor`; HostEnvError if it failed."""
        if (pool_id, actor) not in self.sent:
            self.flush()
        ref, index = self.sent.pop((pool_id, actor))
        if ref not in self.answers:
            left = None if deadline is None else max(deadline - time.monotonic(), 0.0)
            self.answers[ref] = self.get(ref, what, actor, left)
        answers = self.answers[ref]
        if not any(r is ref for r, _ in self.sent.values()):
            del self.answers[ref]  # every pool has its answer
        ok, value = answers[index]
        if ok:
            return value
        is_host_env_error, kind, message = value
        if not is_host_env_error:  # a local pool's HostEnvError already names the env
            message = f"{self.name}: {what} raised {kind}: {message}"
        raise HostEnvError(message)

    def get(self, ref: Any, what: str, actor: int, timeout: float | None = None) -> Any:
        """`ray.get(ref)`; a failure of Ray's (a dead actor, no answer in time) ends every actor
        and raises HostEnvError."""
        ray = _ray()
        try:
            return ray.get(ref, timeout=self.timeout if timeout is None else timeout)
        except Exception as e:
            message = self._failure(what, actor, e)
            self.kill()
            raise HostEnvError(message) from e

    def release(self, pool_id: int) -> None:
        """A pool is closed: its slices go; with the last pool the actors go too."""
        if pool_id not in self.live:
            return
        self.live.discard(pool_id)
        for key in [key for key in self.sent if key[0] == pool_id]:  # answers it left unread
            del self.sent[key]
        if not self.live:
            self.kill()
            return
        for actor in range(len(self.actors)):
            self.submit(pool_id, actor, "close", ())

    def kill(self) -> None:
        ray = _ray()
        # Once Ray is shut down (its actors ended with the driver), a Ray call would join the
        # cluster again (Ray's auto-init); at exit, while Python finalises, that process can die
        # of SIGSEGV after a completed run.
        for actor in self.actors if ray.is_initialized() else ():
            with contextlib.suppress(Exception):
                ray.kill(actor, no_restart=True)
        self.actors, self.pids, self.live, self.next_actor = [], [], set(), 0
        self.queued, self.sent, self.answers = {}, {}, {}

    def _failure(self, what: str, actor: int, e: Exception) -> str:
        exceptions = _ray().exceptions
        if isinstance(e, exceptions.GetTimeoutError):
            hint = (
                f"; the cluster has {_ray().cluster_resources().get('CPU', 0):g} CPUs and each "
                f"worker asks env.ray.cpus_per_worker={self.cfg.cpus_per_worker:g}"
                if what == "starting its workers"
                else ""
            )
            return (
                f"{self.name}: Ray worker {actor} gave no answer to {what} within {self.timeout} s "
                f"(env.timeout){hint}"
            )
        if isinstance(e, exceptions.RayActorError):
            return f"{self.name}: Ray worker {actor} died during {what} ({_first_line(e)})"
        return f"{self.name}: {what} raised {type(e).__name__}: {_first_line(e)}"


class RayPool:
    """A `HostPool` whose envs are slices `(actor, start, stop)` held by `workers`' actors."""

    def __init__(
        self, workers: RayWorkers, pool_id: int, num_envs: int, slices: list[tuple[int, int, int]]
    ) -> None:
        self.workers = workers
        self.pool_id = pool_id
        self.num_envs = num_envs
        self.slices = slices

    def reset(self, seed: int, env_offset: int = 0) -> np.ndarray:
        for actor, start, _ in self.slices:
            self.workers.submit(self.pool_id, actor, "reset", (seed, env_offset + start))
        return np.concatenate(self.gather("reset"))

    def step(self, actions: Any) -> HostStep:
        self.step_async(actions)
        return self.step_wait()

    def step_async(self, actions: Any) -> None:
        """Queue each slice's actions; they are sent with the other pools' at the first wait."""
        for actor, start, stop in self.slices:
            self.workers.submit(self.pool_id, actor, "step", (_slice(actions, start, stop),))

    def step_wait(self) -> HostStep:
        steps = self.gather("step")
        return HostStep(*(np.concatenate(field) for field in zip(*steps, strict=True)))

    def gather(self, what: str) -> list[Any]:
        """Each slice's answer to the pool's last call, in env order (one deadline for all)."""
        timeout = self.workers.timeout
        deadline = None if timeout is None else time.monotonic() + timeout
        return [self.workers.answer(self.pool_id, a, what, deadline) for a, _, _ in self.slices]

    def close(self) -> None:
        self.workers.release(self.pool_id)


def _first_line(e: Exception) -> str:
    lines = [line.strip() for line in str(e).splitlines() if line.strip()]
    return lines[0] if lines else type(e).__name__
