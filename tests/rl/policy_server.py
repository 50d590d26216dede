"""A model server on loopback for rollouts: OpenAI-compatible Chat Completions, replies shaped as
vLLM shapes them, and each conversation played by one of a few fixed behaviours, so that a group
of episodes of one task earns different rewards whatever order they run in.

A conversation is known by its first assistant reply, "episode K: ...": the K-th conversation to
start plays behaviours[K % len(behaviours)]:
  good   writes the example's kernel and model_new.py, then says it is done
  wrong  writes a kernel that forgets the bias, then says it is done
  idle   says it is done at once (the template is evaluated: no kernels/ to compile)
"""
from __future__ import annotations

import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from conftest import good_files, wrong_files
from scripted_server import vllm_completion

BEHAVIOURS = ("good", "wrong", "idle")


def write_calls(files: dict[str, str]) -> list[dict]:
    return [{"name": "Write", "arguments": {"file_path": path, "content": text}}
            for path, text in files.items()]


def step(behaviour: str, episode: int, turn: int) -> dict:
    if turn == 0 and behaviour == "good":
        return {"content": f"episode {episode}: one fused pass.", "tool_calls": write_calls(good_files())}
    if turn == 0 and behaviour == "wrong":
        return {"content": f"episode {episode}: one fused pass.", "tool_calls": write_calls(wrong_files())}
    if turn == 0:
        return {"content": f"episode {episode}: nothing to do."}
    return {"content": "model_new.py is done."}


class PolicyServer:
    def __init__(self, behaviours=BEHAVIOURS):
        self.behaviours = behaviours
        self.started = 0
        self.requests = 0
        self.lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                said = [m for m in body["messages"] if m["role"] == "assistant"]
                with server.lock:
                    server.requests += 1
                    if said:
                        episode = int(re.match(r"episode (\d+):", said[0]["content"]).group(1))
                    else:
                        episode = server.started
                        server.started += 1
                behaviour = server.behaviours[episode % len(server.behaviours)]
                reply = vllm_completion(step(behaviour, episode, len(said)), server.requests, 100)
                data = json.dumps(reply).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()
