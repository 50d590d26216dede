"""The agent loop against a scripted model: a working episode earns its reward from a fresh
evaluation, and each way a model or its server can go wrong is handled and recorded."""
import json
from pathlib import Path

import jsonschema
import pytest

from conftest import EXAMPLE, HERE
from scripted_server import ScriptedServer

SCHEMA = json.loads((HERE / "chat_completions_request.schema.json").read_text())


def call(name: str, **arguments) -> dict:
    return {"name": name, "arguments": arguments}


def assert_requests_are_valid(server: ScriptedServer) -> None:
    assert server.requests
    for r in server.requests:
        assert r["path"] == "/v1/chat/completions"
        jsonschema.validate(r["body"], SCHEMA)


def test_a_scripted_episode_that_writes_a_working_kernel_is_rewarded(agent, task):
    kernel = (EXAMPLE / "kernels_cpu" / "scale_bias_relu.cpp").read_text()
    model_new = (EXAMPLE / "model_new.py").read_text()
    script = [
        {"content": "Reading the task first.", "tool_calls": [call("Read", file_path="model.py"),
                                                            call("Glob", pattern="utils/*.py")]},
        {"tool_calls": [call("Write", file_path="kernels/scale_bias_relu.cpp", content=kernel),
                        call("Write", file_path="model_new.py", content=model_new)]},
        {"tool_calls": [call("Bash", command="python utils/compile.py")]},
        {"tool_calls": [call("Bash", command="python utils/verify.py", timeout=300000)]},
        {"content": "model_new.py is correct; done."},
    ]
    with ScriptedServer(script) as server:
        e = agent.episode(task, server.url)
    assert e.returncode == 0, e.stderr
    assert e.record["reward"] >= 1 and e.record["correct"]
    t = e.trajectory
    assert t["ending"]["reason"] == "finished" and len(t["turns"]) == 5
    assert t["reward"] == e.record["reward"] and t["final"]["outcome"] == "pass"
    # The model's own compile and verify went through the evaluator, into the trajectory.
    stages = [ev["stage"] for ev in t["evaluations"]]
    assert stages == ["compile", "verify"], stages
    assert all(ev["outcome"] == "pass" for ev in t["evaluations"])
    outputs = e.tool_outputs()
    assert "class Model" in outputs[0]["output"] and "     1\t" in outputs[0]["output"]
    assert not any(o["error"] for o in outputs), outputs
    # The messages: system (with the skill), user (with model.py), then the conversation.
    roles = [m["role"] for m in t["messages"]]
    assert roles[:3] == ["system", "user", "assistant"] and roles.count("tool") == 6
    assert "cuda-kernel-optimization" in t["messages"][0]["content"]
    assert "class Model" in t["messages"][1]["content"]
    assert t["tokens"]["prompt_tokens"] > 0 and t["tokens"]["completion_tokens"] > 0
    assert_requests_are_valid(server)
    # Every request carries the tools and the whole conversation so far.
    names = [tool["function"]["name"] for tool in server.requests[0]["body"]["tools"]]
    assert names == ["Bash", "BashOutput", "KillBash", "Glob", "Grep", "Read", "Write", "Edit",
                     "MultiEdit", "NotebookEdit"]
    assert len(server.requests[-1]["body"]["messages"]) == len(t["messages"]) - 1
    shown = agent.run("show", e.record["run"])
    assert shown.returncode == 0 and "[turn 3]" in shown.stdout
    assert "Bash(python utils/compile.py)" in shown.stdout and "final evaluation: pass" in shown.stdout


