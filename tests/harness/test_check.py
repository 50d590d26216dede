"""check.py's comparison rules, called in-process."""

import json
import math
import os

import pytest
import torch

import check
import common

ATOL = RTOL = 1e-2


def compare(expected: list[list], got: list[list]) -> dict:
    return check.compare_sets(expected, got, ATOL, RTOL)


def test_close_values_pass() -> None:
    torch.manual_seed(0)
    expected = torch.randn(64, 32)
    result = compare([[expected]], [[expected + 1e-3]])
    assert result["mismatch"] is None
    assert result["sets"] == 1
    assert result["max_abs_diff"] == pytest.approx(1e-3, rel=1e-4)


def test_tolerance_scales_with_expected() -> None:
    expected = torch.tensor([100.0, 100.0])
    inside = torch.tensor([100.9, 99.1])     # |diff| 0.9 <= 0.01 + 0.01 * 100
    outside = torch.tensor([100.9, 101.2])   # |diff| 1.2 > 1.01
    assert compare([[expected]], [[inside]])["mismatch"] is None
    mismatch = compare([[expected]], [[outside]])["mismatch"]
    assert mismatch["kind"] == "value" and mismatch["index"] == [1]


@pytest.mark.parametrize("chunk", [None, 7])
def test_value_off_by_more_than_tolerance_names_the_first_mismatch(chunk, monkeypatch) -> None:
    # Compared a chunk at a time (7 elements: the two mismatches fall in different chunks).
    if chunk:
        monkeypatch.setattr(check, "COMPARE_CHUNK", chunk)
    torch.manual_seed(1)
    a, b = torch.randn(8, 16), torch.randn(3, 4, 5)
    wrong = b.clone()
    wrong[1, 2, 3] += 0.5
    wrong[2, 0, 0] += 0.7
    result = compare([[a], [a, b]], [[a.clone()], [a.clone(), wrong]])
    mismatch = result["mismatch"]
    assert (mismatch["set"], mismatch["output"], mismatch["kind"]) == (1, 1, "value")
    assert mismatch["index"] == [1, 2, 3]
    assert mismatch["expected"] == pytest.approx(b[1, 2, 3].item())
    assert mismatch["got"] == pytest.approx(wrong[1, 2, 3].item())
    assert mismatch["mismatched"] == 2 and mismatch["numel"] == 60
    assert mismatch["max_abs_diff"] == pytest.approx(0.7, rel=1e-5)
    assert "set 1 output 1" in mismatch["detail"] and "[1, 2, 3]" in mismatch["detail"]
    assert result["max_abs_diff"] == pytest.approx(0.7, rel=1e-5)


@pytest.mark.parametrize("expected, got", [
    (float("nan"), float("nan")),
    (1.0, float("nan")),
    (float("nan"), 1.0),
    (float("inf"), float("-inf")),
    (float("inf"), 1e30),
    (1.0, float("inf")),
])
def test_nan_and_mismatched_infinity_never_match(expected: float, got: float) -> None:
    e = torch.tensor([0.5, expected])
    g = torch.tensor([0.5, got])
    mismatch = compare([[e]], [[g]])["mismatch"]
    assert mismatch is not None and mismatch["kind"] == "value"
    assert mismatch["index"] == [1] and mismatch["mismatched"] == 1


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.complex64])
def test_finite_outputs_are_judged_as_outputs_with_infinities_are(dtype) -> None:
    # Outputs without a NaN or an infinity take a shorter path; one infinity that both sides
    # share (which matches) sends the same values down the general one. Both must give the
    # same mismatch count, first mismatch and largest differences.
    torch.manual_seed(2)
    expected = torch.randn(4096).to(dtype) * 3
    expected[:64] = 0  # no relative difference where the expected value is zero
    got = expected + (torch.randn(4096) * 0.02).to(dtype)
    shared_inf = torch.tensor([float("inf")]).to(dtype)
    fast = check.compare_output(expected, got, ATOL, RTOL)
    general = check.compare_output(torch.cat([expected, shared_inf]), torch.cat([got, shared_inf]),
                                   ATOL, RTOL)
    assert fast[0] is not None and general[0] is not None
    assert fast[0]["mismatched"] == general[0]["mismatched"] > 0
    assert fast[0]["index"] == general[0]["index"]
    assert fast[1:] == general[1:]


