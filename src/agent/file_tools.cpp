/// The tools that read and change files: Read, Write, Edit, MultiEdit and NotebookEdit, with the
/// names, arguments and behaviour models know from Claude Code. Reads may look at the read-only
/// infrastructure; every change is refused there and outside the workspace, and is written
/// atomically, so a failed call leaves the file as it was.
#include <algorithm>
#include <cmath>
#include <random>
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

constexpr long kDefaultReadLimit = 2000;
constexpr std::size_t kMaxLineChars = 2000;
/// Read stops before this many characters of output even when lines remain, and says where to
/// go on from.
constexpr std::size_t kMaxReadChars = 100000;
constexpr std::uintmax_t kMaxFileBytes = 32u << 20;
constexpr std::size_t kSnippetContext = 3;
constexpr std::size_t kMaxSnippetLines = 30;

/// The first at most n bytes of text, without splitting a UTF-8 character (a split one would make
/// the tool message invalid JSON text).
std::string_view utf8_prefix(std::string_view text, std::size_t n) {
  if (text.size() <= n) return text;
  while (n > 0 && (static_cast<unsigned char>(text[n]) & 0xC0) == 0x80) --n;
  return text.substr(0, n);
}

/// A line as `cat -n` shows it: the number right-aligned in six columns, a tab, the text (cut
/// when very long).
std::string numbered(std::size_t number, std::string_view line) {
  std::string n = std::to_string(number);
  std::string out = n.size() < 6 ? std::string(6 - n.size(), ' ') + n : n;
  out += '\t';
  out += utf8_prefix(line, kMaxLineChars);
  if (line.size() > kMaxLineChars) {
    out += " [... line cut: " + std::to_string(line.size()) + " characters in all]";
  }
  return out;
}

std::size_t line_of(const std::string& text, std::size_t pos) {
  return std::count(text.begin(), text.begin() + std::min(pos, text.size()), '\n') + 1;
}

/// Loads a text file for reading or editing: false, with *err saying why, when it is missing, a
/// folder, too large or binary.
bool load_text(const fs::path& path, const std::string& shown, std::string* text,
               std::string* err) {
  std::error_code ec;
  fs::file_status status = fs::status(path, ec);
  if (!fs::exists(status)) {
    *err = shown + " does not exist; find files with Glob, or create one with Write";
    return false;
  }
  if (fs::is_directory(status)) {
    *err = shown +
           " is a folder, not a file; list what is in it with Glob (pattern \"*\", path \"" +
           shown + "\")";
    return false;
  }
  if (!fs::is_regular_file(status)) {
    *err = shown + " is not a regular file";
    return false;
  }
  if (std::uintmax_t size = fs::file_size(path, ec); !ec && size > kMaxFileBytes) {
    *err = shown + " is " + std::to_string(size) +
           " bytes, more than this tool handles (32 MiB); search it with Grep instead";
    return false;
  }
  if (Status s = read_file(path, text); !s.ok()) {
    *err = "cannot read " + shown + ": " + s.message();
    return false;
  }
  if (text->find('\0') != std::string::npos) {
    *err = shown + " is a binary file (it holds NUL bytes); only text files can be read or edited";
    return false;
  }
  return true;
}

/// Writes text to path atomically, keeping the permissions of the file it replaces (so a script
/// stays executable).
bool store(const fs::path& path, const std::string& text, const std::string& shown,
           std::string* err) {
  std::error_code ec;
  fs::file_status before = fs::status(path, ec);
  if (Status s = write_file_atomic(path, text); !s.ok()) {
    *err = "cannot write " + shown + ": " + s.message();
    return false;
  }
  if (fs::exists(before)) fs::permissions(path, before.permissions(), ec);
  return true;
}

