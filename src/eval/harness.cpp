#include "eval/harness.h"

#include <chrono>

#include "util/files.h"

namespace cuda_agent {

namespace fs = std::filesystem;

ProcessSpec harness_process(const std::string& python, const fs::path& harness_dir,
                            const fs::path& pycache, const std::string& script) {
  ProcessSpec spec;
  spec.argv = {python, "-E", "-s"};
  if (!pycache.empty())
    spec.argv.insert(spec.argv.end(), {"-X", "pycache_prefix=" + pycache.string()});
  spec.fork_server = spec.argv;
  spec.fork_server.push_back((harness_dir / "fork_server.py").string());
  spec.argv.push_back((harness_dir / script).string());
  // Idle OpenMP threads sleep rather than spin, in torch and in the candidate's kernels alike:
  // a thread still on a CPU after a call returned is then one that is working (watch.py).
  spec.env["OMP_WAIT_POLICY"] = "PASSIVE";
  return spec;
}

HarnessCall Harness::call(const std::string& script, const std::vector<std::string>& args,
                          double timeout_s, const fs::path& cwd,
                          const std::map<std::string, std::string>& env, bool gated) {
  fs::path logs = run_dir_ / "logs";
  fs::create_directories(logs);
  std::string stem = std::to_string(++processes_) + "-" + script.substr(0, script.find('.'));
  HarnessCall call;
  call.script = script;
  call.report_path = run_dir_ / (stem + ".report.json");
  // pycache_prefix: bytecode never comes from (or goes to) a __pycache__ folder the candidate
  // could have planted; it lies in trusted/ or the evaluator's bytecode folder, both read-only
  // mounts for candidate processes (they then write no bytecode).
  fs::path pycache =
      options_.bytecode_dir.empty() ? run_dir_ / "trusted" / "pycache" : options_.bytecode_dir;
  call.spec = harness_process(options_.python, options_.harness_dir, pycache, script);
  ProcessSpec& spec = call.spec;
  spec.argv.insert(spec.argv.end(), args.begin(), args.end());
  spec.argv.insert(spec.argv.end(), {"--report", call.report_path.string()});
  if (gated) {
    call.gate = run_dir_ / (stem + ".gate");
    spec.argv.insert(spec.argv.end(), {"--wait-for", call.gate.string()});
    spec.released_at_ns = std::make_shared<std::atomic<long long>>(0);
    spec.wait_timeout_s = options_.wait_timeout_s;
  }
  spec.cancel = std::make_shared<std::atomic<bool>>(false);
  spec.cwd = cwd;
  for (const auto& [key, value] : env) {
    spec.env[key] = value;
    spec.env_after_imports.insert(key);  // the call's own: read once its script runs
  }
  spec.timeout_s = timeout_s;
  spec.memory_limit_mb = options_.memory_limit_mb;
  spec.stdout_path = logs / (stem + ".out");
  spec.stderr_path = logs / (stem + ".err");
  return call;
}

HarnessResult Harness::run(const HarnessCall& call) const {
  HarnessResult result;
  result.process = runner_->run(call.spec);
  std::string out, err;
  read_file(call.spec.stdout_path, &out);
  read_file(call.spec.stderr_path, &err);
  result.output = out.empty() ? err : out + "\n" + err;
  std::string text;
  if (read_file(call.report_path, &text).ok()) {
    nlohmann::json parsed = nlohmann::json::parse(text, nullptr, false);
    if (parsed.is_object()) result.report = std::move(parsed);
  }
  return result;
}

HarnessStep::HarnessStep(const Harness* harness, HarnessCall call) : call_(std::move(call)) {
  future_ = std::async(std::launch::async, [harness, c = call_] { return harness->run(c); });
}

HarnessStep::~HarnessStep() {
  if (!released_) abort();
  if (future_.valid()) future_.wait();
}

HarnessResult HarnessStep::go() {
  release(true);
  return future_.get();
}

HarnessResult HarnessStep::go_timed(const std::string& secret_hex) {
  release(true);
  const fs::path ready = call_.gate.string() + ".ready";
  using namespace std::chrono_literals;
  while (future_.wait_for(1ms) != std::future_status::ready) {
    if (!fs::exists(ready)) continue;
    auto start = std::chrono::steady_clock::now();
    write_file_atomic(secret_path(), secret_hex);
    HarnessResult result = future_.get();
    result.timed_host_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return result;
  }
  return future_.get();  // it ended before its timed calls: the report says why
}

bool HarnessStep::starting() const {
  if (call_.gate.empty() || released_) return false;
  if (future_.wait_for(std::chrono::seconds(0)) == std::future_status::ready) return false;
  return !fs::exists(call_.gate.string() + ".waiting");
}

void HarnessStep::abort() {
  release(false);
  call_.spec.cancel->store(true);
}

void HarnessStep::release(bool go) {
  if (released_) return;
  released_ = true;
  if (call_.gate.empty()) return;
  // The time limit of a gated process counts from here (ProcessSpec::released_at_ns).
  call_.spec.released_at_ns->store(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                       std::chrono::steady_clock::now().time_since_epoch())
                                       .count());
  write_file_atomic(call_.gate, go ? "go" : "abort");
}

}  // namespace cuda_agent
