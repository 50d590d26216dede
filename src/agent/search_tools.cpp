/// The tools that find files and text in the workspace: Glob and Grep, with the names, arguments
/// and output models know from Claude Code. Both walk the workspace the same way: .git and
/// __pycache__ are skipped, links to folders are not followed, and a linked file whose target lies
/// outside the workspace is left out, so nothing beyond the workspace is read.
#include <fnmatch.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <regex>
#include <string>
#include <string_view>
#include <vector>

#include "agent/tool.h"
#include "util/files.h"
#include "util/text.h"

namespace cuda_agent::agent {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr std::size_t kMaxGlobResults = 100;
constexpr std::size_t kMaxOutputChars = 30000;
constexpr std::size_t kMaxGrepLineChars = 500;
/// Grep passes over larger files (generated data, not source).
constexpr std::uintmax_t kMaxGrepFileBytes = 16u << 20;
/// std::regex matches by recursion, about a kilobyte of stack per character for patterns like
/// (a|b)*c; a longer line could overflow the stack, so it is not searched (and the output says so).
constexpr std::size_t kMaxRegexLineChars = 3000;
constexpr std::size_t kMaxBraceExpansions = 256;

/// The patterns that {a,b} alternatives spell out: "*.{cu,cpp}" is "*.cu" and "*.cpp". Braces
/// nest; a brace without a partner or without a comma is taken literally.
std::vector<std::string> expand_braces(const std::string& pattern) {
  for (std::size_t open = 0; open < pattern.size(); ++open) {
    if (pattern[open] == '\\') {
      ++open;
      continue;
    }
    if (pattern[open] != '{') continue;
    int depth = 0;
    std::size_t close = std::string::npos;
    std::vector<std::size_t> commas;
    for (std::size_t i = open; i < pattern.size() && close == std::string::npos; ++i) {
      if (pattern[i] == '\\') {
        ++i;
      } else if (pattern[i] == '{') {
        ++depth;
      } else if (pattern[i] == '}' && --depth == 0) {
        close = i;
      } else if (pattern[i] == ',' && depth == 1) {
        commas.push_back(i);
      }
    }
    if (close == std::string::npos) break;
    if (commas.empty()) continue;
    commas.push_back(close);
    std::vector<std::string> out;
    std::size_t start = open + 1;
    for (std::size_t comma : commas) {
      std::string alternative = pattern.substr(0, open) + pattern.substr(start, comma - start) +
                                pattern.substr(close + 1);
      for (std::string& p : expand_braces(alternative)) {
        if (out.size() < kMaxBraceExpansions) out.push_back(std::move(p));
      }
      start = comma + 1;
    }
    return out;
  }
  return {pattern};
}

std::vector<std::string> split_path(const std::string& path) {
  std::vector<std::string> parts;
  std::size_t start = 0;
  while (start <= path.size()) {
    std::size_t end = path.find('/', start);
    if (end == std::string::npos) end = path.size();
    std::string part = path.substr(start, end - start);
    if (!part.empty() && part != ".") parts.push_back(part);
    start = end + 1;
  }
  return parts;
}

/// A glob pattern split at '/', its braces expanded: one list of segments per alternative. A
/// segment is matched by fnmatch(3) (`*`, `?`, `[abc]`), except `**`, which stands for any number
/// of folders.
using Glob = std::vector<std::vector<std::string>>;

Glob compile_glob(const std::string& pattern) {
  Glob glob;
  for (const std::string& p : expand_braces(pattern)) {
    std::vector<std::string> segments = split_path(p);
    // Consecutive ** say no more than one.
    segments.erase(std::unique(segments.begin(), segments.end(),
                               [](const std::string& a, const std::string& b) {
                                 return a == "**" && b == "**";
                               }),
                   segments.end());
    if (!segments.empty()) glob.push_back(std::move(segments));
  }
  return glob;
}

bool segment_matches(const std::string& pattern, const std::string& name) {
  return fnmatch(pattern.c_str(), name.c_str(), 0) == 0;
}

/// Whether path's segments from si on match pattern's from pi on.
bool matches(const std::vector<std::string>& pattern, std::size_t pi,
             const std::vector<std::string>& path, std::size_t si) {
  if (pi == pattern.size()) return si == path.size();
  if (pattern[pi] == "**") {
    for (std::size_t k = si; k <= path.size(); ++k) {
      if (matches(pattern, pi + 1, path, k)) return true;
    }
    return false;
  }
  return si < path.size() && segment_matches(pattern[pi], path[si]) &&
         matches(pattern, pi + 1, path, si + 1);
}

/// Whether some path beneath the folder dir (its segments) could match pattern: the walk enters
/// only folders where one could.
bool could_match_below(const std::vector<std::string>& pattern, std::size_t pi,
                       const std::vector<std::string>& dir, std::size_t si) {
  if (si == dir.size()) return pi < pattern.size();
  if (pi == pattern.size()) return false;
  if (pattern[pi] == "**") return true;
  return segment_matches(pattern[pi], dir[si]) && could_match_below(pattern, pi + 1, dir, si + 1);
}

bool glob_matches(const Glob& glob, const std::vector<std::string>& path) {
  return std::any_of(glob.begin(), glob.end(),
                     [&](const std::vector<std::string>& p) { return matches(p, 0, path, 0); });
}

bool glob_could_match_below(const Glob& glob, const std::vector<std::string>& dir) {
  return std::any_of(glob.begin(), glob.end(), [&](const std::vector<std::string>& p) {
    return could_match_below(p, 0, dir, 0);
  });
}

std::vector<std::string> segments_of(const fs::path& relative) {
  std::vector<std::string> parts;
  for (const fs::path& part : relative) parts.push_back(part.string());
  return parts;
}

/// Calls visit(file, segments relative to folder) for every file beneath folder that a tool may
/// read; enters a subfolder only when enter(its segments) says so.
void walk_files(
    const WorkspacePaths& paths, const fs::path& folder,
    const std::function<bool(const std::vector<std::string>&)>& enter,
    const std::function<void(const fs::path&, const std::vector<std::string>&)>& visit) {
  std::error_code ec;
  fs::recursive_directory_iterator it(folder, fs::directory_options::skip_permission_denied, ec);
  for (; !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    const fs::directory_entry& entry = *it;
    std::error_code entry_ec;
    const std::string name = entry.path().filename().string();
    if (entry.is_symlink(entry_ec)) {
      // A linked file is read only when its target is inside too; linked folders are not entered.
      fs::path target;
      std::string err;
      if (paths.resolve(entry.path().string(), false, &target, &err) &&
          fs::is_regular_file(target, entry_ec)) {
        visit(entry.path(), segments_of(entry.path().lexically_relative(folder)));
      }
    } else if (entry.is_directory(entry_ec)) {
      if (name == ".git" || name == "__pycache__" ||
          !enter(segments_of(entry.path().lexically_relative(folder)))) {
        it.disable_recursion_pending();
      }
    } else if (entry.is_regular_file(entry_ec)) {
      visit(entry.path(), segments_of(entry.path().lexically_relative(folder)));
    }
  }
}

/// The folder (or file) a search looks in: the "path" argument, or the workspace root.
bool search_root(const json& args, const ToolContext& context, fs::path* root, std::string* err) {
  std::string path = ".";
  if (!optional_string(args, "path", &path, err)) return false;
  if (path.empty()) path = ".";
  if (!context.paths.resolve(path, false, root, err)) return false;
  std::error_code ec;
  if (!fs::exists(*root, ec)) {
    *err = "path " + path + " does not exist; give a folder of the workspace (or leave path out)";
    return false;
  }
  return true;
}

struct Found {
  fs::path path;
  fs::file_time_type modified;
};

/// Newest first, then by name.
void sort_newest_first(std::vector<Found>* found) {
  std::sort(found->begin(), found->end(), [](const Found& a, const Found& b) {
    return a.modified != b.modified ? a.modified > b.modified : a.path < b.path;
  });
}

fs::file_time_type modified(const fs::path& path) {
  std::error_code ec;
  fs::file_time_type time = fs::last_write_time(path, ec);
  return ec ? fs::file_time_type::min() : time;
}

ToolOutput run_glob(const json& args, ToolContext& context) {
  std::string pattern, err;
  fs::path folder;
  if (!required_string(args, "pattern", &pattern, &err) ||
      !search_root(args, context, &folder, &err)) {
    return ToolOutput::fail(err);
  }
  std::error_code ec;
  if (!fs::is_directory(folder, ec)) {
    return ToolOutput::fail("path " + context.paths.relative(folder) +
                            " is a file; give the folder to search in");
  }
  // An absolute pattern inside the folder is taken relative to it.
  const std::string prefix = folder.string() + "/";
  if (pattern.rfind(prefix, 0) == 0) pattern = pattern.substr(prefix.size());
  if (!pattern.empty() && pattern[0] == '/') {
    return ToolOutput::fail("pattern " + pattern + " is absolute; give it relative to path (" +
                            context.paths.relative(folder) + "), e.g. \"**/*.cu\"");
  }
  Glob glob = compile_glob(pattern);
  if (glob.empty()) return ToolOutput::fail("the pattern is empty; give one like \"**/*.cu\"");
  std::vector<Found> found;
  walk_files(
      context.paths, folder,
      [&](const std::vector<std::string>& dir) { return glob_could_match_below(glob, dir); },
      [&](const fs::path& file, const std::vector<std::string>& segments) {
        if (glob_matches(glob, segments)) found.push_back({file, modified(file)});
      });
  if (found.empty()) {
    return ToolOutput::ok("no files match \"" + pattern + "\" in " +
                          context.paths.relative(folder));
  }
  sort_newest_first(&found);
  std::string out;
  for (std::size_t i = 0; i < found.size() && i < kMaxGlobResults; ++i) {
    out += context.paths.relative(found[i].path) + "\n";
  }
  if (found.size() > kMaxGlobResults) {
    out += "[showing the " + std::to_string(kMaxGlobResults) + " newest of " +
           std::to_string(found.size()) + " files; narrow the pattern or path to see the rest]\n";
  }
  return ToolOutput::ok(cut_for_model(out, kMaxOutputChars));
}

/// What Grep asks for, read from its arguments.
struct GrepRequest {
  std::string pattern;
  std::regex regex;
  std::string mode = "files_with_matches";
  bool line_numbers = true;
  long before = 0;
  long after = 0;
  long head_limit = 0;  // 0: no cap
};

/// The lines of one file that match, 0-based.
struct FileMatches {
  fs::path path;
  std::vector<std::size_t> lines;
};

bool line_matches(const GrepRequest& request, std::string_view line) {
  try {
    return std::regex_search(line.begin(), line.end(), request.regex);
  } catch (const std::regex_error&) {
    return false;  // too complex to match on this line
  }
}

/// The first at most n bytes of text, without splitting a UTF-8 character (a split one would make
/// the tool message invalid JSON text).
std::string_view utf8_prefix(std::string_view text, std::size_t n) {
  if (text.size() <= n) return text;
  while (n > 0 && (static_cast<unsigned char>(text[n]) & 0xC0) == 0x80) --n;
  return text.substr(0, n);
}

/// Appends one line of content output: "path:12:text" for a match, "path-11-text" for context.
void add_line(const GrepRequest& request, const std::string& shown, std::size_t number,
              std::string_view text, bool match, std::vector<std::string>* out) {
  const char separator = match ? ':' : '-';
  std::string line = shown + separator;
  if (request.line_numbers) line += std::to_string(number) + separator;
  line += utf8_prefix(text, kMaxGrepLineChars);
  if (text.size() > kMaxGrepLineChars) {
    line += " [... " + std::to_string(text.size()) + " characters in all]";
  }
  out->push_back(std::move(line));
}

/// Content mode's lines for one file: matches with their context, "--" between groups that do
/// not touch (and before the file's first group when another file's came before).
void add_content(const GrepRequest& request, const std::string& shown,
                 const std::vector<std::string_view>& lines, const std::vector<std::size_t>& hits,
                 std::vector<std::string>* out) {
  const bool context = request.before > 0 || request.after > 0;
  const std::size_t before = request.before, after = request.after, last = lines.size() - 1;
  for (std::size_t h = 0; h < hits.size(); ++h) {
    std::size_t from = hits[h] > before ? hits[h] - before : 0;
    std::size_t to = std::min(last, hits[h] + after);
    // A hit whose context touches this group's joins it.
    while (h + 1 < hits.size() && hits[h + 1] <= to + 1 + before) {
      to = std::min(last, hits[++h] + after);
    }
    if (context && !out->empty()) out->push_back("--");
    for (std::size_t i = from; i <= to; ++i) {
      bool match = std::binary_search(hits.begin(), hits.end(), i);
      add_line(request, shown, i + 1, lines[i], match, out);
    }
  }
}

bool parse_grep(const json& args, GrepRequest* request, std::string* err) {
  std::string& pattern = request->pattern;
  bool ignore_case = false;
  long around = 0, before = -1, after = -1;
  if (!required_string(args, "pattern", &pattern, err) ||
      !optional_string(args, "output_mode", &request->mode, err) ||
      !optional_bool(args, "-i", &ignore_case, err) ||
      !optional_bool(args, "-n", &request->line_numbers, err) ||
      !optional_int(args, "-C", 0, &around, err) || !optional_int(args, "-B", 0, &before, err) ||
      !optional_int(args, "-A", 0, &after, err) ||
      !optional_int(args, "head_limit", 0, &request->head_limit, err)) {
    return false;
  }
  if (request->mode != "files_with_matches" && request->mode != "content" &&
      request->mode != "count") {
    *err = "output_mode must be \"files_with_matches\", \"content\" or \"count\", not \"" +
           request->mode + "\"";
    return false;
  }
  request->before = before >= 0 ? before : around;
  request->after = after >= 0 ? after : around;
  auto flags = std::regex::ECMAScript | (ignore_case ? std::regex::icase : std::regex::flag_type{});
  try {
    request->regex = std::regex(pattern, flags);
  } catch (const std::regex_error& e) {
    *err = "invalid regular expression \"" + pattern + "\": " + e.what() +
           " (the pattern is an ECMAScript regex; escape ( ) [ ] { } . * + ? | \\ with a backslash "
           "to match them literally)";
    return false;
  }
  return true;
}

std::string plural(std::size_t n, const std::string& word) {
  return std::to_string(n) + " " + word + (n == 1 ? "" : "s");
}

std::string capped_note(std::size_t shown, std::size_t total, const std::string& what) {
  return "[showing the first " + std::to_string(shown) + " of " + std::to_string(total) + " " +
         what + "; raise head_limit or narrow the search to see more]\n";
}

ToolOutput run_grep(const json& args, ToolContext& context) {
  GrepRequest request;
  std::string err, glob_pattern;
  fs::path root;
  if (!parse_grep(args, &request, &err) || !optional_string(args, "glob", &glob_pattern, &err) ||
      !search_root(args, context, &root, &err)) {
    return ToolOutput::fail(err);
  }
  // A filter without '/' matches a file's name anywhere; one with '/' its path below the root.
  Glob filter = compile_glob(glob_pattern);
  const bool by_name = glob_pattern.find('/') == std::string::npos;
  std::vector<fs::path> files;
  std::error_code ec;
  if (fs::is_directory(root, ec)) {
    walk_files(
        context.paths, root, [](const std::vector<std::string>&) { return true; },
        [&](const fs::path& file, const std::vector<std::string>& segments) {
          if (filter.empty() ||
              glob_matches(filter,
                           by_name ? std::vector<std::string>{segments.back()} : segments)) {
            files.push_back(file);
          }
        });
    std::sort(files.begin(), files.end());
  } else {
    files.push_back(root);
  }
  const bool first_only = request.mode == "files_with_matches";
  std::vector<FileMatches> matched;
  std::vector<std::string> out;  // content mode's lines
  std::size_t total_lines = 0;
  std::size_t long_lines = 0;  // not searched
  for (const fs::path& file : files) {
    std::error_code ec;
    std::string text;
    if (fs::file_size(file, ec) > kMaxGrepFileBytes || ec) continue;
    if (!read_file(file, &text).ok() || text.find('\0') != std::string::npos) continue;
    std::vector<std::string_view> lines = split_lines(text, /*strip_cr=*/true);
    FileMatches found{file, {}};
    std::size_t unsearched = 0;
    for (std::size_t i = 0; i < lines.size(); ++i) {
      if (lines[i].size() > kMaxRegexLineChars) {
        ++unsearched;
      } else if (line_matches(request, lines[i])) {
        found.lines.push_back(i);
        if (first_only) break;
      }
    }
    // A file listed for one match needs no word about its long lines.
    if (!first_only || found.lines.empty()) long_lines += unsearched;
    if (found.lines.empty()) continue;
    total_lines += found.lines.size();
    if (request.mode == "content") {
      add_content(request, context.paths.relative(file), lines, found.lines, &out);
    }
    matched.push_back(std::move(found));
  }
  const std::string where = context.paths.relative(root);
  const std::string long_note =
      long_lines == 0
          ? ""
          : "[" + plural(long_lines, "line") + " longer than " +
                std::to_string(kMaxRegexLineChars) + " characters " +
                (long_lines == 1 ? "was not searched; Read with offset to see it]\n"
                                 : "were not searched; Read with offset to see them]\n");
  if (matched.empty()) {
    return ToolOutput::ok("no matches for /" + request.pattern + "/ in " + where +
                          (glob_pattern.empty() ? "" : " (files matching " + glob_pattern + ")") +
                          "\n" + long_note);
  }
  const std::size_t cap = request.head_limit > 0 ? request.head_limit : SIZE_MAX;
  std::string text;
  if (request.mode == "files_with_matches") {
    std::vector<Found> found;
    for (const FileMatches& m : matched) found.push_back({m.path, modified(m.path)});
    sort_newest_first(&found);
    text = "Found " + std::to_string(found.size()) + (found.size() == 1 ? " file" : " files") +
           " (newest first)\n";
    for (std::size_t i = 0; i < found.size() && i < cap; ++i) {
      text += context.paths.relative(found[i].path) + "\n";
    }
    if (found.size() > cap) text += capped_note(cap, found.size(), "files");
  } else if (request.mode == "count") {
    for (std::size_t i = 0; i < matched.size() && i < cap; ++i) {
      text += context.paths.relative(matched[i].path) + ":" +
              std::to_string(matched[i].lines.size()) + "\n";
    }
    if (matched.size() > cap) text += capped_note(cap, matched.size(), "files");
    text += plural(total_lines, "matching line") + " in " + plural(matched.size(), "file") + "\n";
  } else {
    for (std::size_t i = 0; i < out.size() && i < cap; ++i) text += out[i] + "\n";
    if (out.size() > cap) text += capped_note(cap, out.size(), "lines");
  }
  return ToolOutput::ok(cut_for_model(text + long_note, kMaxOutputChars));
}

}  // namespace

