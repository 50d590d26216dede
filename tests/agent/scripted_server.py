"""An OpenAI-compatible Chat Completions server on loopback that answers from a script, for
testing the agent loop without a model. Replies are shaped as vLLM shapes them (ids
"chatcmpl-...", tool call ids "chatcmpl-tool-...", "object": "chat.completion", usage counts).

A script is a list of steps, one per request:
  {"content": "...", "tool_calls": [{"name": "Read", "arguments": {...} or "raw JSON text"}]}
  {"status": 500, "body": {...}}        an error response ("headers": {...} to add some)
  {"drop": true}                         close the connection without answering
  {"context_overflow": true}             vLLM's 400 for a prompt longer than the model's context
  {"raw": {...}}                         a recorded response, sent as it is
When the script runs out, the server answers "done" with no tool calls. A script may instead be
a function of the request's body that returns the step (called one request at a time), for
replies that depend on the conversation. Every request body is kept, in order, in `requests`.
"""
from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def vllm_completion(step: dict, index: int, prompt_tokens: int) -> dict:
    calls = []
    for n, call in enumerate(step.get("tool_calls", [])):
        arguments = call["arguments"]
        calls.append({
            "id": call.get("id", f"chatcmpl-tool-{index:04d}{n:02d}"),
            "type": "function",
            "function": {"name": call["name"],
                         "arguments": arguments if isinstance(arguments, str) else json.dumps(arguments)},
        })
    message = {"role": "assistant", "reasoning_content": step.get("reasoning"),
               "content": step.get("content"), "tool_calls": calls}
    completion_tokens = 10 + len(json.dumps(message)) // 4
    return {
        "id": f"chatcmpl-{index:08x}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": "scripted",
        "choices": [{"index": 0, "message": message, "logprobs": None,
                     "finish_reason": step.get("finish_reason", "tool_calls" if calls else "stop"),
                     "stop_reason": None}],
        "usage": {"prompt_tokens": prompt_tokens, "total_tokens": prompt_tokens + completion_tokens,
                  "completion_tokens": completion_tokens, "prompt_tokens_details": None},
        "prompt_logprobs": None,
    }


class ScriptedServer:
    def __init__(self, script):
        self.script = script if callable(script) else list(script)
        self.requests: list[dict] = []
        self.lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):  # quiet
                pass

            def do_POST(self):
                length = int(self.headers.get("Content-Length", "0"))
                body = json.loads(self.rfile.read(length) or b"{}")
                with server.lock:
                    index = len(server.requests)
                    server.requests.append({"path": self.path, "body": body,
                                            "authorization": self.headers.get("Authorization")})
                    if callable(server.script):
                        step = server.script(body)
                    else:
                        step = server.script[index] if index < len(server.script) else {"content": "done"}
                if self.path != "/v1/chat/completions":
                    return self.reply(404, {"error": {"message": f"no route {self.path}"}})
                if step.get("drop"):
                    self.close_connection = True
                    self.connection.shutdown(2)
                    return
                if step.get("context_overflow"):
                    return self.reply(400, {"object": "error", "type": "BadRequestError", "code": 400,
                                            "message": "This model's maximum context length is 8192 "
                                                       "tokens. However, you requested 9000 tokens."})
                if "raw" in step:  # a response recorded from a real server, replayed verbatim
                    return self.reply(200, step["raw"])
                if "status" in step:
                    return self.reply(step["status"], step.get("body", {"error": {"message": "scripted"}}),
                                      step.get("headers", {}))
                prompt_tokens = len(json.dumps(body["messages"])) // 4
                return self.reply(200, vllm_completion(step, index, prompt_tokens))

            def reply(self, status: int, payload: dict, headers: dict | None = None):
                data = json.dumps(payload).encode()
                self.send_response(status)
                for key, value in (headers or {}).items():
                    self.send_header(key, value)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> "ScriptedServer":
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()
