"""An eighth held-out set for `ragdoll bench conversation` (part "held_out8"), written
after the seventh held-out set (bench/conversation_set10.py) so that the next
change can be judged on conversations nothing was tuned on. Two-turn conversations
over the real manuals: the first question names its subject, the follow-up means
little without it, typed as people type them. Some follow-ups are answered on the page
of the first question's answer, others on another page of the same file (bash-manpage.pdf
22 and 73, bashref.pdf 34 and 167, gnuplot.pdf 181, developers-reference.pdf 96: the
first question's answer is on the page before, or on 164 for 167).

How it was written (set11, blind to the product's results): the author read the form of
the earlier sets (set 10's docstring and first entries, its test, the shared checks in
tests/bench/blind_set_checks.py, the TwoTurns type and file names of
bench/conversation_set.py and set 6's MANPAGE constant; the grep that found that
constant also printed two of set 6's first questions, which nothing here was written
from), never the bench's reports or figures for any conversation nor the other held-out
sets' questions or pages; pages were chosen among those no other set uses (checked by a
script printing only the (file, page) pairs already taken), each follow-up's answer read
on the page's own text (PDFium's text of that physical page; the text itself for the txt
and html files), and its page confirmed by a script finding a distinctive phrase of the
answer on exactly the listed pages and no other page of that file, or in the file for
the txt and html ones (46 checks in the final run: a phrase a conversation, and a second
one for bashref.pdf 34, debian-policy.pdf 122 and 137, developers-reference.pdf 96 and
latex-clsguide.pdf 27 and 31; all found where listed, 0 failures; quote marks, hyphens
and dashes, PDFium's hyphenation marks and all whitespace (PDFium drops some spaces of
the bash manual page) were normalised away before matching, and the html files' phrases
were matched on their text without markup). No page is listed twice: each conversation
lists one page, and no page serves two conversations. Two checks of the first run
failed and were settled before the commit: the phrase for debian-reference.pdf 97 was
also on 99, whose sentence about the experimental archive uses the same words (a page
another set uses), so the rest of 97's own sentence was matched, the answer kept; the
phrase for git-bisect.txt missed for want of the backquotes round `git bisect reset
HEAD`. Reading the pages for the same answer in other words, which a phrase does not
catch, changed five more before the commit: set -e in init.d scripts (debian-policy.pdf
94) is also stated on 105 and in the upgrading checklist (173), and install-info's
triggers (122) in the checklist too (168, 174), so the first gave way to dpkg-source's
warnings (137) and the second to the info section line on 122; restricted mode that
cannot be unset (bashref.pdf 75) is also among the restricted shell's rules on 112 (a
page another set uses), so privileged mode on 75 was asked instead; how long to wait for
a missing maintainer (developers-reference.pdf 96) starts on 95 (another set's page),
so the follow-up asks what to find out about them, on 96 alone; and the team-upload
follow-up (61) asks for the changelog line, which 63's mention of team uploads lacks.
The eight conversations about the bash manuals have rows in conversation_also.json (part
"held_out8"): seven with the other manual's page stating the same answer, its phrase
matched on exactly that page by the same script (8 checks, 0 failures), and none for
configure's cache (bashref.pdf 167), which the manual page does not describe.
Nothing was searched, asked, embedded or benchmarked before the set was committed.
`pages` are 1-based PDF pages; None for formats without pages.
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


HELD_OUT8: tuple[TwoTurns, ...] = (
    # The bash manual page
    _h(MANPAGE, (22,), "How do I make bash expand a range of numbers like 1 to 10 inside braces?",
       "can the numbers be zero-padded?"),
    _h(MANPAGE, (37,), "What does bash do when I type a command it can't find anywhere in PATH?",
       "can i plug in my own handler for that?"),
    _h(MANPAGE, (73,), "How do I give bash's read a time limit so my script doesn't wait forever?",
       "what exit status do i get if it runs out?"),
    _h(MANPAGE, (76,), "What does the shift builtin do to my script's arguments?",
       "and if i shift by more than there are?"),
    # The Bash Reference Manual
    _h(BASHREF, (34,), "How do I pull a substring out of a variable in bash?",
       "can i count from the end instead?"),
    _h(BASHREF, (75,), "What does privileged mode, set -p, do in bash?",
       "and what happens when i switch it off?"),
    _h(BASHREF, (94,), "How can my bash prompt show only the last few directories of the path?",
       "what gets put in place of the part it cuts?"),
    _h(BASHREF, (167,), "How do I compile and install Bash from its source code?",
       "can i stop it caching the test results?"),
    # Debian Policy
    _h(POLICY, (32,), "How should the shell commands in debian/rules deal with errors?",
       "what about loops and if statements?"),
    _h(POLICY, (51,), "What does the Distribution field of a .changes file hold?",
       "can it name more than one?"),
    _h(POLICY, (122,), "Where should a Debian package put its info documents?",
       "how do i choose which section it's listed under?"),
    _h(POLICY, (137,), "Which changes to the upstream source make dpkg-source stop with an error?",
       "and which ones does it only warn about?"),
    # Debian Reference
    _h(DEBREF, (42,), "What is a named pipe, or FIFO, on Linux?",
       "does it keep what i write to it?"),
    _h(DEBREF, (97,), "How do I install a newer package from bullseye-backports on Debian stable?",
       "do i need to pin it in the preferences file?"),
    _h(DEBREF, (197,), "How do I encrypt a USB stick on Debian?",
       "does that cost me anything?"),
    _h(DEBREF, (211,), "How long can backup media like CDs or tapes be expected to last?",
       "and how many rewrites does flash memory take?"),
    _h(DEBREF, (243,), "How do I keep bashisms out of my shell scripts so they run under dash?",
       "is echo safe to use?"),
    # Debian Developer's Reference
    _h(DEVREF, (43,), "Who decides the section and priority my package gets in the Debian archive?",
       "how do i get it changed?"),
    _h(DEVREF, (61,), "How do I mark a QA upload in my package's Debian changelog?",
       "and a team upload?"),
    _h(DEVREF, (89,), "What counts as a pristine upstream tarball in Debian packaging?",
       "when am i allowed to repackage it?"),
    _h(DEVREF, (96,), "What can I do when a Debian maintainer seems to have gone missing?",
       "what info should i dig up about them?"),
    # gnuplot
    _h(GNUPLOT, (33,), "How do I put comments in a gnuplot script?",
       "what if the comment line ends with a backslash?"),
    _h(GNUPLOT, (99,), "How can I look at the commands I've already typed in gnuplot?",
       "can i write them out to a file?"),
    _h(GNUPLOT, (116,), "How do I tell gnuplot which columns of my data file to plot?",
       "can i refer to a column by its header?"),
    _h(GNUPLOT, (181,), "What does gnuplot do when integer arithmetic overflows?",
       "does that apply to bit shifts too?"),
    # LaTeX2e for class and package writers
    _h(CLS, (4,), "Will the LaTeX team change the standard classes if I find their design wrong?",
       "so what do they suggest i do instead?"),
    _h(CLS, (27,), "How do I define an environment that displays text numbered like an equation?",
       "why do i get a stray space after it mid-paragraph?"),
    _h(CLS, (31,), "What should I use instead of LaTeX 2.09's internal font commands like \\tenrm?",
       "and the size ones like \\vpt?"),
    # Debian New Maintainers' Guide
    _h(MAINT, (16,), "How are programs that use Autotools usually built from source?",
       "how do i change where it installs to?"),
    _h(MAINT, (26,), "How long should the short description in debian/control be?",
       "can the long one have blank lines?"),
    _h(MAINT, (57,), "How do I upload a finished package with dupload?",
       "where does its configuration live?"),
    # git rebase, git bisect, SQLite CREATE TABLE, the APT guide (no pages)
    _h(REBASE, None, "Can I run git rebase when my working tree has uncommitted changes?",
       "is there any catch?"),
    _h(REBASE, None, "How do I make git rebase run a command after each commit it replays?",
       "what if that command fails?"),
    _h(REBASE, None, "What does the --update-refs option of git rebase do?",
       "what about branches checked out in another worktree?"),
    _h(BISECT, None, "How do I end a git bisect session and get back to my branch?",
       "can i stay on the commit it's testing instead?"),
    _h(BISECT, None, "I marked a commit wrongly during git bisect, how do I fix that?",
       "what do i do with the edited log?"),
    _h(SQLITE, None, "What does IF NOT EXISTS do in an SQLite CREATE TABLE statement?",
       "and if an index already has that name?"),
    _h(SQLITE, None, "What happens when I insert a NULL into a NOT NULL column in SQLite?",
       "is it checked when i read the table too?"),
    _h(APT, None, "How do I make apt-get only download packages without installing them?",
       "how do i install them later?"),
    _h(APT, None, "What is the status line apt-get shows while it downloads?",
       "can i turn it off when logging to a file?"),
)  # fmt: skip