void add_search_tools(ToolRegistry* registry) {
  registry->add(
      {"Glob",
       "Finds files by name pattern, e.g. \"**/*.cu\" (any folder) or \"kernels/*.{cu,cpp}\". "
       "`*` and `?` stay within one folder, `**` spans folders. Lists paths relative to the "
       "workspace, most recently modified first, at most 100.",
       {{"type", "object"},
        {"properties",
         {{"pattern", schema_property("string", "The glob pattern, relative to path.")},
          {"path",
           schema_property("string", "The folder to search in (default: the workspace root).")}}},
        {"required", {"pattern"}}},
       false,
       run_glob});
  registry->add(
      {"Grep",
       "Searches file contents with a regular expression (ECMAScript syntax, like JavaScript). "
       "By default lists the files that match; output_mode \"content\" shows the matching lines "
       "(with -A/-B/-C context), \"count\" counts them per file. Filter files with glob (e.g. "
       "\"*.cu\"). Binary files are skipped.",
       {{"type", "object"},
        {"properties",
         {{"pattern", schema_property("string", "The regular expression to search for.")},
          {"path",
           schema_property("string", "A file or folder to search (default: the workspace).")},
          {"glob",
           schema_property("string", "Only search files matching this glob, e.g. \"*.{cu,h}\".")},
          {"output_mode",
           {{"type", "string"},
            {"enum", {"files_with_matches", "content", "count"}},
            {"description", "What to show (default files_with_matches)."}}},
          {"-i", schema_property("boolean", "Ignore case.")},
          {"-n", schema_property("boolean", "Show line numbers in content mode (default true).")},
          {"-A", schema_property("integer", "Lines of context after each match (content mode).")},
          {"-B", schema_property("integer", "Lines of context before each match (content mode).")},
          {"-C", schema_property("integer", "Lines of context before and after each match.")},
          {"head_limit", schema_property("integer", "Show at most this many lines or files.")}}},
        {"required", {"pattern"}}},
       false,
       run_grep});
}

}  // namespace cuda_agent::agent
