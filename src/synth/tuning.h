/// What the tuner needs of a synthesized candidate: the launch configurations of its kernel that
/// model_new.py may choose, and the keys the tuning database files the winner under.
///
/// Every configuration lives in the one compiled library; model_new.py picks one at import
/// (`CONFIG = id`, passed to the library's <entry>_config), so trying a configuration costs an
/// evaluation and no compile. On CUDA a configuration is a block shape; on the CPU, an OpenMP
/// schedule.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace cuda_agent::synth {

struct KernelConfig {
  int id = -1;        // CONFIG in model_new.py
  std::string label;  // for people: "rows 4 x 32 threads x 1 run", "schedule dynamic,16"
};

struct Candidate {
  std::map<std::string, std::string> files;  // by path relative to the workspace
  std::vector<KernelConfig> configs;         // worth timing, the default first
  std::string pattern;      // the kernel source's sha256: same ops, dtypes and plan
  std::string shape_class;  // sizes rounded so that tasks of similar shape share a winner
  // A plainer candidate for the same graph, to write instead where this one does not build,
  // fails verification or crashes (the attention kernel's GEMMs summed in another order than
  // the library's can round a score of a spiked input to the next 16-bit value), with what it
  // does differently; at most one.
  std::vector<Candidate> fallbacks;
  std::string summary;  // for a fallback: "attention's GEMMs through the library"
};

/// The CPU backends' configurations: OpenMP schedules of the row loop.
std::vector<KernelConfig> cpu_schedules();

/// C++ for a CPU kernel library: `<entry>_config(int64_t)` and sa_apply_config(), which sets
/// the OpenMP schedule that `schedule(runtime)` loops then follow. Needs <omp.h> and stdint.
std::string cpu_config_source(const std::string& entry);

/// model_new.py's lines that choose the configuration after `lib = load()`.
std::string model_config_source(const std::string& entry);

/// model (a generated model_new.py) with CONFIG set to id.
std::string with_config(const std::string& model, int id);
/// The text with_config writes for id ("\nCONFIG = 3 "), unique in a generated model_new.py.
std::string config_text(int id);
/// The configuration a generated model_new.py chooses; empty when it has no CONFIG line.
std::optional<int> config_of(const std::string& model);

/// A size as its power-of-two class: "2^12" for 3000..4096.
std::string size_class(long long size);

}  // namespace cuda_agent::synth