def test_same_infinity_matches() -> None:
    e = torch.tensor([float("inf"), float("-inf"), 2.0])
    result = compare([[e]], [[e.clone()]])
    assert result["mismatch"] is None
    assert result["max_abs_diff"] == 0.0


def test_shape_mismatch() -> None:
    mismatch = compare([[torch.zeros(4, 8)]], [[torch.zeros(8, 4)]])["mismatch"]
    assert mismatch["kind"] == "shape"
    assert (mismatch["expected"], mismatch["got"]) == ([4, 8], [8, 4])


def test_dtype_mismatch() -> None:
    mismatch = compare([[torch.zeros(4)]], [[torch.zeros(4, dtype=torch.float16)]])["mismatch"]
    assert mismatch["kind"] == "dtype"
    assert (mismatch["expected"], mismatch["got"]) == ("float32", "float16")


def test_count_and_type_mismatch() -> None:
    t = torch.zeros(2)
    count = compare([[t, t]], [[t]])["mismatch"]
    assert (count["kind"], count["expected"], count["got"]) == ("count", 2, 1)
    kind = compare([[t]], [[[0.0, 0.0]]])["mismatch"]
    assert (kind["kind"], kind["expected"], kind["got"]) == ("type", "torch.Tensor", "list")


def test_first_mismatch_is_kept_across_sets() -> None:
    t = torch.ones(3)
    result = compare([[t], [t]], [[torch.ones(4)], [t + 1]])
    assert result["mismatch"]["set"] == 0 and result["mismatch"]["kind"] == "shape"
    assert result["max_abs_diff"] == pytest.approx(1.0)  # set 1 was still compared


def test_changed_input_is_detected() -> None:
    x = torch.randn(4, 4)
    x[0, 0] = float("nan")
    original = [[x, 3], [x.clone(), 3]]
    assert check.find_modified_input(original, [[x.clone(), 3], [x.clone(), 3]]) is None
    # None: the candidate's process found the input unchanged and sent no copy of it.
    assert check.find_modified_input(original, [[None, None], [None, 3]]) is None
    changed = x.clone()
    changed[2, 1] += 1e-6
    assert check.find_modified_input(original, [[x.clone(), 3], [changed, 3]]) == \
        {"set": 1, "input": 0}
    assert check.find_modified_input(original, [[x.double(), 3], [x.clone(), 3]]) == \
        {"set": 0, "input": 0}
    assert check.find_modified_input(original, [[x.clone(), 4], [x.clone(), 3]]) == \
        {"set": 0, "input": 1}


def test_report_is_strict_json(tmp_path) -> None:
    path = tmp_path / "report.json"
    common.write_report(str(path), {"ok": True, "max_abs_diff": math.inf, "got": math.nan})
    report = json.loads(path.read_text(), parse_constant=lambda name: pytest.fail(name))
    assert report == {"ok": True, "max_abs_diff": "inf", "got": "nan"}
    assert not (tmp_path / "report.json.tmp").exists()


def test_degenerate_outputs_are_found_chunk_by_chunk(monkeypatch) -> None:
    # Full-size outputs are compared a chunk at a time; a chunk smaller than the output must
    # give the verdicts a whole comparison gives.
    monkeypatch.setattr(check, "CHUNK", 7)
    inputs = [[torch.randn(5, 11)] for _ in range(3)]
    constant = [[torch.full((5, 11), 0.25) + 1e-4 * torch.randn(5, 11)] for _ in range(3)]
    assert "constant" in check.trivial_output(0, constant, inputs, 1e-2, 1e-2)
    copies = [[x[0].clone()] for x in inputs]
    assert "input 0" in check.trivial_output(0, copies, inputs, 1e-2, 1e-2)
    varying = [[x[0] * 3 + 1] for x in inputs]
    assert check.trivial_output(0, varying, inputs, 1e-2, 1e-2) is None
    varying[2][0][4, 10] = float("nan")  # the last chunk: not finite, so not trivial either
    assert check.trivial_output(0, varying, inputs, 1e-2, 1e-2) is None


