// The HTML report: one page with everything inline (styles and SVG plots), so it opens offline,
// from a mail attachment or a CI artifact alike.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "report/metrics.h"

namespace cuda_agent::report {
namespace {

using json = nlohmann::json;

std::string escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string num(double v, int digits = 1) {
  char text[32];
  std::snprintf(text, sizeof text, "%.*f", digits, v);
  return text;
}

const char* kColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b"};

// Every plot: 600 x 320, its key on the line under the title (kKey), the data inside [kLeft, kWidth
// - kRight] x [kTop, kHeight - kBottom].
constexpr double kKey = 36;
constexpr double kWidth = 600, kHeight = 320, kLeft = 60, kRight = 20, kTop = 46, kBottom = 50;

/// Maps [lo, hi] onto [a, b] (a > b for the vertical axis).
struct Scale {
  double lo, hi, a, b;
  double operator()(double v) const { return a + (v - lo) / (hi - lo) * (b - a); }
};

class Plot {
 public:
  Plot(const std::string& id, const std::string& title) {
    out_ << "<figure><svg class=\"plot\" id=\"" << id << "\" viewBox=\"0 0 " << kWidth << " "
         << kHeight << "\" width=\"" << kWidth << "\" height=\"" << kHeight
         << "\" role=\"img\" xmlns=\"http://www.w3.org/2000/svg\">\n<title>" << escape(title)
         << "</title>\n";
    text(kWidth / 2, 18, title, "middle", "title");
  }
  void text(double x, double y, const std::string& s, const char* anchor = "middle",
            const char* cls = "") {
    out_ << "<text x=\"" << num(x) << "\" y=\"" << num(y) << "\" text-anchor=\"" << anchor
         << "\" class=\"" << cls << "\">" << escape(s) << "</text>\n";
  }
  void line(double x1, double y1, double x2, double y2, const char* cls) {
    out_ << "<line x1=\"" << num(x1) << "\" y1=\"" << num(y1) << "\" x2=\"" << num(x2) << "\" y2=\""
         << num(y2) << "\" class=\"" << cls << "\"/>\n";
  }
  /// A data mark: a bar, with a tooltip.
  void bar(double x, double y, double w, double h, const char* color, const std::string& tip) {
    out_ << "<rect class=\"mark\" x=\"" << num(x) << "\" y=\"" << num(y) << "\" width=\""
         << num(std::max(w, 0.5)) << "\" height=\"" << num(std::max(h, 0.0)) << "\" fill=\""
         << color << "\"><title>" << escape(tip) << "</title></rect>\n";
  }
  void dot(double x, double y, const char* color, const std::string& tip) {
    out_ << "<circle class=\"mark\" cx=\"" << num(x) << "\" cy=\"" << num(y) << "\" r=\"4\" fill=\""
         << color << "\" fill-opacity=\"0.75\"><title>" << escape(tip) << "</title></circle>\n";
  }
  void axes(const std::string& x_label, const std::string& y_label) {
    line(kLeft, kHeight - kBottom, kWidth - kRight, kHeight - kBottom, "axis");
    line(kLeft, kTop, kLeft, kHeight - kBottom, "axis");
    text((kLeft + kWidth - kRight) / 2, kHeight - 10, x_label);
    out_ << "<text transform=\"translate(16 " << num((kTop + kHeight - kBottom) / 2)
         << ") rotate(-90)\" text-anchor=\"middle\">" << escape(y_label) << "</text>\n";
  }
  void empty(const std::string& why) { text(kWidth / 2, kHeight / 2, why, "middle", "note"); }
  std::string done() {
    out_ << "</svg></figure>\n";
    return out_.str();
  }

