"""Loading models. Cached ℓ(b) profiles are keyed by what changes them: an executor with another torch thread
count, torch version, CPU or model version measures its own instead of planning on someone else's."""

from vidnexus.contracts.profile import Profile
from vidnexus.gpu_executor.profiler import load_profile, profile_env, save_profile


def test_a_profile_is_reused_only_in_the_environment_it_was_measured_in(tmp_path):
    env = profile_env("cpu", version=1)
    assert {"device", "cpu", "torch", "threads", "version"} <= set(env)
    prof = Profile((1, 2, 4), (0.010, 0.015, 0.025), (0.001, 0.001, 0.002))
    save_profile(tmp_path, "m", "cpu", prof, env)
    assert load_profile(tmp_path, "m", "cpu", env) == prof
    assert load_profile(tmp_path, "m", "cpu", {**env, "threads": env["threads"] + 1}) is None
    assert load_profile(tmp_path, "m", "cpu", {**env, "torch": "0.0"}) is None
    assert load_profile(tmp_path, "m", "cpu", {**env, "version": 2}) is None
    assert load_profile(tmp_path, "other", "cpu", env) is None
    # Both environments keep their own file: executors with 1 and 2 threads do not overwrite each other.
    save_profile(tmp_path, "m", "cpu", Profile((1,), (0.02,), (0.0,)), {**env, "threads": env["threads"] + 1})
    assert load_profile(tmp_path, "m", "cpu", env) == prof
    assert len(list(tmp_path.glob("m@cpu-*.json"))) == 2


def test_the_default_environment_is_this_process_now(tmp_path):
    import torch

    prof = Profile((1,), (0.01,), (0.0,))
    save_profile(tmp_path, "m", "cpu", prof)
    assert load_profile(tmp_path, "m", "cpu") == prof
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(threads + 1)
        assert load_profile(tmp_path, "m", "cpu") is None
    finally:
        torch.set_num_threads(threads)


def test_a_detector_takes_read_only_inputs_without_a_warning():
    """Inputs decoded from a message are read-only views of its bytes; a detector (list input) used
    to hand them to torch as they were, and its first batch warned that the array is not writable."""
    import warnings

    import numpy as np
    import torch

    from vidnexus.gpu_executor.runner import TorchRunner

    seen = []

    class Detector(torch.nn.Module):  # a detector's interface: a list of images in, a dict per image out
        def forward(self, batch):
            seen.extend(tuple(t.shape) for t in batch)
            return [{"boxes": t.sum()} for t in batch]

    run = TorchRunner("det", Detector(), "cpu", postprocess=lambda r: r, list_input=True)
    frozen = np.frombuffer(np.ones((3, 4, 5), np.float32).tobytes(), np.float32).reshape(3, 4, 5)
    assert not frozen.flags.writeable
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = run([frozen, np.ones((3, 4, 5), np.float32)])
    assert len(out) == 2 and seen == [(3, 4, 5), (3, 4, 5)]


def test_the_profiler_measures_each_size_and_keeps_the_latency_non_decreasing():
    """ℓ(b) as measured can dip at a larger b (noise); the profile the planner gets never does,
    while the rows keep what was measured."""
    import time

    from vidnexus.gpu_executor.profiler import profile_runner

    cost = {1: 0.030, 2: 0.005, 4: 0.040}  # b = 2 measured faster than b = 1
    calls = []

    def run(batch):
        calls.append(len(batch))
        time.sleep(cost[len(batch)])

    prof, rows = profile_runner(run, lambda: 0, [1, 2, 4], repeats=2, warmup=1)
    assert calls == [1, 2, 4] + [1, 2, 4] * 2              # every size warmed, then rounds over them
    assert [b for b, _, _ in rows] == [1, 2, 4]
    assert rows[1][1] < rows[0][1]                       # measured: the dip
    assert list(prof.mean_s) == sorted(prof.mean_s)      # planned: non-decreasing
    assert prof.mean_s[1] == prof.mean_s[0] and prof.mean_s[2] >= 0.040


def test_the_profiler_keeps_the_typical_run_when_one_is_preempted():
    """One run of a size taking 10× (the OS ran something else meanwhile) does not move its ℓ(b):
    the median of the rounds is kept, the spread shows the outlier."""
    import time

    from vidnexus.gpu_executor.profiler import profile_runner

    n = [0]

    def run(batch):
        n[0] += 1
        time.sleep(0.050 if n[0] == 5 else 0.004 * len(batch))  # the second timed run of b=1 is slow

    prof, rows = profile_runner(run, lambda: 0, [1, 2], repeats=5, warmup=1)
    assert abs(prof.latency(1) - 0.004) < 0.003
    assert abs(prof.latency(2) - 0.008) < 0.003
    assert rows[0][2] > 0.010                               # the spread records the slow run


def test_cuda_graphs_are_for_cuda_devices_and_keep_their_own_profile_cache(monkeypatch):
    """On a CPU the flag changes nothing (the runner runs eagerly, its first run budgeted as any
    runner's); on a cuda device a graph runner's profiles are cached apart from the eager ones."""
    import numpy as np
    import torch

    from vidnexus.gpu_executor.loading import runner_env
    from vidnexus.gpu_executor.probing import FIRST_RUN_FACTOR
    from vidnexus.gpu_executor.runner import GRAPH_FIRST_RUN_FACTOR, GRAPH_SIZES, TorchRunner

    r = TorchRunner("m", torch.nn.Linear(3, 2), "cpu", cuda_graphs=True)
    assert r.cuda_graphs is False and r.first_run_factor == FIRST_RUN_FACTOR
    assert len(r([np.ones(3, np.float32)] * 5)) == 5
    assert GRAPH_FIRST_RUN_FACTOR > FIRST_RUN_FACTOR and list(GRAPH_SIZES) == sorted(GRAPH_SIZES)
    assert runner_env("cpu", 1, cuda_graphs=True) == runner_env("cpu", 1)
    monkeypatch.setattr("vidnexus.gpu_executor.profiler.profile_env", lambda d, v=None: {"device": d, "version": v})
    assert runner_env("cuda:0", 1, cuda_graphs=True) == {"device": "cuda:0", "version": 1, "cuda_graphs": True}
    assert runner_env("cuda:0", 1) == {"device": "cuda:0", "version": 1}
