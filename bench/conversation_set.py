"""Two-turn conversations over the real documents (bench/real_docs.py), for
`ragdoll bench conversation`: the first question stands alone; the second is a
follow-up that means little without it ("and the second one?"). `pages` are the
pages (1-based, as the PDF numbers them) where the follow-up's answer is; None for
formats without pages. The questions paraphrase the documents, they do not quote
them. `held_out` ones were set aside before history-aware retrieval was tuned (the
bonuses in engine/pipeline/adapters.py) and are reported apart.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, kw_only=True)
class TwoTurns:
    file: str  # the follow-up's file, by name
    first: str
    follow_up: str
    pages: tuple[int, ...] | None  # None: a file without pages
    held_out: bool = False


def two_turns(
    file: str,
    pages: tuple[int, ...] | None,
    first: str,
    follow_up: str,
    *,
    held_out: bool = False,
) -> TwoTurns:
    """One row of a set, positionally: the sets are long tables of them."""
    return TwoTurns(file=file, pages=pages, first=first, follow_up=follow_up, held_out=held_out)


MAINT = "maint-guide.pdf"
CLS = "latex-clsguide.pdf"
REBASE = "git-rebase.html"
BISECT = "git-bisect.txt"
SQLITE = "sqlite-createtable.html"
APT = "apt-guide.txt"

BASHREF = "bashref.pdf"
GNUPLOT = "gnuplot.pdf"
DEVREF = "developers-reference.pdf"
POLICY = "debian-policy.pdf"
DEBREF = "debian-reference.pdf"  # asked about by the later sets only

# The files the questions are about (the benchmark indexes the rest of the corpus too).
FILES = (MAINT, CLS, REBASE, BISECT, SQLITE, APT, BASHREF, GNUPLOT, DEVREF, POLICY)

CONVERSATIONS: tuple[TwoTurns, ...] = (
    # Debian New Maintainers' Guide (the PDF's page = the printed page + 6)
    TwoTurns(file=MAINT, first="What is a conffile in a Debian package?",
             follow_up="And how is the cron one handled?", pages=(36,)),
    TwoTurns(file=MAINT, first="What does the debuild command do when building a package?",
             follow_up="How does pbuilder differ from it?", pages=(46, 47)),
    TwoTurns(file=MAINT, first="How do I set up quilt for Debian packaging?",
             follow_up="And how do I fix an upstream bug with it?", pages=(19,)),
    TwoTurns(file=MAINT, first="What goes into the debian/control file?",
             follow_up="What about the copyright one?", pages=(27,)),
    TwoTurns(file=MAINT, first="What is the purpose of the debian/watch file?",
             follow_up="And what does the source/format one say?", pages=(42,)),
    TwoTurns(file=MAINT, first="How do I check a Debian package for errors with lintian?",
             follow_up="What does debdiff do in that step?", pages=(52,)),
    TwoTurns(file=MAINT, first="How do I upload a package to the Debian archive?",
             follow_up="When must the orig.tar.gz go with it?", pages=(58,)),
    TwoTurns(file=MAINT, first="What are shared library packages in Debian?",
             follow_up="How are their symbols managed?", pages=(60,)),
    TwoTurns(file=MAINT, first="What is multiarch in Debian packaging?",
             follow_up="And how do I build a shared library package with it?", pages=(62,)),
    TwoTurns(file=MAINT, first="How do I update a Debian package for a new Debian revision?",
             follow_up="And for a new upstream release?", pages=(54,), held_out=True),
    TwoTurns(file=MAINT, first="What is dh_make used for?",
             follow_up="What does the initial non-native package it makes look like?",
             pages=(18,), held_out=True),
    TwoTurns(file=MAINT, first="Which programs do I need for Debian package development?",
             follow_up="And which documentation should I read?", pages=(10,), held_out=True),
    TwoTurns(file=MAINT, first="What are the targets of the debian/rules file?",
             follow_up="How can I customize it?", pages=(32,), held_out=True),
    TwoTurns(file=MAINT, first="What is the changelog file in the debian directory for?",
             follow_up="Who writes its entries, and in what format?", pages=(28,)),
    # LaTeX2e for class and package writers
    TwoTurns(file=CLS, first="How do I declare options in a LaTeX class?",
             follow_up="And how are they processed afterwards?", pages=(20, 21)),
    TwoTurns(file=CLS, first="What does a minimal LaTeX class file look like?",
             follow_up="Is there an example of a local letter class built like it?", pages=(14,)),
    TwoTurns(file=CLS, first="How should command names be chosen in a LaTeX package?",
             follow_up="And what about box commands and colour?", pages=(6,)),
    TwoTurns(file=CLS, first="How do I upgrade a LaTeX 2.09 package to LaTeX2e?",
             follow_up="What do I do when it goes wrong?", pages=(28,)),
    TwoTurns(file=CLS, first="Which commands are obsolete in LaTeX2e classes and packages?",
             follow_up="And what replaces the old font commands?", pages=(29,), held_out=True),
    TwoTurns(file=CLS, first="How does a LaTeX package report errors and warnings?",
             follow_up="And how should it define its commands?", pages=(24,), held_out=True),
    TwoTurns(file=CLS, first="What does AtEndOfPackage do in a LaTeX package?",
             follow_up="What other hooks delay code like that?", pages=(20,)),
    TwoTurns(file=CLS, first="What is docstrip used for when writing LaTeX packages?",
             follow_up="How do I decide whether my file should be a class or a package then?",
             pages=(5,)),
    # git rebase, git bisect (HTML and text: no pages)
    TwoTurns(file=REBASE, first="What choices does git rebase --empty accept?",
             follow_up="And what does the second one do?", pages=None),
    TwoTurns(file=REBASE, first="What does git rebase --onto do?",
             follow_up="Can you show an example of it?", pages=None),
    TwoTurns(file=REBASE, first="What does the fixup command do in an interactive rebase?",
             follow_up="How is it different from squash?", pages=None, held_out=True),
    TwoTurns(file=BISECT, first="How do I start a git bisect session?",
             follow_up="And how do I mark a commit as bad?", pages=None),
    TwoTurns(file=BISECT, first="How can git bisect run a test script by itself?",
             follow_up="What exit code means the commit should be skipped?", pages=None),
    TwoTurns(file=BISECT, first="Can git bisect use other terms than good and bad?",
             follow_up="How do I set them when starting?", pages=None, held_out=True),
    # SQLite CREATE TABLE (HTML)
    TwoTurns(file=SQLITE, first="What is a WITHOUT ROWID table in SQLite?",
             follow_up="When should I use one?", pages=None),
    TwoTurns(file=SQLITE, first="What does a CHECK constraint do in an SQLite table?",
             follow_up="When is it evaluated?", pages=None),
    TwoTurns(file=SQLITE, first="What does the DEFAULT clause of a column do in SQLite?",
             follow_up="Can it be an expression?", pages=None, held_out=True),
    # APT user's guide (text)
    TwoTurns(file=APT, first="What does apt-get dist-upgrade do?",
             follow_up="How is it different from the plain upgrade?", pages=None),
    TwoTurns(file=APT, first="What is dselect in APT?",
             follow_up="How do I start it?", pages=None, held_out=True),
    # Held out, written the way a person follows up (paraphrased, naming little), over
    # files the tuned set does not touch; added after the tuning above and before any
    # later change to the history-aware search. Bash reference (PDF page = printed + 6)
    TwoTurns(file=BASHREF, first="What is a coprocess in Bash?",
             follow_up="How does my script read from it and write to it?", pages=(24,),
             held_out=True),
    TwoTurns(file=BASHREF, first="What is a here document in Bash?",
             follow_up="Is there a one-line form of it?", pages=(47,), held_out=True),
    TwoTurns(file=BASHREF, first="How does Bash keep a history of the commands I type?",
             follow_up="How do I stop it saving the same line twice in a row?", pages=(91,),
             held_out=True),
    TwoTurns(file=BASHREF, first="How do arrays work in Bash?",
             follow_up="How do I delete one element, or the whole thing?", pages=(108,),
             held_out=True),
    # gnuplot 5.4 (PDF page = printed page)
    TwoTurns(file=GNUPLOT, first="What does multiplot mode do in gnuplot?",
             follow_up="Can it arrange the plots in a grid by itself?", pages=(172, 173),
             held_out=True),
    TwoTurns(file=GNUPLOT, first="How do I fit a function to my data in gnuplot?",
             follow_up="Where does it write its log, and can I change that?", pages=(93, 97),
             held_out=True),
    # Debian Developer's Reference (PDF page = printed + 8), Debian Policy
    TwoTurns(file=DEVREF, first="What is a non-maintainer upload in Debian?",
             follow_up="What should its changelog entry and version look like?",
             pages=(59, 60), held_out=True),
    TwoTurns(file=DEVREF, first="How do I orphan a Debian package I no longer maintain?",
             follow_up="And if I want to take one over?", pages=(52, 53), held_out=True),
    TwoTurns(file=POLICY, first="What priority levels can a Debian package have?",
             follow_up="Which one should most packages use?", pages=(21,), held_out=True),
    TwoTurns(file=POLICY, first="What are maintainer scripts in a Debian package?",
             follow_up="May they ask the user questions?", pages=(28,), held_out=True),
)  # fmt: skip
