"""A fourth held-out set for `ragdoll bench conversation` (part "held_out4"), written
for issue #19 after the third held-out set (bench/conversation_set6.py) had been
measured, so that the next change can be judged on conversations nothing was tuned
on. Two-turn conversations over the real manuals: the first question names its
subject, the follow-up means little without it, typed as people type them. Some
follow-ups are answered on the page of the first question's answer, others on
another page of the same file.

How it was written (set7, blind to the product's results): the author read the form
of the earlier sets (bench/conversation_set.py and the opening of set 6), never
the bench's reports or figures for any conversation; pages were chosen among those no
other set's follow-up uses (checked by a script printing only the (file, page) pairs
already taken), each follow-up's answer read on the page's own text (PDFium's text of
that physical page), and its page confirmed by a script finding a distinctive phrase
of the answer on exactly that page (a second page is listed where the same answer is
also stated there). Nothing was searched, asked, embedded or benchmarked before the
set was committed. `pages` are 1-based PDF pages; None for formats without pages.
"""

from __future__ import annotations

from functools import partial

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
    two_turns,
)
from bench.conversation_set6 import MANPAGE

_h = partial(two_turns, held_out=True)


HELD_OUT4: tuple[TwoTurns, ...] = (
    # The Debian Reference
    _h(DEBREF, (130,), "How do I find the best MTU for my network connection on Debian?",
       "is there a command that works it out for me?"),
    _h(DEBREF, (187,), "How can I get warned before a hard disk is about to fail?",
       "where do i switch the daemon on?"),
    _h(DEBREF, (181,), "How do I turn off the screen saver on the console and in X?",
       "and the beeps in bash?"),
    _h(DEBREF, (212,), "How does GNOME mount a USB stick by itself when I plug it in?",
       "and if the stick is listed in fstab?"),
    _h(DEBREF, (186,), "How can fsck check the root filesystem safely at reboot on Debian?",
       "where do i see what it found?"),
    _h(DEBREF, (254,), "How do I get a backtrace of a crashing program for a bug report?",
       "what goes in limits.conf for the core dump way?"),
    _h(DEBREF, (108,), "How does systemd bring up a Debian system at boot?",
       "where does it get the machine's name from?"),
    # gnuplot
    _h(GNUPLOT, (190,), "How do I colour a 3D surface by its height with pm3d in gnuplot?",
       "is there any lighting by default?"),
    _h(GNUPLOT, (232,), "What does the stats command print in gnuplot?",
       "Can I send that to a file instead of the screen?"),
    _h(GNUPLOT, (244,), "How do I make an HTML5 canvas plot with gnuplot?",
       "what size is it if i don't give one?"),
    _h(GNUPLOT, (139,), "How do I draw contour lines for a 3D surface in gnuplot?",
       "can i pick the exact levels myself?"),
    _h(GNUPLOT, (216,), "How do I set the range of the x axis in gnuplot?",
       "and to make it run backwards?"),
    _h(GNUPLOT, (128,), "How is refresh different from replot in gnuplot?",
       "Can it add new data to the plot?"),
    # The Bash Reference Manual
    _h(BASHREF, (25,), "How do I write a function in a Bash script?",
       "and to get rid of one later?"),
    _h(BASHREF, (46,), "How do I send both the output and the errors of a command to one file?",
       "and to append instead of overwriting?"),
    _h(BASHREF, (104,), "How does Bash do integer arithmetic?",
       "what happens when a number gets too big?"),
    _h(BASHREF, (158,), "Where does Bash save my command history between sessions?",
       "does it overwrite that file when the shell exits?"),
    _h(BASHREF, (166,), "How do I build and install Bash from its source code?",
       "where does it go if I don't say?"),
    _h(BASHREF, (145,), "What does the TAB key do in Readline?",
       "is there one that cycles through the matches instead?"),
    # Debian Policy
    _h(POLICY, (24,), "How should a Debian package number versions that are based on dates?",
       "what separator then, for a native one?"),
    _h(POLICY, (97,), "How does a package run a job at a set time with cron?",
       "can the file's name have a dot in it?"),
    _h(POLICY, (109,), "Where should a Debian package put its configuration files?",
       "and dotfiles it needs in every home directory?"),
    _h(POLICY, (100,), "May a program in a Debian package need environment variables set to work?",
       "what if I can't change its source?"),
    _h(POLICY, (60,), "What are the maintainer scripts of a Debian package?",
       "and if there's no terminal when they run?"),
    # The Developer's Reference
    _h(DEVREF, (69,), "What is the stable-backports archive?",
       "how often should I upload there?"),
    _h(DEVREF, (88,), "How can my package's build use a locale that isn't installed?",
       "do i need root for that?"),
    _h(DEVREF, (32,), "When should I upload to experimental rather than unstable?",
       "do packages stay there forever?"),
    _h(DEVREF, (46,), "When should I close the bugs my new upload fixes?",
       "can the changelog close them for me?"),
    # The New Maintainers' Guide
    _h(MAINT, (39,), "How do I quieten a lintian warning that is wrong for my package?",
       "is the source one installed too?"),
    _h(MAINT, (29,), "How do I write the first entry of debian/changelog for a new package?",
       "what should the distribution say until it's ready?"),
    _h(MAINT, (56,), "How do I move an old 1.0 source package to the 3.0 (quilt) format?",
       "and if it used dpatch?"),
    # The bash manual page
    _h(MANPAGE, (15,), "What does the SECONDS variable hold in bash?",
       "and if I assign a number to it?"),
    _h(MANPAGE, (25,), "How do I replace part of a variable's value in bash?",
       "every match, not just the first?"),
    _h(MANPAGE, (40,), "How do I stop a running job in bash and get back to the prompt?",
       "and the one that waits till it reads from the terminal?"),
    # The LaTeX class guide
    _h(CLS, (10, 16), "How does a LaTeX package identify itself at the start of its file?",
       "what format must the date be in?"),
    _h(CLS, (19,), r"What does \LoadClassWithOptions do in a LaTeX class?",
       r"isn't that the same as passing them on with \DeclareOption*?"),
    # Formats without pages
    _h(SQLITE, None, "How do I make a temporary table in SQLite?",
       "can i give it a schema name as well?"),
    _h(REBASE, None, "How can git rebase run a command after each commit it replays?",
       "and if that fails, can it retry it by itself?"),
    _h(BISECT, None, "How do I see what I have marked so far in a git bisect?",
       "i marked one wrong, how do i fix that?"),
    _h(APT, None, "What does the summary at the end of apt-get's report tell me?",
       "and the second line of it?"),
)  # fmt: skip
