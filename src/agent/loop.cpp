#include "agent/loop.h"

#include <algorithm>
#include <chrono>

#include "agent/context.h"
#include "llm/text_tool_calls.h"
#include "sandbox/process_runner.h"
#include "util/text.h"

namespace cuda_agent::agent {

using nlohmann::json;

namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

/// Context overflows the server reports are met by assuming denser text; after this many in
/// one turn the conversation is taken not to fit.
constexpr int kOverflowRetries = 3;

std::string one_line(std::string text, std::size_t max) {
  std::replace(text.begin(), text.end(), '\n', ' ');
  if (text.size() > max) text = text.substr(0, max - 3) + "...";
  return text;
}

/// A fingerprint of a turn's calls and results, for telling a stuck model.
std::string fingerprint(const Turn& turn) {
  std::string f;
  for (const ToolEvent& e : turn.tools)
    f += e.name + '\x1f' + e.arguments + '\x1f' + e.output + '\x1e';
  return f;
}

}  // namespace

std::string ending_name(Ending ending) {
  switch (ending) {
    case Ending::kFinished:
      return "finished";
    case Ending::kMaxTurns:
      return "max_turns";
    case Ending::kContextBudget:
      return "context_budget";
    case Ending::kModelRefused:
      return "model_refused";
    case Ending::kModelUnavailable:
      return "model_unavailable";
    case Ending::kStuck:
      return "stuck";
    case Ending::kInterrupted:
      return "interrupted";
  }
  return "unknown";
}

std::string describe_call(const std::string& name, const std::string& arguments) {
  json args = json::parse(arguments, nullptr, false);
  std::string detail;
  if (args.is_object()) {
    for (const char* key :
         {"command", "file_path", "notebook_path", "pattern", "bash_id", "shell_id"}) {
      if (args.contains(key) && args[key].is_string()) {
        detail = args[key].get<std::string>();
        break;
      }
    }
  } else {
    detail = arguments;
  }
  return (name.empty() ? "?" : name) + "(" + one_line(detail, 80) + ")";
}

AgentLoop::AgentLoop(AgentOptions options, llm::LlmClient* client, const ToolRegistry* tools,
                     ToolContext* context, Progress progress)
    : options_(std::move(options)),
      client_(client),
      tools_(tools),
      context_(context),
      progress_(std::move(progress)) {}

ToolEvent run_tool_call(const ToolRegistry& tools, ToolContext& context,
                        const llm::ToolCall& call) {
  ToolEvent event;
  event.call_id = call.id;
  event.name = call.name;
  event.arguments = call.arguments;
  const auto start = Clock::now();
  auto fail = [&](std::string text) {
    event.output = "Error: " + std::move(text);
    event.error = true;
    event.seconds = since(start);
    return event;
  };
  if (call.name.empty()) {
    return fail("this tool call could not be read (" + one_line(call.arguments, 200) +
                "); write calls as JSON: {\"name\": TOOL, \"arguments\": {...}}");
  }
  const Tool* tool = tools.find(call.name);
  if (!tool) {
    std::string names;
    for (const std::string& n : tools.names()) names += (names.empty() ? "" : ", ") + n;
    return fail("there is no tool named \"" + call.name + "\"; the tools are: " + names);
  }
  std::string text = call.arguments;
  if (text.find_first_not_of(" \t\r\n") == std::string::npos) text = "{}";
  json args = json::parse(text, nullptr, false);
  if (args.is_discarded()) {
    return fail("the arguments of " + call.name + " are not valid JSON (" +
                one_line(call.arguments, 200) +
                "); send them as one JSON object, with strings escaped");
  }
  if (!args.is_object()) {
    return fail("the arguments of " + call.name + " must be a JSON object, not " +
                std::string(args.type_name()));
  }
  ToolOutput output;
  try {
    output = tool->run(args, context);
  } catch (const std::exception& e) {
    output = ToolOutput::fail(call.name + " failed: " + e.what());
  }
  event.seconds = since(start);
  event.error = output.error;
  output.text = valid_utf8(output.text);  // a command may print any bytes; JSON takes UTF-8
  event.output =
      output.error && output.text.rfind("Error", 0) != 0 ? "Error: " + output.text : output.text;
  return event;
}

