#include "task/dataset_import.h"

#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>

#include "task/suite.h"
#include "task/task.h"
#include "util/files.h"
#include "util/hash.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace cuda_agent {
namespace {

Status prepare_out(const fs::path& out) {
  std::error_code ec;
  if (fs::exists(out, ec) && !(fs::is_directory(out, ec) && fs::is_empty(out, ec))) {
    return Status::InvalidArgument("--out " + out.string() +
                                   " already exists and is not empty: give a new folder");
  }
  fs::create_directories(out, ec);
  if (ec) return Status::IoError("cannot create " + out.string() + ": " + ec.message());
  return Status::OK();
}

Status write_manifest(const ImportOptions& options, const std::string& description,
                      const std::string& source, const json& tasks) {
  json manifest = {{"name", options.name.empty() ? options.out.filename().string() : options.name},
                   {"description", description},
                   {"source", source},
                   {"tasks", tasks}};
  return write_file_atomic(options.out / "suite.json", manifest.dump(2) + "\n");
}

/// A file name made of the characters that are safe everywhere.
std::string safe_name(const std::string& id) {
  std::string name;
  for (char c : id)
    name +=
        (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.') ? c : '_';
  return name.empty() ? "task" : name;
}

/// The level folders of a KernelBench checkout: CHECKOUT/KernelBench/levelN or CHECKOUT/levelN.
std::vector<fs::path> kernelbench_levels(const fs::path& checkout) {
  static const std::regex kLevel(R"(level\d+)");
  std::vector<fs::path> levels;
  std::error_code ec;
  for (const fs::path& base : {checkout / "KernelBench", checkout}) {
    for (const auto& entry : fs::directory_iterator(base, ec)) {
      if (entry.is_directory() && std::regex_match(entry.path().filename().string(), kLevel)) {
        levels.push_back(entry.path());
      }
    }
    if (!levels.empty()) break;
  }
  std::sort(levels.begin(), levels.end());
  return levels;
}

std::string field_text(const json& record, const std::string& key) {
  auto it = record.find(key);
  if (it == record.end() || it->is_null()) return "";
  return it->is_string() ? it->get<std::string>() : it->dump();
}

/// "torch#3" -> 3; 0 when the field says nothing of the kind.
int operator_count(const json& record) {
  static const std::regex kCount(R"(#(\d+)\s*$)");
  std::smatch m;
  std::string source = field_text(record, "data_source");
  if (std::regex_search(source, m, kCount)) return std::stoi(m[1]);
  auto ops = record.find("ops");
  if (ops != record.end() && ops->is_array()) return static_cast<int>(ops->size());
  return 0;
}

/// Parquet to JSON Lines through pyarrow (harness/read_records.py); JSON Lines as they are.
Status records_as_jsonl(const fs::path& records, const ImportOptions& options,
                        ProcessRunner* runner, const fs::path& scratch, fs::path* jsonl) {
  if (records.extension() != ".parquet") {
    *jsonl = records;
    return Status::OK();
  }
  *jsonl = scratch / "records.jsonl";
  ProcessSpec spec;
  spec.argv = {options.python, (options.harness_dir / "read_records.py").string(), records.string(),
               jsonl->string()};
  spec.timeout_s = 600;
  spec.stderr_path = scratch / "read_records.log";
  ProcessResult result = runner->run(spec);
  if (!result.succeeded()) {
    std::string log;
    read_file(spec.stderr_path, &log);
    return Status::InvalidArgument("cannot read " + records.string() +
                                   " as Parquet: " + result.describe() + "\n" + log);
  }
  return Status::OK();
}

}  // namespace

Status import_kernelbench(const fs::path& checkout, const ImportOptions& options,
                          ImportSummary* summary) {
  std::vector<fs::path> levels = kernelbench_levels(checkout);
  if (levels.empty()) {
    return Status::InvalidArgument(checkout.string() +
                                   " has no level folders (KernelBench/level1, ... or level1, ...)"
                                   ": is it a KernelBench checkout?");
  }
  if (Status s = prepare_out(options.out); !s.ok()) return s;
  json tasks = json::array();
  for (const fs::path& level : levels) {
    std::vector<fs::path> files;
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(level, ec)) {
      if (entry.is_regular_file() && entry.path().extension() == ".py") files.push_back(entry);
    }
    std::sort(files.begin(), files.end());
    for (const fs::path& file : files) {
      Task task;
      if (Status s = load_task(file, &task); !s.ok()) {
        summary->skipped.push_back(s.message());
        continue;
      }
      std::string level_name = level.filename().string();
      fs::create_directories(options.out / level_name, ec);
      std::string name = safe_name(task.id);
      if (Status s = write_file_atomic(options.out / level_name / (name + ".py"), task.source);
          !s.ok()) {
        return s;
      }
      tasks.push_back({{"id", level_name + "/" + name},
                       {"origin", fs::relative(file, checkout).string()},
                       {"sha256", task.sha256}});
      summary->imported++;
    }
  }
  return write_manifest(options, "KernelBench tasks, imported", fs::absolute(checkout).string(),
                        tasks);
}

