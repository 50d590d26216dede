"""The evaluation service under concurrent clients, its refusals, its queue, clients that go
away, a rollout through it, and verl's reward adapter calling it."""
import json
import socket
import sqlite3
import subprocess
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

import rl_reward
from conftest import good_files, wrong_files
from policy import Policy
from scripted_server import ScriptedServer


class Service:
    def __init__(self, cli, suite, tmp, *options):
        self.cli = cli
        self.log = open(tmp / "serve.log", "w")
        self.process = subprocess.Popen(
            cli.argv("serve", "--suite", str(suite), "--port", "0", "--device", "cpu",
                     "--work-dir", str(tmp / "work"), *options),
            stdout=subprocess.PIPE, stderr=self.log, text=True, env=cli.env)
        self.url = f"http://127.0.0.1:{int(self.process.stdout.readline())}"

    def request(self, method, path, body=None, raw: bytes | None = None, timeout=600):
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
        req = urllib.request.Request(self.url + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                return r.status, r.read().decode(), dict(r.headers)
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode(), dict(e.headers)

    def json(self, method, path, body=None, **kw):
        status, text, _ = self.request(method, path, body, **kw)
        return status, json.loads(text)

    def metrics(self) -> dict[str, float]:
        _, text, _ = self.request("GET", "/metrics")
        return {line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1])
                for line in text.splitlines() if line and not line.startswith("#")}

    def stop(self):
        self.process.send_signal(2)
        assert self.process.wait(timeout=60) == 0
        self.log.close()


@pytest.fixture(scope="module")
def service(cli, suite, tmp_path_factory):
    s = Service(cli, suite, tmp_path_factory.mktemp("serve"), "--jobs", "2", "--queue", "16",
                "--max-body-mb", "1")
    yield s
    s.stop()


def evaluations(cli) -> int:
    with sqlite3.connect(cli.store) as db:
        return db.execute("SELECT COUNT(*) FROM evaluations").fetchone()[0]


def test_bad_requests_are_refused_with_the_reason(service):
    status, health = service.json("GET", "/v1/health")
    assert status == 200 and health["status"] == "ok" and health["slots"] == 2
    assert service.json("GET", "/v1/tasks")[1]["tasks"] == ["scale_bias_relu"]
    files = good_files()
    refusals = [
        (b"{not json", "not a JSON object"),
        (json.dumps([1, 2]).encode(), "not a JSON object"),
        (json.dumps({"task": "nope", "files": files}).encode(), "no task \"nope\""),
        (json.dumps({"task": "scale_bias_relu"}).encode(), "\"files\" must be an object"),
        (json.dumps({"task": "scale_bias_relu", "files": {"../model.py": "x", **files}}).encode(),
         "is not model_new.py or a file beneath kernels/"),
        (json.dumps({"task": "scale_bias_relu", "files": {"kernels/a.cpp": "x"}}).encode(),
         "no model_new.py"),
        (json.dumps({"task": "scale_bias_relu", "files": {"model_new.py": 3}}).encode(),
         "must be text"),
        (json.dumps({"task": "scale_bias_relu", "files": files, "recipe": "vibes"}).encode(),
         "unknown reward recipe"),
        (json.dumps({"task": "scale_bias_relu", "files": files, "shrink": 0}).encode(),
         "\"shrink\" must be"),
    ]
    for raw, why in refusals:
        status, text, _ = service.request("POST", "/v1/evaluate", raw=raw)
        assert status == 400 and why in json.loads(text)["error"], (raw[:60], text)
    status, text, _ = service.request("POST", "/v1/rollout", {"task": "scale_bias_relu"})
    assert status == 400 and "needs \"endpoint\"" in json.loads(text)["error"]
    status, text, _ = service.request("POST", "/v1/evaluate",
                                      raw=json.dumps({"task": "scale_bias_relu",
                                                      "files": {"model_new.py": "x" * (2 << 20)}}).encode())
    assert status == 413 and "over the limit" in json.loads(text)["error"]
    status, text, _ = service.request("GET", "/v1/nothing")
    assert status == 404 and "no such endpoint" in json.loads(text)["error"]
    m = service.metrics()
    assert m['cuda_agent_requests_total{endpoint="/v1/evaluate",code="400"}'] == len(refusals)
    assert m['cuda_agent_requests_total{endpoint="/v1/evaluate",code="413"}'] == 1
    assert m['cuda_agent_work_done_total{kind="evaluate"}'] == 0  # nothing refused ever ran


