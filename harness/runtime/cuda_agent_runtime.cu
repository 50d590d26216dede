// Compiled into every kernel library built for the cuda device: lets the binding turn the error
// code a kernel entry point returns into CUDA's own message.
#include <cuda_runtime.h>

extern "C" const char* cuda_agent_error_string(int code) {
  return cudaGetErrorString(static_cast<cudaError_t>(code));
}
