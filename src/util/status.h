/// A Status says whether an operation worked and, when it did not, why, in a sentence a person
/// can act on. Failures are values: they travel up to the command line and are reported once.
#pragma once

#include <string>
#include <utility>

namespace cuda_agent {

class Status {
 public:
  enum class Code { kOk, kInvalidArgument, kNotFound, kIoError, kCorruption, kInternal };

  Status() = default;
  static Status OK() { return Status(); }
  static Status InvalidArgument(std::string msg) {
    return {Code::kInvalidArgument, std::move(msg)};
  }
  static Status NotFound(std::string msg) { return {Code::kNotFound, std::move(msg)}; }
  static Status IoError(std::string msg) { return {Code::kIoError, std::move(msg)}; }
  static Status Corruption(std::string msg) { return {Code::kCorruption, std::move(msg)}; }
  static Status Internal(std::string msg) { return {Code::kInternal, std::move(msg)}; }

  bool ok() const { return code_ == Code::kOk; }
  Code code() const { return code_; }
  const std::string& message() const { return message_; }
  std::string ToString() const;

 private:
  Status(Code code, std::string msg) : code_(code), message_(std::move(msg)) {}
  Code code_ = Code::kOk;
  std::string message_;
};

}  // namespace cuda_agent
