#!/usr/bin/env bash
# What benchmarks/gpu_session.sh needs carried to a lent GPU machine, made here (where PyPI is
# reachable) in the repository root: .whl/ (Python 3.12 wheels of the packages that machine's
# image lacks, the versions this repository is tested with) and .pjx/ (PureJaxRL's purejaxrl/
# folder, copied from a checkout given as the argument). Both are ignored by git (added to
# .git/info/exclude), so they travel only when a call carries them.
#
#   bash benchmarks/gpu_prepare.sh PATH_TO_PUREJAXRL_CHECKOUT
set -euo pipefail
cd "$(dirname "$0")/.."
purejaxrl=${1:?usage: bash benchmarks/gpu_prepare.sh PATH_TO_PUREJAXRL_CHECKOUT}
for ignored in /.whl/ /.pjx/; do
    grep -qxF "$ignored" .git/info/exclude 2>/dev/null || echo "$ignored" >> .git/info/exclude
done

rm -rf .whl && mkdir .whl
platforms=()
for p in manylinux_2_28_x86_64 manylinux_2_27_x86_64 manylinux_2_17_x86_64 manylinux2014_x86_64 \
    manylinux1_x86_64; do
    platforms+=(--platform "$p")
done
# mujoco-studio (a dependency of mujoco 4 that `import mujoco` does not load) is left out: 9 MB.
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
    --implementation cp "${platforms[@]}" -d .whl \
    gymnax==1.0.1 gymnasium==1.3.0 farama-notifications==0.0.6 brax==0.14.2 mujoco==4.0.1 \
    mujoco-core==4.0.1 mujoco-mjx==3.17.0 hydra-core==1.3.8 omegaconf==2.3.1 tensorboardX==2.6.5 \
    ale-py==0.12.1 trimesh==5.2.0 ml_collections==1.1.0 flask==3.1.3 flask-cors==6.0.2 \
    blinker==1.9.0 itsdangerous==2.2.0 jaxopt==0.8.5 glfw==2.11.0 pyopengl==3.1.10
# antlr4's 4.9 runtime (Hydra's parser) is only an sdist on PyPI: built here, pure Python.
python3 -m pip wheel -q --no-deps antlr4-python3-runtime==4.9.3 -w .whl

rm -rf .pjx && mkdir -p .pjx
cp -r "$purejaxrl/purejaxrl" .pjx/
du -sh .whl .pjx
