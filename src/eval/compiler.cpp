#include "eval/compiler.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <mutex>
#include <regex>
#include <set>
#include <thread>

#include "util/files.h"
#include "util/hash.h"
#include "util/text.h"

namespace cuda_agent {
namespace {

namespace fs = std::filesystem;

bool has_extension(const fs::path& p, std::initializer_list<const char*> exts) {
  std::string ext = p.extension().string();
  return std::any_of(exts.begin(), exts.end(), [&](const char* e) { return ext == e; });
}

/// What one compiler invocation needs: the command and where its output goes.
struct Job {
  std::string label;  // file name, for messages
  std::vector<std::string> argv;
  fs::path output;
};

struct JobResult {
  bool ok = false;
  std::string log;
  std::string failure;  // the runner's description when the compiler itself died
};

JobResult run_job(const Job& job, const CompileOptions& options, ProcessRunner* runner,
                  const fs::path& log_dir) {
  ProcessSpec spec;
  spec.argv = job.argv;
  spec.timeout_s = options.timeout_s;
  spec.memory_limit_mb = options.memory_limit_mb;
  spec.stdout_path = log_dir / (job.output.filename().string() + ".log");
  spec.stderr_path = spec.stdout_path;
  // Both streams into one file: a second open with O_TRUNC would lose what the first wrote.
  spec.stderr_path += ".err";
  ProcessResult r = runner->run(spec);
  JobResult result;
  std::string out, err;
  read_file(spec.stdout_path, &out);
  read_file(spec.stderr_path, &err);
  result.log = out + err;
  result.ok = r.succeeded() && fs::exists(job.output);
  if (!r.succeeded() &&
      (r.timed_out || r.memory_exceeded || r.signal != 0 || !r.started || r.exit_code == 127)) {
    result.failure = r.describe();
  }
  return result;
}

/// Runs jobs on up to `jobs` threads; results in job order.
std::vector<JobResult> run_parallel(const std::vector<Job>& jobs, const CompileOptions& options,
                                    ProcessRunner* runner, const fs::path& log_dir) {
  std::vector<JobResult> results(jobs.size());
  int workers = options.jobs > 0 ? options.jobs : std::max(1u, std::thread::hardware_concurrency());
  workers = std::min<int>(workers, static_cast<int>(jobs.size()));
  std::mutex mutex;
  std::size_t next = 0;
  std::vector<std::thread> threads;
  for (int w = 0; w < workers; ++w) {
    threads.emplace_back([&] {
      while (true) {
        std::size_t i;
        {
          std::lock_guard<std::mutex> lock(mutex);
          if (next >= jobs.size()) return;
          i = next++;
        }
        results[i] = run_job(jobs[i], options, runner, log_dir);
      }
    });
  }
  for (auto& t : threads) t.join();
  return results;
}

/// The compiler's --version text, hashed into every cache key (once per process per compiler).
Status compiler_identity(const std::string& compiler, ProcessRunner* runner,
                         const fs::path& log_dir, std::string* identity) {
  static std::mutex mutex;
  static std::map<std::string, std::string> known;
  std::lock_guard<std::mutex> lock(mutex);
  if (auto it = known.find(compiler); it != known.end()) {
    *identity = it->second;
    return Status::OK();
  }
  ProcessSpec spec;
  spec.argv = {compiler, "--version"};
  spec.timeout_s = 60;
  spec.stdout_path = log_dir / "compiler-version.log";
  ProcessResult r = runner->run(spec);
  std::string text;
  read_file(spec.stdout_path, &text);
  if (!r.succeeded()) {
    return Status::NotFound("the compiler " + compiler + " is not usable (" + r.describe() +
                            "); install it or pass its path");
  }
  known[compiler] = *identity = sha256_hex(text);
  return Status::OK();
}

}  // namespace

nlohmann::json CompileReport::to_json() const {
  return {{"ok", ok},
          {"cached", cached},
          {"seconds", seconds},
          {"objects_built", objects_built},
          {"objects_cached", objects_cached},
          {"library", library.string()},
          {"sources", sources},
          {"ignored", ignored},
          {"error", error},
          {"first_error", first_error},
          {"log", log}};
}

Status compile_kernels(const fs::path& kernels_dir, const CompileOptions& options,
                       ProcessRunner* runner, CompileReport* report) {
  auto start = std::chrono::steady_clock::now();
  *report = CompileReport();
  auto finish = [&] {
    report->seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return Status::OK();
  };
  const bool cuda = options.device == "cuda";
  std::error_code ec;
  if (!fs::is_directory(kernels_dir, ec)) {
    report->error = "there is no kernels/ folder";
    return finish();
  }

  // Sources at the top of kernels/; headers anywhere below it feed every source's key.
  std::vector<fs::path> sources;
  std::string headers;
  std::vector<fs::path> all;
  for (const auto& entry : fs::recursive_directory_iterator(kernels_dir, ec)) {
    if (entry.is_regular_file()) all.push_back(entry.path());
  }
  std::sort(all.begin(), all.end());
  bool links_cublas = false;
  static const std::regex kCublasInclude(R"(#\s*include\s*[<"]cublas)");
  for (const fs::path& p : all) {
    std::string relative = fs::relative(p, kernels_dir).string();
    std::string text;
    if (!read_file(p, &text).ok()) continue;
    if (has_extension(p, {".h", ".hpp", ".cuh", ".inc", ".inl"})) {
      headers += relative + "\n" + text + "\n";
    } else if (p.parent_path() == kernels_dir && has_extension(p, {".cu", ".cpp", ".cc", ".c"})) {
      if (!cuda && has_extension(p, {".cu"})) {
        report->ignored.push_back(relative);
        continue;
      }
      sources.push_back(p);
      report->sources.push_back(relative);
    }
    if (cuda && std::regex_search(text, kCublasInclude)) links_cublas = true;
  }
  if (sources.empty()) {
    report->error = std::string("kernels/ holds no ") + (cuda ? ".cu or .cpp" : ".cpp") +
                    " source to build for the " + options.device + " device";
    return finish();
  }
  sources.push_back(options.runtime_dir /
                    (cuda ? "cuda_agent_runtime.cu" : "cuda_agent_runtime.cpp"));

