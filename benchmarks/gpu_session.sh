#!/usr/bin/env bash
# A lent GPU machine's checks in one call (device time is lent by the quarter hour, and each
# start costs minutes): the accelerator-relevant tests, then the PPO CartPole, Brax and Atari rows
# (issue 14's GPU goal, issue 18's GPU rows). Sections run in order of priority, each under its
# own time cap and all under one deadline, so a slow section cuts the later ones, never the
# call. The test log and the reports land under $OUT; the rest is printed.
#
# Before the call, from the repository root (the machine has JAX and PyTorch but reaches no
# package index; pyproject's pins do not apply there): `bash benchmarks/gpu_prepare.sh
# PATH_TO_PUREJAXRL_CHECKOUT` makes the two ignored folders it reads:
#   .whl/  wheels for Python 3.12 of what its image lacks (gymnax, brax, mujoco, hydra, ale-py, ...)
#   .pjx/  PureJaxRL's purejaxrl/ folder
# and carry both: run(command="bash benchmarks/gpu_session.sh 540", carry=[".whl", ".pjx"]).
# The argument is the deadline in seconds from the start: leave 50 s of the call's timeout_s
# beside it (start-up and the copy of $OUT).
set -u
deadline=$(($(date +%s) + ${1:-540}))
OUT=${OUT:-/tmp/gpu_session}
mkdir -p "$OUT"

cap() {  # the smaller of a section's cap and the time to the deadline, at least 1 s
    local left=$((deadline - $(date +%s)))
    ((left < $1)) && echo $((left > 1 ? left : 1)) || echo "$1"
}
section() { echo; echo "=== $1 ($(date +%T), $((deadline - $(date +%s))) s left)"; }

