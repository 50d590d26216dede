#include "agent/skill.h"

#include <sstream>

#include "util/files.h"
#include "util/text.h"

namespace cuda_agent::agent {

namespace {

/// A scalar of the front matter: plain, or in single or double quotes.
std::string scalar(std::string value) {
  value = trim(value);
  if (value.size() >= 2 && (value.front() == '"' || value.front() == '\'') &&
      value.back() == value.front()) {
    value = value.substr(1, value.size() - 2);
  }
  return value;
}

}  // namespace

Status parse_skill(const std::string& text, Skill* skill) {
  std::istringstream in(text);
  std::string line;
  if (!std::getline(in, line) || trim(line) != "---") {
    return Status::InvalidArgument(
        "SKILL.md has no front matter: it must open with a '---' line, name: and description:, "
        "and a closing '---'");
  }
  Skill s;
  bool closed = false;
  while (std::getline(in, line)) {
    if (trim(line) == "---") {
      closed = true;
      break;
    }
    std::size_t colon = line.find(':');
    if (colon == std::string::npos || line.empty() || line[0] == ' ' || line[0] == '#') continue;
    std::string key = trim(line.substr(0, colon));
    if (key == "name") s.name = scalar(line.substr(colon + 1));
    if (key == "description") s.description = scalar(line.substr(colon + 1));
  }
  if (!closed) return Status::InvalidArgument("SKILL.md's front matter has no closing '---'");
  if (s.name.empty() || s.description.empty()) {
    return Status::InvalidArgument("SKILL.md's front matter must give name and description");
  }
  std::ostringstream body;
  body << in.rdbuf();
  s.body = trim(body.str());
  *skill = std::move(s);
  return Status::OK();
}

Status load_skill(const std::filesystem::path& path, Skill* skill) {
  std::string text;
  if (Status s = read_file(path, &text); !s.ok()) return s;
  if (Status s = parse_skill(text, skill); !s.ok()) {
    return Status::InvalidArgument(path.string() + ": " + s.message());
  }
  return Status::OK();
}

std::string system_prompt(const Skill& skill, const std::string& device) {
  return "You are a CUDA kernel engineer working in a sandboxed workspace (the current folder) "
         "through the tools you are given. The device is " +
         device +
         ". Paths are relative to the workspace; nothing outside it can be read or written, and "
         "there is no network. When your model_new.py is correct and as fast as you can make "
         "it, stop calling tools and say so: the workspace is then evaluated afresh, and only "
         "that evaluation counts.\n\n"
         "<skill name=\"" +
         skill.name + "\">\n" + skill.description + "\n\n" + skill.body + "\n</skill>\n";
}

}  // namespace cuda_agent::agent