/// Lines first..last (1-based) of text, numbered, with kSnippetContext lines around them.
std::string snippet(const std::string& text, std::size_t first, std::size_t last) {
  std::vector<std::string_view> lines = split_lines(text);
  if (lines.empty()) return "(the file is now empty)\n";
  std::size_t from = first > kSnippetContext ? first - kSnippetContext : 1;
  std::size_t to = std::min(lines.size(), last + kSnippetContext);
  to = std::min(to, from + kMaxSnippetLines - 1);
  std::string out;
  for (std::size_t i = from; i <= to && i <= lines.size(); ++i) {
    out += numbered(i, lines[i - 1]) + "\n";
  }
  return out;
}

/// One replacement a call asks for: old_string by new_string, once or everywhere.
struct EditRequest {
  std::string old_string;
  std::string new_string;
  bool replace_all = false;
};

bool parse_edit(const json& args, EditRequest* edit, std::string* err) {
  if (!args.is_object()) {
    *err = "an edit must be an object {old_string, new_string, replace_all}, not " + args.dump();
    return false;
  }
  return required_string(args, "old_string", &edit->old_string, err) &&
         required_string(args, "new_string", &edit->new_string, err) &&
         optional_bool(args, "replace_all", &edit->replace_all, err);
}

/// What applying an edit did: how many places changed, and where the first change lies in the
/// new text.
struct EditResult {
  std::size_t count = 0;
  std::size_t begin = 0;
  std::size_t end = 0;
};

/// Applies edit to *text; on failure *text is unchanged and *err says why in a way the model can
/// act on.
bool apply_edit(const EditRequest& edit, const std::string& shown, std::string* text,
                EditResult* result, std::string* err) {
  const std::string& old_string = edit.old_string;
  if (old_string.empty()) {
    *err = "old_string is empty; give the exact text to replace (to write a whole file, use Write)";
    return false;
  }
  if (old_string == edit.new_string) {
    *err = "old_string and new_string are the same, so the edit would change nothing";
    return false;
  }
  std::vector<std::size_t> at;
  for (std::size_t pos = text->find(old_string); pos != std::string::npos;
       pos = text->find(old_string, pos + old_string.size())) {
    at.push_back(pos);
  }
  if (at.empty()) {
    *err = "old_string was not found in " + shown +
           "; Read the file and copy the text exactly, including whitespace";
    std::size_t tab = old_string.find('\t');
    if (tab != std::string::npos && tab > 0 && old_string.find_first_not_of(" 0123456789") == tab) {
      *err += " (leave out the line numbers and tab that Read puts before each line)";
    }
    return false;
  }
  if (at.size() > 1 && !edit.replace_all) {
    std::string lines;
    for (std::size_t i = 0; i < at.size() && i < 10; ++i) {
      lines += (i ? ", " : "") + std::to_string(line_of(*text, at[i]));
    }
    *err = "old_string occurs " + std::to_string(at.size()) + " times in " + shown + " (at lines " +
           lines + (at.size() > 10 ? ", ..." : "") +
           "); include more of the surrounding text to make it unique, or pass replace_all=true "
           "to replace every occurrence";
    return false;
  }
  std::string out;
  std::size_t prev = 0;
  for (std::size_t pos : at) {
    out.append(*text, prev, pos - prev);
    out += edit.new_string;
    prev = pos + old_string.size();
  }
  out.append(*text, prev, std::string::npos);
  *text = std::move(out);
  result->count = at.size();
  result->begin = at.front();
  result->end = at.front() + edit.new_string.size();
  return true;
}

std::string plural(std::size_t n, const std::string& word) {
  return std::to_string(n) + " " + word + (n == 1 ? "" : "s");
}