# Every command runs under a cap. On 2026-12-04 the first call linked /tmp/bin/python to the
# image's python3 (a link leaves its venv: no jax), and the second call, on the same warm
# machine, wrote the wrapper below *through* that link: python3 itself became a script that
# exec'd python3, the import check never returned, and nothing under $OUT came back. The wrapper
# now goes into a fresh directory, and the imports print one at a time, timed.
section "set-up"
if [ -d .whl ]; then
    timeout 120 python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
        --upgrade --target /tmp/site .whl/*.whl || exit 1
    export PYTHONPATH=/tmp/site:$PWD
fi
# `python` for the tests' and benchmarks' subprocesses: a wrapper, since a link to the image's
# venv python3 leaves the venv (no jax); in a new directory, never over an existing file.
bin_dir=$(mktemp -d)
printf '#!/bin/sh\nexec %s "$@"\n' "$(command -v python3)" > "$bin_dir/python"
chmod +x "$bin_dir/python"
export PATH=$bin_dir:$PATH XLA_PYTHON_CLIENT_PREALLOCATE=false PYTHONUNBUFFERED=1
timeout 20 nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
lscpu | grep -E "^Model name|^CPU\(s\)"
imports='import importlib, sys, time
for name in ["jax", "jaxrl", "hydra", "gymnasium", "gymnax", "ale_py", "brax"]:
    t = time.time(); print("importing", name, end=" ", flush=True)
    importlib.import_module(name); print(f"{time.time() - t:.1f} s", flush=True)
import jax
t = time.time(); print(jax.__version__, jax.devices(), f"{time.time() - t:.1f} s", flush=True)'
if ! timeout -k 5 "$(cap 120)" python -c "$imports"; then
    echo "set-up failed; JAX alone, without the carried wheels:"
    PYTHONPATH= timeout -k 5 60 python3 -c "import jax; print(jax.__version__, jax.devices())"
    exit 1
fi

section "tests: accelerator-relevant files and the ones that failed there (gpu_h200.md)"
# Left out: the bad-input cases (one CUDA start-up each), what needs rliable or PyBullet (not
# carried: gpu_h200.md), and test_es_devices.py (forced CPU devices; its script died of a
# segmentation fault in the H200 image's jax).
timeout -k 10 "$(cap 160)" python -m pytest -p no:cacheprovider -v -n 12 --timeout 160 \
    -k "not bad_input and not racecar and not four_seeds and not sweep_summarises" \
    --tb=short -rfE \
    tests/jaxrl/test_networks.py tests/jaxrl/test_parallel.py tests/jaxrl/test_reliability.py \
    tests/jaxrl/test_presets.py tests/envs/test_host.py tests/envs/test_atari.py \
    tests/envs/test_brax_envs.py tests/jaxrl/test_onpolicy.py tests/jaxrl/test_rollout.py \
    tests/jaxrl/test_checkpoint.py tests/agents/test_td3.py tests/agents/test_es.py \
    tests/agents/test_dqn.py tests/agents/test_ppo.py tests/agents/test_reinforce.py \
    tests/agents/test_erl.py \
    "tests/jaxrl/test_cli.py::test_seed_k_of_a_sweep_is_the_run_with_seed_k" \
    > "$OUT/pytest.log" 2>&1
echo "pytest exit $? (124: stopped at its cap)"
pkill -f pytest
echo "$(grep -c " PASSED" "$OUT/pytest.log") passed, $(grep -c " SKIPPED" "$OUT/pytest.log") skipped"
grep -E " (FAILED|ERROR)( |$)|^(FAILED|ERROR) " "$OUT/pytest.log" | sort -u | tail -30

section "PPO CartPole-v1 beside PureJaxRL (1 and 512 seeds)"
timeout -k 5 "$(cap 125)" python benchmarks/ppo_purejaxrl.py --purejaxrl .pjx --seeds 1 512 \
    --repeats 2 --out "$OUT/ppo_purejaxrl.md"

section "PPO CartPole on the GPU, 1 seed: default, one evaluation, one evaluation without speed-ups"
# Where the 0.84x of gpu_h200.md goes: the evaluations (~0.3 s there), or the CPU-timed forms
# (jaxrl/speedups.py: the flat optimiser vector is on everywhere).
ppo_args="agent=ppo env=CartPole-v1 env.num_envs=4 agent.num_steps=128 agent.num_minibatches=4
    agent.update_epochs=4 agent.obs_normalization=false agent.return_normalization=false
    budget.env_steps=499712 log.progress=false log.tensorboard=false"
for variant in "eval.every=null" "eval.every=977" "eval.every=977 JAXRL_SPEEDUPS=off"; do
    overrides=${variant% JAXRL_SPEEDUPS=off}
    speedups=$([ "$overrides" = "$variant" ] && echo on || echo off)
    echo "$variant: $(JAXRL_SPEEDUPS=$speedups timeout -k 5 "$(cap 30)" python -m jaxrl.run \
        $ppo_args "$overrides" log.dir="/tmp/runs/ppo_${speedups}_${overrides#eval.every=}" \
        2>&1 | tail -1)"
done

section "Brax: our PPO and Brax's ppo.train on ant (spring), 8 iterations"
timeout -k 5 "$(cap 120)" python benchmarks/brax_trainers.py --algo ppo --budget 2621440 \
    --seeds 1 --runs /tmp/runs/brax --retrain &&
    cp benchmarks/results/brax_trainers_ppo.md "$OUT/brax_trainers_ppo.md"

section "Atari: the bridge beside ALE's vector env, 8 envs"
timeout -k 5 "$(cap 45)" python benchmarks/atari_bridge.py --num-envs 8 --steps 2000 \
    --repeats 1 --out "$OUT/atari_bridge.md"

section "Atari: PPO on ALE/Pong-v5 (atari preset), 32 iterations, one evaluation of 2 games"
timeout -k 5 "$(cap 75)" python -m jaxrl.run agent=ppo env=ALE/Pong-v5 budget.env_steps=32768 \
    eval.every=32 eval.episodes=2 log.dir=/tmp/runs/pong log.progress=false &&
    cp /tmp/runs/pong/summary.json "$OUT/pong_summary.json"
section "done"
