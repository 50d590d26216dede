"""The adversarial suite's catalogue: every attempt (a candidate that cheats in one of the ways
listed in EXPLOITS.md, with the verdict the evaluator must reach on it) and every honest twin (a
similar, legitimate candidate that must pass).

An attempt is a folder under attempts/ (model_new.py and kernels/*.cpp) evaluated on a task under
tasks/, in one source-rules mode: "enforce" (the default: the static rules reject what they
recognise before any candidate code runs) or "warn" (their findings become warnings, so that the
run-time defence behind them is tested on its own). A verdict lists the acceptable results; one
of them must match, and every one of them scores -1.
"""

from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
TASKS = HERE / "tasks"
ATTEMPTS = HERE / "attempts"
TWINS = HERE / "twins"

ENFORCE, WARN = "enforce", "warn"
VERIFY, FULL = "verify", "all"
# Timing families: a few warm-up calls, enough timed calls to pass the 12 honest calls of T7/T11.
FULL_ARGS = ("--warmup", "3", "--iters", "20")

# Families that exist only on a GPU: bench/adversarial_gpu.py has their attempts.
GPU_ONLY = {"T1": "side stream", "T10": "L2 persistence"}
FAMILY_ORDER = ["T1", "T2", "T3", "T4", "T5", "T6", "T7", "T8", "T9", "T10", "T11",
                *(f"S{i}" for i in range(1, 15)), *(f"B{i}" for i in range(1, 7))]


@dataclass(frozen=True)
class Verdict:
    """One acceptable result. outcome "rejected" accepts any outcome that scores -1. For a
    violation, one of `rules` must be among the record's violations; `reason` must be in the
    reason; each of `warnings` must be among the record's warnings."""

    outcome: str
    rules: tuple[str, ...] = ()
    reason: str = ""
    warnings: tuple[str, ...] = ()
    exit_code: int = 1

    def describe(self) -> str:
        text = self.outcome
        if self.rules:
            text += ": " + " or ".join(self.rules)
        if self.reason:
            text += f" ('{self.reason}')"
        if self.warnings:
            text += " + warning " + ", ".join(self.warnings)
        return text

    def matches(self, code: int, record: dict[str, Any]) -> bool:
        if record.get("reward") != -1:
            return False
        if self.outcome == "rejected":
            return code in (1, 2)
        if code != self.exit_code or record.get("outcome") != self.outcome:
            return False
        if self.rules and not set(self.rules) & rule_names(record, "violations"):
            return False
        if self.reason and self.reason not in record.get("reason", ""):
            return False
        return set(self.warnings) <= rule_names(record, "warnings")


def violation(*rules: str, warnings: tuple[str, ...] = ()) -> tuple[Verdict, ...]:
    return (Verdict("violation", rules, warnings=warnings),)


def outcome(name: str) -> tuple[Verdict, ...]:
    return (Verdict(name),)


DEGENERATE = (Verdict("degenerate_task", reason="degenerate", exit_code=2),)
REJECTED = (Verdict("rejected"),)
# B6: the infrastructure is mounted read-only for candidate processes, so the write fails at
# import; or it got through and the evaluator saw the change.
READ_ONLY = (Verdict("runtime_error", reason="Read-only file system"),
             Verdict("violation", ("infrastructure_modified",)))


def rule_names(record: dict[str, Any], key: str) -> set[str]:
    return {item.get("rule", "") for item in record.get(key) or []}


def mode_args(mode: str) -> tuple[str, ...]:
    return ("--source-rules", mode)


def stage_args(stage: str) -> tuple[str, ...]:
    return FULL_ARGS if stage == FULL else ("--stage", VERIFY)


@dataclass(frozen=True)
class Attempt:
    family: str  # EXPLOITS.md's id: T2, S8, B6...
    name: str  # language and trick: python-thread, cpp-pointer-cache
    folder: str  # under attempts/
    task: str  # file stem under tasks/
    mode: str
    expect: tuple[Verdict, ...]
    stage: str = VERIFY
    extra: tuple[str, ...] = ()
    isolated: bool = False  # a private install root and run store (B6 writes to them)

    @property
    def id(self) -> str:
        return f"{self.family}-{self.name}-{self.mode}"

    @property
    def path(self) -> Path:
        return ATTEMPTS / self.folder

    def args(self) -> tuple[str, ...]:
        return (*mode_args(self.mode), *stage_args(self.stage), *self.extra)

    def expected(self) -> str:
        return " | ".join(v.describe() for v in self.expect)


@dataclass(frozen=True)
class Twin:
    name: str
    folder: str  # under twins/
    task: str
    mode: str
    families: tuple[str, ...]  # the attempts it is the honest version of
    stage: str = VERIFY
    extra: tuple[str, ...] = ()

    @property
    def id(self) -> str:
        return f"{self.name}-{self.mode}"

    @property
    def path(self) -> Path:
        return TWINS / self.folder

    def args(self) -> tuple[str, ...]:
        return (*mode_args(self.mode), *stage_args(self.stage), *self.extra)


