#include "eval/result.h"

#include <cstdio>

namespace cuda_agent {
namespace {

constexpr Outcome kAllOutcomes[] = {
    Outcome::kPass,      Outcome::kCompileError, Outcome::kMismatch,
    Outcome::kViolation, Outcome::kRuntimeError, Outcome::kCrash,
    Outcome::kTimeout,   Outcome::kInterrupted,  Outcome::kDegenerateTask};

template <typename T>
nlohmann::json optional_json(const std::optional<T>& value) {
  return value ? nlohmann::json(*value) : nlohmann::json(nullptr);
}

template <typename T>
std::optional<T> optional_from(const nlohmann::json& j, const char* key) {
  if (!j.contains(key) || j[key].is_null()) return std::nullopt;
  return j[key].get<T>();
}

nlohmann::json stage_json(const StageReport& s) {
  return {{"status", s.status},
          {"seconds", s.seconds},
          {"detail", s.detail},
          {"data", s.data},
          {"log", s.log}};
}

nlohmann::json findings_json(const std::vector<Violation>& findings) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& v : findings) {
    nlohmann::json item = {{"rule", v.rule}, {"detail", v.detail}};
    if (!v.file.empty()) item["file"] = v.file;
    if (v.line > 0) item["line"] = v.line;
    out.push_back(std::move(item));
  }
  return out;
}

std::vector<Violation> findings_from(const nlohmann::json& j) {
  std::vector<Violation> out;
  if (!j.is_array()) return out;
  for (const auto& v : j) {
    out.push_back(
        {v.value("rule", ""), v.value("detail", ""), v.value("file", ""), v.value("line", 0)});
  }
  return out;
}

StageReport stage_from(const nlohmann::json& j) {
  StageReport s;
  if (!j.is_object()) return s;
  s.status = j.value("status", "skipped");
  s.seconds = j.value("seconds", 0.0);
  s.detail = j.value("detail", "");
  s.data = j.value("data", nlohmann::json::object());
  s.log = j.value("log", "");
  return s;
}

std::string format_us(const std::optional<double>& us) {
  if (!us) return "-";
  char buffer[32];
  if (*us >= 1000)
    std::snprintf(buffer, sizeof buffer, "%.3f ms", *us / 1000);
  else
    std::snprintf(buffer, sizeof buffer, "%.1f us", *us);
  return buffer;
}

std::string format_ratio(const std::optional<double>& x) {
  if (!x) return "-";
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.2fx", *x);
  return buffer;
}

/// "p10-p90" of one implementation's timed calls, from the profile stage's data.
std::string format_spread(const nlohmann::json& data, const char* impl) {
  if (!data.is_object() || !data.contains(impl) || !data[impl].is_object()) return "-";
  const nlohmann::json& timing = data[impl];
  if (!timing.contains("p10_us") || !timing.contains("p90_us") || !timing["p10_us"].is_number() ||
      !timing["p90_us"].is_number()) {
    return "-";
  }
  return format_us(timing["p10_us"].get<double>()) + "-" +
         format_us(timing["p90_us"].get<double>());
}

}  // namespace

const char* outcome_name(Outcome outcome) {
  switch (outcome) {
    case Outcome::kPass:
      return "pass";
    case Outcome::kCompileError:
      return "compile_error";
    case Outcome::kMismatch:
      return "mismatch";
    case Outcome::kViolation:
      return "violation";
    case Outcome::kRuntimeError:
      return "runtime_error";
    case Outcome::kCrash:
      return "crash";
    case Outcome::kTimeout:
      return "timeout";
    case Outcome::kInterrupted:
      return "interrupted";
    case Outcome::kDegenerateTask:
      return "degenerate_task";
  }
  return "unknown";
}

nlohmann::json EvalResult::to_json() const {
  nlohmann::json checks_json = nlohmann::json::array();
  for (const auto& c : checks)
    checks_json.push_back({{"name", c.name}, {"status", c.status}, {"detail", c.detail}});
  return {
      {"schema", kSchema},
      {"id", id},
      {"task", {{"id", task_id}, {"path", task_path}, {"sha256", task_sha256}}},
      {"workspace", workspace},
      {"device", device},
      {"device_name", device_name},
      {"torch", torch_version},
      {"stage", stage},
      {"outcome", outcome_name(outcome)},
      {"reason", reason},
      {"compiled", compiled},
      {"correct", correct},
      {"violations", findings_json(violations)},
      {"warnings", findings_json(warnings)},
      {"checks", checks_json},
      {"eager_us", optional_json(eager_us)},
      {"compile_us", optional_json(compile_us)},
      {"candidate_us", optional_json(candidate_us)},
      {"speedups",
       {{"vs_eager", optional_json(speedup_vs_eager)},
        {"vs_compile", optional_json(speedup_vs_compile)}}},
      {"reward", optional_json(reward)},
      {"reward_recipe", reward_recipe},
      {"reward_value", optional_json(reward_value)},
      {"log_speedup", optional_json(log_speedup)},
      {"stages",
       {{"compile", stage_json(compile)},
        {"verify", stage_json(verify)},
        {"profile", stage_json(profile)}}},
      {"settings", settings},
      {"sandbox", sandbox},
  };
}

