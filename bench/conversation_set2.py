"""A second held-out set of two-turn conversations for `ragdoll bench conversation`
(issue #19, written 2026-11-27 before it was measured): the first held-out set of
bench/conversation_set.py had been measured over several rounds of changes
to the history-aware search, so it no longer tells whether a change generalises.

Written the same way (the first question paraphrased and standing alone, the
follow-up meaning little without it), on topics and pages that the 43 conversations
of the first set do not use, over eleven files of the corpus. `pages` are 1-based as
the PDF numbers them (the page a PDF viewer shows, not the printed folio); None for
formats without pages. Never edit or drop one of these after seeing its result: the
set is only worth something while nothing was fitted to it.
"""

from __future__ import annotations

from bench.conversation_set import (
    APT,
    BASHREF,
    BISECT,
    CLS,
    DEBREF,
    DEVREF,
    GNUPLOT,
    MAINT,
    POLICY,
    REBASE,
    SQLITE,
    TwoTurns,
)

HELD_OUT2: tuple[TwoTurns, ...] = (
    # Debian New Maintainers' Guide (PDF page = printed + 6)
    TwoTurns(file=MAINT, first="How do I write a manual page for my program when I package it?",
             follow_up="And if I'd rather write it in XML?", pages=(40,)),
    TwoTurns(file=MAINT, first="What is git-buildpackage good for when packaging for Debian?",
             follow_up="How do all these build tools stack on top of each other?",
             pages=(49,)),
    # LaTeX2e for class and package writers (PDF page = printed page)
    TwoTurns(file=CLS, first="How can a LaTeX package test whether a file exists?",
             follow_up="And read it in only if it's there?", pages=(23,)),
    TwoTurns(file=CLS, first="How do I put text into capital letters in a LaTeX class?",
             follow_up="Does it touch maths and labels too?", pages=(26,)),
    # git rebase (HTML), git bisect (text): no pages
    TwoTurns(file=REBASE, first="Can I rebase while I have uncommitted changes in my work tree?",
             follow_up="Is there a catch?", pages=None),
    TwoTurns(file=REBASE,
             first="What should I do when the upstream branch my work is based on was rebased?",
             follow_up="And if they had conflicts while doing it?", pages=None),
    TwoTurns(file=BISECT, first="How do I end a git bisect session and go back to where I was?",
             follow_up="Can I land on another commit instead?", pages=None),
    TwoTurns(file=BISECT, first="How do I see what I have marked so far during a bisection?",
             follow_up="And if I marked one wrongly, how do I fix it?", pages=None),
    TwoTurns(file=BISECT, first="How can I look at the commits git bisect still suspects?",
             follow_up="What if I have no graphical display?", pages=None),
    # SQLite CREATE TABLE (HTML)
    TwoTurns(file=SQLITE, first="How do I make a table in SQLite from the results of a query?",
             follow_up="Does it keep a primary key or any constraints?", pages=None),
    TwoTurns(file=SQLITE, first="When does a column in SQLite become an alias for the rowid?",
             follow_up="Is there an exception to that?", pages=None),
    TwoTurns(file=SQLITE, first="What happens in SQLite if I create a table that already exists?",
             follow_up="Even when it is an index that has that name?", pages=None),
    # APT user's guide (text)
    TwoTurns(file=APT, first="Why does apt-get say some packages have been kept back?",
             follow_up="How do I get them installed anyway?", pages=None),
    TwoTurns(file=APT, first="What do the lines apt-get prints while it downloads mean?",
             follow_up="How do I turn that off when I log to a file?", pages=None),
    # Bash reference (PDF page = printed + 6)
    TwoTurns(file=BASHREF, first="What does a restricted shell in Bash stop you from doing?",
             follow_up="Is that enough on its own to lock a user down?", pages=(112,)),
    TwoTurns(file=BASHREF, first="What is the directory stack in Bash?",
             follow_up="How do I take an entry off it without changing where I am?",
             pages=(109,)),
    TwoTurns(file=BASHREF, first="What does Bash do when it receives a hangup signal?",
             follow_up="How do I keep one of my jobs from receiving it?", pages=(51,)),
    # gnuplot 5.4 (PDF page = printed page)
    TwoTurns(file=GNUPLOT,
             first="How do I plot only some of the points of a data file in gnuplot?",
             follow_up="And how is that different from skipping lines at the start?",
             pages=(112,)),
    TwoTurns(file=GNUPLOT, first="What ways does gnuplot have to smooth noisy data?",
             follow_up="Which one is least thrown off by outliers?", pages=(113,)),
    TwoTurns(file=GNUPLOT, first="How does gnuplot deal with dates and times in my data?",
             follow_up="What about time zones?", pages=(61,)),
    # Debian Developer's Reference (PDF page = printed + 8)
    TwoTurns(file=DEVREF, first="What should a Debian developer do before going on vacation?",
             follow_up="And when leaving the project for good?", pages=(20,)),
    TwoTurns(file=DEVREF, first="What is package salvaging in Debian?",
             follow_up="How do I go about it?", pages=(62, 63)),
    TwoTurns(file=DEVREF, first="What is the stable backports archive for?",
             follow_up="How long do I have to look after what I upload there?", pages=(68,)),
    # Debian Policy (PDF page = printed + 10)
    TwoTurns(file=POLICY, first="What is a virtual package in Debian?",
             follow_up="Where do I find the list of agreed names?", pages=(27,)),
    TwoTurns(file=POLICY, first="What does it mean for a Debian package to be essential?",
             follow_up="Can a shared library be one?", pages=(27,)),
    TwoTurns(file=POLICY, first="How is a Debian package's version number made up?",
             follow_up="Which part is compared first?", pages=(48,)),
    # Debian Reference (PDF page = printed + 28)
    TwoTurns(file=DEBREF, first="How do I run a job regularly on a Debian system?",
             follow_up="And what if the machine is not on all the time?", pages=(177,)),
    TwoTurns(file=DEBREF, first="How do I cap the bandwidth APT uses for downloads?",
             follow_up="And if an upgrade breaks my system, can I go back?",
             pages=(100, 101)),
    TwoTurns(file=DEBREF, first="How do I check that a text file is valid UTF-8?",
             follow_up="And what about the names of the files themselves?", pages=(229,)),
    TwoTurns(file=DEBREF, first="How do I run a command every few seconds and watch its output?",
             follow_up="And to run it once for each file in a folder?", pages=(173,)),
    TwoTurns(file=DEBREF, first="How do I forward a port through ssh?",
             follow_up="How do I shut that remote machine down without the connection "
             "killing it?", pages=(143,)),
)  # fmt: skip