 private:
  std::ostringstream out_;
};

std::vector<std::string> levels_of(const std::vector<Metrics>& metrics) {
  std::vector<std::string> levels;
  for (const Metrics& m : metrics) levels.push_back(m.level);
  return levels;
}

const char* color_of(const std::vector<std::string>& levels, const std::string& level) {
  auto it = std::find(levels.begin(), levels.end(), level);
  return kColors[(it == levels.end() ? 0 : it - levels.begin()) % 6];
}

/// Histograms of log2 speedup over torch.compile and over eager, side by side per bin.
std::string speedup_distribution(const std::vector<TaskResult>& results) {
  Plot plot("speedup-distribution", "Speedup distribution (correct tasks)");
  std::vector<double> compile, eager;
  for (const TaskResult& r : results) {
    if (!timed(r)) continue;
    compile.push_back(std::log2(*r.speedup_vs_compile));
    eager.push_back(std::log2(*r.speedup_vs_eager));
  }
  plot.axes("speedup (log scale; bins of 2^0.25)", "tasks");
  if (compile.empty()) {
    plot.empty("no correct task was timed");
    return plot.done();
  }
  const double step = 0.25;
  double lo = 0, hi = 0;
  for (double v : compile) lo = std::min(lo, v), hi = std::max(hi, v);
  for (double v : eager) lo = std::min(lo, v), hi = std::max(hi, v);
  lo = std::floor(std::max(lo, -6.0) / step) * step;
  hi = std::ceil(std::min(hi, 6.0) / step) * step + step;
  const int bins = static_cast<int>(std::lround((hi - lo) / step));
  std::vector<int> nc(bins, 0), ne(bins, 0);
  auto bin = [&](double v) { return std::clamp(static_cast<int>((v - lo) / step), 0, bins - 1); };
  for (double v : compile) ++nc[bin(v)];
  for (double v : eager) ++ne[bin(v)];
  const int top =
      std::max(*std::max_element(nc.begin(), nc.end()), *std::max_element(ne.begin(), ne.end()));
  Scale x{lo, hi, kLeft, kWidth - kRight}, y{0, static_cast<double>(top), kHeight - kBottom, kTop};
  const double w = (x(lo + step) - x(lo)) / 2;
  for (int b = 0; b < bins; ++b) {
    const double from = std::exp2(lo + b * step), to = std::exp2(lo + (b + 1) * step);
    const std::string range = num(from, 2) + "x to " + num(to, 2) + "x";
    if (nc[b]) {
      plot.bar(x(lo + b * step), y(nc[b]), w, y(0) - y(nc[b]), kColors[0],
               std::to_string(nc[b]) + " task(s) " + range + " vs torch.compile");
    }
    if (ne[b]) {
      plot.bar(x(lo + b * step) + w, y(ne[b]), w, y(0) - y(ne[b]), kColors[4],
               std::to_string(ne[b]) + " task(s) " + range + " vs eager");
    }
  }
  for (double t = std::ceil(lo); t <= hi; t += 1) {
    plot.text(x(t), kHeight - kBottom + 16, num(std::exp2(t), t < 0 ? 2 : 0) + "x");
  }
  plot.line(x(0), kTop, x(0), kHeight - kBottom, "one");
  plot.text(kLeft, kKey, "vs torch.compile", "start", "key0");
  plot.text(kLeft + 110, kKey, "vs eager", "start", "key4");
  plot.text(kLeft - 6, y(top) + 4, std::to_string(top), "end");
  return plot.done();
}

/// Each correct task: its eager time against its speedup over torch.compile, by level.
std::string speedup_vs_eager_time(const std::vector<TaskResult>& results,
                                  const std::vector<std::string>& levels) {
  Plot plot("speedup-vs-time", "Speedup over torch.compile against eager time");
  plot.axes("eager time per call (us, log scale)", "speedup vs torch.compile (log)");
  std::vector<const TaskResult*> points;
  for (const TaskResult& r : results) {
    if (timed(r) && r.eager_us && *r.eager_us > 0) points.push_back(&r);  // x is log eager time
  }
  if (points.empty()) {
    plot.empty("no correct task was timed");
    return plot.done();
  }
  double xlo = 1e300, xhi = -1e300, ylo = 0, yhi = 0;
  for (const TaskResult* r : points) {
    xlo = std::min(xlo, std::log10(*r->eager_us));
    xhi = std::max(xhi, std::log10(*r->eager_us));
    ylo = std::min(ylo, std::log2(*r->speedup_vs_compile));
    yhi = std::max(yhi, std::log2(*r->speedup_vs_compile));
  }
  xlo = std::floor(xlo), xhi = std::max(std::ceil(xhi), xlo + 1);
  ylo = std::floor(ylo) - 0.5, yhi = std::ceil(yhi) + 0.5;
  Scale x{xlo, xhi, kLeft + 8, kWidth - kRight - 8}, y{ylo, yhi, kHeight - kBottom - 8, kTop + 8};
  for (double t = xlo; t <= xhi; t += 1) {
    plot.text(x(t), kHeight - kBottom + 16, t >= 0 ? "1e" + num(t, 0) : "1e" + num(t, 0));
  }
  for (double t = std::ceil(ylo); t <= yhi; t += 1) {
    plot.text(kLeft - 6, y(t) + 4, num(std::exp2(t), t < 0 ? 2 : 0) + "x", "end");
  }
  plot.line(kLeft, y(0), kWidth - kRight, y(0), "one");
  for (const TaskResult* r : points) {
    plot.dot(x(std::log10(*r->eager_us)), y(std::log2(*r->speedup_vs_compile)),
             color_of(levels, r->level),
             r->task + ": eager " + num(*r->eager_us) + " us, " +
                 format_ratio(r->speedup_vs_compile) + " vs torch.compile, " +
                 format_ratio(r->speedup_vs_eager) + " vs eager");
  }
  double key_x = kLeft;
  for (const std::string& level : levels) {
    if (level == "all") continue;
    plot.text(
        key_x, kKey, level.empty() ? "tasks" : level, "start",
        ("key" + std::to_string(std::find(levels.begin(), levels.end(), level) - levels.begin()))
            .c_str());
    key_x += 70;
  }
  return plot.done();
}

/// Per level: pass rate and the shares faster than eager and than torch.compile.
std::string level_bars(const std::vector<Metrics>& metrics) {
  Plot plot("level-bars", "Per level: correct, faster than eager, faster than torch.compile");
  plot.axes("", "share of tasks (%)");
  Scale y{0, 100, kHeight - kBottom, kTop};
  for (int t = 0; t <= 100; t += 25) {
    plot.text(kLeft - 6, y(t) + 4, std::to_string(t), "end");
    if (t) plot.line(kLeft, y(t), kWidth - kRight, y(t), "grid");
  }
  const double group = (kWidth - kRight - kLeft) / metrics.size();
  const double w = std::min(group / 4, 40.0);
  const char* names[] = {"correct", "faster than eager", "faster than torch.compile"};
  for (std::size_t g = 0; g < metrics.size(); ++g) {
    const Metrics& m = metrics[g];
    const int counts[] = {m.correct, m.faster_than_eager, m.faster_than_compile};
    const double x0 = kLeft + g * group + (group - 3 * w) / 2;
    for (int k = 0; k < 3; ++k) {
      const double share = 100 * m.share(counts[k]);
      plot.bar(x0 + k * w, y(share), w - 2, y(0) - y(share),
               kColors[k == 0   ? 2
                       : k == 1 ? 4
                                : 0],
               m.level + ": " + names[k] + " " + num(share) + "% (" + std::to_string(counts[k]) +
                   " of " + std::to_string(m.tasks) + ")");
    }
    plot.text(kLeft + (g + 0.5) * group, kHeight - kBottom + 16, m.level);
  }
  plot.text(kLeft, kKey, "correct", "start", "key2");
  plot.text(kLeft + 70, kKey, "faster than eager", "start", "key4");
  plot.text(kLeft + 190, kKey, "faster than torch.compile", "start", "key0");
  return plot.done();
}

std::string reward_histogram(const Metrics& all) {
  Plot plot("rewards", "Rewards");
  plot.axes("reward", "tasks");
  int top = 1;
  for (const auto& [reward, n] : all.rewards) top = std::max(top, n);
  Scale y{0, static_cast<double>(top), kHeight - kBottom, kTop + 10};
  const int rewards[] = {-1, 1, 2, 3};
  const double group = (kWidth - kRight - kLeft) / 4;
  for (int k = 0; k < 4; ++k) {
    auto it = all.rewards.find(rewards[k]);
    const int n = it == all.rewards.end() ? 0 : it->second;
    const double x = kLeft + k * group + group / 4;
    if (n) {
      plot.bar(x, y(n), group / 2, y(0) - y(n), k == 0 ? kColors[1] : kColors[k == 3 ? 2 : 0],
               std::to_string(n) + " task(s) with reward " + std::to_string(rewards[k]));
      plot.text(x + group / 4, y(n) - 4, std::to_string(n));
    }
    plot.text(kLeft + (k + 0.5) * group, kHeight - kBottom + 16, std::to_string(rewards[k]));
  }
  return plot.done();
}

std::string metrics_table(const std::vector<Metrics>& metrics) {
  std::ostringstream out;
  out << "<table class=\"metrics\">";
  bool header = true;
  for (const std::vector<std::string>& row : metric_rows(metrics)) {
    out << "<tr>";
    for (std::size_t c = 0; c < row.size(); ++c) {
      const char* cell = header || c == 0 ? "th" : "td";
      out << "<" << cell << ">" << escape(row[c]) << "</" << cell << ">";
    }
    out << "</tr>\n";
    header = false;
  }
  out << "</table>\n";
  return out.str();
}

std::string task_table(const std::vector<TaskResult>& results) {
  std::ostringstream out;
  out << "<table class=\"tasks\"><tr><th>task</th><th>outcome</th><th>reward</th>"
         "<th>eager us</th><th>compile us</th><th>candidate us</th><th>vs eager</th>"
         "<th>vs compile</th><th>evaluations</th><th>seconds</th><th>reason</th></tr>\n";
  auto us = [](const std::optional<double>& v) { return v ? num(*v) : std::string("-"); };
  for (const TaskResult& r : results) {
    out << "<tr class=\"" << (r.correct ? "pass" : "fail") << "\"><td>" << escape(r.task)
        << "</td><td>" << escape(r.outcome) << "</td><td>"
        << (r.reward ? std::to_string(*r.reward) : "-") << "</td><td>" << us(r.eager_us)
        << "</td><td>" << us(r.compile_us) << "</td><td>" << us(r.candidate_us) << "</td><td>"
        << format_ratio(r.speedup_vs_eager) << "</td><td>" << format_ratio(r.speedup_vs_compile)
        << "</td><td>" << r.evaluations << "</td><td>" << num(r.seconds) << "</td><td>"
        << escape(r.reason) << "</td></tr>\n";
  }
  out << "</table>\n";
  return out.str();
}

const char* kStyle = R"css(
body { font: 14px/1.4 system-ui, sans-serif; margin: 2em; color: #222; max-width: 1300px; }
h1 { font-size: 22px; } h2 { font-size: 17px; margin-top: 1.6em; }
table { border-collapse: collapse; margin: 0.5em 0; }
th, td { border-bottom: 1px solid #ddd; padding: 3px 10px; text-align: right; }
th:first-child, td:first-child { text-align: left; }
table.tasks td:last-child { text-align: left; color: #555; max-width: 420px; }
tr.fail td:nth-child(2) { color: #b00; }
dl { display: grid; grid-template-columns: max-content auto; gap: 2px 14px; }
dt { color: #555; } dd { margin: 0; }
.plots { display: flex; flex-wrap: wrap; gap: 12px; }
figure { margin: 0; border: 1px solid #ddd; }
svg text { font-size: 11px; fill: #333; } svg text.title { font-size: 13px; font-weight: 600; }
svg text.note { fill: #888; font-size: 13px; }
svg .axis { stroke: #333; } svg .grid { stroke: #eee; }
svg .one { stroke: #888; stroke-dasharray: 4 3; }
svg text.key0 { fill: #1f77b4; } svg text.key1 { fill: #d62728; } svg text.key2 { fill: #2ca02c; }
svg text.key3 { fill: #9467bd; } svg text.key4 { fill: #ff7f0e; }
)css";

}  // namespace

std::string render_html(const std::string& title, const json& run,
                        const std::vector<TaskResult>& results) {
  const std::vector<Metrics> metrics = compute_metrics(results);
  std::vector<std::string> levels = levels_of(metrics);
  std::ostringstream out;
  out << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>" << escape(title)
      << "</title><style>" << kStyle << "</style></head><body>\n<h1>" << escape(title)
      << "</h1>\n<dl>\n";
  auto item = [&](const std::string& name, const json& value) {
    if (value.is_null()) return;
    out << "<dt>" << escape(name) << "</dt><dd>"
        << escape(value.is_string() ? value.get<std::string>() : value.dump()) << "</dd>\n";
  };
  for (const char* key : {"suite", "policy", "device", "device_name", "shrink", "tune", "precision",
                          "created_at", "throughput"}) {
    if (run.contains(key)) item(key, run[key]);
  }
  out << "</dl>\n<h2>Figures</h2>\n"
      << metrics_table(metrics)
      << "<p>Geometric means are over the correct tasks. fast_p: correct and more than p times as "
         "fast as the baseline, as a share of all tasks (KernelBench).</p>\n"
      << "<h2>Plots</h2>\n<div class=\"plots\">\n"
      << speedup_distribution(results) << speedup_vs_eager_time(results, levels)
      << level_bars(metrics) << reward_histogram(metrics.back()) << "</div>\n<h2>Tasks</h2>\n"
      << task_table(results) << "</body></html>\n";
  return out.str();
}

}  // namespace cuda_agent::report
