"""A policy for the scripted model server (tests/agent/scripted_server.py) that plays each
conversation with one of a few fixed behaviours, so that a group of episodes of one task earns
different rewards whatever order they run in.

A conversation is known by its first assistant reply, "episode K: ...": the K-th conversation to
start plays behaviours[K % len(behaviours)]:
  good   writes the example's kernel and model_new.py, then says it is done
  wrong  writes a kernel that forgets the bias, then says it is done
  idle   says it is done at once (the template is evaluated: no kernels/ to compile)
"""
from __future__ import annotations

import re

from conftest import good_files, wrong_files

BEHAVIOURS = ("good", "wrong", "idle")


def write_calls(files: dict[str, str]) -> list[dict]:
    return [{"name": "Write", "arguments": {"file_path": path, "content": text}}
            for path, text in files.items()]


class Policy:
    """Called with each request's body; returns the scripted server's step for it."""

    def __init__(self, behaviours=BEHAVIOURS):
        self.behaviours = behaviours
        self.started = 0  # conversations begun

    def __call__(self, body: dict) -> dict:
        said = [m for m in body["messages"] if m["role"] == "assistant"]
        if said:
            episode = int(re.match(r"episode (\d+):", said[0]["content"]).group(1))
        else:
            episode = self.started
            self.started += 1
        behaviour = self.behaviours[episode % len(self.behaviours)]
        if said:
            return {"content": "model_new.py is done."}
        if behaviour == "idle":
            return {"content": f"episode {episode}: nothing to do."}
        files = good_files() if behaviour == "good" else wrong_files()
        return {"content": f"episode {episode}: one fused pass.", "tool_calls": write_calls(files)}