ToolOutput run_read(const json& args, ToolContext& context) {
  std::string file, err, text;
  long offset = 1, limit = kDefaultReadLimit;
  if (!required_string(args, "file_path", &file, &err) ||
      !optional_int(args, "offset", 0, &offset, &err) ||
      !optional_int(args, "limit", 1, &limit, &err)) {
    return ToolOutput::fail(err);
  }
  fs::path path;
  if (!context.paths.resolve(file, false, &path, &err)) return ToolOutput::fail(err);
  const std::string shown = context.paths.relative(path);
  if (!load_text(path, shown, &text, &err)) return ToolOutput::fail(err);
  if (text.empty()) return ToolOutput::ok(shown + " is empty (0 lines)");
  std::vector<std::string_view> lines = split_lines(text);
  const std::size_t total = lines.size();
  const std::size_t first = offset > 0 ? offset : 1;
  if (first > total) {
    return ToolOutput::fail("offset " + std::to_string(first) + " is past the end of " + shown +
                            ", which has " + plural(total, "line") + "; pass an offset from 1 to " +
                            std::to_string(total));
  }
  const std::size_t end = std::min(total, first - 1 + static_cast<std::size_t>(limit));
  std::string out;
  std::size_t i = first - 1;
  for (; i < end; ++i) {
    std::string line = numbered(i + 1, lines[i]);
    if (i >= first && out.size() + line.size() > kMaxReadChars) break;
    out += line + "\n";
  }
  if (i < total) {
    out += "[lines " + std::to_string(first) + "-" + std::to_string(i) + " of " +
           std::to_string(total) + "; pass offset=" + std::to_string(i + 1) + " to read on]\n";
  }
  return ToolOutput::ok(out);
}

ToolOutput run_write(const json& args, ToolContext& context) {
  std::string file, content, err;
  if (!required_string(args, "file_path", &file, &err) ||
      !required_string(args, "content", &content, &err)) {
    return ToolOutput::fail(err);
  }
  fs::path path;
  if (!context.paths.resolve(file, true, &path, &err)) return ToolOutput::fail(err);
  const std::string shown = context.paths.relative(path);
  std::error_code ec;
  fs::file_status status = fs::status(path, ec);
  if (fs::is_directory(status)) {
    return ToolOutput::fail(shown + " is a folder; give the path of a file in it");
  }
  const bool existed = fs::exists(status);
  fs::create_directories(path.parent_path(), ec);
  if (ec) {
    return ToolOutput::fail("cannot create the folder " +
                            context.paths.relative(path.parent_path()) + ": " + ec.message());
  }
  if (!store(path, content, shown, &err)) return ToolOutput::fail(err);
  return ToolOutput::ok("wrote " + plural(split_lines(content).size(), "line") + " to " + shown +
                        (existed ? " (overwrote it)" : " (created it)"));
}

ToolOutput run_edit(const json& args, ToolContext& context) {
  std::string file, err, text;
  EditRequest edit;
  if (!required_string(args, "file_path", &file, &err) || !parse_edit(args, &edit, &err)) {
    return ToolOutput::fail(err);
  }
  fs::path path;
  if (!context.paths.resolve(file, true, &path, &err)) return ToolOutput::fail(err);
  const std::string shown = context.paths.relative(path);
  EditResult result;
  if (!load_text(path, shown, &text, &err) || !apply_edit(edit, shown, &text, &result, &err) ||
      !store(path, text, shown, &err)) {
    return ToolOutput::fail(err);
  }
  const std::size_t first = line_of(text, result.begin);
  const std::size_t last = line_of(text, result.end > result.begin ? result.end - 1 : result.end);
  std::string out = "replaced " + plural(result.count, "occurrence") + " in " + shown;
  out += result.count > 1 ? "; around the first (line " + std::to_string(first) + "):\n"
                          : "; lines around the edit now read:\n";
  return ToolOutput::ok(out + snippet(text, first, last));
}