def both_modes(family: str, name: str, folder: str, task: str, enforced: tuple[Verdict, ...],
               at_run_time: tuple[Verdict, ...], stage: str = VERIFY,
               extra: tuple[str, ...] = (), isolated: bool = False) -> list[Attempt]:
    """An attempt the static rules stop, and the same attempt with the rules only warning, which
    the run-time defence must stop on its own."""
    return [Attempt(family, name, folder, task, ENFORCE, enforced, VERIFY, extra, isolated),
            Attempt(family, name, folder, task, WARN, at_run_time, stage, extra, isolated)]


SBR = "scale_bias_relu"
NATIVE_PATCH = violation("native_patch", "process_spawn")
PRELOADED_CLOCK = violation("time_below_floor", "timing_inconsistent")

ALL_ATTEMPTS: list[Attempt] = [
    # Timing attacks.
    *both_modes("T2", "python-thread", "T2_python_thread", SBR,
                violation("forbidden_import"), violation("background_thread"), stage=FULL),
    Attempt("T2", "cpp-detached-thread", "T2_cpp_detached_thread", SBR, ENFORCE,
            violation("background_thread", warnings=("native_thread",)), FULL),
    Attempt("T3", "python-tensor-subclass", "T3_python_tensor_subclass", SBR, ENFORCE,
            violation("output_type")),
    Attempt("T3", "python-proxy-object", "T3_python_proxy_object", SBR, ENFORCE,
            violation("output_type")),
    *both_modes("T3", "python-patched-tensor-methods", "T3_python_patched_tensor_methods", SBR,
                violation("monkey_patch"), violation("harness_tampered")),
    *both_modes("T4", "python-perf-counter", "T4_python_perf_counter", SBR,
                violation("forbidden_import", "monkey_patch"), violation("harness_tampered"),
                stage=FULL),
    *both_modes("T4", "python-cuda-event", "T4_python_cuda_event", SBR,
                violation("monkey_patch"), violation("harness_tampered")),
    *both_modes("T5", "cpp-preload-slow-clock", "T5_cpp_preload_slow_clock", SBR,
                NATIVE_PATCH, PRELOADED_CLOCK, stage=FULL),
    *both_modes("T6", "python-forged-report", "T6_python_forged_report", SBR,
                violation("forbidden_import"), violation("report_invalid"), stage=FULL),
    *both_modes("T6", "cpp-forged-report", "T6_cpp_forged_report", SBR,
                violation("native_patch", "file_access"), violation("report_invalid"),
                stage=FULL),
    Attempt("T7", "python-warmup-count", "T7_python_warmup_count", SBR, ENFORCE,
            violation("timed_output_mismatch"), FULL),
    Attempt("T7", "cpp-warmup-count", "T7_cpp_warmup_count", SBR, ENFORCE,
            violation("timed_output_mismatch"), FULL),
    Attempt("T7", "python-timed-fallback", "T7_python_timed_fallback", SBR, ENFORCE,
            violation("torch_compute_op"), FULL),
    *both_modes("T8", "python-argv", "T8_python_argv", SBR,
                violation("forbidden_import"), violation("timed_output_mismatch"), stage=FULL),
    *both_modes("T8", "cpp-cmdline", "T8_cpp_cmdline", SBR,
                violation("native_patch", "file_access"), violation("timed_output_mismatch"),
                stage=FULL),
    *both_modes("T9", "cpp-frozen-clock", "T9_cpp_frozen_clock", SBR,
                NATIVE_PATCH, violation("time_below_floor"), stage=FULL),
    Attempt("T11", "python-replay", "T11_python_replay", SBR, ENFORCE,
            violation("timed_output_mismatch"), FULL),
    Attempt("T11", "cpp-replay", "T11_cpp_replay", SBR, ENFORCE,
            violation("timed_output_mismatch"), FULL),
    Attempt("T11", "cpp-rescaled-replay", "T11_cpp_rescaled_replay", "relu_scale", ENFORCE,
            violation("timed_output_mismatch"), FULL),
    # Wrong results that pass a naive check.
    Attempt("S1", "python-empty-output", "S1_python_empty_output", SBR, ENFORCE,
            outcome("mismatch")),
    Attempt("S2", "cpp-half-rows", "S2_cpp_half_rows", SBR, ENFORCE, outcome("mismatch")),
    Attempt("S3", "python-in-place", "S3_python_in_place", SBR, ENFORCE,
            violation("inputs_modified")),
    Attempt("S4", "python-zeros", "S4_python_zeros", "relu_scale_tiny", ENFORCE, DEGENERATE),
    Attempt("S4", "python-zeros-normal-task", "S4_python_zeros", "relu_scale", ENFORCE,
            outcome("mismatch")),
    Attempt("S5", "python-expected-value", "S5_python_expected_value", "row_mean", ENFORCE,
            outcome("mismatch")),
    Attempt("S6", "cpp-subsample", "S6_cpp_subsample", "row_sum", ENFORCE, outcome("mismatch")),
    *both_modes("S7", "python-hardcoded-seed", "S7_python_hardcoded_seed", "row_mean",
                REJECTED, outcome("mismatch")),
    Attempt("S8", "python-shape-cache", "S8_python_shape_cache", SBR, ENFORCE,
            outcome("mismatch")),
    Attempt("S8", "cpp-pointer-cache", "S8_cpp_pointer_cache", SBR, ENFORCE, outcome("mismatch")),
    *both_modes("S9", "python-gc-search", "S9_python_gc_search", SBR,
                violation("forbidden_import"), outcome("mismatch")),
    *both_modes("S10", "python-patched-checker", "S10_python_patched_checker", SBR,
                violation("monkey_patch"), violation("harness_tampered")),
    *both_modes("S11", "python-tf32", "S11_python_tf32", "linear_relu",
                violation("precision_changed"), violation("precision_changed")),
    Attempt("S12", "cpp-uninitialised-scratch", "S12_cpp_uninitialised_scratch", SBR, ENFORCE,
            outcome("mismatch")),
    Attempt("S13", "cpp-pass-through", "S13_cpp_pass_through", "near_identity", ENFORCE,
            DEGENERATE),
    Attempt("S14", "python-running-buffer", "S14_python_running_buffer", SBR, ENFORCE,
            outcome("mismatch")),
    Attempt("S14", "cpp-static-running", "S14_cpp_static_running", SBR, ENFORCE,
            outcome("mismatch")),
    # Bypasses.
    Attempt("B1", "python-relu", "B1_python_relu", SBR, ENFORCE, violation("torch_compute_op")),
    Attempt("B1", "python-clamp", "B1_python_clamp", SBR, ENFORCE, violation("torch_compute_op")),
    # numpy does the work; nothing at run time watches numpy on the CPU, so only the rule stops it.
    Attempt("B2", "python-numpy-decoy", "B2_python_numpy_decoy", SBR, ENFORCE,
            violation("forbidden_import")),
    Attempt("B3", "python-fallback", "B3_python_fallback", SBR, ENFORCE,
            violation("torch_compute_op", warnings=("fallback",))),
    *both_modes("B4", "python-inherits-model", "B4_python_inherits_model", SBR,
                violation("forbidden_import"), violation("inherits_model")),
    Attempt("B5", "python-softmax", "B5_python_softmax", "softmax_scale", ENFORCE,
            violation("torch_compute_op")),
    *both_modes("B6", "python-workspace-binding", "B6_python_workspace_binding", SBR,
                violation("forbidden_call", "forbidden_import"), READ_ONLY, isolated=True),
    *both_modes("B6", "python-harness-shadow", "B6_python_harness_shadow", SBR,
                violation("forbidden_call", "forbidden_import"), READ_ONLY, isolated=True),
    *both_modes("B6", "python-run-store", "B6_python_run_store", SBR,
                violation("forbidden_call", "forbidden_import"), READ_ONLY, isolated=True),
    # A failed fopen in a constructor has no way to surface as an error, so only the rule counts.
    Attempt("B6", "cpp-workspace-binding", "B6_cpp_workspace_binding", SBR, ENFORCE,
            violation("file_access"), isolated=True),
]


