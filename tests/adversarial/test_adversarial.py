"""Every attempt in the catalogue is rejected with the verdict EXPLOITS.md's defence gives it, and
every honest twin passes: the evaluator neither lets a cheat through nor refuses the legitimate
code next to it. adversarial_cases.py holds the cases; attempts/ and twins/ their candidates."""

import pytest

from adversarial_cases import ALL_ATTEMPTS, ALL_TWINS, TASKS, Attempt, Twin


def explain(code: int, record: dict) -> str:
    """The parts of a record that say why it ended as it did, for a failing assertion."""
    keys = ("outcome", "reward", "reason", "violations", "warnings")
    shown = {k: record.get(k) for k in keys if k in record}
    if "_stderr" in record:
        shown["stderr"] = record["_stderr"][-2000:]
    return f"exit {code}: {shown}"


@pytest.mark.parametrize("attempt", ALL_ATTEMPTS, ids=lambda a: a.id)
def test_attempt(attempt: Attempt, request, results):
    runner = request.getfixturevalue("isolated_agent" if attempt.isolated else "agent")
    code, record = runner.eval(TASKS / f"{attempt.task}.py", attempt.path, *attempt.args())
    matched = any(verdict.matches(code, record) for verdict in attempt.expect)
    results.add_attempt(attempt, code, record, matched)
    assert matched, f"expected {attempt.expected()}; {explain(code, record)}"


@pytest.mark.parametrize("twin", ALL_TWINS, ids=lambda t: t.id)
def test_twin(twin: Twin, agent, results):
    code, record = agent.eval(TASKS / f"{twin.task}.py", twin.path, *twin.args())
    accepted = code == 0 and record.get("outcome") == "pass"
    results.add_twin(twin, code, record, accepted)
    assert accepted, explain(code, record)
    assert record["violations"] == []
    if twin.stage == "all":
        assert record["reward"] >= 1 and record["candidate_us"] > 0