def test_errors_the_model_can_fix_go_back_to_it_and_into_the_trajectory(agent, task):
    script = [
        {"tool_calls": [{"name": "Read", "arguments": "{\"file_path\": \"model.py\""}]},  # cut JSON
        {"tool_calls": [call("Compile", target="all")]},  # no such tool
        {"tool_calls": [call("Read", file_path="kernels/missing.cu")]},  # the tool fails
        {"status": 500, "body": {"error": {"message": "engine overloaded"}}},
        {"drop": True},
        {"status": 429, "headers": {"Retry-After": "0"},
         "body": {"error": {"message": "rate limited"}}},
        {"tool_calls": [call("Write", file_path="model.py", content="import os\n")]},  # read-only
        {"tool_calls": [call("Bash", command="cat ../../../../etc/hostname > /dev/null; "
                                             "echo written > model.py")]},
        {"content": "<tool_call>{\"name\": \"Bash\", \"arguments\": {\"command\": \"echo from-text\"}}"
                    "</tool_call>"},
        {"content": "I give up."},
    ]
    with ScriptedServer(script) as server:
        e = agent.episode(task, server.url, "--stage", "compile")
    t = e.trajectory
    assert t is not None, e.stderr
    assert t["ending"]["reason"] == "finished"
    out = e.tool_outputs()
    assert "not valid JSON" in out[0]["output"] and out[0]["error"]
    assert "no tool named \"Compile\"" in out[1]["output"] and "Bash" in out[1]["output"]
    assert out[2]["error"] and "missing.cu" in out[2]["output"]
    assert out[3]["error"] and "read-only" in out[3]["output"]
    # The shell cannot write the infrastructure either, and the workspace still verifies.
    assert out[4]["error"]
    assert (Path(t["workspace"]) / "model.py").read_text() == task.read_text()
    assert out[5]["output"].strip() == "from-text" and not out[5]["error"]
    turn = t["turns"][3]  # the 500, the dropped connection and the 429 were retried in one turn
    assert turn["attempts"] == 4 and len(turn["retries"]) == 3
    assert "HTTP 500" in turn["retries"][0] and "engine overloaded" in turn["retries"][0]
    assert "HTTP 429" in turn["retries"][2] and "rate limited" in turn["retries"][2]
    assert t["turns"][5]["calls_from_text"] is True
    # The final evaluation ran on the untouched infrastructure.
    assert "modified" not in t["final"].get("reason", "")
    assert_requests_are_valid(server)


def test_turn_limit_ends_the_episode_and_it_is_still_evaluated(agent, task):
    script = [{"tool_calls": [call("Bash", command=f"echo {n}")]} for n in range(10)]
    with ScriptedServer(script) as server:
        e = agent.episode(task, server.url, "--max-turns", "3", "--stage", "compile")
    assert e.trajectory["ending"]["reason"] == "max_turns"
    assert len(e.trajectory["turns"]) == 3 and len(server.requests) == 3
    assert e.trajectory["final"]["stage"] == "compile"


def test_context_is_kept_in_budget_by_cutting_old_tool_output(agent, task):
    script = [{"tool_calls": [call("Bash", command=f"seq 1 2000 | sed 's/^/line {n} /'")]}
              for n in range(4)] + [{"content": "done"}]
    with ScriptedServer(script) as server:
        e = agent.episode(task, server.url, "--max-context", "8000", "--max-reply-tokens", "512",
                          "--stage", "compile")
    t = e.trajectory
    assert t["ending"]["reason"] == "finished", t["ending"]
    notes = [n for turn in t["turns"] for n in turn["notes"]]
    assert any("cut" in n and "older tool outputs" in n for n in notes), notes
    last = server.requests[-1]["body"]["messages"]
    # The system prompt and the task were sent whole; an older output was cut, the newest not.
    assert last[0]["content"] == t["messages"][0]["content"]
    assert last[1]["content"] == t["messages"][1]["content"]
    tool_messages = [m["content"] for m in last if m["role"] == "tool"]
    assert "older tool output cut" in tool_messages[0]
    assert "line 3 2000" in tool_messages[-1]
    # The trajectory keeps every output whole.
    assert all("older tool output cut" not in m["content"] for m in t["messages"] if m["role"] == "tool")


