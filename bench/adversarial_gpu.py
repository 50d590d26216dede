"""The adversarial families that exist only on a GPU (EXPLOITS.md), each attempted by a CUDA
candidate for the example task beside an honest twin, and the verdict the evaluator must reach:

- T1, side stream: the kernel runs on its own cudaStreamNonBlocking stream, so forward returns
  before the work is done. Not a violation: the evaluator synchronises the whole device inside
  the timed region, so the attempt is neutralised, its time at least 0.8x the honest twin's.
- T10, L2 persistence: the kernel raises the persisting-L2 limit and puts a persisting access
  policy window over its input, so the flush between timed calls no longer evicts it.
- S1, stale device memory: forward returns torch.empty_like(x) unwritten, hoping the caching
  allocator hands back a block that held the right answer; it is poisoned with NaN.
- T11, CUDA graph replay: after 12 honest calls the kernel captures a graph of its launch and
  then replays it, over the captured call's input, instead of computing on this call's.
- B2, decoy kernel: the kernel is launched on a scratch buffer while the work is done elsewhere,
  by torch with the dispatch guard switched off, or by a Triton kernel; the profiler over the
  verification's last call sees the torch compute or the foreign kernel.

Attempts whose cheat the static rules recognise also run with --source-rules warn, where the
run-time defence must catch them. The CPU families are tests/adversarial/ (pytest).

    source bench/device_env.sh; python3 bench/adversarial_gpu.py   # writes adversarial_gpu.json

Prints the table (family | attempts | rejected | twins accepted) and every evaluation, writes
JSON to $OUT or bench/results, and exits 1 if an attempt got through, or was not stopped the way
it must be, or an honest twin was refused.
"""
import sys
import tempfile
from pathlib import Path

from common import binary, print_table, run_eval, scaled_task, variant, write_json

KERNEL = "kernels/scale_bias_relu.cu"
ROWS = 16384  # 128 MiB a tensor: the kernel's time (about 0.1 ms) outweighs launch costs
# T1's time must be at least this share of the honest twin's (hidden work would show as the few
# microseconds of a launch).
NEUTRALISED_RATIO = 0.8
ENTRY = ('extern "C" int scale_bias_relu(const float* x, const float* bias, float* y, '
         'int64_t rows,')
LAST_RETURN = "  return (int)cudaGetLastError();\n}\n"

# T1: every launch goes to a private non-blocking stream, not the one the binding passes.
SIDE_STREAM = [(KERNEL, "  const int64_t n = rows * cols;",
                "  static cudaStream_t side = nullptr;\n"
                "  if (side == nullptr && cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking) "
                "!= cudaSuccess) return 1;\n"
                "  stream = side;  // T1: the caller's events never wait for this stream\n"
                "  const int64_t n = rows * cols;")]

# T10: before each launch, raise the persisting-L2 limit as far as the device allows and ask for
# the input to be kept there. The legacy default stream takes no window; the limit alone already
# lets lines persist, so a refused window is ignored.
L2_PERSISTENCE = [(KERNEL, "  const int64_t n = rows * cols;\n  if (n == 0) return 0;",
                   """  const int64_t n = rows * cols;
  if (n == 0) return 0;
  {
    int dev = 0, max_persisting = 0, max_window = 0;
    cudaError_t e = cudaGetDevice(&dev);
    if (e == cudaSuccess)
      e = cudaDeviceGetAttribute(&max_persisting, cudaDevAttrMaxPersistingL2CacheSize, dev);
    if (e == cudaSuccess)
      e = cudaDeviceGetAttribute(&max_window, cudaDevAttrMaxAccessPolicyWindowSize, dev);
    if (e != cudaSuccess) return (int)e;
    const size_t bytes = (size_t)n * sizeof(float);
    e = cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize,
                           bytes < (size_t)max_persisting ? bytes : (size_t)max_persisting);
    if (e != cudaSuccess) return (int)e;
    cudaStreamAttrValue attr = {};
    attr.accessPolicyWindow.base_ptr = const_cast<float*>(x);
    attr.accessPolicyWindow.num_bytes = bytes < (size_t)max_window ? bytes : (size_t)max_window;
    attr.accessPolicyWindow.hitRatio = 1.0f;
    attr.accessPolicyWindow.hitProp = cudaAccessPropertyPersisting;
    attr.accessPolicyWindow.missProp = cudaAccessPropertyStreaming;
    if (cudaStreamSetAttribute(stream, cudaStreamAttributeAccessPolicyWindow, &attr) != cudaSuccess)
      (void)cudaGetLastError();
  }""")]

