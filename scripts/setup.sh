#!/usr/bin/env bash
# Installs what cuda-agent needs and is missing (Debian packages through apt-get, Python packages
# through pip), then configures and builds it under build/. Safe to run again: it installs nothing
# that is already there and rebuilds only what changed.
set -euo pipefail
cd "$(dirname "$0")/.."

TORCH_VERSION=2.11.0
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

# Debian packages: tools found on PATH count as installed, whatever installed them.
missing=()
command -v g++ >/dev/null || missing+=(g++)
command -v cmake >/dev/null || missing+=(cmake)
command -v ninja >/dev/null || missing+=(ninja-build)
command -v pkg-config >/dev/null || missing+=(pkgconf)
command -v python3 >/dev/null || missing+=(python3 python3-pip)
# chromium-headless-shell: the test that draws the HTML report in a browser; libcpp-httplib-dev:
# the HTTP server of `cuda-agent serve`.
for pkg in nlohmann-json3-dev libcli11-dev libsqlite3-dev libssl-dev libcurl4-openssl-dev libgtest-dev libgmock-dev libcpp-httplib-dev chromium-headless-shell; do
  dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing Debian packages: ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# Python packages: torch pinned to the version on the GPU machines, so CPU and GPU results come
# from the same code.
pip_args=()
if python3 -c 'import os, sysconfig, sys; sys.exit(0 if os.path.exists(os.path.join(sysconfig.get_path("stdlib"), "EXTERNALLY-MANAGED")) else 1)'; then
  pip_args+=(--break-system-packages)
fi
python3 -m pip --version >/dev/null 2>&1 || { $SUDO apt-get install -y -qq python3-pip >/dev/null; }
want=()
python3 -c "import torch, sys; sys.exit(0 if torch.__version__.split('+')[0] == '$TORCH_VERSION' else 1)" 2>/dev/null \
  || want+=("torch==$TORCH_VERSION")
python3 -c 'import numpy' 2>/dev/null || want+=(numpy)
python3 -c 'import pytest' 2>/dev/null || want+=(pytest)
python3 -c 'import pyarrow' 2>/dev/null || want+=(pyarrow)  # Parquet datasets (tasks import)
python3 -c 'import jsonschema' 2>/dev/null || want+=(jsonschema)  # the agent's request schema test
python3 -c 'import ray' 2>/dev/null || want+=(ray)  # bench --ray: evaluation workers as Ray actors
python3 -c 'import datasets' 2>/dev/null || want+=(datasets)  # the RL exports' loader test
if [ ${#want[@]} -gt 0 ]; then
  echo "setup: installing Python packages: ${want[*]}"
  python3 -m pip install -q "${pip_args[@]}" "${want[@]}"
fi

cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build
