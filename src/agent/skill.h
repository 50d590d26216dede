/// A skill in the Agent Skills format: a SKILL.md file whose YAML front matter names it and says
/// what it is for, followed by the instructions. The agent loads the workspace's SKILL.md into
/// its system prompt whole; the context budget never cuts it.
#pragma once

#include <filesystem>
#include <string>

#include "util/status.h"

namespace cuda_agent::agent {

struct Skill {
  std::string name;
  std::string description;
  std::string body;  // the Markdown after the front matter
};

/// Parses SKILL.md's text. The front matter (between two "---" lines at the top) must give name
/// and description; a file without it, or without either key, is InvalidArgument saying so.
Status parse_skill(const std::string& text, Skill* skill);
Status load_skill(const std::filesystem::path& path, Skill* skill);

/// The system prompt of an episode: who the agent is and where it works, then the skill.
std::string system_prompt(const Skill& skill, const std::string& device);

}  // namespace cuda_agent::agent