@pytest.mark.parametrize("tensor", [
    torch.randn(7, 33),                                    # more than one stage, a partial last one
    torch.randn(40, 9).t(),                                # not contiguous
    torch.randn(5, 6, dtype=torch.complex64).conj(),       # a lazily conjugated view
    torch.randint(0, 2, (301,), dtype=torch.bool),
    torch.randn(3, 100).half(),
    torch.arange(1000, dtype=torch.int64).reshape(10, 100),
    torch.tensor(2.5),                                     # zero dimensions
    torch.empty(0, 4),
], ids=["float32", "transposed", "conj-complex", "bool", "half", "int64", "scalar", "empty"])
def test_a_staged_copy_to_the_host_holds_the_same_values(tensor) -> None:
    # The path a large device output takes to the host: a small buffer, many chunks.
    stage = torch.empty(64, dtype=torch.uint8)
    copy = common.staged_copy(tensor, stage)
    assert copy.shape == tensor.shape and copy.dtype == tensor.dtype
    assert copy.is_contiguous()
    assert torch.equal(copy, tensor.resolve_conj())


def test_an_output_of_another_layout_is_a_mismatch_not_a_checker_failure() -> None:
    expected = torch.eye(4)
    found, _, _ = check.compare_output(expected, expected.to_sparse(), ATOL, RTOL)
    assert found["kind"] == "layout"
    assert (found["expected"], found["got"]) == ("strided", "sparse_coo")


def test_a_comparison_that_raises_is_the_candidates_outputs_fault() -> None:
    with pytest.raises(common.Failure) as caught:
        with check.candidate_outputs_at_fault():
            raise RuntimeError("no kernel for this layout")
    assert caught.value.kind == "candidate_output" and "could not be compared" in str(caught.value)
    # Running out of device memory is the checker's own failure: no verdict on the candidate.
    with pytest.raises(torch.OutOfMemoryError):
        with check.candidate_outputs_at_fault():
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 4.00 GiB")
    with pytest.raises(common.TaskError):
        with check.candidate_outputs_at_fault():
            raise common.TaskError("the reference failed")


def test_bundles_are_written_without_checksums_and_read_back_whole(tmp_path) -> None:
    # The CRC-32 of each record is half the cost of a write and guards nothing here.
    import zipfile

    value = [torch.randn(1000), {"index": torch.arange(5)}, 3]
    common.save_bundle(value, str(tmp_path / "bundle.pt"))
    records = zipfile.ZipFile(tmp_path / "bundle.pt").infolist()
    assert records and all(record.CRC == 0 for record in records)
    back = common.load_bundle(str(tmp_path / "bundle.pt"))
    assert torch.equal(back[0], value[0]) and torch.equal(back[1]["index"], value[1]["index"])
    assert back[2] == 3


@pytest.mark.parametrize("filesystem", ["tmpfs", "ext4"])  # written through a mapping, write()
def test_large_tensors_are_written_apart_and_mapped_back(tmp_path, monkeypatch,
                                                         filesystem) -> None:
    monkeypatch.setattr(common, "RAW_MIN_BYTES", 64)
    monkeypatch.setattr(common, "filesystem_type", lambda path: filesystem)
    bundle = str(tmp_path / "candidate_out.pt")
    spill = common.Spill(bundle)
    assert spill.mapped == (filesystem == "tmpfs")
    big = torch.randn(8, 16)
    values = [big, big.t(), torch.randn(4, 4, dtype=torch.complex64), torch.rand(100) > 0.5,
              torch.randn(64).to(torch.bfloat16), torch.ones(3), 7]
    written = spill(values)
    # Five files; the 3-element tensor stays in the bundle as a host copy, the number as it is.
    assert sorted(p.name for p in (tmp_path / "candidate_out.pt.raw").iterdir()) == [
        f"{k}.raw" for k in range(5)]
    assert isinstance(written[5], torch.Tensor) and written[6] == 7
    common.save_bundle({"outputs": [written]}, bundle)
    back = common.load_bundle(bundle)["outputs"][0]
    for want, got in zip(values[:6], back[:6]):
        assert got.dtype == want.dtype and got.shape == want.shape and torch.equal(got, want)
    assert back[1].is_contiguous()  # written in order, whatever the layout it had
    assert back[6] == 7