Status import_ops6k(const fs::path& records, const ImportOptions& options, ProcessRunner* runner,
                    ImportSummary* summary) {
  std::error_code ec;
  if (!fs::is_regular_file(records, ec)) {
    return Status::NotFound("records file " + records.string() + " does not exist");
  }
  if (Status s = prepare_out(options.out); !s.ok()) return s;
  TempDir scratch("cuda-agent-import-");
  fs::path jsonl;
  if (Status s = records_as_jsonl(records, options, runner, scratch.path(), &jsonl); !s.ok()) {
    return s;
  }
  std::ifstream in(jsonl);
  if (!in) return Status::IoError("cannot read " + jsonl.string());
  const std::string code_field = options.code_field.empty() ? "code" : options.code_field;
  std::set<std::string> seen_ids, seen_code;
  json tasks = json::array();
  std::string line;
  for (int row = 0; std::getline(in, line); ++row) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    std::string where = records.filename().string() + " record " + std::to_string(row);
    json record = json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!record.is_object()) {
      summary->skipped.push_back(where + ": not a JSON object");
      continue;
    }
    std::string code = field_text(record, code_field);
    if (code.empty()) {
      summary->skipped.push_back(where + ": no \"" + code_field + "\" field");
      continue;
    }
    if (Status s = check_task_source(code, where); !s.ok()) {
      summary->skipped.push_back(s.message());
      continue;
    }
    std::string digest = sha256_hex(code);
    if (!seen_code.insert(digest).second) {
      summary->skipped.push_back(where + ": the same code as an earlier record");
      continue;
    }
    std::string id;
    for (const char* key : {"id", "task_id", "uid", "uuid", "name"}) {
      if (!(id = field_text(record, key)).empty()) break;
    }
    id = safe_name(id.empty() ? "op_" + digest.substr(0, 12) : id);
    if (!seen_ids.insert(id).second) id += "_" + digest.substr(0, 8);
    int count = operator_count(record);
    std::string level = count == 0 ? "" : count == 1 ? "level1" : "level2";
    fs::path dir = level.empty() ? options.out : options.out / level;
    fs::create_directories(dir, ec);
    if (Status s = write_file_atomic(dir / (id + ".py"), code); !s.ok()) return s;
    json entry = {
        {"id", level.empty() ? id : level + "/" + id}, {"origin", where}, {"sha256", digest}};
    if (record.contains("ops")) entry["ops"] = record["ops"];
    if (record.contains("data_source")) entry["data_source"] = record["data_source"];
    tasks.push_back(entry);
    summary->imported++;
  }
  if (summary->imported == 0) {
    return Status::InvalidArgument("no record of " + records.string() +
                                   " holds a task file (in field \"" + code_field + "\")");
  }
  return write_manifest(options, "CUDA-Agent-Ops-6K-format records, imported",
                        fs::absolute(records).string(), tasks);
}

}  // namespace cuda_agent