def test_concurrent_evaluations_each_get_their_own_result_once(service, cli):
    broken = good_files()
    broken["kernels/scale_bias_relu.cpp"] += "\nthis is not C++\n"
    requests = ([("good", {"files": good_files()})] * 2 + [("wrong", {"files": wrong_files()})]
                + [("wrong", {"files": wrong_files(), "recipe": "milestone"})]
                + [("broken", {"files": broken})])
    before = evaluations(cli)
    answers = [None] * len(requests)

    def client(i):
        answers[i] = service.json("POST", "/v1/evaluate",
                                  {"task": "scale_bias_relu", **requests[i][1]})

    threads = [threading.Thread(target=client, args=(i,)) for i in range(len(requests))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for (kind, request), (status, body) in zip(requests, answers):
        assert status == 200 and body["ok"], body
        assert body["task"] == "scale_bias_relu"
        if kind == "good":
            assert body["outcome"] == "pass" and body["reward"] >= 1 and body["result"]["correct"]
        elif kind == "wrong":
            assert body["outcome"] == "mismatch" and body["discrete_reward"] == -1
            assert body["reward"] == (-0.5 if request.get("recipe") == "milestone" else -1)
        else:
            assert body["outcome"] == "compile_error" and body["reward"] == -1
            assert "not C++" in json.dumps(body["result"])  # the compiler's complaint
    ids = [body["id"] for _, body in answers]
    assert len(set(ids)) == len(ids)
    stored = {body["result"]["id"] for _, body in answers}
    assert len(stored) == len(requests)  # each its own evaluation, none shared or repeated
    assert evaluations(cli) - before == len(requests)
    m = service.metrics()
    assert m['cuda_agent_work_done_total{kind="evaluate"}'] == len(requests)
    assert m["cuda_agent_work_running"] == 0 and m["cuda_agent_work_queued"] == 0


def raw_post(url: str, body: dict) -> socket.socket:
    """Sends a request and returns the open connection without reading the answer."""
    host, port = url.removeprefix("http://").split(":")
    data = json.dumps(body).encode()
    s = socket.create_connection((host, int(port)))
    s.sendall(b"POST /v1/evaluate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              b"Content-Length: %d\r\n\r\n" % len(data) + data)
    assert b" 200 " in s.recv(200)
    return s


def command_lines() -> list[str]:
    """Every process's command line on this machine."""
    lines = []
    for proc in Path("/proc").iterdir():
        try:
            lines.append((proc / "cmdline").read_bytes().replace(b"\0", b" ").decode())
        except (OSError, ValueError):
            continue
    return lines


def wait_for(predicate, seconds=30.0):
    end = time.time() + seconds
    while time.time() < end:
        if predicate():
            return True
        time.sleep(0.2)
    return False


def test_a_full_queue_refuses_and_work_whose_client_left_is_stopped(cli, suite, tmp_path):
    small = Service(cli, suite, tmp_path, "--jobs", "1", "--queue", "1")
    try:
        request = {"task": "scale_bias_relu", "files": good_files()}
        running = raw_post(small.url, request)
        assert wait_for(lambda: small.metrics()["cuda_agent_work_running"] == 1)
        queued = raw_post(small.url, request)
        assert wait_for(lambda: small.metrics()["cuda_agent_work_queued"] == 1)
        status, text, headers = small.request("POST", "/v1/evaluate", request)
        assert status == 503 and "queue is full" in text and headers["Retry-After"] == "5"
        queued.close()  # gone while waiting: its work never starts
        running.close()  # gone while running: its evaluation is stopped
        assert wait_for(lambda: small.metrics()['cuda_agent_work_cancelled_total{kind="evaluate"}'] == 2)
        m = small.metrics()
        assert m["cuda_agent_work_running"] == 0 and m["cuda_agent_work_queued"] == 0
        assert m['cuda_agent_work_done_total{kind="evaluate"}'] == 0
        # No evaluation process outlives its request.
        assert not [p for p in command_lines() if str(tmp_path / "work") in p and " eval " in p]
        # And the service still works (a candidate that fails to compile is the quickest answer).
        broken = {"task": "scale_bias_relu", "files": {"model_new.py": "x", "kernels/a.cpp": "?"}}
        status, body = small.json("POST", "/v1/evaluate", broken)
        assert status == 200 and body["outcome"] == "compile_error"
    finally:
        small.stop()
    assert "cancelled (the client went away)" in (tmp_path / "serve.log").read_text()


def test_a_rollout_through_the_service_returns_its_trajectory(service):
    with ScriptedServer(Policy(behaviours=("good",))) as model:
        status, body = service.json("POST", "/v1/rollout",
                                    {"task": "scale_bias_relu", "endpoint": model.url,
                                     "model": "scripted", "max_turns": 4})
    assert status == 200 and body["ok"], body
    assert body["outcome"] == "pass" and body["reward"] >= 1
    t = body["trajectory"]
    assert body["run"].startswith("r") and t["final"]["outcome"] == "pass"
    assert [m["role"] for m in t["messages"]][:3] == ["system", "user", "assistant"]
    assert service.metrics()['cuda_agent_work_done_total{kind="rollout"}'] == 1


def test_verls_reward_adapter_scores_a_response_through_the_service(service):
    files = good_files()
    fenced = "Here is my solution.\n\n" + "\n".join(
        f"```{'python' if p.endswith('.py') else 'cpp'} {p}\n{text}```\n" for p, text in files.items())
    # Write calls as a tool-calling model prints them; the later model_new.py wins.
    calls = "".join(
        "<tool_call>" + json.dumps({"name": "Write", "arguments": {"file_path": p, "content": t}})
        + "</tool_call>\n" for p, t in [("model_new.py", "broken"), *wrong_files().items()])
    here = {"service": service.url}
    # verl's batch reward manager: a batch at once, answered in its order.
    nothing, good, wrong = rl_reward.compute_score_batch(
        ["cuda-agent"] * 3, ["I could not do it.", fenced, calls], ["scale_bias_relu"] * 3,
        [here, here, {**here, "recipe": "milestone"}])
    assert good["ok"] and good["score"] >= 1 and good["outcome"] == "pass", good
    assert wrong["outcome"] == "mismatch" and wrong["score"] == -0.5, wrong
    assert nothing["score"] == -1 and nothing["outcome"] == "no_candidate"
    unknown = rl_reward.compute_score("cuda-agent", fenced, "no_such_task", here)
    assert unknown["score"] == -1 and "no task" in unknown["error"]
    assert set(good) == set(nothing) == set(unknown)  # the same keys every time, for verl
    with pytest.raises(RuntimeError, match="cannot be reached"):
        rl_reward.compute_score("cuda-agent", fenced, "scale_bias_relu",
                                {"service": "http://127.0.0.1:9"})
