"""The blind multilingual corpus: Debian documents the project was never tuned on.

`python -m bench.blind_docs [--dir DIR]` fetches them as `real_docs` does (`apt-get
download`, `dpkg -x`) into DIR/corpus (default ~/.cache/ragdoll-blind-docs, or
$RAGDOLL_BLIND_DOCS). One document set per language, none a translation of another nor
of a tuning document, so a question has one right source in the mixed collection:

- German: the Debian FAQ as its 17-file HTML manual;
- French: the Debian Live manual as an EPUB;
- Spanish: the Debian New Maintainers' Guide, typeset PDF (dblatex);
- English: the short history of Debian (6 HTML files) and a two-column TUGboat paper.

The second blind part (`"split": "blind2"`, written after the first part had judged three
rounds of changes), in two more languages:

- Italian: the aptitude user's manual, 14 of its HTML pages (`aptitude-doc-it`);
- Portuguese: the Debian Edu / Skolelinux Bookworm manual, typeset PDF
  (`debian-edu-doc-pt-pt`).

The third blind part (`"split": "blind3"`, written on 2026-12-03, blind, before any run on
it), in two languages the corpus had not had and one it had, none a translation of another
document of the corpus:

- Dutch: the Debian installation guide for amd64, 20 of its HTML pages
  (`installation-guide-amd64`, the `nl` variant only);
- Polish: the user's guide of the MWCLS document classes, typeset PDF (LaTeX), from
  `texlive-lang-polish`;
- Italian: the manual of the `verifica` document class (school tests), typeset PDF
  (LaTeX), from `texlive-lang-italian`; its Italian sections, its implementation part is
  in English.

The fourth blind part (`"split": "blind4"`, written on 2026-12-03, blind, before any run on
it), in three languages the corpus had not had, one of them in a non-Latin script, none a
translation of another document of the corpus:

- Czech: Petr Olšák's "První setkání s TeXem", a short introduction to plain TeX, csplain
  and LaTeX, typeset PDF (csplain), from `texlive-lang-czechslovak`;
- Russian: "STEAD3: Программирование модулей", the manual for writing modules of the
  INSTEAD text-adventure engine, typeset PDF (LaTeX), from `instead-doc-ru`;
- Swedish: the LifeLines genealogy program's user guide as one large HTML page (DocBook,
  encoded in ISO-8859-1 without a charset declaration), from `lifelines-doc-sv`.

The fifth blind part (`"split": "blind5"`, written on 2026-12-03, blind, before any run on
it), in three languages the corpus already had, over documents new to it, none a
translation of another document of the corpus:

- German: Dominik Bischoff's "Bilder einfügen in LaTeX: Ein How-To", a FAQ on pictures
  and floats, typeset PDF (LaTeX), from `texlive-lang-german`;
- Spanish: "Una guía esencial para el correcto uso de LaTeX2e", the Spanish l2tabu
  (obsolete packages and commands), typeset PDF (LaTeX), from `texlive-lang-spanish`
  (its German original is not in the corpus);
- French: the TeXworks editor's French manual, 9 of its HTML pages (TeX4ht, ISO-8859-1),
  from `texworks-help-fr`.

The sixth blind part (`"split": "blind6"`, written on 2026-12-03, blind, before any run on
it), in three languages each with a close sister language the corpus already has (Slovak
beside Czech, Ukrainian and Bulgarian beside Russian), over documents new to it, none a
translation of another document of the corpus:

- Slovak: the Debian reference card, two A4 pages (DocBook, dblatex), from
  `debian-refcard` (the Slovak card only; no other language's card is in the corpus);
- Ukrainian: the hyphenation rules of the 1960 Ukrainian orthography, typeset PDF
  (pdfTeX, three pages), from `texlive-lang-cyrillic` (`ukrhyph`);
- Bulgarian: the Bulgarian translation of the pst-eucl manual (Euclidean geometry with
  PSTricks), typeset PDF (LaTeX, dvips, Ghostscript), from `texlive-lang-cyrillic` (its
  originals are not in the corpus).

The seventh blind part (`"split": "blind7"`, written on 2026-12-03, blind, before any run on
it), in three languages the corpus already had and one it had not (Simplified Chinese),
over documents new to it, none a translation of another document of the corpus:

- German: Manuel Pégourié-Gonnard's "Eine Einführung in LuaLaTeX", the German translation
  of the LuaLaTeX guide, typeset PDF (LaTeX, LuaTeX), from `texlive-lang-german` (its
  English original is not in the corpus);
- French: "LaTeX appliqué au droit français", the manual of the droit-fr class and
  bibliography style for law theses, typeset PDF (LaTeX), from `texlive-lang-french`;
- Spanish: the expEYES-17 user's manual (a school science kit), as an EPUB, from
  `eyes17-manuals-es`;
- Simplified Chinese: the Chinese translation of the Asymptote FAQ, typeset PDF (XeTeX),
  from `texlive-lang-chinese` (its English original is not in the corpus).

The eighth blind part (`"split": "blind8"`, written on 2026-12-04, blind, before any run on
it), in four languages the corpus had not had, two of them in a non-Latin script:

- Japanese: the manual of KiCad's drawing sheet (title block) editor, Pl_Editor, one HTML
  page (AsciiDoc), from `kicad-doc-ja` (its other manuals there are mostly untranslated
  English; no KiCad document is in the corpus);
- Korean: 10 HTML pages of the Korean GIMP user manual (DocBook), from `gimp-help-ko`
  (the Korean Debian FAQ was passed over: it translates the German FAQ the corpus has);
- Vietnamese: the Debian New Maintainers' Guide, 7 of its HTML chapters (DocBook), from
  `maint-guide-vi`; its Spanish translation is in the corpus (the first part's typeset
  PDF), so each question names the Spanish page that also answers it (`also`);
- Indonesian: the Debian Reference, typeset PDF (DocBook, dblatex), from
  `debian-reference-id` (its English original is only among the tuning documents, not in
  this corpus).

The questions over it are in `blind_set.json`: written from the documents' text before
any run, never tuned on.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

from bench.real_docs import RealDoc, fetch_real_docs, find_real_docs

ENV_DIR = "RAGDOLL_BLIND_DOCS"

_FAQ_DE = (
    "basic-defs",
    "choosing",
    "compatibility",
    "contributing",
    "customizing",
    "faqinfo",
    "ftparchives",
    "getting-debian",
    "index",
    "kernel",
    "nextrelease",
    "pkg-basics",
    "pkgtools",
    "redistributing",
    "software",
    "support",
    "uptodate",
)
_HISTORY_EN = ("detailed", "index", "intro", "leaders", "manifesto", "releases")
_APTITUDE_IT = (
    "pr01s02",
    "pr01s03",
    "pr01s04s02",
    "ch01s01s04",
    "ch01s02",
    "ch02s01s04",
    "ch02s02s02",
    "ch02s02s03",
    "ch02s02s05",
    "ch02s02s06",
    "ch02s03s02",
    "ch02s04s01",
    "ch02s06",
    "ch03",
)
_TEXWORKS_FR = (
    "Introduction",
    "Installation",
    "Priseenmain",
    "CompilerTw",
    "Allerplusloinoutilsdedition",
    "Allerplusloinautresoutils",
    "Expressionsregulieres",
    "UsageavancelesScripts",
    "Audeladecemanuel",
)
_INSTALL_NL = (
    "ch02s02",
    "ch02s05",
    "ch03s02",
    "ch03s05",
    "ch03s06",
    "ch04s03",
    "ch04s07",
    "ch05s02",
    "ch06s04",
    "ch07s02",
    "ch07s03",
    "ch08s01",
    "ch08s02",
    "ch08s04",
    "ch08s06",
    "apcs02",
    "apcs03",
    "apcs04",
    "apds02",
    "apds05",
)

_GIMP_KO = (
    "gimp-first-steps",
    "gimp-concepts-undo",
    "gimp-tutorial-quickie-scale",
    "gimp-tutorial-quickie-jpeg",
    "gimp-tutorial-quickie-crop",
    "gimp-tutorial-quickie-change-mode",
    "gimp-concepts-patterns",
    "gimp-using-brushes",
    "font-problems",
    "gimp-using-setup-tile-cache",
)
_MAINT_VI = ("first", "modify", "dreq", "build", "checkit", "update", "upload")

BLIND_DOCS: tuple[RealDoc, ...] = (
    *(
        RealDoc(
            package="debian-faq-de",
            path=f"usr/share/doc/debian/FAQ/de/{page}.de.html",
            name=f"faq-de-{page}.html",
            maker="DebianDoc SGML (HTML), German",
        )
        for page in _FAQ_DE
    ),
    RealDoc(
        package="live-manual-epub",
        path="usr/share/doc/live-manual/epub/live-manual.fr.epub",
        name="live-manual.fr.epub",
        maker="EPUB, French",
    ),
    RealDoc(
        package="maint-guide-es",
        path="usr/share/doc/maint-guide-es/maint-guide.es.pdf",
        name="maint-guide.es.pdf",
        maker="DocBook (dblatex), Spanish",
    ),
    *(
        RealDoc(
            package="debian-history",
            path=f"usr/share/doc/debian-history/docs/{page}.en.html",
            name=f"history-{page}.en.html",
            maker="DebianDoc (HTML), English",
        )
        for page in _HISTORY_EN
    ),
    RealDoc(
        package="texlive-latex-base-doc",
        path="usr/share/doc/texlive-doc/bibtex/babelbib/tugboat-babelbib.pdf",
        name="tugboat-babelbib.pdf",
        maker="LaTeX (TUGboat, two columns), English",
    ),
    # The second blind part (blind2).
    *(
        RealDoc(
            package="aptitude-doc-it",
            path=f"usr/share/doc/aptitude/html/it/{page}.html",
            name=f"aptitude-it-{page}.html",
            maker="DocBook (HTML), Italian",
        )
        for page in _APTITUDE_IT
    ),
    RealDoc(
        package="debian-edu-doc-pt-pt",
        path="usr/share/doc/debian-edu-doc-pt-pt/debian-edu-bookworm-manual.pdf",
        name="debian-edu-manual.pt.pdf",
        maker="DocBook (dblatex), European Portuguese",
    ),
    # The third blind part (blind3).
    *(
        RealDoc(
            package="installation-guide-amd64",
            path=f"usr/share/doc/installation-guide-amd64/nl/{page}.html",
            name=f"install-nl-{page}.html",
            maker="DocBook (HTML), Dutch",
        )
        for page in _INSTALL_NL
    ),
    RealDoc(
        package="texlive-lang-polish",
        path="usr/share/doc/texlive-doc/latex/mwcls/mwclsdoc.pdf",
        name="mwcls.pl.pdf",
        maker="LaTeX, Polish",
    ),
    RealDoc(
        package="texlive-lang-italian",
        path="usr/share/doc/texlive-doc/latex/verifica/verifica.pdf",
        name="verifica.it.pdf",
        maker="LaTeX, Italian",
    ),
    # The fourth blind part (blind4).
    RealDoc(
        package="texlive-lang-czechslovak",
        path="usr/share/doc/texlive-doc/cstex/prvni.pdf",
        name="prvni.cs.pdf",
        maker="TeX (csplain), Czech",
    ),
    RealDoc(
        package="instead-doc-ru",
        path="usr/share/doc/instead/manual/pdf/ru/modules3-ru.pdf",
        name="stead3-modules.ru.pdf",
        maker="LaTeX, Russian",
    ),
    RealDoc(
        package="lifelines-doc-sv",
        path="usr/share/doc/lifelines-doc-sv/ll-userguide.sv.html",
        name="lifelines-userguide.sv.html",
        maker="DocBook (HTML, ISO-8859-1), Swedish",
    ),
    # The fifth blind part (blind5).
    RealDoc(
        package="texlive-lang-german",
        path="usr/share/doc/texlive-doc/latex/l2picfaq/l2picfaq.pdf",
        name="l2picfaq.de.pdf",
        maker="LaTeX, German",
    ),
    RealDoc(
        package="texlive-lang-spanish",
        path="usr/share/doc/texlive-doc/latex/l2tabu-spanish/l2tabues.pdf",
        name="l2tabu.es.pdf",
        maker="LaTeX (KOMA-Script), Spanish",
    ),
    *(
        RealDoc(
            package="texworks-help-fr",
            path=f"usr/share/texworks-help/fr/{page}.html",
            name=f"texworks-fr-{page}.html",
            maker="TeX4ht (HTML, ISO-8859-1), French",
        )
        for page in _TEXWORKS_FR
    ),
    # The sixth blind part (blind6).
    RealDoc(
        package="debian-refcard",
        path="usr/share/doc/debian-refcard/refcard-sk-a4.pdf.gz",
        name="debian-refcard.sk.pdf",
        maker="DocBook (dblatex; reference card, two pages), Slovak",
    ),
    RealDoc(
        package="texlive-lang-cyrillic",
        path="usr/share/doc/texlive-doc/generic/ukrhyph/rules60.pdf",
        name="ukrhyph-rules60.uk.pdf",
        maker="TeX (pdfTeX), Ukrainian",
    ),
    RealDoc(
        package="texlive-lang-cyrillic",
        path="usr/share/doc/texlive-doc/latex/pst-eucl-translation-bg/pst-eucl-docBG.pdf",
        name="pst-eucl.bg.pdf",
        maker="LaTeX (dvips, Ghostscript), Bulgarian",
    ),
    # The seventh blind part (blind7).
    RealDoc(
        package="texlive-lang-german",
        path="usr/share/doc/texlive-doc/latex/lualatex-doc-de/lualatex-doc-DE.pdf",
        name="lualatex-doc.de.pdf",
        maker="LaTeX (LuaTeX), German",
    ),
    RealDoc(
        package="texlive-lang-french",
        path="usr/share/doc/texlive-doc/latex/droit-fr/droit-fr.pdf",
        name="droit-fr.fr.pdf",
        maker="LaTeX, French",
    ),
    RealDoc(
        package="eyes17-manuals-es",
        path="usr/share/doc/eyes17/es/eyes17.epub",
        name="expeyes17.es.epub",
        maker="EPUB, Spanish",
    ),
    RealDoc(
        package="texlive-lang-chinese",
        path="usr/share/doc/texlive-doc/support/asymptote-faq-zh-cn/asymptote-faq-zh-cn.pdf",
        name="asymptote-faq.zh.pdf",
        maker="LaTeX (XeTeX, xdvipdfmx), Simplified Chinese",
    ),
    # The eighth blind part (blind8).
    RealDoc(
        package="kicad-doc-ja",
        path="usr/share/doc/kicad/help/ja/pl_editor.html",
        name="kicad-pl-editor.ja.html",
        maker="AsciiDoc (HTML), Japanese",
    ),
    *(
        RealDoc(
            package="gimp-help-ko",
            path=f"usr/share/gimp/2.0/help/ko/{page}.html",
            name=f"gimp-ko-{page}.html",
            maker="DocBook (HTML), Korean",
        )
        for page in _GIMP_KO
    ),
    *(
        RealDoc(
            package="maint-guide-vi",
            path=f"usr/share/doc/maint-guide-vi/html/{page}.vi.html",
            name=f"maint-guide-vi-{page}.html",
            maker="DocBook (HTML), Vietnamese",
        )
        for page in _MAINT_VI
    ),
    RealDoc(
        package="debian-reference-id",
        path="usr/share/debian-reference/debian-reference.id.pdf",
        name="debian-reference.id.pdf",
        maker="DocBook (dblatex), Indonesian",
    ),
)


def default_dir() -> Path:
    env = os.environ.get(ENV_DIR)
    if env:
        return Path(env)
    return Path.home() / ".cache" / "ragdoll-blind-docs"


def find_blind_docs(*, root: Path | None = None) -> Path | None:
    """The corpus folder if every file is there, else None."""
    return find_real_docs(root=root or default_dir(), docs=BLIND_DOCS)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", type=Path, default=None, help=f"cache folder (${ENV_DIR})")
    parser.add_argument("--quiet", action="store_true", help="no apt-get output")
    args = parser.parse_args(argv)
    try:
        corpus = fetch_real_docs(root=args.dir or default_dir(), quiet=args.quiet, docs=BLIND_DOCS)
    except (RuntimeError, subprocess.SubprocessError, OSError) as e:
        print(f"could not fetch the blind documents: {e}", file=sys.stderr)
        return 1
    print(corpus)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
