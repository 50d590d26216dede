#include "synth/capture.h"

#include "eval/harness.h"
#include "util/files.h"

namespace fs = std::filesystem;

namespace cuda_agent::synth {

Status capture_graph(const fs::path& task, const CaptureOptions& options, ProcessRunner* runner,
                     Graph* graph, nlohmann::json* document) {
  std::error_code ec;
  if (!fs::is_regular_file(task, ec)) {
    return Status::InvalidArgument("task file " + task.string() + " does not exist");
  }
  TempDir scratch("cuda-agent-capture-");
  const fs::path report_path = scratch.path() / "report.json";
  const fs::path graph_path = scratch.path() / "graph.json";
  // Trusted, and run as the evaluator runs its trusted scripts, so that one fork server, one
  // torch import, serves the capture and the evaluations after it.
  ProcessSpec spec =
      harness_process(options.python, options.harness_dir, options.bytecode_dir, "capture.py");
  spec.argv.insert(spec.argv.end(), {"--task", fs::absolute(task).string(), "--device", "cpu",
                                     "--report", report_path.string(), "--out", graph_path.string(),
                                     "--shrink", std::to_string(options.shrink)});
  spec.timeout_s = options.timeout_s;
  spec.stdout_path = scratch.path() / "capture.log";
  spec.stderr_path = spec.stdout_path;
  ProcessResult result = runner->run(spec);
  std::string text;
  if (!result.succeeded() || !read_file(report_path, &text).ok()) {
    std::string log;
    read_file(spec.stdout_path, &log);
    return Status::Internal("the graph capture " + result.describe() + ": " + log);
  }
  nlohmann::json report = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!report.is_object() || !report.value("ok", false)) {
    std::string why = report.is_object() ? report.value("error", std::string("no reason"))
                                         : "an unreadable report";
    return Status::InvalidArgument("cannot capture the graph of " + task.string() + ": " + why);
  }
  if (Status s = read_file(graph_path, &text); !s.ok()) return s;
  nlohmann::json doc = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (Status s = read_graph(doc, graph); !s.ok()) return s;
  if (document) *document = std::move(doc);
  return Status::OK();
}

}  // namespace cuda_agent::synth
