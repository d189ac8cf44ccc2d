"""`GET /v1/hardware` and the report behind it."""

from __future__ import annotations

from pathlib import Path

from engine.paths import resolve_paths
from engine.runtime.models.synthetic import write_random_model
from engine.runtime.planner.profiling import run_active_profile, save_profile
from engine.runtime.planner.report import folder_bytes, hardware_info


def test_the_engine_reports_this_machine_without_a_gpu(engine) -> None:  # type: ignore[no-untyped-def]
    info = engine.client.hardware()
    assert info.profile.gpus == []  # the CI machine has none
    assert info.profile.ram_total_bytes > 0 and info.profile.cpu_cores_logical >= 1
    assert info.profile.disk_read_bytes_per_s  # measured on first call
    assert info.placement is None and "Extractive" in (info.note or "")
    assert info.fit is None
    assert info.index is not None and info.index.chunks == 0


def test_folder_bytes_counts_every_file_below(tmp_path: Path) -> None:
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "a" / "one.lance").write_bytes(b"x" * 1000)
    (tmp_path / "a" / "b" / "two.idx").write_bytes(b"y" * 234)
    assert folder_bytes(tmp_path) == 1234
    assert folder_bytes(tmp_path / "missing") == 0


def test_report_places_a_chosen_model_and_carries_a_current_fit(
    ragdoll_home: Path, tmp_path: Path
) -> None:
    paths = resolve_paths().ensure()
    model = write_random_model(folder=tmp_path / "llama", architecture="llama", hidden_size=32)
    first = hardware_info(paths=paths, model=str(model), chunks=0)
    fit = run_active_profile(
        sample_generation=lambda b: 0.05 * b**0.5,
        sample_retrieval=None,
        model_id=str(model),
        hardware_fingerprint=first.profile.fingerprint,
        collection_chunks=0,
    )
    save_profile(data_dir=paths.data, result=fit)
    info = hardware_info(paths=paths, model=str(model), chunks=0)
    p = info.placement
    assert p is not None and p.fits
    assert p.memory_model == "cpu_only"  # the compute tier is RAM, "gpu" stays empty
    assert p.weights.gpu == 0 and p.weights.cpu > 0
    assert p.workspace.gpu == 0 and p.workspace.cpu > 0
    assert info.fit is not None and info.fit.c is not None
    assert [b for b, _ in info.fit.samples] == [1.0, 2.0, 4.0, 8.0]
    assert p.batch == info.fit.batch
    # Another model makes the stored fit stale.
    assert hardware_info(paths=paths, model=None, chunks=0).fit is None