def test_a_server_that_keeps_overflowing_the_context_ends_the_episode(agent, task):
    with ScriptedServer([{"context_overflow": True}] * 10) as server:
        e = agent.episode(task, server.url, "--stage", "compile")
    t = e.trajectory
    assert t["ending"]["reason"] == "context_budget"
    assert "maximum context length" in t["ending"]["detail"]
    assert any("exceeds the context" in n for n in t["turns"][0]["notes"])


def test_a_refused_request_is_a_clear_error(agent, task):
    body = {"error": {"message": "The model `scripted` does not exist.", "type": "NotFoundError"}}
    with ScriptedServer([{"status": 404, "body": body}]) as server:
        e = agent.episode(task, server.url, "--stage", "compile")
    t = e.trajectory
    assert t["ending"]["reason"] == "model_refused"
    assert "HTTP 404" in t["ending"]["detail"] and "does not exist" in t["ending"]["detail"]
    assert len(server.requests) == 1  # a 4xx is not retried


def test_recorded_vllm_responses_are_read(agent, task):
    recorded = [json.loads((HERE / "recorded" / name).read_text())
                for name in ("vllm_tool_calls.json", "vllm_reasoning_then_text.json")]
    with ScriptedServer([{"raw": r} for r in recorded]) as server:
        e = agent.episode(task, server.url, "--stage", "compile")
    t = e.trajectory
    calls = e.tool_outputs()
    assert [c["name"] for c in calls] == ["Read", "Glob"]
    assert calls[0]["id"] == "chatcmpl-tool-8b1e0c2d4f6a4c1e9d3b5a7c9e1f3a5b"
    assert t["tokens"]["prompt_tokens"] == 3012 + 3520
    assert t["messages"][-1]["reasoning_content"].startswith("model.py holds")
    # The tool messages answer the recorded ids, in the next request.
    second = server.requests[1]["body"]["messages"]
    assert [m["tool_call_id"] for m in second if m["role"] == "tool"] == [
        "chatcmpl-tool-8b1e0c2d4f6a4c1e9d3b5a7c9e1f3a5b", "chatcmpl-tool-2c4e6a8b0d1f4e3a9c5b7d9f1a3c5e7b"]
    assert_requests_are_valid(server)


def test_bad_options_are_refused_before_anything_runs(agent, task):
    r = agent.run("optimize", str(task), "--device", "cpu", "--policy", "llm", "--model", "m")
    assert r.returncode != 0 and "--endpoint" in r.stderr
    r = agent.run("optimize", str(task), "--device", "cpu", "--policy", "llm", "--model", "m",
                  "--endpoint", "http://127.0.0.1:9/v1", "--api-key-env", "CUDA_AGENT_NO_SUCH_KEY")
    assert r.returncode != 0 and "CUDA_AGENT_NO_SUCH_KEY" in r.stderr