EvalResult EvalResult::from_json(const nlohmann::json& j) {
  EvalResult r;
  r.id = j.value("id", 0LL);
  const nlohmann::json task = j.value("task", nlohmann::json::object());
  r.task_id = task.value("id", "");
  r.task_path = task.value("path", "");
  r.task_sha256 = task.value("sha256", "");
  r.workspace = j.value("workspace", "");
  r.device = j.value("device", "");
  r.device_name = j.value("device_name", "");
  r.torch_version = j.value("torch", "");
  r.stage = j.value("stage", "all");
  std::string outcome = j.value("outcome", "pass");
  for (Outcome o : kAllOutcomes) {
    if (outcome == outcome_name(o)) r.outcome = o;
  }
  r.reason = j.value("reason", "");
  r.compiled = j.value("compiled", false);
  r.correct = j.value("correct", false);
  r.violations = findings_from(j.value("violations", nlohmann::json::array()));
  r.warnings = findings_from(j.value("warnings", nlohmann::json::array()));
  for (const auto& c : j.value("checks", nlohmann::json::array())) {
    r.checks.push_back({c.value("name", ""), c.value("status", ""), c.value("detail", "")});
  }
  r.eager_us = optional_from<double>(j, "eager_us");
  r.compile_us = optional_from<double>(j, "compile_us");
  r.candidate_us = optional_from<double>(j, "candidate_us");
  const nlohmann::json speedups = j.value("speedups", nlohmann::json::object());
  r.speedup_vs_eager = optional_from<double>(speedups, "vs_eager");
  r.speedup_vs_compile = optional_from<double>(speedups, "vs_compile");
  r.reward = optional_from<int>(j, "reward");
  r.reward_recipe = j.value("reward_recipe", "");
  r.reward_value = optional_from<double>(j, "reward_value");
  r.log_speedup = optional_from<double>(j, "log_speedup");
  const nlohmann::json stages = j.value("stages", nlohmann::json::object());
  r.compile = stage_from(stages.value("compile", nlohmann::json()));
  r.verify = stage_from(stages.value("verify", nlohmann::json()));
  r.profile = stage_from(stages.value("profile", nlohmann::json()));
  r.settings = j.value("settings", nlohmann::json::object());
  r.sandbox = j.value("sandbox", nlohmann::json::object());
  return r;
}

std::string format_summary(const EvalResult& r) {
  char line[256];
  std::string out;
  std::snprintf(line, sizeof line, "%s  %s on %s%s\n", r.passed() ? "PASS" : "FAIL",
                r.task_id.c_str(), r.device.c_str(),
                r.device_name.empty() ? "" : (" (" + r.device_name + ")").c_str());
  out += line;
  out += "  " + std::string(outcome_name(r.outcome)) + ": " + r.reason + "\n";
  auto where = [](const Violation& v) {
    if (v.file.empty()) return std::string();
    std::string text = " (" + v.file;
    if (v.line > 0) text.append(":").append(std::to_string(v.line));
    return text + ")";
  };
  for (const auto& v : r.violations)
    out += "  violation " + v.rule + where(v) + ": " + v.detail + "\n";
  for (const auto& v : r.warnings)
    out += "  warning   " + v.rule + where(v) + ": " + v.detail + "\n";
  const std::pair<const char*, const StageReport*> stages[] = {
      {"compile", &r.compile}, {"verify", &r.verify}, {"profile", &r.profile}};
  for (const auto& [name, stage] : stages) {
    std::snprintf(line, sizeof line, "  %-8s %-8s %7.2f s  %s\n", name, stage->status.c_str(),
                  stage->seconds, stage->detail.c_str());
    out += line;
  }
  if (r.candidate_us || r.eager_us) {
    out += "  time     eager " + format_us(r.eager_us) + "   torch.compile " +
           format_us(r.compile_us) + "   candidate " + format_us(r.candidate_us) + "\n";
    out += "  spread   p10-p90 of the timed calls: eager " +
           format_spread(r.profile.data, "eager") + "   torch.compile " +
           format_spread(r.profile.data, "compile") + "   candidate " +
           format_spread(r.profile.data, "candidate") + "\n";
    out += "  speedup  vs eager " + format_ratio(r.speedup_vs_eager) + "   vs torch.compile " +
           format_ratio(r.speedup_vs_compile) + "\n";
  }
  const std::string precision = r.settings.value("precision", "fp32");
  if (precision != "fp32") {
    out += "  precision " + precision +
           ": the candidate's fp32 GEMMs and convolutions may run in it; eager and "
           "torch.compile ran in full fp32\n";
  }
  if (r.reward) {
    out += "  reward   " + std::to_string(*r.reward);
    if (r.reward_value && r.reward_recipe != "discrete" && !r.reward_recipe.empty()) {
      char value[64];
      std::snprintf(value, sizeof value, " (discrete); %s %.4g\n", r.reward_recipe.c_str(),
                    *r.reward_value);
      out += value;
    } else {
      out += " (discrete)\n";
    }
  }
  return out;
}

std::string format_checks(const EvalResult& r) {
  std::string out = "checks (" + std::to_string(r.checks.size()) + "):\n";
  for (const auto& c : r.checks) {
    char line[128];
    std::snprintf(line, sizeof line, "  %-8s %-40s ", c.status.c_str(), c.name.c_str());
    out += line + c.detail + "\n";
  }
  return out;
}

}  // namespace cuda_agent
