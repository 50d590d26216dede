#include "report/metrics.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>
#include <sstream>

namespace cuda_agent::report {
namespace {

using json = nlohmann::json;

template <typename T>
void put(json* j, const char* key, const std::optional<T>& value) {
  (*j)[key] = value ? json(*value) : json(nullptr);
}

template <typename T>
std::optional<T> get(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::nullopt;
  if constexpr (std::is_same_v<T, int>) {
    if (!it->is_number_integer()) return std::nullopt;
  } else {
    if (!it->is_number()) return std::nullopt;
  }
  return it->get<T>();
}

std::optional<double> geomean(const std::vector<double>& values) {
  if (values.empty()) return std::nullopt;
  double sum = 0;
  for (double v : values) sum += std::log(v);
  return std::exp(sum / values.size());
}

std::string percent(double share) {
  char text[16];
  std::snprintf(text, sizeof text, "%.1f%%", 100 * share);
  return text;
}

std::string fixed(double value, int digits) {
  char text[32];
  std::snprintf(text, sizeof text, "%.*f", digits, value);
  return text;
}

/// Rows of cells, each column as wide as its widest cell; the first column left-aligned.
std::string table(const std::vector<std::vector<std::string>>& rows) {
  std::vector<std::size_t> width;
  for (const auto& row : rows) {
    width.resize(std::max(width.size(), row.size()), 0);
    for (std::size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
  }
  std::ostringstream out;
  for (const auto& row : rows) {
    std::string line;
    for (std::size_t c = 0; c < row.size(); ++c) {
      const std::string pad(width[c] - row[c].size(), ' ');
      line += c == 0 ? row[c] + pad : "  " + pad + row[c];
    }
    out << line.substr(0, line.find_last_not_of(' ') + 1) << "\n";
  }
  return out.str();
}

}  // namespace

bool timed(const TaskResult& r) {
  return r.correct && r.speedup_vs_eager && r.speedup_vs_compile && *r.speedup_vs_eager > 0 &&
         *r.speedup_vs_compile > 0;
}

std::string TaskResult::key() const {
  return sample < 0 ? task : task + "#" + std::to_string(sample);
}

json TaskResult::to_json() const {
  json j = {{"schema", kSchema},
            {"task", task},
            {"level", level},
            {"outcome", outcome},
            {"correct", correct},
            {"reason", reason},
            {"device_name", device_name},
            {"evaluation", evaluation},
            {"run", run},
            {"evaluations", evaluations},
            {"seconds", seconds},
            {"worker", worker}};
  if (sample >= 0) j["sample"] = sample;
  put(&j, "reward", reward);
  put(&j, "eager_us", eager_us);
  put(&j, "compile_us", compile_us);
  put(&j, "candidate_us", candidate_us);
  put(&j, "speedup_vs_eager", speedup_vs_eager);
  put(&j, "speedup_vs_compile", speedup_vs_compile);
  return j;
}

TaskResult TaskResult::from_json(const json& j) {
  TaskResult r;
  if (!j.is_object()) return r;
  r.task = j.value("task", "");
  r.sample = j.value("sample", -1);
  r.level = j.value("level", "");
  r.outcome = j.value("outcome", "");
  r.correct = j.value("correct", false);
  r.reason = j.value("reason", "");
  r.device_name = j.value("device_name", "");
  r.evaluation = j.value("evaluation", 0LL);
  r.run = j.value("run", "");
  r.evaluations = j.value("evaluations", 0);
  r.seconds = j.value("seconds", 0.0);
  r.worker = j.value("worker", "");
  r.reward = get<int>(j, "reward");
  r.eager_us = get<double>(j, "eager_us");
  r.compile_us = get<double>(j, "compile_us");
  r.candidate_us = get<double>(j, "candidate_us");
  r.speedup_vs_eager = get<double>(j, "speedup_vs_eager");
  r.speedup_vs_compile = get<double>(j, "speedup_vs_compile");
  return r;
}

std::vector<Metrics> compute_metrics(const std::vector<TaskResult>& results) {
  std::vector<std::string> levels;
  for (const TaskResult& r : results) {
    if (!r.level.empty() && std::find(levels.begin(), levels.end(), r.level) == levels.end())
      levels.push_back(r.level);
  }
  std::sort(levels.begin(), levels.end());
  levels.push_back("all");
  std::vector<Metrics> out;
  for (const std::string& level : levels) {
    Metrics m;
    m.level = level;
    m.fast_p_eager.assign(kFastP.size(), 0);
    m.fast_p_compile.assign(kFastP.size(), 0);
    std::vector<double> vs_eager, vs_compile;
    for (const TaskResult& r : results) {
      if (level != "all" && r.level != level) continue;
      ++m.tasks;
      m.evaluations += r.evaluations;
      m.seconds += r.seconds;
      if (r.reward) ++m.rewards[*r.reward];
      if (!r.correct) continue;
      ++m.correct;
      if (!timed(r)) continue;
      vs_eager.push_back(*r.speedup_vs_eager);
      vs_compile.push_back(*r.speedup_vs_compile);
      if (*r.speedup_vs_eager > 1) ++m.faster_than_eager;
      if (*r.speedup_vs_compile > 1) ++m.faster_than_compile;
      for (std::size_t p = 0; p < kFastP.size(); ++p) {
        if (*r.speedup_vs_eager > kFastP[p]) ++m.fast_p_eager[p];
        if (*r.speedup_vs_compile > kFastP[p]) ++m.fast_p_compile[p];
      }
    }
    m.geomean_vs_eager = geomean(vs_eager);
    m.geomean_vs_compile = geomean(vs_compile);
    out.push_back(std::move(m));
  }
  if (out.size() == 2) out.erase(out.begin());  // one level: "all" says it
  return out;
}

std::string format_ratio(const std::optional<double>& ratio) {
  return ratio ? fixed(*ratio, 2) + "x" : "-";
}

std::vector<std::vector<std::string>> metric_rows(const std::vector<Metrics>& metrics) {
  std::vector<std::vector<std::string>> rows;
  auto row = [&](const std::string& name, auto cell) {
    std::vector<std::string> r{name};
    for (const Metrics& m : metrics) r.push_back(cell(m));
    rows.push_back(std::move(r));
  };
  row("", [](const Metrics& m) { return m.level; });
  row("tasks", [](const Metrics& m) { return std::to_string(m.tasks); });
  row("pass rate", [](const Metrics& m) { return percent(m.share(m.correct)); });
  row("faster than eager", [](const Metrics& m) { return percent(m.share(m.faster_than_eager)); });
  row("faster than torch.compile",
      [](const Metrics& m) { return percent(m.share(m.faster_than_compile)); });
  row("geomean speedup vs eager",
      [](const Metrics& m) { return format_ratio(m.geomean_vs_eager); });
  row("geomean speedup vs torch.compile",
      [](const Metrics& m) { return format_ratio(m.geomean_vs_compile); });
  for (std::size_t p = 0; p < kFastP.size(); ++p) {
    std::ostringstream name;
    name << "fast_" << kFastP[p] << " vs eager / compile";
    row(name.str(), [p](const Metrics& m) {
      return percent(m.share(m.fast_p_eager[p])) + " / " + percent(m.share(m.fast_p_compile[p]));
    });
  }
  row("rewards -1 / 1 / 2 / 3", [](const Metrics& m) {
    auto n = [&m](int r) {
      auto it = m.rewards.find(r);
      return std::to_string(it == m.rewards.end() ? 0 : it->second);
    };
    return n(-1) + " / " + n(1) + " / " + n(2) + " / " + n(3);
  });
  row("candidates evaluated", [](const Metrics& m) { return std::to_string(m.evaluations); });
  return rows;
}

std::string format_metrics(const std::vector<Metrics>& metrics) {
  return table(metric_rows(metrics)) +
         "geometric means are over the correct tasks; fast_p: correct and more than p times as "
         "fast, as a share of all tasks\n";
}

std::string format_tasks(const std::vector<TaskResult>& results) {
  std::vector<std::vector<std::string>> rows{
      {"task", "outcome", "reward", "vs eager", "vs compile", "evaluated", "seconds"}};
  std::string failures;
  for (const TaskResult& r : results) {
    rows.push_back({r.key(), r.outcome, r.reward ? std::to_string(*r.reward) : "-",
                    format_ratio(r.speedup_vs_eager), format_ratio(r.speedup_vs_compile),
                    std::to_string(r.evaluations), fixed(r.seconds, 0)});
    if (!r.correct) failures += "  " + r.key() + ": " + r.reason + "\n";
  }
  return table(rows) + (failures.empty() ? "" : "\nwhy the failures failed:\n" + failures);
}

std::string format_compare(const std::string& name_a, const std::vector<TaskResult>& a,
                           const std::string& name_b, const std::vector<TaskResult>& b) {
  std::map<std::string, const TaskResult*> by_a, by_b;
  std::set<std::string> tasks;
  for (const TaskResult& r : a) by_a[r.key()] = &r, tasks.insert(r.key());
  for (const TaskResult& r : b) by_b[r.key()] = &r, tasks.insert(r.key());
  auto outcome = [](const TaskResult* r) { return r ? r->outcome : std::string("(not run)"); };
  auto speedup = [](const TaskResult* r) {
    return r && timed(*r) ? format_ratio(r->speedup_vs_compile) : std::string("-");
  };
  std::vector<std::vector<std::string>> rows{{"task", "outcome " + name_a, "outcome " + name_b,
                                              "vs compile " + name_a, "vs compile " + name_b,
                                              name_b + " / " + name_a}};
  std::vector<double> ratios;
  int wins = 0, losses = 0, ties = 0, fixed_by_b = 0, broken_by_b = 0;
  for (const std::string& task : tasks) {
    const TaskResult* ra = by_a.count(task) ? by_a[task] : nullptr;
    const TaskResult* rb = by_b.count(task) ? by_b[task] : nullptr;
    std::string ratio = "-";
    if (ra && rb && timed(*ra) && timed(*rb)) {
      const double x = *rb->speedup_vs_compile / *ra->speedup_vs_compile;
      ratios.push_back(x);
      ratio = format_ratio(x);
      // Within 5% (the reward's margin) is a tie.
      if (x > 1.05)
        ++wins;
      else if (x < 1 / 1.05)
        ++losses;
      else
        ++ties;
    }
    if (ra && rb && !ra->correct && rb->correct) ++fixed_by_b;
    if (ra && rb && ra->correct && !rb->correct) ++broken_by_b;
    rows.push_back({task, outcome(ra), outcome(rb), speedup(ra), speedup(rb), ratio});
  }
  std::ostringstream out;
  out << table(rows) << "\n";
  const Metrics ma = compute_metrics(a).back(), mb = compute_metrics(b).back();
  std::vector<std::vector<std::string>> agg{
      {"", name_a, name_b},
      {"tasks", std::to_string(ma.tasks), std::to_string(mb.tasks)},
      {"pass rate", percent(ma.share(ma.correct)), percent(mb.share(mb.correct))},
      {"faster than torch.compile", percent(ma.share(ma.faster_than_compile)),
       percent(mb.share(mb.faster_than_compile))},
      {"geomean speedup vs eager", format_ratio(ma.geomean_vs_eager),
       format_ratio(mb.geomean_vs_eager)},
      {"geomean speedup vs torch.compile", format_ratio(ma.geomean_vs_compile),
       format_ratio(mb.geomean_vs_compile)}};
  out << table(agg) << "\n";
  out << "on the " << ratios.size() << " task(s) both timed: " << name_b << " faster on " << wins
      << ", slower on " << losses << ", within 5% on " << ties << "; geomean " << name_b << " / "
      << name_a << " " << format_ratio(geomean(ratios)) << "\n";
  out << "correct in " << name_b << " only: " << fixed_by_b << "; correct in " << name_a
      << " only: " << broken_by_b << "\n";
  return out.str();
}

}  // namespace cuda_agent::report