def test_an_interrupted_episode_keeps_its_trajectory(agent, task):
    import signal
    import subprocess
    import time
    script = [{"tool_calls": [call("Bash", command="echo started; sleep 60")]}]
    with ScriptedServer(script) as server:
        workspace = agent.home / "interrupted"
        process = subprocess.Popen(
            [agent.binary, "--store", str(agent.store), "optimize", str(task), "--device", "cpu",
             "--policy", "llm", "--endpoint", server.url, "--model", "scripted",
             "--workspace", str(workspace)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.time() + 60
        while not server.requests and time.time() < deadline:
            time.sleep(0.1)
        time.sleep(1.0)  # the command is running
        began = time.time()
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=60)
    assert time.time() - began < 20  # the sleeping command was killed, not waited for
    assert process.returncode == 2, err
    run = err.split("trajectory ")[1].split()[0]
    shown = agent.run("show", run, "--json")
    t = json.loads(shown.stdout)
    assert t["ending"]["reason"] == "interrupted" and t["final"] is None
    assert "started" in t["turns"][0]["tool_calls"][0]["output"]
    assert "final evaluation: none" in agent.run("show", run).stdout


def test_a_filed_episode_replays_through_the_same_tools(agent, task, tmp_path):
    script = [{"tool_calls": [call("Write", file_path="notes.txt", content="first\n")]},
              {"tool_calls": [call("Bash", command="cat notes.txt; echo second >> notes.txt")]},
              {"tool_calls": [call("Read", file_path="notes.txt")]},
              {"content": "done"}]
    jsonl = tmp_path / "episodes.jsonl"
    with ScriptedServer(script) as server:
        first = agent.episode(task, server.url, "--stage", "compile", "--trajectory", str(jsonl))
    for source in (first.record["run"], str(jsonl)):
        agent.count += 1
        r = agent.run("optimize", str(task), "--device", "cpu", "--policy", "replay", "--replay",
                      source, "--json", "--stage", "compile",
                      "--workspace", str(agent.home / f"replay-{agent.count}"))
        replayed = json.loads(agent.run("show", json.loads(r.stdout)["run"], "--json").stdout)
        assert replayed["policy"] == "replay" and replayed["model"] == f"replay of {source}"
        outputs = [c["output"] for turn in replayed["turns"] for c in turn["tool_calls"]]
        assert outputs == [c["output"] for c in first.tool_outputs()]
        assert "1\tfirst\n     2\tsecond" in outputs[2]
        assert replayed["ending"]["reason"] == "finished"
    r = agent.run("optimize", str(task), "--device", "cpu", "--policy", "replay", "--replay", "r999")
    assert r.returncode == 2 and "run r999" in r.stderr


def test_the_api_key_is_sent_to_the_server_and_hidden_from_the_models_commands(
        agent, task, monkeypatch):
    monkeypatch.setenv("CUDA_AGENT_TEST_KEY", "sk-test-456")
    script = [{"tool_calls": [call("Bash", command="echo \"key=[$CUDA_AGENT_TEST_KEY]\"")]}]
    with ScriptedServer(script) as server:
        e = agent.episode(task, server.url, "--stage", "compile",
                          "--api-key-env", "CUDA_AGENT_TEST_KEY")
    assert all(r["authorization"] == "Bearer sk-test-456" for r in server.requests)
    assert e.tool_outputs()[0]["output"].strip() == "key=[]"
    assert "sk-test-456" not in json.dumps(e.trajectory)


def test_the_model_profiles_the_reference_at_the_evaluations_sizes(agent, task):
    script = [{"tool_calls": [call("Bash", command="python utils/profile_model.py")]},
              {"tool_calls": [call("Bash", command="python utils/profile_model.py --shrink 1 "
                                                   "--rows 3")]}]
    with ScriptedServer(script) as server:
        e = agent.episode(task, server.url, "--stage", "compile", "--shrink", "4")
    shrunk, full = (c["output"] for c in e.tool_outputs())
    assert "model.py on cpu: rows 64 (of 256)" in shrunk and "eager: " in shrunk
    # The task's three ops, by self time.
    assert all(op in shrunk for op in ("aten::mul", "aten::add", "aten::relu"))
    assert "model.py on cpu: rows 256\n" in full and "gpuGetDeviceCount" not in full


def test_the_models_evaluations_run_at_the_episodes_sizes(agent, task):
    script = [{"tool_calls": [call("Bash", command="python utils/verify.py --json")]},
              {"tool_calls": [call("Bash", command="python utils/verify.py --json --shrink 2")]}]
    with ScriptedServer(script) as server:
        e = agent.episode(task, server.url, "--stage", "compile", "--shrink", "4")
    # Each output: the evaluation's JSON record, then what the command tool adds after it.
    shrunk, chosen = (json.JSONDecoder().raw_decode(c["output"], c["output"].index("{"))[0]
                      for c in e.tool_outputs())
    assert shrunk["settings"]["shrink"] == 4
    assert chosen["settings"]["shrink"] == 2

