"""Rollouts in groups against a model server, and what trainers read from them."""
import json
import statistics

import datasets
import pyarrow.parquet as pq

from policy import Policy
from scripted_server import ScriptedServer


def test_a_rollout_scores_each_group_and_its_exports_load_in_the_trainers_readers(cli, suite,
                                                                                   tmp_path):
    out = tmp_path / "rollouts.jsonl"
    policy = Policy()
    with ScriptedServer(policy) as server:
        r = cli.run("rollout", "--suite", str(suite), "--group-size", "3", "--endpoint",
                    server.url, "--model", "scripted", "--device", "cpu", "--jobs", "2",
                    "--gamma", "0.5", "--out", str(out), "--work-dir", str(tmp_path / "work"),
                    "--quiet")
    assert r.returncode == 0, r.stderr + r.stdout
    assert policy.started == 3  # one conversation per episode, none run twice
    assert "rollouts: 3 episodes in 1 groups" in r.stdout, r.stdout
    name = r.stdout.split(":")[0].split()[-1]  # "rollout b1: ..."
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert [x["sample"] for x in records] == [0, 1, 2]
    assert {x["task"] for x in records} == {"scale_bias_relu"}
    by_behaviour = {x["messages"][2]["content"].split(": ")[1]: x for x in records}
    # Which sample played which behaviour depends on the order they started; their rewards do not.
    first = [x for x in records if x["messages"][2]["content"].startswith("episode ")]
    assert len(first) == 3
    good = [x for x in records if x["outcome"] == "pass"]
    assert len(good) == 1 and good[0]["reward"] >= 1, [(x["outcome"], x["reward"]) for x in records]
    # The idle episode left the template (no kernels/: nothing to compile); the wrong one, a bias.
    assert sorted(x["outcome"] for x in records if x is not good[0]) == ["compile_error", "mismatch"]
    assert all(x["reward"] == -1 for x in records if x is not good[0])
    # GRPO by hand: (r - mean) / (sample std + 1e-6).
    rewards = [x["reward"] for x in records]
    mean, std = statistics.mean(rewards), statistics.stdev(rewards)
    for x in records:
        assert abs(x["advantage"] - (x["reward"] - mean) / (std + 1e-6)) < 1e-9
        assert x["group_size"] == 3 and x["recipe"] == "discrete" and x["estimator"] == "grpo"
        turns = sum(1 for m in x["messages"] if m["role"] == "assistant")
        assert x["returns"] == [x["reward"] * 0.5 ** (turns - 1 - t) for t in range(turns)]
    assert len(by_behaviour) == 2  # "one fused pass." twice, "nothing to do." once
    tools = [t["function"]["name"] for t in records[0]["tools"]]
    assert "Write" in tools and "Bash" in tools

    # The same run exported again as Parquet with another recipe: verl reads it with pyarrow,
    # OpenRLHF and verl's SFT loaders with datasets.
    parquet = tmp_path / "rollouts.parquet"
    e = cli.run("export", "rollouts", name, "--recipe", "milestone", "--advantage", "grpo_mean",
                "--out", str(parquet))
    assert e.returncode == 0, e.stderr
    table = pq.read_table(parquet)
    assert table.num_rows == 3
    rows = table.to_pylist()
    milestone = {x["run"]: x["reward"] for x in rows}
    for x in records:
        if x["outcome"] != "pass":  # compiled but wrong: -0.5; nothing compiled: -1
            assert milestone[x["run"]] == (-0.5 if x["outcome"] == "mismatch" else -1.0)
    m = statistics.mean(milestone.values())
    assert all(abs(x["advantage"] - (x["reward"] - m)) < 1e-12 for x in rows)
    loaded = datasets.load_dataset("parquet", data_files=str(parquet), split="train")
    assert loaded.num_rows == 3
    chat = loaded[0]["messages"]
    assert chat[0]["role"] == "system" and chat[1]["role"] == "user"
    calls = [m for m in chat if m["role"] == "assistant" and m["tool_calls"]]
    for m in calls:
        for c in m["tool_calls"]:
            json.loads(c["function"]["arguments"])  # arguments stay JSON text, as sent
    assert [t["function"]["name"] for t in json.loads(loaded[0]["tools"])] == tools

    # Warm-up data: only the passing episode clears reward 1, read back through datasets' JSON.
    warm = tmp_path / "warmup.jsonl"
    w = cli.run("export", "warmup", name, "--min-reward", "1", "--out", str(warm))
    assert w.returncode == 0, w.stderr
    assert "warmup: 1 of 3 episodes kept" in w.stdout, w.stdout
    sft = datasets.load_dataset("json", data_files=str(warm), split="train")
    assert sft.num_rows == 1 and sft[0]["run"] == good[0]["run"]
    assert sft[0]["messages"][-1]["content"] == "model_new.py is done."

    # The report reads the run like any bench run, episode by episode.
    shown = cli.run("report", name)
    assert shown.returncode == 0 and "3 of 3 episodes done" in shown.stdout, shown.stdout
    assert "scale_bias_relu#2" in shown.stdout


def test_prompts_export_gives_verl_rows_for_a_suites_tasks(cli, tmp_path):
    out = tmp_path / "prompts.parquet"
    r = cli.run("export", "prompts", "--suite", "builtin", "--filter", "level1/00[12]_*",
                "--device", "cuda", "--out", str(out))
    assert r.returncode == 0, r.stderr
    rows = datasets.load_dataset("parquet", data_files=str(out), split="train")
    assert rows.num_rows == 2
    assert [x["reward_model"]["ground_truth"] for x in rows] == ["level1/001_relu",
                                                                "level1/002_leaky_relu"]
    first = rows[0]
    assert first["data_source"] == "cuda-agent" and first["reward_model"]["style"] == "rule"
    assert [m["role"] for m in first["prompt"]] == ["system", "user"]
    assert "cuda" in first["prompt"][0]["content"] and "class Model" in first["prompt"][1]["content"]
    assert first["extra_info"]["index"] == 0 and rows[1]["extra_info"]["index"] == 1
    none = cli.run("export", "prompts", "--filter", "nothing*", "--out", str(tmp_path / "x.jsonl"))
    assert none.returncode != 0 and "matches --filter" in none.stderr