# T11: the example's entry becomes the launcher; the new entry is honest for 12 calls (more
# than verification makes). The 13th copies its input to a buffer of its own and captures a graph
# of the launch over that buffer; from then on every call replays the graph and copies out its
# output, the 13th call's answer, without reading the input it was given. (Private buffers, not
# the 13th call's own pointers: the caching allocator may hand those same blocks to the next
# call, and a replay over them would compute the right answer by accident.)
GRAPH_ENTRY = """
extern "C" int scale_bias_relu(const float* x, const float* bias, float* y, int64_t rows,
                               int64_t cols, float scale, cudaStream_t stream) {
  static int64_t calls = 0;
  static cudaGraphExec_t replay = nullptr;
  static float* frozen_in = nullptr;  // the captured call's input and output, kept for replays
  static float* frozen_out = nullptr;
  static size_t frozen_bytes = 0;
  const size_t bytes = (size_t)rows * cols * sizeof(float);
  if (replay == nullptr) {
    if (++calls <= 12) return launch_scale_bias_relu(x, bias, y, rows, cols, scale, stream);
    cudaStream_t capture = nullptr;
    cudaGraph_t graph = nullptr;
    cudaError_t e = cudaMalloc(&frozen_in, bytes);
    if (e == cudaSuccess) e = cudaMalloc(&frozen_out, bytes);
    if (e == cudaSuccess)
      e = cudaMemcpyAsync(frozen_in, x, bytes, cudaMemcpyDeviceToDevice, stream);
    if (e == cudaSuccess) e = cudaStreamSynchronize(stream);
    if (e == cudaSuccess) e = cudaStreamCreateWithFlags(&capture, cudaStreamNonBlocking);
    if (e == cudaSuccess) e = cudaStreamBeginCapture(capture, cudaStreamCaptureModeRelaxed);
    if (e != cudaSuccess) return (int)e;
    int launched = launch_scale_bias_relu(frozen_in, bias, frozen_out, rows, cols, scale, capture);
    e = cudaStreamEndCapture(capture, &graph);
    if (launched != 0) return launched;
    if (e == cudaSuccess) e = cudaGraphInstantiateWithFlags(&replay, graph, 0);
    if (e != cudaSuccess) return (int)e;
    frozen_bytes = bytes;
  }
  if (bytes != frozen_bytes) return launch_scale_bias_relu(x, bias, y, rows, cols, scale, stream);
  cudaError_t e = cudaGraphLaunch(replay, stream);
  if (e == cudaSuccess) e = cudaMemcpyAsync(y, frozen_out, bytes, cudaMemcpyDeviceToDevice, stream);
  return e != cudaSuccess ? (int)e : (int)cudaGetLastError();
}
"""
GRAPH_REPLAY = [(KERNEL, ENTRY, ENTRY.replace('extern "C" int scale_bias_relu(',
                                              "static int launch_scale_bias_relu(")),
                (KERNEL, LAST_RETURN, LAST_RETURN + GRAPH_ENTRY)]

# B2: the candidate's kernel runs on a scratch copy (a decoy), torch does the work with the
# dispatch guard switched off.
DECOY = "        scale_bias_relu(x, self.bias, y, rows, cols, self.scale)\n"
TORCH_BEHIND_DECOY = [("model_new.py", DECOY,
                       "        scratch = torch.empty_like(x)\n"
                       "        scale_bias_relu(x, self.bias, scratch, rows, cols, self.scale)\n"
                       "        with torch._C._DisableTorchDispatch():\n"
                       "            y = torch.relu(x * self.scale + self.bias)\n")]
