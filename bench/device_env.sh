# Sourced by a GPU run whose machine lacks the build's -dev packages: uses the cuda-agent binary
# built elsewhere and carried in .device/ (with the shared libraries it links), and this checkout
# as the install root for the harness.
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
export CUDA_AGENT_HOME=$root
if [ -x "$root/.device/cuda-agent" ]; then
  # A binary named by the caller (another build, for an A/B) wins, here and in scripts that
  # source this file again.
  export CUDA_AGENT_BIN=${CUDA_AGENT_BIN:-$root/.device/cuda-agent}
  # Carried libraries only where the machine lacks them: children (Python) inherit the path too.
  if ldd "$CUDA_AGENT_BIN" | grep -q "not found"; then
    export LD_LIBRARY_PATH=$root/.device/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  fi
fi
export PYTHONUNBUFFERED=1
