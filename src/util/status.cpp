#include "util/status.h"

namespace cuda_agent {

std::string Status::ToString() const {
  switch (code_) {
    case Code::kOk:
      return "OK";
    case Code::kInvalidArgument:
      return "invalid argument: " + message_;
    case Code::kNotFound:
      return "not found: " + message_;
    case Code::kIoError:
      return "I/O error: " + message_;
    case Code::kCorruption:
      return "corruption: " + message_;
    case Code::kInternal:
      return "internal error: " + message_;
  }
  return message_;
}

}  // namespace cuda_agent
