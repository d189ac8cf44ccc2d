"""The Engine object in-process: how its parts share one plan."""

from pathlib import Path


def test_choosing_a_model_gives_the_index_its_resident_budget_from_the_same_plan(
    tmp_path: Path,
) -> None:
    from engine.core import Engine
    from engine.models.synthetic import write_random_model
    from engine.paths import resolve_paths

    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "note.txt").write_text("The greenhouse is watered every morning at six.")
    model = write_random_model(folder=tmp_path / "tiny-llama", architecture="llama")
    paths = resolve_paths(env={"RAGDOLL_HOME": str(tmp_path / "home")})
    engine = Engine(paths=paths, warm_up=False)
    try:
        _, job = engine.add_folder(path=str(docs))
        version = 0
        while job.snapshot().state not in ("done", "failed", "cancelled"):
            version, _ = job.wait_next(after=version, timeout_s=1.0)
        engine.set_model(model=str(model))
        placement = engine._generator.placement
        assert placement.resident_partition_bytes > 0
        assert engine.store.resident_budget == placement.resident_partition_bytes
    finally:
        engine.close()