  fs::path objects_dir = options.cache_dir / "objects";
  fs::path libraries_dir = options.cache_dir / "libraries";
  fs::create_directories(objects_dir, ec);
  fs::create_directories(libraries_dir, ec);
  if (ec)
    return Status::IoError("cannot create the build cache " + options.cache_dir.string() + ": " +
                           ec.message());
  // Work happens beside the cache, so finished files move into it with a rename.
  TempDir log_dir("tmp-", options.cache_dir);

  const std::string compiler = cuda ? options.nvcc : options.cxx;
  std::string identity;
  Status s = compiler_identity(compiler, runner, log_dir.path(), &identity);
  if (!s.ok()) return s;
  std::vector<std::string> flags =
      cuda ? std::vector<std::string>{"-O3",        "-std=c++17", "-arch=" + options.arch,
                                      "-Xcompiler", "-fPIC",      "-lineinfo"}
           // No floating-point traps are ever enabled (nor by torch), nor errno read after a
           // math function: without these, GCC will not evaluate both sides of a select such as
           // relu's or a clamp's, nor take sqrtf as the instruction, so such loops stay scalar
           // and branchy (16x slower on a leaky relu); results do not change.
           : std::vector<std::string>{"-O3",   "-std=c++17",         "-march=native",  "-fopenmp",
                                      "-fPIC", "-fno-trapping-math", "-fno-math-errno"};
  std::string flag_text;
  for (const auto& f : flags) flag_text += f + " ";