ToolOutput run_multi_edit(const json& args, ToolContext& context) {
  std::string file, err, text;
  if (!required_string(args, "file_path", &file, &err)) return ToolOutput::fail(err);
  auto given = args.find("edits");
  json edits = given == args.end() ? json() : *given;
  // Models that write tool calls as text may send the list as a JSON string.
  if (edits.is_string()) edits = json::parse(edits.get<std::string>(), nullptr, false);
  if (!edits.is_array() || edits.empty()) {
    return ToolOutput::fail(
        "argument \"edits\" must be a non-empty array of {old_string, new_string, replace_all}");
  }
  fs::path path;
  if (!context.paths.resolve(file, true, &path, &err)) return ToolOutput::fail(err);
  const std::string shown = context.paths.relative(path);
  if (!load_text(path, shown, &text, &err)) return ToolOutput::fail(err);
  std::size_t replacements = 0;
  for (std::size_t i = 0; i < edits.size(); ++i) {
    EditRequest edit;
    EditResult result;
    if (!parse_edit(edits[i], &edit, &err) || !apply_edit(edit, shown, &text, &result, &err)) {
      return ToolOutput::fail("edit " + std::to_string(i + 1) + " of " +
                              std::to_string(edits.size()) + " failed: " + err +
                              "; nothing was written (the edits apply all or none)");
    }
    replacements += result.count;
  }
  if (!store(path, text, shown, &err)) return ToolOutput::fail(err);
  return ToolOutput::ok("applied " + plural(edits.size(), "edit") + " (" +
                        plural(replacements, "replacement") + ") to " + shown + "; it now has " +
                        plural(split_lines(text).size(), "line"));
}

/// A cell's source as Jupyter stores it: a list of lines, each but the last keeping its "\n".
json source_lines(const std::string& source) {
  json lines = json::array();
  std::size_t start = 0;
  while (start < source.size()) {
    std::size_t end = source.find('\n', start);
    end = end == std::string::npos ? source.size() : end + 1;
    lines.push_back(source.substr(start, end - start));
    start = end;
  }
  return lines;
}

/// A text field of a notebook's JSON object; empty when it is absent or not text.
std::string field(const json& object, const char* key) {
  if (!object.is_object()) return "";
  auto it = object.find(key);
  return it != object.end() && it->is_string() ? it->get<std::string>() : "";
}

/// A random cell id, as nbformat 4.5 gives every cell.
std::string new_cell_id(const json& cells) {
  std::random_device device;
  std::mt19937 random(device());
  for (;;) {
    std::string id;
    for (int i = 0; i < 8; ++i) id += "0123456789abcdef"[random() % 16];
    auto same = [&](const json& c) { return field(c, "id") == id; };
    if (std::none_of(cells.begin(), cells.end(), same)) return id;
  }
}

/// Gives cell the fields its type needs: a code cell has outputs and an execution count (cleared,
/// since its source changed); other cells have neither.
void set_cell_type(json* cell, const std::string& type) {
  (*cell)["cell_type"] = type;
  if (type == "code") {
    (*cell)["outputs"] = json::array();
    (*cell)["execution_count"] = nullptr;
  } else {
    cell->erase("outputs");
    cell->erase("execution_count");
  }
}

