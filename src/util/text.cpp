#include "util/text.h"

#include <sstream>
#include <vector>

namespace cuda_agent {
namespace {

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

}  // namespace

std::string join(const std::vector<std::string>& parts, const std::string& separator) {
  std::string out;
  for (std::size_t i = 0; i < parts.size(); ++i) out += (i ? separator : "") + parts[i];
  return out;
}

std::string trim_lines(const std::string& text, std::size_t head, std::size_t tail) {
  std::vector<std::string> lines = split_lines(text);
  if (lines.size() <= head + tail) return text;
  std::string out;
  for (std::size_t i = 0; i < head; ++i) out += lines[i] + "\n";
  out += "... [" + std::to_string(lines.size() - head - tail) + " of " +
         std::to_string(lines.size()) + " lines cut] ...\n";
  for (std::size_t i = lines.size() - tail; i < lines.size(); ++i) out += lines[i] + "\n";
  return out;
}

std::string first_compiler_error(const std::string& log) {
  std::vector<std::string> lines = split_lines(log);
  for (std::size_t i = 0; i < lines.size(); ++i) {
    if (lines[i].find("error:") != std::string::npos ||
        lines[i].find("error #") != std::string::npos ||
        lines[i].find("undefined reference") != std::string::npos) {
      std::string out = lines[i];
      for (std::size_t j = i + 1; j < lines.size() && j <= i + 2; ++j) out += "\n" + lines[j];
      return out;
    }
  }
  return "";
}

std::string trim_compiler_log(const std::string& log) {
  std::string first = first_compiler_error(log);
  std::string trimmed = trim_lines(log, 30, 20);
  if (first.empty()) return trimmed;
  return "first error:\n" + first + "\n\nfull log (trimmed):\n" + trimmed;
}

std::string last_line(const std::string& text) {
  std::vector<std::string> lines = split_lines(text);
  for (auto it = lines.rbegin(); it != lines.rend(); ++it) {
    if (it->find_first_not_of(" \t\r") != std::string::npos) return *it;
  }
  return "";
}

}  // namespace cuda_agent
