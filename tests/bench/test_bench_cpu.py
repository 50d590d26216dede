"""`cuda-agent bench`, `report` and `compare` on the CPU device.

Three runs share one run store (so the baselines are timed once): an uninterrupted local run of
two tasks, a local run of the same two killed with SIGKILL once its first result is stored and
then resumed, and a run of one of them on Ray actors of a local cluster. Their results must
agree task by task.
Outcomes are compared, not rewards: on a shared CPU a speedup near the reward's 5% margin can
fall either side of it from one run to the next."""
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest

TASKS = "level1/00[12]_*"  # relu and leaky relu: two episodes of a few seconds each
ARGS = ["--suite", "builtin", "--filter", TASKS, "--device", "cpu", "--shrink", "256",
        "--tune", "off"]


class Bench:
    def __init__(self, binary: str, home: Path):
        self.binary = binary
        self.home = home
        self.store = home / "store.sqlite"
        self.env = dict(os.environ, XDG_CACHE_HOME=str(home / "cache"))

    def argv(self, *args: str) -> list[str]:
        return [self.binary, "--store", str(self.store), *args]

    def run(self, *args: str, timeout: float = 900) -> subprocess.CompletedProcess:
        return subprocess.run(self.argv(*args), capture_output=True, text=True, env=self.env,
                              timeout=timeout)

    def report(self, run: str) -> dict:
        result = self.run("report", run, "--json")
        assert result.returncode == 0, result.stderr
        return json.loads(result.stdout)

    def results_stored(self, bench_id: int) -> int:
        if not self.store.exists():
            return 0
        with sqlite3.connect(self.store, timeout=30) as db:
            try:
                return db.execute("SELECT COUNT(*) FROM bench_results WHERE bench = ?",
                                  (bench_id,)).fetchone()[0]
            except sqlite3.OperationalError:  # the table is not there yet
                return 0

    def processes(self) -> list[str]:
        """Command lines of the processes still working on this store."""
        found = []
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            try:
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if str(self.home) in cmdline and "pytest" not in cmdline:
                found.append(cmdline)
        return found


def outcomes(report: dict) -> dict:
    return {r["task"]: (r["outcome"], r["correct"]) for r in report["results"]}


@pytest.fixture(scope="module")
def bench(request, tmp_path_factory) -> Bench:
    return Bench(request.config.getoption("--binary"), tmp_path_factory.mktemp("bench"))


@pytest.fixture(scope="module")
def uninterrupted(bench) -> dict:
    result = bench.run("bench", *ARGS, "--jobs", "2")
    assert result.returncode == 0, result.stderr
    assert "bench b1" in result.stdout and "pass rate" in result.stdout, result.stdout
    assert "candidates evaluated in" in result.stdout  # the throughput line
    return bench.report("b1")


