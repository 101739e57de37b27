"""Meshes and sharding helpers: the only module that knows about devices.

A run of several processes (`jaxrl.distributed`) sees every process's devices: its meshes take
the same number of devices from each process, so that every process holds its share of what is
split, and its programs are one program over all of them.

On a CPU, XLA's one device runs a program's operations on all cores, and a small network's
operations divide badly: a program of several runs (seeds, grid points) goes faster as one share
of the runs per core, each on a device of its own (`use_cores_as_devices`, `run_devices`). Those
devices are the runs' alone: an agent's own data parallelism (PPO's env batch, ES's population)
splits only over devices the user asked for (accelerators, or XLA's forced host device count),
because splitting one small program over cores costs more than it gains
(benchmarks/results/runs_over_cores.md).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
from jax.extend.core import ClosedJaxpr, Jaxpr, subjaxprs
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from jaxrl.config import ConfigError

log = logging.getLogger(__name__)

# The axis over which the trainer vmaps a program's runs (seeds and grid points).
RUN_AXIS = "runs"
# The mesh axis over which the trainer spreads the runs' shares (`run_devices`).
RUN_DEVICES_AXIS = "run_devices"
# Set by `use_cores_as_devices` when its CPU devices took effect: they are for runs only.
_cores_are_devices = False
# Set when it came too late: JAX had started with one CPU device for several cores.
_cores_missed = False


def use_cores_as_devices() -> None:
    """One XLA:CPU device per core this process may use, for `run_devices` to spread runs over:
    unless the user chose a device count (`--xla_force_host_platform_device_count` in XLA_FLAGS,
    `jax_num_cpu_devices`), or JAX started its backends already (the devices stay as they are).
    A config setting, not a device: it touches no backend, and a GPU or TPU stays the default."""
    global _cores_are_devices, _cores_missed
    chosen = "xla_force_host_platform_device_count" in os.environ.get("XLA_FLAGS", "")
    if _cores_are_devices or chosen or jax.config.jax_num_cpu_devices != -1:
        return
    cores = len(os.sched_getaffinity(0))
    try:
        jax.config.update("jax_num_cpu_devices", cores)
    except RuntimeError:  # JAX has run something: its devices are fixed
        _cores_missed = cores > 1 and jax.local_device_count() == 1
        return
    _cores_are_devices = True


def warn_if_runs_miss_the_cores(num_runs: int) -> None:
    """A warning for a program of several runs that could have spread over the cores, had JAX
    not started before `use_cores_as_devices` (Python code that used JAX first)."""
    if _cores_missed and num_runs > 1 and jax.default_backend() == "cpu":
        log.warning(
            "%d runs share one CPU device: JAX started before jaxrl could make the %d cores "
            "devices; call jaxrl.parallel.use_cores_as_devices() right after `import jax` to "
            "spread them over the cores",
            num_runs,
            len(os.sched_getaffinity(0)),
        )


def _cores_in_use() -> bool:
    """Whether this process's devices are the CPU cores of `use_cores_as_devices`."""
    return _cores_are_devices and jax.default_backend() == "cpu" and jax.process_count() == 1


def work_devices() -> list[jax.Device]:
    """This process's devices an agent may split its own work over: all of them, but one of
    the cores that `use_cores_as_devices` made devices."""
    devices = jax.local_devices()
    return devices[:1] if _cores_in_use() else devices


def run_devices(num_runs: int, uneven: bool = False) -> list[jax.Device]:
    """The devices a program of `num_runs` runs spreads them over, an equal share each: as many
    of the cores made devices as split the runs evenly, or with `uneven` one per run up to the
    cores (the program then pads the last share); one device otherwise (no cores made devices,
    one run, or several processes)."""
    devices = jax.local_devices() if _cores_in_use() else jax.local_devices()[:1]
    if uneven:
        return devices[: min(len(devices), num_runs)]
    count = max(d for d in range(1, len(devices) + 1) if num_runs % d == 0)
    return devices[:count]


def every_run(condition: jax.Array) -> jax.Array:
    """`condition` where it holds in every run of the vmapped program, as one unbatched bool.

    Under vmap a `lax.cond` on a batched predicate becomes a select that computes both branches
    (e.g. the updates of a random warm-up). A schedule that counts env steps of fixed-size
    iterations agrees across runs by construction, so the reduced predicate keeps the branch;
    runs spread over devices (`run_devices`) reduce over their device's share alone, which agrees
    with the others for the same reason, without a collective between devices. Outside the
    trainer's vmap (one run, an evaluation) the axis is unbound and `condition` is
    returned as it is."""
    try:
        return jax.lax.pmin(condition.astype(jnp.int32), RUN_AXIS).astype(bool)
    except NameError:
        return condition


def cond_over_runs(
    condition: jax.Array, true_fn: Callable, false_fn: Callable, *operands: Any
) -> Any:
    """`lax.cond` for a predicate the runs usually agree on but need not (an update count that
    ERL's per-seed episode lengths make differ): one branch where they agree, both and a select
    where they do not, as a plain vmap would (runs spread over devices: within each device's
    share)."""
    try:
        low = jax.lax.pmin(condition.astype(jnp.int32), RUN_AXIS)
        high = jax.lax.pmax(condition.astype(jnp.int32), RUN_AXIS)
    except NameError:
        return jax.lax.cond(condition, true_fn, false_fn, *operands)
    agreed = lambda *ops: jax.lax.cond(low.astype(bool), true_fn, false_fn, *ops)
    mixed = lambda *ops: jax.lax.cond(condition, true_fn, false_fn, *ops)
    return jax.lax.cond(low == high, agreed, mixed, *operands)