Episode AgentLoop::run(const std::string& system_prompt, const std::string& task_message) {
  Episode episode;
  const auto started = Clock::now();
  auto say = [this](const std::string& line) {
    if (progress_) progress_(line);
  };
  episode.messages = {llm::Message::system(system_prompt), llm::Message::user(task_message)};
  std::vector<llm::Message> context = episode.messages;  // what the model is shown, cut to fit
  const json specs = tools_->specs();
  const std::size_t specs_chars = specs.dump().size();
  const std::vector<std::string> names = tools_->names();
  double chars_per_token = 3.5;  // until the server's counts calibrate it
  const long long budget = options_.max_context_tokens - options_.max_reply_tokens;
  std::vector<std::string> fingerprints;

  auto end = [&](Ending ending, std::string detail) {
    episode.ending = ending;
    episode.ending_detail = std::move(detail);
    episode.seconds = since(started);
    say("agent: " + ending_name(ending) +
        (episode.ending_detail.empty() ? "" : ": " + episode.ending_detail));
    return episode;
  };

  for (int number = 1;; ++number) {
    if (number > options_.max_turns) {
      return end(Ending::kMaxTurns, "the model was still calling tools after " +
                                        std::to_string(options_.max_turns) + " turns");
    }
    if (interrupt_requested()) return end(Ending::kInterrupted, "");
    Turn turn;
    turn.number = number;
    llm::ChatResponse response;
    llm::CallInfo info;
    for (int overflow = 0;; ++overflow) {
      ContextFit fit = fit_context(&context, specs_chars, chars_per_token, budget);
      if (fit.cut > 0) {
        turn.notes.push_back("cut " + std::to_string(fit.cut) +
                             " older tool outputs to fit the context (about " +
                             std::to_string(fit.tokens_before) + " -> " +
                             std::to_string(fit.tokens_after) + " tokens)");
      }
      if (!fit.fits) {
        episode.turns.push_back(turn);
        return end(Ending::kContextBudget,
                   "the conversation needs about " + std::to_string(fit.tokens_after) +
                       " tokens with every older tool output cut, over the budget of " +
                       std::to_string(budget) + " (" + std::to_string(options_.max_context_tokens) +
                       " less " + std::to_string(options_.max_reply_tokens) + " for the reply)");
      }
      llm::ChatRequest request{options_.model, context, specs, options_.temperature,
                               options_.max_reply_tokens};
      Status s = client_->complete(request, &response, &info);
      turn.model_seconds += info.seconds;
      turn.attempts += info.attempts;
      turn.retries.insert(turn.retries.end(), info.retries.begin(), info.retries.end());
      if (s.ok()) {
        if (response.usage && response.usage->prompt_tokens > 0) {
          // The server's count calibrates the estimate for the next turns.
          const long long estimate = estimate_tokens(context, specs_chars, 1.0);
          chars_per_token = std::clamp(
              static_cast<double>(estimate) / static_cast<double>(response.usage->prompt_tokens),
              1.0, 8.0);
        }
        break;
      }
      if (interrupt_requested()) return end(Ending::kInterrupted, "");
      if (info.context_overflow && overflow < kOverflowRetries) {
        turn.notes.push_back("the server said the prompt exceeds the context: " + s.message());
        chars_per_token *= 0.7;  // denser than estimated: cut more
        continue;
      }
      episode.turns.push_back(turn);
      if (info.context_overflow) return end(Ending::kContextBudget, s.message());
      return end(s.code() == Status::Code::kInvalidArgument ? Ending::kModelRefused
                                                            : Ending::kModelUnavailable,
                 s.message());
    }
    turn.finish_reason = response.finish_reason;
    if (response.usage) {
      turn.usage = response.usage;
      episode.tokens.prompt_tokens += response.usage->prompt_tokens;
      episode.tokens.completion_tokens += response.usage->completion_tokens;
      episode.tokens.total_tokens += response.usage->total_tokens;
    }
    llm::Message reply = response.message;
    if (reply.tool_calls.empty() && !reply.content.empty()) {
      llm::TextToolCalls parsed = llm::parse_text_tool_calls(reply.content, names);
      if (!parsed.calls.empty()) {
        reply.tool_calls = parsed.calls;
        reply.content = parsed.remaining;
        turn.calls_from_text = true;
      }
    }
    // Ids must be present and distinct for the tool messages to answer them.
    for (std::size_t i = 0; i < reply.tool_calls.size(); ++i) {
      std::string& id = reply.tool_calls[i].id;
      bool duplicate = false;
      for (std::size_t j = 0; j < i; ++j) duplicate |= reply.tool_calls[j].id == id;
      if (id.empty() || duplicate) {
        id = "call_" + std::to_string(number) + "_" + std::to_string(i + 1);
      }
    }
    episode.messages.push_back(reply);
    context.push_back(reply);

    if (reply.tool_calls.empty()) {
      if (response.finish_reason == "length") {
        // Cut off mid-reply: not an answer. Say so and go on.
        turn.notes.push_back("the reply was cut at max_tokens");
        llm::Message nudge = llm::Message::user(
            "Your reply was cut off at the token limit. Continue, in shorter steps.");
        episode.messages.push_back(nudge);
        context.push_back(nudge);
        episode.turns.push_back(turn);
        continue;
      }
      episode.turns.push_back(turn);
      return end(Ending::kFinished, one_line(reply.content, 160));
    }
    for (const llm::ToolCall& call : reply.tool_calls) {
      ToolEvent event = run_tool_call(*tools_, *context_, call);
      say("turn " + std::to_string(number) + ": " + describe_call(call.name, call.arguments) +
          (event.error ? " -> " + one_line(event.output, 100) : ""));
      llm::Message result = llm::Message::tool(call.id, event.output);
      episode.messages.push_back(result);
      context.push_back(result);
      turn.tools.push_back(std::move(event));
      if (interrupt_requested()) break;
    }
    fingerprints.push_back(fingerprint(turn));
    episode.turns.push_back(std::move(turn));
    if (options_.stuck_turns > 1 && static_cast<int>(fingerprints.size()) >= options_.stuck_turns &&
        std::all_of(fingerprints.end() - options_.stuck_turns, fingerprints.end(),
                    [&](const std::string& f) { return f == fingerprints.back(); })) {
      return end(Ending::kStuck, "the same tool calls got the same results " +
                                     std::to_string(options_.stuck_turns) + " turns in a row");
    }
  }
}

}  // namespace cuda_agent::agent