# More tuning conversations, written after the second held-out set and before any
# change was tuned on them: the first set's tuned part found 21 of its 23, too few
# misses left to tell a change from noise. Topics and pages apart from both
# held-out sets'. Reported as their own part ("tuned2"), misses printed.
TUNING2: tuple[TwoTurns, ...] = (
    TwoTurns(file=MAINT, first="What goes into the debian/dirs file?",
             follow_up="And the docs one?", pages=(37,)),
    TwoTurns(file=MAINT, first="How do I do a complete rebuild of a Debian package?",
             follow_up="And what does the autobuilder do differently?", pages=(45, 46)),
    TwoTurns(file=CLS, first="What goes in the identification part of a LaTeX class file?",
             follow_up="And how does it load other packages?", pages=(17,)),
    TwoTurns(file=BASHREF, first="How do aliases work in Bash?",
             follow_up="Why don't they work in my scripts?", pages=(106,)),
    TwoTurns(file=BASHREF, first="What is process substitution in Bash?",
             follow_up="Does it work on every system?", pages=(41,)),
    TwoTurns(file=GNUPLOT, first="How do I make an axis logarithmic in gnuplot?",
             follow_up="And with base 2 instead of 10?", pages=(167,)),
    TwoTurns(file=POLICY, first="What are the archive areas of Debian?",
             follow_up="What may go into the contrib one?", pages=(19,)),
    TwoTurns(file=DEVREF, first="Which mailing lists matter most for Debian development?",
             follow_up="And how do I ask for a new one?", pages=(24,)),
    TwoTurns(file=DEBREF, first="How do I find out which process has a file open?",
             follow_up="And how do I stop it?", pages=(175, 176)),
    TwoTurns(file=SQLITE, first="What does the COLLATE clause on a column do in SQLite?",
             follow_up="And what is used when there is none?", pages=None),
    TwoTurns(file=REBASE, first="What does git rebase --exec do?",
             follow_up="What happens when the command fails?", pages=None),
    TwoTurns(file=APT, first="What does apt-get show in its list of packages to remove?",
             follow_up="And what does its last summary tell me?", pages=None),
)  # fmt: skip
