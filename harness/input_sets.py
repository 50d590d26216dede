"""An evaluation's input sets, drawn again in each process that uses them.

prepare.py draws every set once from the secret seeds and writes a recipe (inputs.json): the
seeds, the device the sets are drawn on, which of the shifted and spiked sets it kept, and a
fingerprint of each set. run_candidate.py, check.py and timing.py draw the same sets from the
recipe, one at a time, where and when they use them. On the device a set of gigabytes takes
milliseconds to draw; copying every set to the host, writing it and reading it back in each
process took tens of seconds an evaluation, most of the time it held the GPU.

get_inputs() seeded alike gives the same values in every process (torch's generators are
deterministic for one seed, device and shape): prepare.py draws set 0 twice to make sure, and
every later draw is held to the set's fingerprint. A task whose draws differ has its sets
written as tensor bundles instead, and the recipe names them."""

import json
import math
import os
import random
import sys
from types import ModuleType
from typing import Any, Iterator

import torch

import common

RECIPE = "inputs.json"
PROFILE_SEED_OFFSET = 1000
EXTRA_SEED_MIX = 0x5EED
FINGERPRINT_ELEMENTS = 64


def draw(task: ModuleType, seed: int, device: str) -> list:
    """get_inputs() under seed: torch's generators, Python's and NumPy's (where the task imported
    it) seeded, the tensor factories running on device."""
    torch.manual_seed(seed)
    random.seed(seed)
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        numpy.random.seed(seed % (1 << 32))
    with torch.device(device):
        return list(task.get_inputs())


def floating(value: Any) -> bool:
    return isinstance(value, torch.Tensor) and (value.is_floating_point() or value.is_complex())


def shifted(inputs: list, rng: random.Random) -> list:
    """S5: the floating inputs moved to another scale and centre, so an answer that is the
    expected value of get_inputs()'s distribution (or any constant tuned to it) no longer holds."""
    scale, shift = 1.5 + 1.5 * rng.random(), 2 * rng.random() - 1
    return [v * scale + shift if floating(v) else v for v in inputs]


def spiked(inputs: list, rng: random.Random) -> list:
    """S6: one element of each floating input far above the rest, so a reduction over a
    subsample, or a kernel that skips part of its input, misses it.

    The spike stays where its square is finite in the input's dtype (below 128 in float16): a
    reference that squares it in that dtype (an RMS norm's x.pow(2), say) would otherwise
    overflow, zero the row where fp32 arithmetic does not, and still give finite outputs, a
    verdict on the overflow rather than on the candidate."""
    result = []
    for value in inputs:
        if floating(value) and value.numel() > 1:
            value = value.clone(memory_format=torch.contiguous_format)
            flat = value.view(-1)
            spread = float(value.abs().max())
            room = math.sqrt(torch.finfo(value.dtype).max) / 2 - spread
            flat[rng.randrange(flat.numel())] += min(50 * (spread + 1), max(room, spread + 1))
        result.append(value)
    return result


def extra_sets(base: list, seed: int) -> Iterator[tuple[str, list]]:
    """The shifted and spiked sets made from set 0 (base), in this order, one at a time: the
    random draws of each follow the other's, so a process that wants only the spiked one makes
    the shifted one first and drops it."""
    rng = random.Random(seed)
    yield "shifted", shifted(base, rng)
    yield "spiked", spiked(base, rng)


def fingerprint(inputs: list) -> list[dict]:
    """Each value's shape and dtype and the bytes of FINGERPRINT_ELEMENTS elements spread over it
    (the first and the last among them); a non-tensor's value."""
    result = []
    for value in inputs:
        if not isinstance(value, torch.Tensor):
            result.append({"value": value})
            continue
        flat = value.detach().reshape(-1)
        count = min(flat.numel(), FINGERPRINT_ELEMENTS)
        positions = torch.linspace(0, max(flat.numel() - 1, 0), count, dtype=torch.float64)
        sample = flat[positions.round().long().to(flat.device)].cpu().contiguous()
        result.append({"shape": list(value.shape),
                       "dtype": str(value.dtype).removeprefix("torch."),
                       "sample": sample.view(torch.uint8).numpy().tobytes().hex()})
    return result


