/// --tf32, which every command that evaluates candidates takes (EvalOptions::precision).
#pragma once

#include <CLI/CLI.hpp>
#include <string>

namespace cuda_agent {

/// Adds --tf32 to command: it sets *precision to "tf32", letting cuBLAS and cuDNN take the
/// candidates' fp32 GEMMs and convolutions in TF32. The help text says where (`scope`, or "" for
/// each evaluation the command makes) and what records it (`record`).
inline CLI::Option* add_tf32_flag(CLI::App* command, std::string* precision,
                                  const std::string& scope, const std::string& record) {
  return command->add_flag_callback(
      "--tf32", [precision] { *precision = "tf32"; },
      "let cuBLAS and cuDNN take the candidate's fp32 GEMMs and convolutions in TF32" +
          (scope.empty() ? "" : " " + scope) + "; eager and torch.compile stay in full fp32; " +
          record);
}

}  // namespace cuda_agent
