#include "sandbox/fork_server.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>

namespace cuda_agent {
namespace {

/// How long the first answer may take: the server imports torch before it reads a request, and
/// a busy machine makes that tens of seconds.
constexpr int kFirstAnswerMs = 180000;

struct Server {
  pid_t pid = -1;
  int control = -1;     // our end of the SOCK_SEQPACKET pair; close-on-exec
  bool failed = false;  // never asked again
  std::string why;
};

std::mutex g_mutex;
std::map<std::string, std::unique_ptr<Server>>& servers() {
  static auto* all = new std::map<std::string, std::unique_ptr<Server>>;  // lives to the exit
  return *all;
}

void fail(Server* server, const std::string& why) {
  if (server->pid > 0) {
    kill(-server->pid, SIGKILL);
    waitpid(server->pid, nullptr, 0);
  }
  if (server->control >= 0) close(server->control);
  server->pid = -1;
  server->control = -1;
  server->failed = true;
  server->why = why;
}

/// Starts argv with env, the control socket as its descriptor 3, in a process group of its own
/// (a ^C at the terminal is this process's to handle), its output discarded. With candidates,
/// that server also forks the candidates' server before it reads any request, whose control
/// socket it gets as descriptor 4 (--candidates-control 4).
bool start(Server* server, std::vector<std::string> argv, const std::vector<std::string>& env,
           Server* candidates) {
  int pair[2] = {-1, -1}, second[2] = {-1, -1};
  const auto give_up = [&](const char* call) {
    const std::string why = std::string(call) + ": " + std::strerror(errno);
    for (int fd : {pair[0], pair[1], second[0], second[1]}) {
      if (fd >= 0) close(fd);
    }
    fail(server, why);
    if (candidates) fail(candidates, why);
    return false;
  };
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) != 0 ||
      (candidates && socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, second) != 0))
    return give_up("socketpair");
  if (candidates) argv.insert(argv.end(), {"--candidates-control", "4"});
  std::vector<std::string> env_strings = env;
  std::vector<char*> argv_ptrs, env_ptrs;
  for (auto& s : argv) argv_ptrs.push_back(s.data());
  argv_ptrs.push_back(nullptr);
  for (auto& s : env_strings) env_ptrs.push_back(s.data());
  env_ptrs.push_back(nullptr);
  pid_t pid = fork();
  if (pid < 0) return give_up("fork");
  if (pid == 0) {
    setpgid(0, 0);
    // Out of the way of 3 and 4 first (dup2 onto itself would keep close-on-exec).
    int control = fcntl(pair[1], F_DUPFD, 10);
    int candidates_control = candidates ? fcntl(second[1], F_DUPFD, 10) : -1;
    int null = ::open("/dev/null", O_RDWR);
    dup2(null, 0);
    dup2(null, 1);
    dup2(null, 2);
    dup2(control, 3);  // without close-on-exec
    if (candidates) dup2(candidates_control, 4);
    execvpe(argv_ptrs[0], argv_ptrs.data(), env_ptrs.data());
    _exit(127);
  }
  setpgid(pid, pid);
  close(pair[1]);
  server->pid = pid;
  server->control = pair[0];
  if (candidates) {
    close(second[1]);
    candidates->pid = -1;  // the server's child: ends with its control socket
    candidates->control = second[0];
  }
  return true;
}

bool send_request(int control, const std::string& message, int fd) {
  iovec io{const_cast<char*>(message.data()), message.size()};
  alignas(cmsghdr) char space[CMSG_SPACE(sizeof(int))] = {};
  msghdr msg{};
  msg.msg_iov = &io;
  msg.msg_iovlen = 1;
  msg.msg_control = space;
  msg.msg_controllen = sizeof space;
  cmsghdr* header = CMSG_FIRSTHDR(&msg);
  header->cmsg_level = SOL_SOCKET;
  header->cmsg_type = SCM_RIGHTS;
  header->cmsg_len = CMSG_LEN(sizeof(int));
  std::memcpy(CMSG_DATA(header), &fd, sizeof(int));
  ssize_t sent;
  do {
    sent = sendmsg(control, &msg, MSG_NOSIGNAL);
  } while (sent < 0 && errno == EINTR);
  return sent == static_cast<ssize_t>(message.size());
}

/// Reads from fd into *pending until a whole line is there or timeout_ms passes (-1: never
/// waits). Returns the line without its end; empty at the end of the pipe or the timeout (*eof
/// says which).
std::string read_line(int fd, std::string* pending, int timeout_ms, bool* eof) {
  *eof = false;
  while (true) {
    if (std::size_t end = pending->find('\n'); end != std::string::npos) {
      std::string line = pending->substr(0, end);
      pending->erase(0, end + 1);
      return line;
    }
    pollfd p{fd, POLLIN, 0};
    int ready = poll(&p, 1, timeout_ms < 0 ? 0 : timeout_ms);
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) return "";
    char buffer[256];
    ssize_t got = read(fd, buffer, sizeof buffer);
    if (got < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (got <= 0) {
      *eof = true;
      return "";
    }
    pending->append(buffer, static_cast<std::size_t>(got));
  }
}

/// Whether line is the child's "readonly E S P N"; if so, it goes into child->readonly.
bool take_readonly_report(const std::string& line, ForkedChild* child) {
  int error = 0, step = 0, path = -1, network = 0;
  if (std::sscanf(line.c_str(), "readonly %d %d %d %d", &error, &step, &path, &network) != 4)
    return false;
  child->readonly_reported = true;
  child->readonly.error = error;
  child->readonly.failed = static_cast<ReadonlyReport::Step>(
      std::clamp(step, 0, static_cast<int>(ReadonlyReport::Step::kLock)));
  child->readonly.failed_path = path;
  child->readonly.network_isolated = network != 0;
  return true;
}

}  // namespace