@pytest.fixture(scope="module")
def resumed(bench, uninterrupted) -> tuple[dict, dict]:
    """b2: killed once its first result is stored, then resumed. Returns the result stored
    before the kill and the final report."""
    process = subprocess.Popen(bench.argv("bench", *ARGS, "--jobs", "1"), env=bench.env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 600
    while bench.results_stored(2) == 0:
        assert process.poll() is None, "the bench ended before it could be killed"
        assert time.monotonic() < deadline, "no result stored in time"
        time.sleep(0.2)
    process.send_signal(signal.SIGKILL)
    process.wait()
    partial = bench.report("b2")
    # What the killed bench had started dies with it.
    deadline = time.monotonic() + 60
    while bench.processes() and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not bench.processes(), bench.processes()
    result = bench.run("bench", "--resume", "b2", "--jobs", "1")
    assert result.returncode == 0, result.stderr
    return partial, bench.report("b2")


@pytest.fixture(scope="module")
def on_ray(bench, uninterrupted) -> dict:
    # One task: what Ray adds is the transport, the same for every task.
    args = [a if a != TASKS else "level1/001_*" for a in ARGS]
    result = bench.run("bench", *args, "--ray", "local", "--jobs", "2")
    log = bench.home / "cache" / "cuda-agent" / "bench" / "ray-workers.log"
    assert result.returncode == 0, result.stderr + (log.read_text() if log.exists() else "")
    report = bench.report("b3")
    return report


def test_every_task_gets_a_result_with_the_papers_figures(uninterrupted):
    assert sorted(outcomes(uninterrupted)) == ["level1/001_relu", "level1/002_leaky_relu"]
    for r in uninterrupted["results"]:
        assert r["correct"], r
        assert r["eager_us"] > 0 and r["candidate_us"] > 0 and r["speedup_vs_compile"] > 0
        assert r["evaluations"] == 1 and r["run"].startswith("r")
    assert uninterrupted["throughput"]["evaluations"] == 2
    assert uninterrupted["sessions"][0]["complete"] is True


def test_a_killed_bench_resumes_and_ends_with_the_same_results(resumed, uninterrupted):
    partial, final = resumed
    assert len(partial["results"]) == 1
    kept = partial["results"][0]
    assert len(final["results"]) == 2
    # The result stored before the kill is kept, not run again.
    assert next(r for r in final["results"] if r["task"] == kept["task"]) == kept
    assert [s["complete"] for s in final["sessions"]] == [False, True]
    assert final["sessions"][0]["tasks_run"] == 1  # counted for the throughput, though killed
    assert outcomes(final) == outcomes(uninterrupted)


def test_the_ray_path_gives_the_local_results(on_ray, uninterrupted):
    local = outcomes(uninterrupted)
    assert outcomes(on_ray) == {"level1/001_relu": local["level1/001_relu"]}
    assert all(r["worker"].startswith("ray actor") for r in on_ray["results"])
    assert on_ray["sessions"][0]["executor"] == "ray"


def test_compare_lists_every_task_and_the_aggregate(bench, resumed, on_ray):
    result = bench.run("compare", "b2", "b3")
    assert result.returncode == 0, result.stderr
    # Every task of either run; the one b3 did not run says so.
    assert "level1/001_relu" in result.stdout and "level1/002_leaky_relu" in result.stdout
    assert "(not run)" in result.stdout
    assert "on the 1 task(s) both timed" in result.stdout


# Measures every plot mark as laid out by the browser and writes the counts into the page.
PROBE = """<script>
const counts = {};
for (const svg of document.querySelectorAll('svg.plot')) {
  const marks = [...svg.querySelectorAll('.mark')].filter(m => {
    const b = m.getBBox(); return b.width > 0 && b.height > 0; });
  counts[svg.id] = {marks: marks.length, width: svg.getBoundingClientRect().width};
}
const out = document.createElement('pre');
out.id = 'probe';
out.textContent = JSON.stringify(counts);
document.body.appendChild(out);
</script>"""


def chromium() -> str:
    for name in ("chromium-headless-shell", "chromium", "chromium-browser"):
        if shutil.which(name):
            return shutil.which(name)
    pytest.fail("no headless Chromium (scripts/setup.sh installs chromium-headless-shell)")


def test_the_html_report_draws_its_plots_in_a_browser(bench, uninterrupted, tmp_path):
    html = tmp_path / "report.html"
    result = bench.run("report", "b1", "--html", str(html))
    assert result.returncode == 0, result.stderr
    assert "pass rate" in result.stdout
    page = html.read_text()
    probed = tmp_path / "probed.html"
    probed.write_text(page.replace("</body>", PROBE + "</body>"))
    browser = [chromium(), "--headless", "--no-sandbox", "--disable-gpu",
               "--user-data-dir=" + str(tmp_path / "profile")]
    dom = subprocess.run(browser + ["--dump-dom", probed.as_uri()], capture_output=True,
                         text=True, timeout=120)
    assert dom.returncode == 0, dom.stderr
    start = dom.stdout.index('<pre id="probe">') + len('<pre id="probe">')
    counts = json.loads(dom.stdout[start:dom.stdout.index("</pre>", start)])
    results = uninterrupted["results"]
    timed = sum(1 for r in results if r["correct"])
    # A bar per non-zero share: correct, faster than eager, faster than torch.compile.
    bars = sum(1 for n in (timed, sum(r["correct"] and r["speedup_vs_eager"] > 1 for r in results),
                           sum(r["correct"] and r["speedup_vs_compile"] > 1 for r in results))
               if n)
    assert set(counts) == {"speedup-distribution", "speedup-vs-time", "level-bars", "rewards"}
    assert all(c["width"] > 100 for c in counts.values()), counts
    assert counts["speedup-vs-time"]["marks"] == timed  # a dot per timed task
    assert counts["speedup-distribution"]["marks"] >= 2  # vs compile and vs eager
    assert counts["level-bars"]["marks"] == bars
    assert counts["rewards"]["marks"] == len({r["reward"] for r in results})
    shot = subprocess.run(browser + ["--window-size=1300,1800", "--screenshot=" +
                                     str(tmp_path / "report.png"), html.as_uri()],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert shot.returncode == 0 and (tmp_path / "report.png").stat().st_size > 10000, shot.stderr


def test_bad_requests_are_refused_with_a_reason(bench, uninterrupted):
    cases = [
        (("bench", "--suite", "no-such-suite"), "no suite no-such-suite"),
        (("bench", "--suite", "builtin", "--filter", "level9/*"), "matches --filter"),
        (("bench", "--resume", "b1", "--device", "cuda"), "leave out --device"),
        (("bench", "--resume", "b99"), "bench run b99"),
        (("report", "b99"), "no bench run b99"),
        (("report", "r1"), "not a bench run"),
        (("bench", "--suite", "builtin", "--policy", "llm"), "--endpoint"),
    ]
    for args, message in cases:
        result = bench.run(*args)
        assert result.returncode == 2, (args, result.stdout, result.stderr)
        assert message in result.stderr, (args, result.stderr)