def as_json(value: Any) -> Any:
    """value as it reads back from the recipe (tuples as lists, say)."""
    return json.loads(json.dumps(common.jsonable(value)))


def write_recipe(path: str, recipe: dict) -> None:
    common.write_text_atomic(path, json.dumps(common.jsonable(recipe), indent=1) + "\n")


class InputSets:
    """The sets a recipe describes, each drawn anew on `device` when asked for: verify(k) for k
    below verify_count (get_inputs()'s sets, then the shifted and spiked ones kept), profile(k)
    for k below profile_count. Every set is new tensors the caller owns.

    A set that does not match its fingerprint is the task's fault (error_kind "task") where no
    candidate code has run in the process; where it has, candidate code may be what changed
    the draw, and the error is its own (error_kind "inputs", which the evaluator counts against
    the candidate)."""

    def __init__(self, recipe_path: str, task: ModuleType, device: str,
                 candidate_process: bool = False) -> None:
        try:
            with open(recipe_path) as f:
                self.recipe = json.load(f)
        except (OSError, ValueError) as error:
            raise common.Failure(f"the input recipe {recipe_path} cannot be read: "
                                 f"{type(error).__name__}: {error}") from error
        self.folder = os.path.dirname(os.path.abspath(recipe_path))
        self.task, self.device = task, device
        self.seeded = len(self.recipe["fingerprints"]["verify"]) - len(self.recipe["extra_sets"])
        self.verify_count = len(self.recipe["fingerprints"]["verify"])
        self.profile_count = len(self.recipe["fingerprints"]["profile"])
        self._bundles: dict[str, list] = {}
        self._failure_kind = "inputs" if candidate_process else "task"

    def arity(self, k: int) -> int:
        """How many values verify set k holds, without drawing it."""
        return len(self.recipe["fingerprints"]["verify"][k])

    def verify(self, k: int) -> list:
        if k < self.seeded:
            return self._set("verify", k, lambda: self._draw(self.recipe["seeds"]["verify"] + k))
        wanted = self.recipe["extra_sets"][k - self.seeded]

        def make() -> list:
            base = self._draw(self.recipe["seeds"]["verify"])
            return next(values for name, values in extra_sets(base, self.recipe["seeds"]["extra"])
                        if name == wanted)
        return self._set("verify", k, make)

    def profile(self, k: int) -> list:
        return self._set("profile", k, lambda: self._draw(self.recipe["seeds"]["profile"] + k))

    def verify_sets(self, count: int | None = None) -> "LazySets":
        """The first count verify sets (all by default) as a sequence that draws on indexing."""
        return LazySets(self.verify, self.verify_count if count is None else count)

    def _draw(self, seed: int) -> list:
        values = draw(self.task, seed, self.recipe["drawn_on"])
        return common.to_device(values, self.device) if self.recipe["drawn_on"] != self.device \
            else values

    def _set(self, kind: str, k: int, make) -> list:
        bundles = self.recipe.get("bundles")
        if bundles:
            if kind not in self._bundles:
                self._bundles[kind] = common.load_bundle(os.path.join(self.folder, bundles[kind]))
            return common.to_device(self._bundles[kind][k], self.device)
        values = make()
        if as_json(fingerprint(values)) != self.recipe["fingerprints"][kind][k]:
            raise common.Failure(
                f"{kind} set {k} drawn in this process differs from the one prepare.py drew from "
                "the same seed: the task's get_inputs() gave other values, or something in this "
                "process changed how they are drawn", self._failure_kind)
        return values


class LazySets:
    """A read-only sequence of input sets, each drawn when indexed (a full-size task's sets are
    gigabytes each: a loop over them holds one at a time)."""

    def __init__(self, get, count: int) -> None:
        self._get, self._count = get, count

    def __len__(self) -> int:
        return self._count

    def __getitem__(self, k: int) -> list:
        if not 0 <= k < self._count:
            raise IndexError(k)
        return self._get(k)

    def __iter__(self) -> Iterator[list]:
        return (self._get(k) for k in range(self._count))
