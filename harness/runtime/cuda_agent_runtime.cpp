// Compiled into every kernel library built for the cpu device: the same entry point as on cuda,
// so the binding reports errors the same way on both devices.
#include <cstdio>

extern "C" const char* cuda_agent_error_string(int code) {
  static thread_local char message[64];
  std::snprintf(message, sizeof message, "kernel returned error code %d", code);
  return message;
}
