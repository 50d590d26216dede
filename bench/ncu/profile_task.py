"""One call of the synthesizer's candidate and one of torch.compile's code for a task, between
cudaProfilerStart/Stop, for Nsight Compute to profile (run.sh drives it):
    ncu --profile-from-start off ... python3 bench/ncu/profile_task.py TASK WORKSPACE LIB
Everything else (building, compiling, warming up) runs outside the profiled range."""
import importlib.util
import os
import sys

import torch


def main(task: str, workspace: str, lib: str) -> None:
    spec = importlib.util.spec_from_file_location("task_module", task)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    os.environ["CUDA_AGENT_KERNEL_LIB"] = lib
    sys.path.insert(0, workspace)
    import model_new  # noqa: E402 (the workspace is on the path only now)

    torch.manual_seed(0)
    init = module.get_init_inputs()
    reference = module.Model(*init).cuda().eval()
    candidate = model_new.ModelNew(*init)
    if candidate.state_dict().keys() == reference.state_dict().keys():
        candidate.load_state_dict(reference.state_dict())
    candidate = candidate.cuda().eval()
    with torch.device("cuda"):
        inputs = [x.cuda() if isinstance(x, torch.Tensor) else x for x in module.get_inputs()]
    compiled = torch.compile(reference)
    with torch.no_grad():
        for _ in range(3):
            compiled(*inputs)
            candidate(*inputs)
        torch.cuda.synchronize()
        torch.cuda.profiler.start()
        candidate(*inputs)
        compiled(*inputs)
        torch.cuda.synchronize()
        torch.cuda.profiler.stop()


if __name__ == "__main__":
    main(*sys.argv[1:4])
