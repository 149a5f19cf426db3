"""Cached ℓ(b) profiles are keyed by what changes them: an executor with another torch thread
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