  std::vector<Job> jobs;
  std::vector<fs::path> objects;
  for (const fs::path& source : sources) {
    std::string text;
    s = read_file(source, &text);
    if (!s.ok()) return s;
    // The fixed runtime includes nothing from kernels/, so it is shared by every workspace.
    bool is_runtime = source.parent_path() == options.runtime_dir;
    std::string key = sha256_hex(identity + "\n" + flag_text + "\n" + source.filename().string() +
                                 "\n" + text + "\n" + (is_runtime ? "" : headers));
    fs::path object = objects_dir / (key + ".o");
    objects.push_back(object);
    if (fs::exists(object, ec)) {
      ++report->objects_cached;
      continue;
    }
    Job job;
    job.label = source.filename().string();
    job.argv.push_back(compiler);
    job.argv.insert(job.argv.end(), flags.begin(), flags.end());
    // Each job writes under a private name, then renames: parallel evaluations never see half an
    // object.
    fs::path partial = log_dir.path() / (key + ".o");
    job.argv.insert(job.argv.end(),
                    {"-I", kernels_dir.string(), "-c", source.string(), "-o", partial.string()});
    job.output = partial;
    jobs.push_back(job);
  }

  std::vector<std::string> link_flags = {"-shared"};
  if (cuda) link_flags.push_back("-arch=" + options.arch);
  if (!cuda) {
    link_flags.push_back("-fopenmp");
#if defined(__GLIBC__) && defined(__x86_64__)
    // glibc's vector math functions, which loops of expf, tanhf, erff and the like call once
    // vectorized (the synthesizer's CPU kernels declare them so).
    link_flags.push_back("-lmvec");
#endif
  }
  if (links_cublas) link_flags.insert(link_flags.end(), {"-lcublas", "-lcublasLt"});
  std::string library_key = identity;
  for (const auto& o : objects) library_key += o.filename().string();
  for (const auto& f : link_flags) library_key += f;
  fs::path library = libraries_dir / sha256_hex(library_key) / "libkernels.so";

  if (jobs.empty() && fs::exists(library, ec)) {
    report->ok = true;
    report->cached = true;
    report->library = library;
    return finish();
  }

  std::vector<JobResult> results = run_parallel(jobs, options, runner, log_dir.path());
  std::string log;
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    if (!results[i].log.empty()) log += results[i].log;
    if (!results[i].ok) {
      report->error = "compiling " + jobs[i].label + " failed" +
                      (results[i].failure.empty() ? "" : ": the compiler " + results[i].failure);
      report->log = trim_compiler_log(log);
      report->first_error = first_compiler_error(log);
      return finish();
    }
    fs::rename(jobs[i].output, objects_dir / jobs[i].output.filename(), ec);
    if (ec) return Status::IoError("cannot store an object in the build cache: " + ec.message());
    ++report->objects_built;
  }

  Job link;
  link.label = "libkernels.so";
  link.output = log_dir.path() / "libkernels.so";
  link.argv.push_back(compiler);
  link.argv.insert(link.argv.end(), link_flags.begin(), link_flags.end());
  for (const auto& o : objects) link.argv.push_back(o.string());
  link.argv.insert(link.argv.end(), {"-o", link.output.string()});
  JobResult linked = run_job(link, options, runner, log_dir.path());
  log += linked.log;
  if (!linked.ok) {
    report->error = "linking the kernel library failed" +
                    (linked.failure.empty() ? "" : ": the linker " + linked.failure);
    report->log = trim_compiler_log(log);
    report->first_error = first_compiler_error(log);
    return finish();
  }
  fs::create_directories(library.parent_path(), ec);
  fs::rename(link.output, library, ec);
  if (ec) return Status::IoError("cannot store the library in the build cache: " + ec.message());
  report->ok = true;
  report->library = library;
  report->log = trim_lines(log, 30, 20);
  return finish();
}

}  // namespace cuda_agent
