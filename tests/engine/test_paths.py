from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from engine.environ import EngineEnviron
from engine.paths import paths_under, resolve_paths


def _mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


@pytest.mark.skipif(os.name != "posix", reason="POSIX file modes")
def test_folders_are_private_and_an_old_install_is_fixed(tmp_path: Path) -> None:
    paths = resolve_paths(env={"RAGDOLL_HOME": str(tmp_path / "home")})
    (paths.data / "index" / "t.lance").mkdir(parents=True)
    (paths.data / "index" / "t.lance" / "0.arrow").write_text("rows")
    for path in (paths.data, paths.data / "index", paths.data / "index" / "t.lance"):
        os.chmod(path, 0o755)
    os.chmod(paths.data / "index" / "t.lance" / "0.arrow", 0o644)
    outside = tmp_path / "elsewhere.txt"
    outside.write_text("not ours")
    os.chmod(outside, 0o644)
    os.symlink(outside, paths.data / "link.txt")  # a link is not followed

    paths.ensure()
    for folder in (paths.data, paths.config, paths.cache, paths.logs, paths.runtime):
        assert _mode(folder) == 0o700, folder
    assert _mode(paths.data / "index" / "t.lance") == 0o700
    assert _mode(paths.data / "index" / "t.lance" / "0.arrow") == 0o600
    assert _mode(outside) == 0o644


def test_the_folders_follow_the_home_read_with_the_other_variables(tmp_path: Path) -> None:
    """RAGDOLL_HOME is read once with the other RAGDOLL_* variables (EngineEnviron) and
    the folders made from it: `resolve_paths` of an environment is `paths_under` its home."""
    env = {"RAGDOLL_HOME": str(tmp_path / "home")}
    paths = paths_under(home=EngineEnviron.from_environ(env).home)
    assert paths == resolve_paths(env=env)
    assert paths.home == (tmp_path / "home").resolve()
    assert paths.index_dir == paths.home / "data" / "index"
    assert paths_under(home=None) == resolve_paths(env={})
