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

std::string trim(const std::string& text) {
  const char* space = " \t\r\n";
  std::size_t b = text.find_first_not_of(space);
  if (b == std::string::npos) return "";
  return text.substr(b, text.find_last_not_of(space) - b + 1);
}

std::string valid_utf8(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  const auto* b = reinterpret_cast<const unsigned char*>(text.data());
  const std::size_t n = text.size();
  for (std::size_t i = 0; i < n;) {
    const unsigned char c = b[i];
    std::size_t len = c < 0x80           ? 1
                      : (c >> 5) == 0x6  ? 2
                      : (c >> 4) == 0xE  ? 3
                      : (c >> 3) == 0x1E ? 4
                                         : 0;
    bool ok = len > 0 && i + len <= n;
    for (std::size_t k = 1; ok && k < len; ++k) ok = (b[i + k] & 0xC0) == 0x80;
    if (ok && len > 1) {
      // Overlong forms, surrogates and code points past U+10FFFF are not UTF-8 either.
      unsigned cp = c & (0xFF >> (len + 1));
      for (std::size_t k = 1; k < len; ++k) cp = (cp << 6) | (b[i + k] & 0x3F);
      static const unsigned kMin[] = {0, 0, 0x80, 0x800, 0x10000};
      ok = cp >= kMin[len] && cp <= 0x10FFFF && (cp < 0xD800 || cp > 0xDFFF);
    }
    if (ok) {
      out.append(text, i, len);
      i += len;
    } else {
      out += "\xEF\xBF\xBD";
      ++i;
    }
  }
  return out;
}

std::vector<std::string_view> split_lines(std::string_view text, bool strip_cr) {
  std::vector<std::string_view> lines;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(start, end - start);
    if (strip_cr && !line.empty() && line.back() == '\r') line.remove_suffix(1);
    lines.push_back(line);
    start = end + 1;
  }
  return lines;
}

std::optional<long long> parse_prefixed_id(const std::string& text, char prefix) {
  if (text.size() < 2 || text.size() > 19 || text[0] != prefix ||
      text.find_first_not_of("0123456789", 1) != std::string::npos) {
    return std::nullopt;
  }
  return std::stoll(text.substr(1));
}

}  // namespace cuda_agent
