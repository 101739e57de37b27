"""`every_run` and `cond_over_runs`: a predicate the runs of a vmapped program agree on keeps
`lax.cond` a branch; one they disagree on still gives each run its own branch. And which devices
the runs and the agents take (`use_cores_as_devices`, `run_devices`, `work_devices`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np

from jaxrl.parallel import RUN_AXIS, cond_over_runs, every_run


def over_runs(fn, *args):
    return jax.vmap(fn, axis_name=RUN_AXIS)(*args)


def test_every_run_is_the_and_of_all_runs_and_is_unbatched():
    agreed = jax.vmap(lambda x: every_run(x > 0), axis_name=RUN_AXIS, out_axes=None)
    assert bool(agreed(jnp.array([1.0, 2.0, 3.0])))
    assert not bool(agreed(jnp.array([1.0, -2.0, 3.0])))


def test_outside_the_run_axis_the_condition_is_returned_as_it_is():
    np.testing.assert_array_equal(every_run(jnp.array([True, False])), [True, False])
    per_item = jax.vmap(lambda x: every_run(x > 0))(jnp.array([1.0, -1.0]))
    np.testing.assert_array_equal(per_item, [True, False])


def test_an_agreed_cond_runs_one_branch_where_a_batched_one_runs_both():
    """Branch executions counted through host callbacks: under vmap a batched predicate turns
    the cond into a select that runs both branches; the agreed one runs only the taken one."""
    calls: list[str] = []

    def branch(name: str, value: jax.Array) -> jax.Array:
        jax.debug.callback(lambda: calls.append(name))
        return value

    def step(x: jax.Array, agree: bool) -> jax.Array:
        take = x > 0
        take = every_run(take) if agree else take
        return jax.lax.cond(take, lambda v: branch("update", v + 1), lambda v: branch("skip", v), x)

    xs = jnp.array([-1.0, -2.0])
    np.testing.assert_array_equal(jax.jit(lambda x: over_runs(lambda v: step(v, True), x))(xs), xs)
    jax.effects_barrier()
    assert calls == ["skip"]
    calls.clear()
    np.testing.assert_array_equal(jax.jit(lambda x: over_runs(lambda v: step(v, False), x))(xs), xs)
    jax.effects_barrier()
    assert sorted(calls) == ["skip", "update"]


def counted_cond(calls: list[str], x: jax.Array) -> jax.Array:
    def branch(name: str, value: jax.Array) -> jax.Array:
        jax.debug.callback(lambda: calls.append(name))
        return value

    return cond_over_runs(
        x > 0, lambda v: branch("update", v * 10), lambda v: branch("skip", v - 1), x
    )


def test_cond_over_runs_runs_one_branch_when_runs_agree_and_each_its_own_when_not():
    calls: list[str] = []
    program = jax.jit(lambda x: over_runs(lambda v: counted_cond(calls, v), x))
    np.testing.assert_array_equal(program(jnp.array([1.0, 2.0])), [10.0, 20.0])
    jax.effects_barrier()
    assert calls == ["update"]
    calls.clear()
    np.testing.assert_array_equal(program(jnp.array([1.0, -2.0])), [10.0, -3.0])
    jax.effects_barrier()
    assert sorted(calls) == ["skip", "update"]
    calls.clear()
    np.testing.assert_array_equal(jax.jit(lambda x: counted_cond(calls, x))(-1.0), -2.0)
    jax.effects_barrier()
    assert calls == ["skip"]


CORES_SCRIPT = """
import json, os, sys
os.sched_getaffinity = lambda pid: set(range(4))  # a 4-core machine, whatever this one is
import jax
from jaxrl import parallel
parallel.use_cores_as_devices()
runs = {n: len(parallel.run_devices(n)) for n in (1, 2, 3, 4, 5, 6, 8)}
print("RESULT " + json.dumps({"devices": jax.device_count(), "runs": runs,
                              "work": len(parallel.work_devices())}))
"""


def run_cores_script(xla_flags: str) -> dict:
    env = {**os.environ, "XLA_FLAGS": xla_flags, "JAX_PLATFORMS": "cpu"}
    out = subprocess.run(
        [sys.executable, "-c", CORES_SCRIPT], capture_output=True, text=True, env=env, timeout=120
    )
    assert out.returncode == 0, out.stderr[-2000:]
    line = next(x for x in out.stdout.splitlines() if x.startswith("RESULT "))
    return json.loads(line.removeprefix("RESULT "))


def test_the_cores_become_devices_for_runs_in_equal_shares_and_agents_keep_one():
    """On 4 cores: 4 CPU devices; a program of n runs takes the most devices that split n
    evenly (6 runs: 3 devices of 2; 5 runs: 1 device); an agent's own mesh takes one."""
    result = run_cores_script("")
    assert result["devices"] == 4
    assert result["runs"] == {"1": 1, "2": 2, "3": 3, "4": 4, "5": 1, "6": 3, "8": 4}
    assert result["work"] == 1


def test_devices_the_user_forced_stay_the_agents_and_the_runs_share_one():
    """With a forced host device count the user chose the devices: agents split their work
    over all of them, as before, and the runs stay on the first."""
    result = run_cores_script("--xla_force_host_platform_device_count=2")
    assert result["devices"] == 2
    assert set(result["runs"].values()) == {1}
    assert result["work"] == 2


def test_a_program_of_runs_after_jax_started_keeps_one_device_and_says_how_to_spread():
    """JAX started first (Python code used it): the devices stay as they are, the runs share
    one, and one warning says what to call to spread them."""
    script = """
import logging, os
os.sched_getaffinity = lambda pid: set(range(4))
import jax, jax.numpy as jnp
jnp.zeros(1)
from jaxrl import parallel
logging.basicConfig(format="%(levelname)s %(message)s")
parallel.use_cores_as_devices()
print("DEVICES", jax.device_count(), len(parallel.run_devices(4)))
parallel.warn_if_runs_miss_the_cores(4)
parallel.warn_if_runs_miss_the_cores(1)
"""
    env = {**os.environ, "XLA_FLAGS": "", "JAX_PLATFORMS": "cpu"}
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert "DEVICES 1 1" in out.stdout
    warnings = [line for line in out.stderr.splitlines() if line.startswith("WARNING")]
    assert warnings == [
        "WARNING 4 runs share one CPU device: JAX started before jaxrl could make the 4 cores "
        "devices; call jaxrl.parallel.use_cores_as_devices() right after `import jax` to spread "
        "them over the cores"
    ]
