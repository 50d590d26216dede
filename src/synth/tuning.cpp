#include "synth/tuning.h"

#include <regex>

namespace cuda_agent::synth {

std::vector<KernelConfig> cpu_schedules() {
  return {{0, "schedule static"}, {2, "schedule dynamic,16"}, {3, "schedule guided"}};
}

std::string cpu_config_source(const std::string& entry) {
  return "// The OpenMP schedule model_new.py chose (a config id), or -1: static.\n"
         "static int sa_config = -1;\n"
         "extern \"C\" int " +
         entry +
         "_config(int64_t config) {\n"
         "  sa_config = (int)config;\n"
         "  return 0;\n}\n"
         "static void sa_apply_config(void) {\n"
         "  switch (sa_config) {\n"
         "    case 1: omp_set_schedule(omp_sched_static, 1); break;\n"
         "    case 2: omp_set_schedule(omp_sched_dynamic, 16); break;\n"
         "    case 3: omp_set_schedule(omp_sched_guided, 0); break;\n"
         "    default: omp_set_schedule(omp_sched_static, 0);\n"
         "  }\n}\n\n";
}

std::string model_config_source(const std::string& entry) {
  return "CONFIG = -1  # the kernel's launch configuration: -1 by the sizes, else as tuned\n" +
         entry + "_config = lib.bind(\"" + entry + "_config\", \"i64\")\n" + entry +
         "_config(CONFIG)\n";
}

namespace {

const std::regex& config_line() {
  static const std::regex line(R"(\nCONFIG = (-?[0-9]+) )");
  return line;
}

}  // namespace

std::string config_text(int id) { return "\nCONFIG = " + std::to_string(id) + " "; }

std::optional<int> config_of(const std::string& model) {
  std::smatch match;
  if (!std::regex_search(model, match, config_line())) return std::nullopt;
  return std::stoi(match[1].str());
}

std::string with_config(const std::string& model, int id) {
  return std::regex_replace(model, config_line(), config_text(id),
                            std::regex_constants::format_first_only);
}

std::string size_class(long long size) {
  int bits = 0;
  while ((1LL << bits) < size && bits < 62) ++bits;
  return "2^" + std::to_string(bits);
}

}  // namespace cuda_agent::synth