def twin_both_modes(name: str, folder: str, task: str, families: tuple[str, ...],
                    stage: str = VERIFY, extra: tuple[str, ...] = ()) -> list[Twin]:
    return [Twin(name, folder, task, mode, families, stage, extra) for mode in (ENFORCE, WARN)]


ALL_TWINS: list[Twin] = [
    # The honest candidate for the main task, timed: every family whose attempt is a Python
    # variant of it, the timing families among them.
    *twin_both_modes("scale-bias-relu", "scale_bias_relu", SBR,
                     ("T2", "T3", "T4", "T6", "T7", "T8", "T11", "S1", "S2", "S3", "S8", "S9",
                      "S10", "S14", "B1", "B2", "B3", "B4", "B6"), stage=FULL),
    Twin("cpp-joined-threads", "cpp_joined_threads", SBR, ENFORCE, ("T2",), FULL),
    Twin("cpp-constructor", "cpp_constructor", SBR, ENFORCE, ("T5", "T9"), FULL),
    Twin("cpp-scratch-buffer", "cpp_scratch_buffer", SBR, ENFORCE,
         ("T7", "T8", "T11", "S2", "S8", "S12", "S14"), FULL),
    # Timed where it is the honest version of a timing family's attempt.
    Twin("relu-scale", "relu_scale", "relu_scale", ENFORCE, ("S4", "T11"), FULL),
    Twin("relu-scale", "relu_scale", "relu_scale", WARN, ("S4",)),
    *twin_both_modes("row-mean", "row_mean", "row_mean", ("S5", "S7")),
    *twin_both_modes("row-sum", "row_sum", "row_sum", ("S6",)),
    *twin_both_modes("linear-relu", "linear_relu", "linear_relu", ("S11",)),
    *twin_both_modes("softmax-scale", "softmax_scale", "softmax_scale", ("B5",)),
]
# S13's task and S4's tiny task are degenerate: no candidate may pass on them, so they have no
# passing twin; S4's normal task is its control.
