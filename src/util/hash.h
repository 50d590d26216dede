/// Content hashes: build-cache keys, task identities and the checksums that prove a workspace's
/// infrastructure files are the ones that were laid out.
#pragma once

#include <string>
#include <string_view>

namespace cuda_agent {

/// Lowercase hex SHA-256 of the bytes.
std::string sha256_hex(std::string_view bytes);

}  // namespace cuda_agent