@pytest.mark.parametrize("value", [
    torch.randn(1000), torch.randn(7, 9, dtype=torch.float64).t().contiguous(),
    torch.rand(333) > 0.5, torch.randn(50, dtype=torch.complex64), torch.randn(0),
    torch.randn(64).to(torch.bfloat16)])
def test_a_host_tensor_moved_through_the_stage_arrives_whole(value) -> None:
    stage = torch.empty(24, dtype=torch.uint8)  # stage-fulls and a part one at the end
    moved = common.staged_upload(value, stage, "cpu")
    assert moved.dtype == value.dtype and moved.shape == value.shape
    assert torch.equal(moved, value)
    assert value.numel() == 0 or moved.data_ptr() != value.data_ptr()
    # Where nothing is staged (the cpu device), upload is the tensor's own .to().
    assert common.upload(value, "cpu") is value


def test_the_file_system_of_a_path_is_that_of_its_longest_mount_point(tmp_path) -> None:
    mounts = tmp_path / "mounts"
    mounts.write_text(
        "/dev/vda / ext4 rw,relatime 0 0\n"
        "tmpfs /dev/shm tmpfs rw,nosuid,nodev 0 0\n"
        "tmpfs /dev/shm/run\\040folder tmpfs rw 0 0\n"
        "/dev/vdb /dev/shm/run\\040folder/disk xfs rw 0 0\n"
        "overlay /data overlay rw 0 0\n"
        "tmpfs /data tmpfs rw 0 0\n")  # mounted over the overlay: the later one is seen
    def kind(path: str) -> str:
        return common.filesystem_type(path, str(mounts))

    assert kind("/dev/shm/cuda-agent-tmp/run") == "tmpfs"
    assert kind("/dev/shmem") == "ext4" and kind("/tmp") == "ext4" and kind("/") == "ext4"
    assert kind("/dev/shm/run folder/disk/x") == "xfs"
    assert kind("/dev/shm/run folder/x") == "tmpfs"
    assert kind("/data/x") == "tmpfs"
    assert common.filesystem_type("/tmp", str(tmp_path / "missing")) == ""


@pytest.mark.parametrize("tamper, why", [
    (lambda folder, m: m.update({"raw_tensor": "../trusted.raw"}), "malformed"),
    (lambda folder, m: m.update({"dtype": "object"}), "malformed"),
    (lambda folder, m: m.update({"shape": [4, -2]}), "malformed"),
    (lambda folder, m: m.update({"shape": [400, 400]}), "not a regular file of"),
    (lambda folder, m: m.update({"extra": 1}), "malformed"),
    (lambda folder, m: ((folder / "0.raw").unlink(), (folder / "0.raw").symlink_to("/dev/zero")),
     "not a regular file"),
])
def test_a_raw_tensor_marker_that_spill_could_not_have_written_is_refused(tmp_path, monkeypatch,
                                                                          tamper, why) -> None:
    # The candidate's process writes its outputs: what it leaves there is read by the trusted
    # checker, which takes only a regular file of the right size under the bundle's own folder.
    monkeypatch.setattr(common, "RAW_MIN_BYTES", 64)
    bundle = str(tmp_path / "candidate_out.pt")
    marker = common.Spill(bundle).one(torch.randn(16, 16))
    tamper(tmp_path / "candidate_out.pt.raw", marker)
    common.save_bundle({"outputs": [[marker]]}, bundle)
    with pytest.raises(ValueError, match=why):
        common.load_bundle(bundle)
    with pytest.raises(common.Failure) as raised:
        check.read_candidate_bundle(bundle)
    assert raised.value.kind == "candidate_output"


