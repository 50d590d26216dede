"""A custom reward function for verl that scores a response with `cuda-agent serve`.

verl calls `compute_score(data_source, solution_str, ground_truth, extra_info)` for each
response when its config names this file and function:

    custom_reward_function:
      path: /path/to/cuda-agent/harness/rl_reward.py
      name: compute_score          # one response at a time (reward_manager: naive)
      # name: compute_score_batch  # a batch at once, evaluated concurrently (reward_manager: batch)

ground_truth is the task's id in the service's suite (what `cuda-agent export prompts` puts in
reward_model.ground_truth). The candidate's files are read from the response text, in order, the
last word on each path winning:
  - fenced code blocks whose info string ends with the path: ```python model_new.py ... ```,
    ```cpp kernels/scale.cpp ... ```;
  - Write tool calls as tool-calling models print them (Hermes style, as Qwen and verl's
    multi-turn rollouts decode them):
    <tool_call>{"name": "Write", "arguments": {"file_path": "model_new.py", "content": "..."}}
    </tool_call>
Only model_new.py and files beneath kernels/ are taken; the service refuses anything else.

It returns a dict, which verl's reward managers accept: "score" (the recipe's reward; -1 when no
model_new.py was found or the service reached no verdict) and the figures worth logging, the same
keys every time. The
service's address comes from extra_info["service"], else $CUDA_AGENT_SERVICE, else
http://127.0.0.1:8321; either may list several, comma-separated (a service per evaluation node),
and each response goes to one of them by a hash of its text. Only the standard library is used, so it loads in any trainer's
environment.
"""

from __future__ import annotations

import json
import os
import re
import urllib.error
import urllib.request
import zlib
from concurrent.futures import ThreadPoolExecutor

DEFAULT_SERVICE = "http://127.0.0.1:8321"
# Requests in flight from one batch; the service queues what its GPUs cannot take yet.
BATCH_CONCURRENCY = int(os.environ.get("CUDA_AGENT_REWARD_CONCURRENCY", "64"))
FENCE = re.compile(r"^```[\w+.-]*[ \t]+(?P<path>[\w./+-]+)[ \t]*\n(?P<body>.*?)^```[ \t]*$",
                   re.MULTILINE | re.DOTALL)
TOOL_CALL = re.compile(r"<tool_call>\s*(?P<call>\{.*?\})\s*</tool_call>", re.DOTALL)
WANTED = re.compile(r"^(model_new\.py|kernels/[\w.+-]+(/[\w.+-]+)*)$")


def candidate_files(text: str) -> dict[str, str]:
    """The files a response hands in, by path, in the order they appear (the last one wins)."""
    found: list[tuple[int, str, str]] = []
    for m in FENCE.finditer(text):
        found.append((m.start(), m.group("path"), m.group("body")))
    for m in TOOL_CALL.finditer(text):
        try:
            call = json.loads(m.group("call"))
        except json.JSONDecodeError:
            continue
        args = call.get("arguments", {}) if isinstance(call, dict) else {}
        if isinstance(args, str):
            try:
                args = json.loads(args)
            except json.JSONDecodeError:
                continue
        if call.get("name") == "Write" and isinstance(args, dict):
            path, content = args.get("file_path"), args.get("content")
            if isinstance(path, str) and isinstance(content, str):
                found.append((m.start(), path.removeprefix("./"), content))
    files: dict[str, str] = {}
    for _, path, body in sorted(found, key=lambda f: f[0]):
        if WANTED.match(path) and ".." not in path.split("/"):
            files[path] = body
    return files


def evaluate(service: str, task: str, files: dict[str, str], recipe: str | None = None,
             timeout: float = 7200) -> dict:
    """POSTs one candidate to the service; its answer as a dict (leading spaces are the
    service's heartbeats)."""
    request = {"task": task, "files": files}
    if recipe:
        request["recipe"] = recipe
    req = urllib.request.Request(service.rstrip("/") + "/v1/evaluate",
                                 data=json.dumps(request).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as response:
            return json.loads(response.read())
    except urllib.error.HTTPError as e:
        body = e.read().decode(errors="replace")
        try:
            return {"ok": False, "error": json.loads(body).get("error", body), "status": e.code}
        except json.JSONDecodeError:
            return {"ok": False, "error": body, "status": e.code}
    except (urllib.error.URLError, OSError) as e:
        # Loud, not -1: a training step scored by a service that is down would learn nothing true.
        raise RuntimeError(f"the cuda-agent service at {service} cannot be reached: {e}") from e


def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs):
    """verl's custom reward signature. Every answer has the same keys, as verl's reward managers
    gather each key across a batch."""
    extra_info = extra_info or {}
    services = [u.strip() for u in (extra_info.get("service")
                                    or os.environ.get("CUDA_AGENT_SERVICE", DEFAULT_SERVICE)).split(",")
                if u.strip()]
    service = services[zlib.crc32((solution_str or "").encode()) % len(services)]
    task = ground_truth or extra_info.get("task")
    scored = {"score": -1.0, "ok": False, "outcome": "no_candidate", "discrete_reward": -1,
              "speedup_vs_compile": 0.0, "error": ""}
    files = candidate_files(solution_str or "")
    if "model_new.py" not in files:
        scored["error"] = "the response hands in no model_new.py"
        return scored
    answer = evaluate(service, task, files, extra_info.get("recipe"))
    if not answer.get("ok"):
        scored.update(outcome="no_verdict", error=str(answer.get("error", "")))
        return scored
    result = answer.get("result", {})
    scored.update(score=float(answer["reward"]), ok=True, outcome=answer.get("outcome", ""),
                  discrete_reward=int(answer.get("discrete_reward", -1)),
                  speedup_vs_compile=float(result.get("speedup_vs_compile") or 0.0))
    return scored


def compute_score_batch(data_sources, solution_strs, ground_truths, extra_infos, **kwargs):
    """verl's batch reward manager's signature: the batch's responses scored concurrently (the
    service spreads them over its GPUs), the answers in the batch's order."""
    extra_infos = extra_infos or [None] * len(solution_strs)
    with ThreadPoolExecutor(max_workers=max(1, min(BATCH_CONCURRENCY, len(solution_strs)))) as pool:
        return list(pool.map(compute_score, data_sources, solution_strs, ground_truths, extra_infos))