bool fork_server_enabled() {
  const char* value = std::getenv("CUDA_AGENT_FORK_SERVER");
  return value == nullptr || std::string(value) != "0";
}

bool fork_from_server(const ProcessSpec& spec, const std::vector<std::string>& env,
                      bool isolate_network, const ReadonlyPlan* readonly, ForkedChild* child,
                      std::string* error) {
  const std::vector<std::string>& server_argv = spec.fork_server;
  // The interpreter and its flags: where the two command lines part, at the scripts.
  const std::size_t prefix =
      std::mismatch(server_argv.begin(), server_argv.end(), spec.argv.begin(), spec.argv.end())
          .first -
      server_argv.begin();
  if (prefix == 0 || prefix == server_argv.size() || prefix == spec.argv.size()) {
    *error = "the command is not the fork server's interpreter";
    return false;
  }
  // The server's environment: the child's less what the child reads only once its script runs.
  std::vector<std::string> server_env;
  for (const auto& entry : env) {
    if (!spec.env_after_imports.count(entry.substr(0, entry.find('='))))
      server_env.push_back(entry);
  }
  const auto key_of = [&](const std::vector<std::string>& argv) {
    std::string key;
    for (const auto& part : argv) key += part + '\0';
    key += '\0';
    for (const auto& entry : server_env) key += entry + '\0';
    return key;
  };
  // The trusted scripts' server and the candidates' start together, the second forked from the
  // first before that reads a request: one import of torch for both.
  std::vector<std::string> trusted_argv = server_argv;
  const bool for_candidates = trusted_argv.back() == kCandidatesFlag;
  if (for_candidates) trusted_argv.pop_back();
  std::vector<std::string> candidates_argv = trusted_argv;
  candidates_argv.push_back(kCandidatesFlag);
  int control = -1;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    std::unique_ptr<Server>& trusted = servers()[key_of(trusted_argv)];
    std::unique_ptr<Server>& candidates = servers()[key_of(candidates_argv)];
    if (!trusted) {  // the two are made together, or neither is
      trusted = std::make_unique<Server>();
      candidates = std::make_unique<Server>();
      start(trusted.get(), trusted_argv, server_env, candidates.get());
    }
    std::unique_ptr<Server>& server = for_candidates ? candidates : trusted;
    if (server->failed) {
      *error = "the fork server failed: " + server->why;
      return false;
    }
    control = server->control;
  }
  int answer[2];
  if (pipe2(answer, O_CLOEXEC) != 0) {
    *error = std::string("pipe: ") + std::strerror(errno);
    return false;
  }
  nlohmann::json request = {
      {"argv", std::vector<std::string>(spec.argv.begin() + prefix, spec.argv.end())},
      {"cwd", spec.cwd.string()},
      {"stdout", spec.stdout_path.string()},
      {"stderr", spec.stderr_path.string()},
      {"isolate_network", isolate_network},
      // The server's children end with it whatever the spec says: no orphan outlives it.
      {"parent_death_signal", spec.parent_death_signal != 0 ? spec.parent_death_signal : SIGKILL}};
  if (readonly && !readonly->paths.empty()) {
    request["readonly"] = {
        {"paths", readonly->paths},       {"mounts", readonly->mounts},
        {"writable", readonly->writable}, {"user_namespace", readonly->user_namespace},
        {"lock", readonly->lock},         {"uid_map", readonly->uid_map},
        {"gid_map", readonly->gid_map}};
    request["require_readonly"] = spec.require_readonly;
  }
  nlohmann::json& environment = request["env"] = nlohmann::json::object();
  for (const auto& entry : env) {
    std::size_t eq = entry.find('=');
    if (eq != std::string::npos) environment[entry.substr(0, eq)] = entry.substr(eq + 1);
  }
  const bool sent = send_request(control, request.dump(), answer[1]);
  close(answer[1]);  // the server holds its own copy now
  bool eof = false;
  std::string pending, line;
  do {  // the child's report on its read-only paths may come before its pid
    line = sent ? read_line(answer[0], &pending, kFirstAnswerMs, &eof) : "";
  } while (take_readonly_report(line, child));
  if (line.rfind("pid ", 0) != 0) {
    close(answer[0]);
    std::lock_guard<std::mutex> lock(g_mutex);
    Server* server = servers()[key_of(server_argv)].get();
    *error = !sent          ? "the fork server is not listening"
             : line.empty() ? (eof ? "the fork server ended" : "the fork server did not answer")
                            : "the fork server said: " + line;
    if (!server->failed) fail(server, *error);
    return false;
  }
  child->pid = static_cast<pid_t>(std::stol(line.substr(4)));
  child->status_fd = answer[0];
  child->pending = pending;
  return true;
}

bool forked_child_ended(ForkedChild* child, int* status) {
  if (child->status_fd < 0) return true;
  bool eof = false;
  std::string line;
  do {
    line = read_line(child->status_fd, &child->pending, -1, &eof);
  } while (take_readonly_report(line, child));
  if (line.empty() && !eof) return false;
  *status = line.rfind("exit ", 0) == 0 ? std::stoi(line.substr(5)) : SIGKILL;  // signalled
  close(child->status_fd);
  child->status_fd = -1;
  return true;
}

}  // namespace cuda_agent