@pytest.mark.parametrize("filesystem", ["tmpfs", "ext4"])
def test_a_raw_tensor_that_finds_no_room_says_how_much_there_was(tmp_path, monkeypatch,
                                                                  filesystem) -> None:
    # In a tmpfs the file's pages are allocated before the copy into its mapping: a full one is
    # an error here, not a SIGBUS that kills the process in the middle of the copy.
    import errno

    def no_room(*args):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(common, "RAW_MIN_BYTES", 64)
    monkeypatch.setattr(common, "filesystem_type", lambda path: filesystem)
    monkeypatch.setattr(os, "posix_fallocate", no_room)
    monkeypatch.setattr(common, "_write_all", no_room)
    with pytest.raises(common.Failure) as raised:
        common.Spill(str(tmp_path / "candidate_out.pt")).one(torch.randn(64, 64))
    message = str(raised.value)
    assert "0.raw failed with" in message and "GiB free in" in message
    assert "No space left" in message


def test_a_bundle_that_cannot_be_written_says_how_much_room_there_was(tmp_path, monkeypatch):
    def full_disk(value, path):
        open(path, "wb").close()
        raise RuntimeError("[enforce fail at inline_container.cc:664] . unexpected pos 2147485056")

    monkeypatch.setattr(torch, "save", full_disk)
    with pytest.raises(common.Failure) as raised:
        common.save_bundle([torch.zeros(3)], str(tmp_path / "verify_inputs.pt"))
    message = str(raised.value)
    assert "verify_inputs.pt" in message and "GiB free in " + str(tmp_path) in message
    assert "TMPDIR" in message and "unexpected pos" in message
    assert list(tmp_path.iterdir()) == []  # no partial file left behind


def test_inputs_drawn_where_get_inputs_cannot_run_on_the_device_come_from_the_host() -> None:
    import input_sets
    import prepare
    from types import SimpleNamespace

    # .numpy() needs a host tensor: on any other device this get_inputs() raises.
    task = SimpleNamespace(get_inputs=lambda: [torch.from_numpy(torch.randn(4, 8).numpy()),
                                               torch.randint(0, 3, (5,)), 2])
    args = SimpleNamespace(device="meta", seed=11, verify_sets=2, profile_sets=1)
    report: dict = {}
    base, recipe, written = prepare.draw_all(task, args, report)
    assert report["inputs_drawn_on"] == "cpu" and "numpy" in report["inputs_device_error"]
    assert report["inputs_repeatable"] is True and recipe["drawn_on"] == "cpu"
    assert base[0].device.type == "meta" and base[2] == 2
    # Drawn on the host for a device run: written out, not drawn again in every process.
    assert written is not None
    assert len(written["verify"]) == 2 and len(written["profile"]) == 1
    for k, values in enumerate(written["verify"]):
        want = input_sets.draw(task, 11 + k, "cpu")
        assert torch.equal(values[0], want[0]) and torch.equal(values[1], want[1])
        assert values[2] == 2
        assert recipe["fingerprints"]["verify"][k] == input_sets.fingerprint(want)
    assert not torch.equal(written["verify"][0][0], written["verify"][1][0])  # one seed per set
    profile = input_sets.draw(task, 11 + 1000, "cpu")
    assert torch.equal(written["profile"][0][0], profile[0])


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
def test_the_spiked_set_stands_out_yet_an_rms_norm_of_it_holds_in_its_dtype(dtype) -> None:
    import random

    import input_sets

    torch.manual_seed(0)
    x = (2 * torch.randn(64, 512)).to(dtype)  # 50 * (spread + 1) would square past float16's max
    spiked, count = input_sets.spiked([x, 3], random.Random(5))
    assert count == 3
    moved = (spiked.float() - x.float()).abs().view(-1)
    assert int((moved > 0).sum()) == 1
    spread = float(x.abs().max())
    assert float(spiked.view(-1)[moved.argmax()].abs()) > 10 * spread

    def rms_norm(t: torch.Tensor) -> torch.Tensor:
        return t * torch.rsqrt(t.pow(2).mean(-1, keepdim=True) + 1e-5)

    # Eager in the dtype and fp32 arithmetic agree on every row, the spiked one too: the set
    # judges a candidate that computes in fp32, not the reference's overflow.
    assert torch.allclose(rms_norm(spiked).float(), rms_norm(spiked.float()), atol=ATOL, rtol=RTOL)
