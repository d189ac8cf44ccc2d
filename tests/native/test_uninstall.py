from __future__ import annotations

from pathlib import Path

from engine.paths import resolve_paths
from native.uninstall import carry_out, plan_uninstall, state_dirs


def setup(tmp_path: Path):  # type: ignore[no-untyped-def]
    home = tmp_path / "home"
    paths = resolve_paths(env={"RAGDOLL_HOME": str(home / "ragdoll")}).ensure()
    (paths.index_dir).mkdir(parents=True)
    (paths.index_dir / "chunks.lance").write_text("index")
    program = home / "app"
    (program / "venv").mkdir(parents=True)
    docs = home / "Documents"
    docs.mkdir()
    (docs / "report.pdf").write_text("mine")
    return home, paths, program, docs


def test_keep_index_removes_only_the_program(tmp_path: Path) -> None:
    home, paths, program, docs = setup(tmp_path)
    plan = plan_uninstall(
        paths=paths, remove_index=False, program_dir=program, watched=[docs], home=home
    )
    assert plan.remove == (program.resolve(),)
    assert paths.data.resolve() in plan.keep
    carry_out(plan=plan)
    assert not program.exists()
    assert (paths.index_dir / "chunks.lance").read_text() == "index"
    assert (docs / "report.pdf").read_text() == "mine"


def test_remove_index_removes_the_apps_state_but_never_the_documents(tmp_path: Path) -> None:
    home, paths, program, docs = setup(tmp_path)
    plan = plan_uninstall(
        paths=paths, remove_index=True, program_dir=program, watched=[docs], home=home
    )
    assert set(plan.remove) == {program.resolve(), *state_dirs(paths=paths)}
    carry_out(plan=plan)
    assert not paths.index_dir.exists() and not paths.config.exists()
    assert (docs / "report.pdf").read_text() == "mine"


def test_a_folder_holding_watched_documents_or_home_is_never_removed(tmp_path: Path) -> None:
    home, paths, _program, _docs = setup(tmp_path)
    inside = paths.data / "my-notes"  # someone put documents in the data folder
    inside.mkdir()
    (inside / "n.md").write_text("keep me")
    plan = plan_uninstall(
        paths=paths, remove_index=True, program_dir=home, watched=[inside], home=home
    )
    refused = dict(plan.refused)
    assert "home folder" in refused[home.resolve()]
    assert "watched folder" in refused[paths.data.resolve()]
    carry_out(plan=plan)
    assert (inside / "n.md").read_text() == "keep me"


def test_state_dirs_drop_nested_folders() -> None:
    paths = resolve_paths(env={"RAGDOLL_HOME": "/tmp/rh"})
    dirs = state_dirs(paths=paths)
    assert len(dirs) == len(set(dirs)) == 5


def test_carrying_out_reports_progress_to_the_end(tmp_path: Path) -> None:
    from native.uninstall import UninstallPlan, carry_out

    program = tmp_path / "ragdoll-desktop"
    for i in range(250):
        (program / "venv" / f"pkg{i % 7}").mkdir(parents=True, exist_ok=True)
        (program / "venv" / f"pkg{i % 7}" / f"m{i}.py").write_text("x")
    (program / "venv" / "link").symlink_to(program / "venv" / "pkg0")
    seen: list[tuple[int, int]] = []
    plan = UninstallPlan(remove=(program,), keep=(), refused=())
    assert carry_out(plan=plan, progress=lambda done, total: seen.append((done, total))) == [
        program
    ]
    assert not program.exists()
    total = seen[-1][1]
    assert total == 250 + 7 + 1 + 1  # files, folders, the link, venv/
    assert seen[-1] == (total, total)
    assert len(seen) > 10 and [d for d, _ in seen] == sorted(d for d, _ in seen)