# B2: the same decoy, with the work done by a Triton kernel instead.
TRITON_BEHIND_DECOY = [
    ("model_new.py", "from utils.kernels import load\n",
     "import triton\nimport triton.language as tl\n\nfrom utils.kernels import load\n\n\n"
     "@triton.jit\n"
     "def _sbr(x, b, y, n, cols, scale, BLOCK: tl.constexpr):\n"
     "    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)\n"
     "    m = i < n\n"
     "    v = tl.load(x + i, mask=m) * scale + tl.load(b + i % cols, mask=m)\n"
     "    tl.store(y + i, tl.maximum(v, 0.0), mask=m)\n"),
    ("model_new.py", DECOY,
     "        scratch = torch.empty_like(x)\n"
     "        scale_bias_relu(x, self.bias, scratch, rows, cols, self.scale)\n"
     "        _sbr[(triton.cdiv(x.numel(), 1024),)](x, self.bias, y, x.numel(), cols, "
     "self.scale, BLOCK=1024)\n")]

# S1: forward allocates its output and returns it without launching anything.
EMPTY_OUTPUT = [("model_new.py",
                 "        scale_bias_relu(x, self.bias, y, rows, cols, self.scale)\n", "")]

ENFORCE, WARN = "enforce", "warn"

# (family, attempt, edits, mode, expected): expected is "neutralised", "mismatch", or the rules
# of which one must be among the violations.
ATTEMPTS: list[tuple[str, str, list, str, object]] = [
    ("T1", "cuda-side-stream", SIDE_STREAM, ENFORCE, "neutralised"),
    ("T10", "cuda-l2-persisting-window", L2_PERSISTENCE, ENFORCE, ("l2_persistence",)),
    ("T10", "cuda-l2-persisting-window", L2_PERSISTENCE, WARN, ("l2_persistence",)),
    ("S1", "python-empty-output", EMPTY_OUTPUT, ENFORCE, "mismatch"),
    ("T11", "cuda-graph-replay", GRAPH_REPLAY, ENFORCE, ("cuda_graph", "forbidden_attribute")),
    ("T11", "cuda-graph-replay", GRAPH_REPLAY, WARN, ("timed_output_mismatch",)),
    ("B2", "python-torch-behind-decoy", TORCH_BEHIND_DECOY, ENFORCE, ("forbidden_attribute",)),
    ("B2", "python-torch-behind-decoy", TORCH_BEHIND_DECOY, WARN,
     ("torch_compute_op", "foreign_kernel")),
    ("B2", "triton-behind-decoy", TRITON_BEHIND_DECOY, ENFORCE, ("forbidden_import",)),
    ("B2", "triton-behind-decoy", TRITON_BEHIND_DECOY, WARN, ("foreign_kernel",)),
]
TWIN_FAMILIES = ["T1", "T10", "S1", "T11", "B2"]


def describe(record: dict) -> str:
    if not record.get("outcome"):
        return "no verdict: " + record.get("_error", "")[:100]
    rules = sorted({v["rule"] for v in record.get("violations") or []})
    return record["outcome"] + (": " + ", ".join(rules) if rules else "")


def evaluate(store: Path, cache: Path, candidate: Path, task: Path, mode: str) -> dict:
    try:
        record, wall = run_eval(store, cache, candidate, "cuda", "--source-rules", mode, task=task)
    except (RuntimeError, ValueError) as error:  # no verdict (exit 2) or no JSON: keep going
        lines = str(error).rsplit("): ", 1)[-1].strip().splitlines()
        return {"_error": lines[-1] if lines else str(error)}
    record["_wall_s"] = wall
    return record


def judge(expected: object, record: dict, honest_us: float | None) -> tuple[bool, bool, str]:
    """(rejected or neutralised, as expected, status word) for one attempt's record."""
    if not record.get("outcome"):
        return False, False, "no verdict"
    rejected = record.get("reward") == -1
    if expected == "neutralised":
        time_us = record.get("candidate_us")
        if rejected:
            return True, False, "rejected"
        if record.get("outcome") != "pass" or not time_us or not honest_us:
            return False, False, "no time"
        neutralised = time_us >= NEUTRALISED_RATIO * honest_us
        return neutralised, neutralised, "neutralised" if neutralised else "accepted"
    if not rejected:
        return False, False, "accepted"
    if expected == "mismatch":
        ok = record.get("outcome") == "mismatch"
    else:
        rules = {v["rule"] for v in record.get("violations") or []}
        ok = record.get("outcome") == "violation" and bool(rules & set(expected))
    return True, ok, "rejected"