def usable_device_count(num_items: int, devices: int | None = None) -> int:
    """The most local devices (<= `devices`) that split `num_items` evenly; ES pairs and env
    batches are sharded without padding, so e.g. 33 pairs on 4 devices use 3."""
    available = devices or len(work_devices())
    for d in range(min(available, num_items), 0, -1):
        if num_items % d == 0:
            if d < available:
                log.warning(
                    "%d items do not split over %d devices; using %d", num_items, available, d
                )
            return d
    return 1


def mesh_devices(num_items: int, what: str = "") -> list[jax.Device]:
    """The devices that evenly share `num_items`: as many local devices as split them, or with
    several processes the same number from each (ConfigError when the processes cannot share
    them evenly; `what` names the items and their config key in that message)."""
    processes = jax.process_count()
    if processes == 1:
        return work_devices()[: usable_device_count(num_items)]
    if num_items % processes:
        raise ConfigError(
            f"{what or f'{num_items} items'} cannot be split evenly over {processes} processes "
            f"(distributed.num_processes={processes})"
        )
    per_process = usable_device_count(num_items // processes)
    return [
        device
        for process in range(processes)
        for device in [d for d in jax.devices() if d.process_index == process][:per_process]
    ]


def mesh_for(num_items: int, axis: str, what: str = "") -> Mesh:
    """A 1-D mesh over as many devices as evenly share `num_items` (`mesh_devices`)."""
    devices = mesh_devices(num_items, what)
    return jax.make_mesh((len(devices),), (axis,), devices=devices)


def data_mesh(num_items: int, axis: str, what: str = "") -> Mesh:
    """Like `mesh_for`, with an Auto-typed axis: data-parallel code shards arrays that reach it
    unsharded (the Trainer's `jit(vmap(...))` hands in plain arrays), which an Explicit axis —
    `jax.make_mesh`'s default — refuses in `shard_map`'s in_specs."""
    devices = mesh_devices(num_items, what)
    return jax.make_mesh(
        (len(devices),), (axis,), axis_types=(jax.sharding.AxisType.Auto,), devices=devices
    )


def replicated() -> NamedSharding:
    """A whole copy on every device of every process: what a run of several processes keeps its
    carry in between chunks (arrays that every process holds and checkpoints together)."""
    mesh = jax.make_mesh(
        (jax.device_count(),),
        ("all",),
        axis_types=(jax.sharding.AxisType.Auto,),
        devices=jax.devices(),
    )
    return NamedSharding(mesh, P())


def laid_out_as(tree: Any, shardings: Any) -> Any:
    """`tree`'s arrays laid out as `shardings` (a compiled program's, which `jax.device_put`
    refuses between processes unless they are NamedShardings): a program that only moves data."""
    return jax.jit(lambda x: x, out_shardings=shardings)(tree)


def spans_every_process(fn: Callable, *args: Any) -> bool:
    """Whether `fn` traced on `args` (arrays or ShapeDtypeStructs) splits work over a mesh that
    holds devices of every process: an agent that never does would run the same whole program
    in each process."""
    processes = set(range(jax.process_count()))
    return any(
        {d.process_index for d in eqn.params["mesh"].devices.flat} == processes
        for eqn in _equations(jax.make_jaxpr(fn)(*args).jaxpr)
        if eqn.primitive.name == "shard_map"
    )


def _equations(jaxpr: Jaxpr | ClosedJaxpr) -> Iterator[Any]:
    """Every equation of `jaxpr` and of the jaxprs nested in it (loops, conds, maps)."""
    if isinstance(jaxpr, ClosedJaxpr):
        jaxpr = jaxpr.jaxpr
    yield from jaxpr.eqns
    for inner in subjaxprs(jaxpr):
        yield from _equations(inner)


@dataclass(frozen=True)
class DataAxis:
    """The mesh axis data-parallel code splits its batch over, with its collectives.

    Why not call `jax.lax.psum` directly: on a one-device mesh XLA:CPU still keeps every
    collective in the program as a runtime all-reduce / all-gather (two per PPO minibatch step),
    dispatched like any other op. With one device the collectives here are identities and
    `shard_map` is skipped, so a one-device program is plain code.
    """

    mesh: Mesh
    name: str

    @property
    def size(self) -> int:
        return self.mesh.devices.size

    def psum(self, x: Any) -> Any:
        return x if self.size == 1 else jax.lax.psum(x, self.name)

    def all_gather(self, x: Any, tiled: bool = False) -> Any:
        """Every device's `x` stacked on a new leading axis (concatenated along axis 0 if tiled)."""
        if self.size == 1:
            return x if tiled else jax.tree.map(lambda a: a[None], x)
        return jax.lax.all_gather(x, self.name, tiled=tiled)

    def index(self) -> Any:
        """This device's position on the axis."""
        return 0 if self.size == 1 else jax.lax.axis_index(self.name)

    def shard_map(self, fn: Callable, in_specs: Any, out_specs: Any) -> Callable:
        """`fn` run per device on its shard; check_vma=False because callers sum gradients over
        devices explicitly."""
        if self.size == 1:
            return fn
        return jax.shard_map(
            fn, mesh=self.mesh, in_specs=in_specs, out_specs=out_specs, check_vma=False
        )
