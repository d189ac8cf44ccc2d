"""installer/linux/wheel_fit.py: a pinned wheel this Python cannot install is left to pip."""

from __future__ import annotations

import zipfile
from pathlib import Path

from installer.linux.wheel_fit import admits, constraints_without, unfit_wheels


def test_requires_python_is_read_like_pip() -> None:
    assert admits(requires_python=">=3.11.5", python=(3, 11, 7))
    assert not admits(requires_python=">=3.11.5", python=(3, 11, 2))  # Debian 12's python3
    assert admits(requires_python=">=3.8, !=3.9.*", python=(3, 11, 2))
    assert not admits(requires_python="!=3.11.*", python=(3, 11, 2))
    assert not admits(requires_python="<3.11", python=(3, 11, 0))
    assert admits(requires_python="~=3.10", python=(3, 12, 1))
    assert not admits(requires_python="~=3.10.1", python=(3, 11, 0))
    assert admits(requires_python=">=2.7, !=3.0.*, !=3.1.*", python=(3, 11, 2))
    assert admits(requires_python="nonsense", python=(3, 11, 2))  # pip decides


def _wheel(folder: Path, name: str, requires: str | None) -> Path:
    path = folder / f"{name}-py3-none-any.whl"
    header = f"Metadata-Version: 2.1\nName: {name.split('-')[0]}\n"
    if requires:
        header += f"Requires-Python: {requires}\n"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr(f"{name.split('-')[0]}.dist-info/METADATA", header + "\nbody: >=9\n")
    return path


def test_an_unfit_wheel_is_left_out_and_its_pin_dropped(tmp_path: Path) -> None:
    soup = _wheel(tmp_path, "soupsieve-4.1.1", ">=3.11.5")
    six = _wheel(tmp_path, "six-1.17.0", ">=2.7")
    bare = _wheel(tmp_path, "odfpy-1.4.1", None)
    unfit = unfit_wheels(wheels=[soup, six, bare], python=(3, 11, 2))
    assert [(w, u.name, u.version) for w, u in unfit] == [(soup, "soupsieve", "4.1.1")]
    assert unfit_wheels(wheels=[soup, six, bare], python=(3, 11, 7)) == []
    text = "six==1.17.0\nsoupsieve==4.1.1\nSoupSieve_x==1\n"
    assert constraints_without(text=text, names={"soupsieve"}) == "six==1.17.0\nSoupSieve_x==1\n"