ToolOutput run_notebook_edit(const json& args, ToolContext& context) {
  std::string file, source, cell_type, cell_id, mode = "replace", err, text;
  long cell_number = -1;
  if (!required_string(args, "notebook_path", &file, &err) ||
      !optional_string(args, "edit_mode", &mode, &err) ||
      !optional_string(args, "cell_type", &cell_type, &err) ||
      !optional_string(args, "cell_id", &cell_id, &err) ||
      !optional_int(args, "cell_number", 0, &cell_number, &err)) {
    return ToolOutput::fail(err);
  }
  if (mode != "replace" && mode != "insert" && mode != "delete") {
    return ToolOutput::fail("edit_mode must be \"replace\", \"insert\" or \"delete\", not \"" +
                            mode + "\"");
  }
  if (!cell_type.empty() && cell_type != "code" && cell_type != "markdown") {
    return ToolOutput::fail("cell_type must be \"code\" or \"markdown\", not \"" + cell_type +
                            "\"");
  }
  if (mode == "insert" && cell_type.empty()) {
    return ToolOutput::fail("cell_type is needed to insert a cell: \"code\" or \"markdown\"");
  }
  if (mode != "delete" && !required_string(args, "new_source", &source, &err)) {
    return ToolOutput::fail(err);
  }
  fs::path path;
  if (!context.paths.resolve(file, true, &path, &err)) return ToolOutput::fail(err);
  const std::string shown = context.paths.relative(path);
  if (path.extension() != ".ipynb") {
    return ToolOutput::fail(shown + " is not a Jupyter notebook (.ipynb); change it with Edit");
  }
  if (!load_text(path, shown, &text, &err)) return ToolOutput::fail(err);
  json notebook = json::parse(text, nullptr, false);
  if (notebook.is_discarded() || !notebook.is_object() || !notebook.contains("cells") ||
      !notebook["cells"].is_array()) {
    return ToolOutput::fail(shown +
                            " is not a Jupyter notebook: it is not JSON with a \"cells\" list "
                            "(nbformat 4); change it with Edit or Write");
  }
  json& cells = notebook["cells"];
  const std::size_t count = cells.size();
  std::size_t index = 0;  // the cell to change, or where to insert
  if (!cell_id.empty()) {
    auto has_id = [&](const json& c) { return field(c, "id") == cell_id; };
    auto it = std::find_if(cells.begin(), cells.end(), has_id);
    if (it == cells.end()) {
      return ToolOutput::fail("no cell of " + shown + " has id \"" + cell_id +
                              "\"; give its cell_number (0-based) instead");
    }
    index = (it - cells.begin()) + (mode == "insert" ? 1 : 0);
  } else if (cell_number >= 0) {
    index = cell_number;
    if (mode == "insert" ? index > count : index >= count) {
      return ToolOutput::fail(
          "cell_number " + std::to_string(index) + " is out of range: " + shown + " has " +
          plural(count, "cell") +
          (count == 0 ? "" : ", numbered 0 to " + std::to_string(count - 1)) +
          (mode == "insert" ? "; insert at 0 to " + std::to_string(count) : ""));
    }
  } else if (mode != "insert") {
    return ToolOutput::fail("give the cell_number (0-based) or cell_id of the cell to " + mode);
  }
  std::string done;
  if (mode == "replace") {
    json& cell = cells[index];
    if (!cell.is_object()) {
      return ToolOutput::fail("cell " + std::to_string(index) + " of " + shown +
                              " is not a JSON object");
    }
    std::string type = cell_type.empty() ? field(cell, "cell_type") : cell_type;
    if (type.empty()) type = "code";
    cell["source"] = source_lines(source);
    if (type == "code" || type != field(cell, "cell_type")) set_cell_type(&cell, type);
    done = "replaced cell " + std::to_string(index) + " (" + type + ") of " + shown;
  } else if (mode == "insert") {
    json cell = {{"metadata", json::object()}, {"source", source_lines(source)}};
    set_cell_type(&cell, cell_type);
    const json minor = notebook.contains("nbformat_minor") ? notebook["nbformat_minor"] : json();
    const bool with_ids =
        (minor.is_number() && minor >= 5) ||
        std::any_of(cells.begin(), cells.end(), [](const json& c) { return c.contains("id"); });
    if (with_ids) cell["id"] = new_cell_id(cells);
    cells.insert(cells.begin() + index, std::move(cell));
    done = "inserted a " + cell_type + " cell at position " + std::to_string(index) + " of " +
           shown + "; it now has " + plural(cells.size(), "cell");
  } else {
    const std::string type = field(cells[index], "cell_type");
    cells.erase(cells.begin() + index);
    done = "deleted cell " + std::to_string(index) + " (" + type + ") of " + shown +
           "; it now has " + plural(cells.size(), "cell");
  }
  // Jupyter writes one space of indent and a final line end.
  std::string out = notebook.dump(1, ' ', false, json::error_handler_t::replace) + "\n";
  if (!store(path, out, shown, &err)) return ToolOutput::fail(err);
  return ToolOutput::ok(done);
}

