#include <curl/curl.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <mutex>
#include <thread>

#include "llm/client.h"
#include "sandbox/process_runner.h"

namespace cuda_agent::llm {

namespace {

void init_curl_once() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

size_t append_body(char* data, size_t size, size_t count, void* out) {
  static_cast<std::string*>(out)->append(data, size * count);
  return size * count;
}

/// Collects the Retry-After header, in seconds.
size_t read_header(char* data, size_t size, size_t count, void* out) {
  std::string line(data, size * count);
  std::string lower = line;
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  if (lower.rfind("retry-after:", 0) == 0) {
    try {
      *static_cast<double*>(out) = std::stod(line.substr(12));
    } catch (...) {  // an HTTP date: fall back to the backoff
    }
  }
  return size * count;
}

/// The server's own words from an error body: {"error": {"message"}}, {"error": "..."},
/// {"message"} or {"detail"}; else the body's start.
std::string error_message(const std::string& body) {
  nlohmann::json j = nlohmann::json::parse(body, nullptr, false);
  if (j.is_object()) {
    if (j.contains("error")) {
      const auto& e = j["error"];
      if (e.is_object() && e.contains("message") && e["message"].is_string()) {
        return e["message"].get<std::string>();
      }
      if (e.is_string()) return e.get<std::string>();
    }
    for (const char* key : {"message", "detail"}) {
      if (j.contains(key) && j[key].is_string()) return j[key].get<std::string>();
    }
  }
  return body.substr(0, 500);
}

void sleep_interruptibly(double seconds) {
  auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < until && !interrupt_requested()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

}  // namespace

bool says_context_overflow(const std::string& text) {
  std::string lower = text;
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  for (const char* phrase :
       {"context length", "context_length", "maximum context", "context window",
        "exceeds the context", "exceed_context", "too many tokens", "prompt is too long",
        "input is too long", "context size"}) {
    if (lower.find(phrase) != std::string::npos) return true;
  }
  return false;
}

HttpLlmClient::HttpLlmClient(HttpClientOptions options) : options_(std::move(options)) {
  init_curl_once();
  url_ = options_.endpoint;
  while (!url_.empty() && url_.back() == '/') url_.pop_back();
  const std::string suffix = "/chat/completions";
  if (url_.size() < suffix.size() ||
      url_.compare(url_.size() - suffix.size(), suffix.size(), suffix) != 0) {
    url_ += suffix;
  }
}

Status HttpLlmClient::complete(const ChatRequest& request, ChatResponse* response, CallInfo* info) {
  *info = CallInfo{};
  const std::string body = request.to_json().dump();
  const auto started = std::chrono::steady_clock::now();
  auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  };
  double backoff = options_.backoff_s;
  std::string last_problem;
  for (int attempt = 1; attempt <= options_.max_attempts; ++attempt) {
    if (interrupt_requested()) {
      info->seconds = elapsed();
      return Status::Internal("interrupted while waiting for the model");
    }
    info->attempts = attempt;
    CURL* curl = curl_easy_init();
    if (!curl) return Status::Internal("libcurl could not start a request");
    std::string reply;
    double retry_after = -1;
    curl_slist* headers = curl_slist_append(nullptr, "Content-Type: application/json");
    headers = curl_slist_append(headers, "Accept: application/json");
    if (!options_.api_key.empty()) {
      headers = curl_slist_append(headers, ("Authorization: Bearer " + options_.api_key).c_str());
    }
    char curl_error[CURL_ERROR_SIZE] = {0};
    curl_easy_setopt(curl, CURLOPT_URL, url_.c_str());
    curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body.c_str());
    curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body.size()));
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, append_body);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, &reply);
    curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, read_header);
    curl_easy_setopt(curl, CURLOPT_HEADERDATA, &retry_after);
    curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, curl_error);
    curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, static_cast<long>(options_.timeout_s * 1000));
    curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS,
                     static_cast<long>(options_.connect_timeout_s * 1000));
    const CURLcode code = curl_easy_perform(curl);
    long status = 0;
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
    curl_slist_free_all(headers);
    curl_easy_cleanup(curl);
    info->http_status = static_cast<int>(status);

    if (code != CURLE_OK) {
      last_problem = std::string("no response from ") + url_ + ": " +
                     (curl_error[0] ? curl_error : curl_easy_strerror(code));
    } else if (status == 200) {
      Status s = ChatResponse::parse(reply, response);
      info->seconds = elapsed();
      if (s.ok()) return s;
      // A garbled body from a server under load is worth another try.
      last_problem = "an unreadable response: " + s.message();
    } else if (status == 429 || status >= 500) {
      last_problem = "HTTP " + std::to_string(status) + ": " + error_message(reply);
    } else {
      info->seconds = elapsed();
      const std::string message = error_message(reply);
      info->context_overflow = says_context_overflow(message);
      return Status::InvalidArgument("the model server refused the request (HTTP " +
                                     std::to_string(status) + "): " + message);
    }
    if (attempt == options_.max_attempts) break;
    info->retries.push_back(last_problem);
    double wait = retry_after >= 0 ? std::min(retry_after, options_.max_backoff_s) : backoff;
    sleep_interruptibly(wait);
    backoff = std::min(backoff * 2, options_.max_backoff_s);
  }
  info->seconds = elapsed();
  return Status::IoError("the model server did not answer after " + std::to_string(info->attempts) +
                         " attempts; the last: " + last_problem);
}

}  // namespace cuda_agent::llm
