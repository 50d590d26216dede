/// Text for people: long logs cut down to what a person (or a model) needs to read, and lists
/// joined into a line.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace cuda_agent {

/// Keeps the first head and last tail lines, with a marker that says how many lines were cut and
/// how many there were in all. A log that fits is returned unchanged.
std::string trim_lines(const std::string& text, std::size_t head = 40, std::size_t tail = 40);

/// The first compiler diagnostic in a log ("error:" or "fatal error:" from gcc, clang or nvcc),
/// with the two lines after it for context; empty if there is none.
std::string first_compiler_error(const std::string& log);

/// Compiler output for a person: the first error lifted out on top, then the trimmed log.
std::string trim_compiler_log(const std::string& log);

/// The parts with separator between them ("a, b, c").
std::string join(const std::vector<std::string>& parts, const std::string& separator);

/// text without the spaces, tabs and line ends around it.
std::string trim(const std::string& text);

/// text with every byte that is not part of well-formed UTF-8 replaced by U+FFFD, so that it can
/// go into JSON (a command's output may hold anything).
std::string valid_utf8(const std::string& text);

/// The lines of text without their line ends (and, with strip_cr, a '\r' before one); a final
/// line end does not start another line. The views point into text.
std::vector<std::string_view> split_lines(std::string_view text, bool strip_cr = false);

/// The last non-empty line of a text, e.g. the exception line of a Python traceback.
std::string last_line(const std::string& text);

/// The id in a name made of a letter and digits ("r3" -> 3 for prefix 'r'); empty when text is
/// not prefix and 1 to 18 digits.
std::optional<long long> parse_prefixed_id(const std::string& text, char prefix);

}  // namespace cuda_agent
