#!/usr/bin/env bash
# Fills what bench/gpu_reference.py carries to a GPU machine that reaches no package registry:
#   bench/wheelhouse/  the wheels that machine's Python lacks, for its Python and platform:
#                      snakemake and jsonschema with their dependencies, pandas (the pinned release,
#                      installed there only where the machine's is of another major release),
#                      torchvision (the download and preload rules; the release that pairs with the
#                      machine's torch, installed without dependencies), nvidia-ml-py. Never torch,
#                      triton, numpy or the CUDA libraries: the machine's own stay.
#   bench/mnist/       the four MNIST .gz files, copied from MNIST_DIR and checked against MNIST's
#                      content checksums (a recompressed copy passes).
# Then it checks that the working tree, the wheelhouse and the data fit the device tool's carry
# limit (64 MiB in all) and prints the sizes. Both folders are ignored by git.
#
#   bench/wheelhouse.sh MNIST_DIR
#
# Environment: PYTHON (the Python whose pip downloads, default python3), TARGET_PYTHON (the GPU
# machine's Python version, default 3.12), PLATFORMS (the wheel platforms it takes, default
# "manylinux_2_28_x86_64 manylinux2014_x86_64": its torch's wheels need glibc 2.28, and pip expands
# manylinux2014 to the older manylinux tags of some dependencies, not manylinux_2_28), TORCHVISION
# (default 0.26.0, the release built for torch 2.11).
set -euo pipefail
cd "$(dirname "$0")/.."

MNIST_DIR=${1:?usage: bench/wheelhouse.sh MNIST_DIR (a folder holding the four MNIST .gz files)}
PYTHON=${PYTHON:-python3}
TARGET_PYTHON=${TARGET_PYTHON:-3.12}
PLATFORMS=${PLATFORMS:-manylinux_2_28_x86_64 manylinux2014_x86_64}
TORCHVISION=${TORCHVISION:-0.26.0}
WHEELHOUSE=bench/wheelhouse
DATA=bench/mnist
LIMIT=$((64 * 1024 * 1024))

pin() { # the version requirements.txt pins, as name==version
    grep -E "^$1==" requirements.txt || {
        echo "error: requirements.txt pins no $1" >&2
        exit 1
    }
}
pip_quiet() { # pip, without the notes about this machine's local index folders
    "$PYTHON" -m pip "$@" 2>&1 | { grep -v "^WARNING: Location .* is ignored" || true; }
}

rm -rf "$WHEELHOUSE"
mkdir -p "$WHEELHOUSE"
# Packages that PyPI has as source only (pure Python): built here as py3-none-any wheels first, since
# a download for another Python and platform takes wheels only.
pip_quiet wheel --quiet --no-deps --wheel-dir "$WHEELHOUSE" "connection_pool>=0.0.3"
target=(--python-version "$TARGET_PYTHON" --only-binary=:all:)
for platform in $PLATFORMS; do target+=(--platform "$platform"); done
pins=("$(pin snakemake)" "$(pin jsonschema)" "$(pin pandas)")
pip_quiet download --quiet --dest "$WHEELHOUSE" --find-links "$WHEELHOUSE" "${target[@]}" "${pins[@]}" nvidia-ml-py
pip_quiet download --quiet --dest "$WHEELHOUSE" --no-deps "${target[@]}" "torchvision==$TORCHVISION"
# pandas pulls numpy in; the machine's numpy is the one its torch was built with, and stays.
rm -f "$WHEELHOUSE"/numpy-*.whl "$WHEELHOUSE"/torch-*.whl "$WHEELHOUSE"/triton-*.whl "$WHEELHOUSE"/nvidia_cu*.whl
for need in snakemake jsonschema pandas torchvision nvidia_ml_py connection_pool; do
    compgen -G "$WHEELHOUSE/$need-*.whl" >/dev/null || {
        echo "error: no $need wheel in $WHEELHOUSE" >&2
        exit 1
    }
done

rm -rf "$DATA"
mkdir -p "$DATA"
for f in train-images-idx3-ubyte.gz train-labels-idx1-ubyte.gz t10k-images-idx3-ubyte.gz t10k-labels-idx1-ubyte.gz; do
    cp "$MNIST_DIR/$f" "$DATA/$f"
done
"$PYTHON" bench/gpu_reference.py --check-data "$DATA"

# What the device tool carries: tracked and untracked-but-not-ignored files, and the two folders.
tree=$(git ls-files -z --cached --others --exclude-standard | while IFS= read -r -d '' f; do
    if [[ -f $f && ! -L $f ]]; then stat -c %s -- "$f"; fi
done | awk '{s += $1} END {print s + 0}')
wheels=$(du -sb "$WHEELHOUSE" | cut -f1)
data=$(du -sb "$DATA" | cut -f1)
total=$((tree + wheels + data))
mib() { awk -v b="$1" 'BEGIN {printf "%.1f MiB", b / 1048576}'; }
echo "wheelhouse: $(find "$WHEELHOUSE" -name '*.whl' | wc -l) wheels, $(mib "$wheels") ($WHEELHOUSE)"
echo "MNIST: $(mib "$data") ($DATA)"
echo "working tree: $(mib "$tree")"
echo "carried in all: $(mib "$total") of the $(mib "$LIMIT") limit"
if ((total > LIMIT)); then
    echo "error: more than the carry limit; drop a wheel the GPU machine has" >&2
    exit 1
fi
