"""A third held-out set for `ragdoll bench conversation` (part "held_out3"), written
for issue #19 after the two earlier held-out sets had been measured following several
tuning rounds, so that the next change can be judged on conversations nothing was
tuned on. Two-turn conversations over the real manuals: the first question names its
subject, the follow-up means little without it, typed as people type them.

How it was written (session 13's lead, blind to the product's results): the author had
read the tuning sets (and their misses in the bench's report), never the held-out
conversations of the first set or of the second held-out set; pages were chosen among
those no other set's follow-up uses (checked by a script printing only page numbers),
each follow-up's answer read on the page's own text, and its page confirmed by
finding the answer's words in the kept index's chunks (a chunk counts by its first
page; a second page is listed where the same answer is also stated there). Nothing was
searched, asked or benchmarked before the set was committed. `pages` are 1-based PDF
pages; None for formats without pages.
"""

from __future__ import annotations

from functools import partial

from bench.conversation_set import (
    BASHREF,
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

MANPAGE = "bash-manpage.pdf"
_h = partial(two_turns, held_out=True)


HELD_OUT3: tuple[TwoTurns, ...] = (
    # The Debian Reference
    _h(DEBREF, (110,), "How do I see the system log since the last boot with journalctl?",
       "And only for one service?"),
    _h(DEBREF, (245,), "How do I test in a shell script whether a file exists?",
       "and whether one file is newer than another?"),
    _h(DEBREF, (200,), "How do I build my own Linux kernel package on Debian?",
       "Is there a package with the source already patched by Debian?"),
    _h(DEBREF, (235,), "How can I check the syntax of an XML file?",
       "And for plain HTML?"),
    _h(DEBREF, (70,), "What codename does testing get after the bookworm release?",
       "and sid, which suite is that?"),
    _h(DEBREF, (160,), "How do I change the keyboard layout of the Debian console?",
       "Which files does that end up changing?"),
    _h(DEBREF, (166,), "How can I customise how vim behaves?",
       "Where do I put those settings so they stick?"),
    _h(DEBREF, (225,), "How do I throw away all uncommitted changes in my git working tree?",
       "What if I need a commit back from a branch I deleted?"),
    # gnuplot
    _h(GNUPLOT, (52, 165), "How do I draw a dashed line in gnuplot?",
       "Can I make that the default for a line type?"),
    _h(GNUPLOT, (180,), "How do I make gnuplot write its output to a file?",
       "Which should come first, that or the terminal?"),
    _h(GNUPLOT, (105,), "How do I plot a binary data file in gnuplot?",
       "What number type does it assume unless told?"),
    _h(GNUPLOT, (150,), "What does the covariancevariables option of gnuplot's fit do?",
       "How are those variables named?"),
    _h(GNUPLOT, (270,), "Which characters need escaping in gnuplot's TeX terminals?",
       "what about backslashes inside double quotes?"),
    _h(GNUPLOT, (80,), "How do I draw a radar chart in gnuplot?",
       "Which command sets up how its axes look?"),
    _h(GNUPLOT, (40,), "What does gnuplot's EllipticE function compute?",
       "And what values may its argument take?"),
    # The Bash Reference Manual
    _h(BASHREF, (14,), "How do I make the messages of a Bash script translatable?",
       "What extension does the template file usually get?"),
    _h(BASHREF, (22,), "How do I match a regular expression inside [[ ]] in Bash?",
       "Any tip to avoid quoting trouble with it?"),
    _h(BASHREF, (56,), "What does the exec builtin do in Bash?",
       "And what does its -l option change?"),
    _h(BASHREF, (70,), "How do I show a prompt when reading input with read in Bash?",
       "and to keep backslashes as they are?"),
    _h(BASHREF, (95,), "Which Bash variable counts how deeply shells are nested?",
       "And which one lists the options set -o has turned on?"),
    _h(BASHREF, (130,), "What is bracketed paste mode in Readline?",
       "Is it on by default?"),
    _h(BASHREF, (140,), "Which Readline command clears the screen?",
       "And to wipe the scrollback as well?"),
    # Debian Policy
    _h(POLICY, (33,), "Should a Debian package keep the upstream files' modification times?",
       "and are hard links allowed in it?"),
    _h(POLICY, (80,), "What should the development package of a shared library be called?",
       "What if I need to ship several development versions at once?"),
    _h(POLICY, (98,), "How should a package add its application to the desktop menu?",
       "Where do those files get installed?"),
    _h(POLICY, (120,), "Where are the rules for packaging Perl modules in Debian?",
       "What about Emacs lisp?"),
    _h(POLICY, (140,), "What does the Status field in dpkg's status file record?",
       "And the Config-Version one?"),
    # The Developer's Reference
    _h(DEVREF, (33,), "Why does Debian keep mirrors of its archive?",
       "How do the first-tier ones stay current?"),
    _h(DEVREF, (82,), "What does the boolean type of a debconf template mean?",
       "And for the select one, how are its values given?"),
    _h(DEVREF, (56,), "Do porters follow the usual NMU rules for source uploads?",
       "Is the waiting time the same for them?"),
    _h(DEVREF, (95,), "What is a bug squashing party in Debian?",
       "Do the NMU rules change during one?"),
    # The New Maintainers' Guide
    _h(MAINT, (22,), "How do I adapt an upstream Makefile's install target for a Debian package?",
       "Why is the install -d line needed there?"),
    _h(MAINT, (30,), "Which targets must debian/rules provide?",
       "What is the difference between the arch and indep ones?"),
    _h(MAINT, (44,), "What must be installed before a complete rebuild of a Debian package?",
       "Once it builds, how do I sign the results?"),
    # The bash manual page
    _h(MANPAGE, (30,), "Which special file names does bash handle itself in redirections?",
       "Can I open a TCP connection that way?"),
    _h(MANPAGE, (10,), "What does += do to a Bash variable?",
       "And when it is an array?"),
    # The LaTeX class guide
    _h(CLS, (25,), "How do I make a LaTeX command robust so it works in moving arguments?",
       r"Do I still need a \relax before \ifmmode then?"),
    _h(CLS, (22,), "What happens to unknown options given to a package with \\DeclareOption*?",
       "In what order does the code of the declared ones run?"),
    # Formats without pages
    _h(SQLITE, None, "What is a CHECK constraint in an SQLite table?",
       "Can the expression in it use a subquery?"),
    _h(REBASE, None, "How can I rebase when I have uncommitted changes?",
       "Can I make that the default?"),
)  # fmt: skip
