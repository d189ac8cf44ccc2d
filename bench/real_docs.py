"""Real documents nobody on the project wrote, fetched from Debian's documentation packages.

`python -m bench.real_docs [--dir DIR]` downloads the packages with `apt-get download`,
unpacks them with `dpkg -x` and copies a fixed selection of files (PDFs made by LaTeX, DocBook,
Sphinx, texinfo and groff; HTML; plain text) into DIR/corpus. Nothing is committed: tests and
benchmarks call `find_real_docs()` and skip with a clear message when the corpus is absent.

The selection is fixed so that a quality set written against it stays valid: each entry names
the package, the path inside it and the name the file gets in the corpus.
"""

from __future__ import annotations

import argparse
import gzip
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ENV_DIR = "RAGDOLL_REAL_DOCS"


@dataclass(frozen=True, kw_only=True)
class RealDoc:
    package: str
    path: str  # inside the unpacked package; a .gz is decompressed
    name: str  # file name in the corpus
    maker: str  # what produced it (for the reports)


DOCS: tuple[RealDoc, ...] = (
    RealDoc(
        package="debian-reference-en",
        path="usr/share/debian-reference/debian-reference.en.pdf",
        name="debian-reference.pdf",
        maker="DocBook (dblatex)",
    ),
    RealDoc(
        package="developers-reference",
        path="usr/share/developers-reference/developers-reference.pdf",
        name="developers-reference.pdf",
        maker="Sphinx (LaTeX)",
    ),
    RealDoc(
        package="maint-guide",
        path="usr/share/doc/maint-guide/maint-guide.en.pdf",
        name="maint-guide.pdf",
        maker="DocBook (dblatex)",
    ),
    RealDoc(
        package="debian-policy",
        path="usr/share/doc/debian-policy/policy.pdf.gz",
        name="debian-policy.pdf",
        maker="Sphinx (LaTeX)",
    ),
    RealDoc(
        package="gnuplot-doc",
        path="usr/share/doc/gnuplot/gnuplot.pdf",
        name="gnuplot.pdf",
        maker="LaTeX",
    ),
    RealDoc(
        package="bash-doc",
        path="usr/share/doc/bash/bash.pdf",
        name="bash-manpage.pdf",
        maker="groff",
    ),
    RealDoc(
        package="bash-doc",
        path="usr/share/doc/bash/bashref.pdf",
        name="bashref.pdf",
        maker="texinfo (TeX)",
    ),
    RealDoc(
        package="texlive-latex-base-doc",
        path="usr/share/doc/texlive-doc/latex/base/clsguide.pdf",
        name="latex-clsguide.pdf",
        maker="LaTeX",
    ),
    RealDoc(
        package="git-doc",
        path="usr/share/doc/git-doc/git-rebase.html",
        name="git-rebase.html",
        maker="AsciiDoc (HTML)",
    ),
    RealDoc(
        package="git-doc",
        path="usr/share/doc/git-doc/git-bisect.txt",
        name="git-bisect.txt",
        maker="AsciiDoc source (text)",
    ),
    RealDoc(
        package="sqlite3-doc",
        path="usr/share/doc/sqlite3/lang_createtable.html",
        name="sqlite-createtable.html",
        maker="HTML",
    ),
    RealDoc(
        package="apt-doc",
        path="usr/share/doc/apt-doc/guide.text.gz",
        name="apt-guide.txt",
        maker="DocBook (text)",
    ),
)


def default_dir() -> Path:
    env = os.environ.get(ENV_DIR)
    if env:
        return Path(env)
    return Path.home() / ".cache" / "ragdoll-real-docs"


def find_real_docs(*, root: Path | None = None) -> Path | None:
    """The corpus folder if every file of the selection is there, else None."""
    corpus = (root or default_dir()) / "corpus"
    if all((corpus / d.name).is_file() for d in DOCS):
        return corpus
    return None


def fetch_real_docs(
    *, root: Path | None = None, quiet: bool = False, timeout_s: float | None = None
) -> Path:
    """Download, unpack and copy the selection; returns the corpus folder.
    `timeout_s` bounds the download (subprocess.TimeoutExpired: apt-get is ended)."""
    root = root or default_dir()
    corpus = root / "corpus"
    corpus.mkdir(parents=True, exist_ok=True)
    missing = [d for d in DOCS if not (corpus / d.name).is_file()]
    if not missing:
        return corpus
    if shutil.which("apt-get") is None or shutil.which("dpkg") is None:
        raise RuntimeError("fetching the real documents needs apt-get and dpkg (Debian/Ubuntu)")
    debs = root / "debs"
    debs.mkdir(parents=True, exist_ok=True)
    packages = sorted({d.package for d in missing})
    out = subprocess.DEVNULL if quiet else None
    have = {p.name.split("_", 1)[0] for p in debs.glob("*.deb")}
    todo = [p for p in packages if p not in have]
    if todo:
        subprocess.run(
            ["apt-get", "download", *todo], cwd=debs, check=True, stdout=out, timeout=timeout_s
        )
    with tempfile.TemporaryDirectory(dir=root) as tmp:
        for deb in debs.glob("*.deb"):
            if deb.name.split("_", 1)[0] in packages:
                subprocess.run(["dpkg", "-x", str(deb), tmp], check=True)
        for d in missing:
            src = Path(tmp) / d.path
            dest = corpus / d.name
            part = dest.with_suffix(dest.suffix + ".part")
            if d.path.endswith(".gz"):
                with gzip.open(src, "rb") as fin, part.open("wb") as fout:
                    shutil.copyfileobj(fin, fout)
            else:
                shutil.copyfile(src, part)
            part.replace(dest)
    return corpus


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", type=Path, default=None, help=f"cache folder (${ENV_DIR})")
    parser.add_argument("--quiet", action="store_true", help="no apt-get output")
    parser.add_argument("--timeout", type=float, default=None, help="seconds for the download")
    args = parser.parse_args(argv)
    try:
        corpus = fetch_real_docs(root=args.dir, quiet=args.quiet, timeout_s=args.timeout)
    except (RuntimeError, subprocess.SubprocessError, OSError) as e:
        print(f"could not fetch the real documents: {e}", file=sys.stderr)
        return 1
    print(corpus)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