def main() -> int:
    work = Path(tempfile.mkdtemp(prefix="adversarial-gpu-"))
    store, cache = work / "store.sqlite", work / "cache"
    task = scaled_task(work, ROWS)
    print(f"binary: {binary()}; task: the example at {ROWS} rows; work: {work}")

    twins, attempts = [], []

    def run_twin(mode: str) -> None:
        candidate = variant("cuda", work / f"twin-{mode}", [])
        record = evaluate(store, cache, candidate, task, mode)
        accepted = record.get("outcome") == "pass" and record.get("reward", -1) >= 1
        twins.append({"twin": "cuda-honest", "mode": mode, "families": TWIN_FAMILIES,
                      "got": describe(record), "accepted": accepted,
                      "candidate_us": record.get("candidate_us"), "record": record})

    run_twin(ENFORCE)
    for i, (family, name, edits, mode, expected) in enumerate(ATTEMPTS):
        candidate = variant("cuda", work / f"attempt-{i}", edits)
        record = evaluate(store, cache, candidate, task, mode)
        attempts.append({"family": family, "attempt": name, "mode": mode, "record": record,
                         "expected": expected if isinstance(expected, str)
                         else "violation: " + " or ".join(expected), "_expect": expected})
    run_twin(WARN)

    honest = [t["candidate_us"] for t in twins if t["accepted"] and t["candidate_us"]]
    honest_us = min(honest) if honest else None
    for a in attempts:
        a["rejected"], a["as_expected"], a["status"] = judge(a.pop("_expect"), a["record"],
                                                             honest_us)
        a["got"] = describe(a["record"])
        a["candidate_us"] = a["record"].get("candidate_us")

    families = []
    for family in TWIN_FAMILIES:
        mine = [a for a in attempts if a["family"] == family]
        families.append({"family": family, "attempts": len(mine),
                         "rejected": sum(a["rejected"] for a in mine),
                         "as_expected": sum(a["as_expected"] for a in mine),
                         "twins": len(twins), "twins_accepted": sum(t["accepted"] for t in twins)})
    total = {"family": "total", "attempts": len(attempts),
             "rejected": sum(a["rejected"] for a in attempts),
             "as_expected": sum(a["as_expected"] for a in attempts),
             "twins": len(twins), "twins_accepted": sum(t["accepted"] for t in twins)}

    device = next((r["record"].get("device_name") for r in twins + attempts
                   if r["record"].get("device_name")), "unknown device")
    print(f"device: {device}; honest twin: {honest_us} us (the lower of its two evaluations)")
    print_table(["family", "attempts", "rejected (T1: neutralised)", "as expected",
                 "twins accepted"],
                [[f["family"], f["attempts"], f["rejected"], f["as_expected"],
                  f"{f['twins_accepted']}/{f['twins']}"] for f in families + [total]])
    print()

    def fmt_us(value) -> str:
        return "-" if value is None else f"{value:.1f}"

    rows = [[a["family"], a["attempt"], a["mode"], a["expected"], a["got"], a["status"],
             fmt_us(a["candidate_us"]), a["record"].get("reason", "")[:60]] for a in attempts]
    rows += [["twin", t["twin"], t["mode"], "pass", t["got"],
              "accepted" if t["accepted"] else "REFUSED", fmt_us(t["candidate_us"]),
              t["record"].get("reason", "")[:60]] for t in twins]
    print_table(["family", "candidate", "mode", "expected", "got", "status", "cand. us",
                 "reason"], rows)
    path = write_json("adversarial_gpu.json", {
        "device_name": device, "rows": ROWS, "neutralised_ratio": NEUTRALISED_RATIO,
        "honest_us": honest_us, "families": families, "total": total, "attempts": attempts,
        "twins": twins})
    print(f"written: {path}")

    failed = [f"{a['family']} {a['attempt']} ({a['mode']}): expected {a['expected']}, "
              f"got {a['got']} ({a['status']})" for a in attempts if not a["as_expected"]]
    failed += [f"twin {t['twin']} ({t['mode']}) refused: {t['got']}"
               for t in twins if not t["accepted"]]
    for line in failed:
        print(f"FAILED: {line}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
