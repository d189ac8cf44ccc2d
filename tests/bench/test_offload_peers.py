"""`ragdoll bench offload --peers`: every system in its own memory cgroup, end to end on a
tiny model (figures and the limit, not speed); llama.cpp's parts where it is installed."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from bench import offload, offload_cgroup, offload_llama
from bench.offload_peers import parse_peers

NO_CGROUP = offload_cgroup.unavailable_reason()
NO_LLAMA = offload_llama.unavailable_reason()


def test_peers_are_parsed_and_unknown_ones_refused() -> None:
    assert parse_peers("llama.cpp, Accelerate") == ["llama.cpp", "accelerate"]
    with pytest.raises(ValueError, match="unknown peer 'vllm'"):
        parse_peers("vllm")


def test_without_llama_cpp_the_skip_and_its_reason_are_said_and_gguf_is_still_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from bench.offload_peers import _gguf_files
    from engine.runtime.models.synthetic import write_random_model

    monkeypatch.setattr(offload_llama, "unavailable_reason", lambda: "not installed; pip ...")
    model = write_random_model(folder=tmp_path / "m", architecture="qwen2")
    said: list[str] = []
    skipped: dict[str, str] = {}
    files = _gguf_files(
        model_dir=model,
        formats=["q4_0"],
        want_llama=True,
        source=None,
        threads=1,
        say=said.append,
        skipped=skipped,
    )
    assert said == ["llama.cpp: skipped: not installed; pip ..."]
    assert skipped == {"llama.cpp": "not installed; pip ..."}
    assert files["q4_0"].is_file()  # the executor's Q4_0 file, by the project's writer


@pytest.mark.skipif(NO_CGROUP is not None, reason=f"no memory cgroup here: {NO_CGROUP}")
def test_a_child_over_its_cgroup_limit_is_killed_and_one_under_it_is_not() -> None:
    grab = "x = bytearray({n} * 2**20); x[::4096] = b'1' * len(x[::4096]); print('ok')"
    with offload_cgroup.memory_cgroup(name="ragdoll-test", limit_bytes=96 * 2**20) as cg:
        under = offload_cgroup.run_in_cgroup(
            cgroup=cg, argv=[sys.executable, "-c", grab.format(n=16)], timeout_s=120
        )
        over = offload_cgroup.run_in_cgroup(
            cgroup=cg, argv=[sys.executable, "-c", grab.format(n=400)], timeout_s=120
        )
        path = cg.path
    assert under.returncode == 0 and under.stdout.strip() == "ok"
    assert over.returncode != 0 and over.oom_killed
    assert 0 < over.peak_bytes <= 96 * 2**20
    assert not path.exists()  # removed after the run


# Slow: nine child processes, each importing torch (about 45 s idle; 11 min at load 20).
@pytest.mark.slow
@pytest.mark.timeout(1200)
@pytest.mark.skipif(NO_CGROUP is not None, reason=f"no memory cgroup here: {NO_CGROUP}")
def test_quick_peers_benchmark_runs_every_system_resident_and_under_the_limit(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "figures.json"
    argv = ["--quick", "--folder", str(tmp_path / "model"), "--out", str(out), "--threads", "1"]
    tiny = "--layers 2 --hidden 64 --intermediate 128 --tokens 2 --prompt-tokens 4 --batches 1"
    peers = ["--peers", "llama.cpp,accelerate", "--weights", "q4_0", "--device", "cpu"]
    assert offload.main([*argv, *tiny.split(), *peers]) == 0

    printed = capsys.readouterr().out
    figures = json.loads(out.read_text(encoding="utf-8"))
    if NO_LLAMA:
        # Never silently: the reason and how to install it are printed and recorded.
        assert "llama.cpp: skipped: llama-cpp-python is not installed" in printed
        assert "bench-peers" in figures["skipped"]["llama.cpp"]
    systems = figures["systems"]
    expected = {"executor q4_0", "accelerate bf16"} | (set() if NO_LLAMA else {"llama.cpp q4_0"})
    # The int4 kernel's references run resident only (its dequantized arithmetic, and
    # Q4_0 decoded to float32 with its fp16 scales).
    references = {"executor q4_0 reference", "executor q4_0 layer"}
    assert set(systems) == expected | references
    for name in references:
        assert set(systems[name]) == {"resident"}
        assert systems[name]["resident"]["1"]["decode_tok_s"] > 0
    for name in expected:
        for scenario in ("resident", "limited"):
            cell = systems[name][scenario]["1"]
            assert cell["decode_tok_s"] > 0 and cell["prefill_tok_s"] > 0, (name, scenario)
            assert systems[name][scenario]["cgroup_peak_bytes"] > 0
    # The limit is half the Q4_0 file plus each runtime's measured allowance.
    half = figures["int4_file_bytes"] // 2
    for name, limit in figures["limit_bytes"].items():
        runtime = name.split()[0]
        assert limit == half + figures["allowance_bytes"][runtime] + figures["slack_bytes"]
        assert systems[name]["limited"]["cgroup_peak_bytes"] <= limit
    executor = systems["executor q4_0"]
    # Under the limit the executor runs its planner's placement for the cgroup it is in
    # (the tiny model fits whole); resident, every layer is in RAM.
    assert 0 < executor["limited"]["layers_in_ram"] <= 2
    assert executor["resident"]["layers_in_ram"] == 2
    # Resident and under the limit it gives the tokens of the kernel's
    # dequantize-then-matmul reference.
    assert executor["resident"]["1"]["tokens_match_reference"] is True
    assert executor["limited"]["1"]["tokens_match_reference"] is True


@pytest.mark.skipif(NO_LLAMA is not None, reason=f"llama.cpp not installed: {NO_LLAMA}")
def test_llama_cpp_gives_the_executors_greedy_tokens_on_the_same_f32_file(tmp_path: Path) -> None:
    import torch
    from gguf import GGMLQuantizationType

    from bench.offload_systems import _prompts
    from engine.runtime.models.gguf_writer import write_gguf
    from engine.runtime.models.synthetic import write_random_model

    model = write_random_model(folder=tmp_path / "m", architecture="qwen2")
    gguf = write_gguf(model_dir=model, out=tmp_path / "m.gguf", qtype=GGMLQuantizationType.F32)
    runner = offload_llama.LlamaRunner(
        gguf=gguf, threads=1, max_batch=2, max_tokens=16, repack=True
    )
    prompts = _prompts(batch=2, length=6)
    run, _ = runner.run(prompts=prompts, tokens=4, read_bytes=lambda: 0)

    from transformers import AutoModelForCausalLM

    hf = AutoModelForCausalLM.from_pretrained(model, dtype=torch.float32)
    expected = hf.generate(prompts, max_new_tokens=5, do_sample=False, eos_token_id=None)
    assert run.tokens == expected[:, prompts.shape[1] :].tolist()


def test_under_the_limit_the_executor_keeps_the_layers_its_planner_places_in_ram(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The limited scenario runs the product's placement for the cgroup the child is in:
    as many Q4_0 layers in RAM as the limit leaves room for, the rest streamed."""
    import torch
    from gguf import GGMLQuantizationType

    from bench.offload_child import planned_placement
    from engine.errors import PlacementError
    from engine.runtime.hardware import profile as profile_module
    from engine.runtime.hardware.cgroup import CgroupMemory
    from engine.runtime.models.gguf_file import companion_folder
    from engine.runtime.models.gguf_writer import write_gguf
    from engine.runtime.models.synthetic import write_random_model
    from engine.runtime.planner.stored import load_held_spec

    model = write_random_model(
        folder=tmp_path / "m", num_layers=6, hidden_size=256, intermediate_size=512, seed=2
    )
    gguf = write_gguf(model_dir=model, out=tmp_path / "m.gguf", qtype=GGMLQuantizationType.Q4_0)
    folder = companion_folder(gguf_path=gguf, cache=tmp_path / "cache")
    spec = {"batches": [1, 8], "prompt_tokens": 16, "tokens": 4}
    layer = max(load_held_spec(source=folder, dtype="float32", cpu=True).layer_bytes)

    # Room on the disk for the streamed layers whatever this machine has left: the
    # planner keeps a 2 GiB margin free, and a nearly full disk here once failed this.
    roomy = SimpleNamespace(total=100 * 2**30, used=0, free=100 * 2**30)
    monkeypatch.setattr(profile_module.shutil, "disk_usage", lambda path: roomy)

    def kept(available: int) -> int:
        limited = CgroupMemory(limit_bytes=64 * 2**20, used_bytes=64 * 2**20 - available)
        monkeypatch.setattr(profile_module, "cgroup_memory", lambda: limited)
        try:
            placement = planned_placement(spec, folder=folder, dtype=torch.float32)
        except PlacementError:
            return -1  # too little for even the layers in flight: refused, not run
        tiers = placement.layer_tiers
        assert tiers == ("cpu",) * tiers.count("cpu") + ("disk",) * tiers.count("disk")
        return tiers.count("cpu")

    # More room never keeps fewer layers; between none and all, some are kept.
    counts = [kept(6 * 2**20 + n * layer // 2) for n in range(60)]
    assert counts == sorted(counts) and counts[0] == -1 and counts[-1] == 6
    assert 0 in counts and any(0 < c < 6 for c in counts)
    monkeypatch.setattr(profile_module, "cgroup_memory", lambda: None)
    assert planned_placement(spec, folder=folder, dtype=torch.float32).layer_tiers == ("cpu",) * 6