json object_schema(json properties, json required) {
  return {{"type", "object"}, {"properties", std::move(properties)}, {"required", required}};
}

json edit_properties() {
  return {
      {"old_string", schema_property("string", "The exact text to replace, whitespace included.")},
      {"new_string", schema_property("string", "The text to put in its place (must differ).")},
      {"replace_all", schema_property("boolean",
                                      "Replace every occurrence (default false: "
                                      "old_string must occur exactly once).")}};
}

}  // namespace

void add_file_tools(ToolRegistry* registry) {
  const json file_path = schema_property("string", "The file, relative to the workspace root.");
  registry->add(
      {"Read",
       "Reads a text file of the workspace, its lines numbered like `cat -n`. Reads up to 2000 "
       "lines; for a long file pass offset (the 1-based line to start at) and limit. Read a file "
       "before you edit it; copy text from it without the line-number prefix.",
       object_schema(
           {{"file_path", file_path},
            {"offset", schema_property("integer", "The 1-based line to start at (default 1).")},
            {"limit", schema_property("integer", "How many lines to read (default 2000).")}},
           {"file_path"}),
       false, run_read});
  registry->add(
      {"Write",
       "Writes a whole file, creating it and its folders or replacing what it held. To change "
       "part of an existing file, use Edit. SKILL.md, model.py, utils/ and .cuda-agent/ are "
       "read-only.",
       object_schema({{"file_path", file_path},
                      {"content", schema_property("string", "The file's complete new content.")}},
                     {"file_path", "content"}),
       true, run_write});
  json edit = edit_properties();
  edit["file_path"] = file_path;
  registry->add(
      {"Edit",
       "Replaces exact text in a file: old_string must occur exactly once (give enough "
       "surrounding lines to make it unique), or pass replace_all to replace every occurrence. "
       "Copy old_string from Read's output exactly, without the line numbers.",
       object_schema(edit, {"file_path", "old_string", "new_string"}), true, run_edit});
  registry->add(
      {"MultiEdit",
       "Makes several Edit-style replacements in one file, in order, each applied to the result "
       "of the ones before. All or nothing: if any edit fails, the file is left unchanged.",
       object_schema(
           {{"file_path", file_path},
            {"edits",
             {{"type", "array"},
              {"description", "The edits, applied in order."},
              {"items", object_schema(edit_properties(), {"old_string", "new_string"})}}}},
           {"file_path", "edits"}),
       true, run_multi_edit});
  registry->add(
      {"NotebookEdit",
       "Changes one cell of a Jupyter notebook (.ipynb): replaces its source (clearing a code "
       "cell's outputs), inserts a new cell at a position, or deletes it. Cells are picked by "
       "cell_number (0-based) or cell_id.",
       object_schema(
           {{"notebook_path",
             schema_property("string", "The .ipynb file, relative to the workspace.")},
            {"cell_number",
             schema_property("integer",
                             "The 0-based cell to replace or delete; for insert, the "
                             "position the new cell takes (0: first; default 0).")},
            {"cell_id", schema_property("string",
                                        "The id of the cell to replace or delete; for insert, "
                                        "the new cell goes after it.")},
            {"new_source",
             schema_property("string", "The cell's new source (not needed to delete).")},
            {"cell_type",
             {{"type", "string"},
              {"enum", {"code", "markdown"}},
              {"description", "The cell's type; needed to insert, and changes it on replace."}}},
            {"edit_mode",
             {{"type", "string"},
              {"enum", {"replace", "insert", "delete"}},
              {"description", "What to do (default replace)."}}}},
           {"notebook_path"}),
       true, run_notebook_edit});
}

}  // namespace cuda_agent::agent
