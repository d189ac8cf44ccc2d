"""A seventh held-out set for `ragdoll bench conversation` (part "held_out7"), written
after the sixth held-out set (bench/conversation_set9.py) so that the next
change can be judged on conversations nothing was tuned on. Two-turn conversations
over the real manuals: the first question names its subject, the follow-up means
little without it, typed as people type them. Some follow-ups are answered on the page
of the first question's answer, others on another page of the same file.

How it was written (set10, blind to the product's results): the author read the form of
the earlier sets (set 9's docstring, a few of its entries and its test, and the shared
checks in tests/bench/blind_set_checks.py), never the bench's reports or figures
for any conversation; pages were chosen among those no other set uses (checked by a
script printing only the (file, page) pairs already taken), each follow-up's answer read
on the page's own text (PDFium's text of that physical page; the text itself for the txt
and html files), and its page confirmed by a script finding a distinctive phrase of the
answer on exactly the listed pages and no other page of that file, or in the file for
the txt and html ones (42 checks in the final run: a phrase a conversation, and two more
for gnuplot.pdf 129 and 206; all found where listed, 0 failures; whitespace, quote
marks, hyphens and PDFium's hyphenation marks were normalised before matching, and the
html files' phrases were matched on their text without markup). A second page is listed
where the same answer is also stated there: gnuplot.pdf 129 and 206 (set term push and
pop), maint-guide.pdf 24 and 59 (objdump's NEEDED lines). Five checks of the first run
failed and were settled before the commit: a bashref.pdf 125 answer was also stated on
144 and a gnuplot.pdf 206 one on 180, pages another set uses, so the first was replaced
by another answer on 125 and the second by the terminal push and pop (129 and 206); a
phrase for debian-reference.pdf 32 was also on 143, in its section on shutting a remote
host down over ssh (a page another set uses), so a phrase of 32's own sentence was
matched instead, the answer kept; a phrase for gnuplot.pdf 166 missed its page over a
hyphen broken at a line end (hyphens were then normalised); and one for maint-guide.pdf
24 was also found on 59, which states the same command, so 59 was listed.
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


HELD_OUT7: tuple[TwoTurns, ...] = (
    # The bash manual page
    _h(MANPAGE, (17,), "How many commands does bash keep in its history list out of the box?",
       "what if i set it to a negative number?"),
    _h(MANPAGE, (39,), "Why does bash kill my background jobs when I close the terminal?",
       "how do i keep one of them running?"),
    _h(MANPAGE, (57,), "When does bash write my command history out to the history file?",
       "can it append instead of overwriting it?"),
    _h(MANPAGE, (60,), "How can I bind a key in bash so it runs a shell command?",
       "how do i list the ones i've set up?"),
    _h(MANPAGE, (35,), "How do I test in bash whether one file is newer than another?",
       "and whether two names are the same file?"),
    # The Bash Reference Manual
    _h(BASHREF, (124,), "Which key deletes from the cursor to the end of the line in bash?",
       "oops, how do i undo that?"),
    _h(BASHREF, (125,), "Where does text I cut on the bash command line go?",
       "is it still there on the next line i type?"),
    _h(BASHREF, (149,), "How do I switch my bash command line to vi keybindings?",
       "which mode does it use by default?"),
    _h(BASHREF, (97,), "How do I start bash without it reading my .bashrc?",
       "and read some other file instead?"),
    _h(BASHREF, (12,), "Which characters keep their special meaning inside double quotes in bash?",
       "and can i escape a ' inside single quotes?"),
    # gnuplot
    _h(GNUPLOT, (129,), "How do I put all of gnuplot's settings back to their defaults?",
       "will that rerun my .gnuplot file too?"),
    _h(GNUPLOT, (129, 206), "How can I save just gnuplot's current terminal setting?",
       "is there a way that doesn't write a file?"),
    _h(GNUPLOT, (179,), "How can I leave some room between my data and the border in gnuplot?",
       "what are they set to by default?"),
    _h(GNUPLOT, (208,), "How do I stamp the date and time on a gnuplot graph?",
       "can it go at the top instead?"),
    _h(GNUPLOT, (166,), "Can gnuplot look in other directories for my data and script files?",
       "how do i separate several paths?"),
    _h(GNUPLOT, (127,), "How do I print a value from inside a gnuplot script?",
       "can it go to stderr instead?"),
    # The Debian Policy Manual
    _h(POLICY, (23,), "What should I do with potentially offensive content in a Debian package?",
       "can the main package depend on it?"),
    _h(POLICY, (79,), "Where should a shared library's run-time support files go per policy?",
       "and the static .a version?"),
    _h(POLICY, (96,), "How should maintainer scripts start or stop a package's init script?",
       "does anything have to happen before that?"),
    _h(POLICY, (111,), "How can an admin keep a packaged file's own owner and mode over upgrades?",
       "should maintainer scripts call it too?"),
    _h(POLICY, (142,), "How does dpkg treat a conffile the user edited when the package upgrades?",
       "so can my postinst just edit it?"),
    # The Debian Developer's Reference
    _h(DEVREF, (45,), "How do I close a Debian bug once it's dealt with?",
       "what if the submitter keeps reopening it?"),
    _h(DEVREF, (51,), "How do I get one of my packages removed from Debian?",
       "and from testing only?"),
    _h(DEVREF, (77,), "How do I warn users about a big change in my Debian package?",
       "what format is that file in?"),
    _h(DEVREF, (110,), "Which tools can upload my Debian packages to the archive?",
       "and to delete a file from the upload queue?"),
    # The Debian Reference
    _h(DEBREF, (31,), "How do I get to a text console from the Debian desktop?",
       "and back to the gui after?"),
    _h(DEBREF, (32,), "How do I leave the shell at a Debian console?",
       "and how do i turn the machine off from there?"),
    _h(DEBREF, (163,), "How do I record everything I do in a shell session on Debian?",
       "the file is full of control chars, can i clean it?"),
    _h(DEBREF, (50,), "How do I change the system's default text editor on Debian?",
       "what should EDITOR and VISUAL be set to?"),
    _h(DEBREF, (94,), "My /var/lib/dpkg/status got corrupted, is there a backup somewhere?",
       "what if all of /var is gone?"),
    # Debian New Maintainers' Guide
    _h(MAINT, (24, 59), "How do I work out which build dependencies my Debian package needs?",
       "and for the libraries of one binary?"),
    _h(MAINT, (50,), "How do I test installing the .deb files I just built?",
       "how do i check no file clashes with other packages?"),
    _h(MAINT, (21,), "Upstream's C sources hardcode usr/local/lib, how do I fix that for Debian?",
       "can i confirm each replacement instead?"),
    # LaTeX2e for class and package writers
    _h(CLS, (8,), "Why shouldn't a LaTeX package be loaded with \\input?",
       "what about old files that still \\input my .sty?"),
    _h(CLS, (30,), "How should a LaTeX2e class change the normal font size?",
       "what about \\small and \\large?"),
    # APT, git bisect, git rebase, SQLite CREATE TABLE (text and html: no pages)
    _h(APT, None, "Can apt-get just download packages without installing them?",
       "how do i install them later then?"),
    _h(APT, None, "Does APT delete the .deb files after dselect installs them?",
       "how do i make it ask first?"),
    _h(BISECT, None, "How do I finish a git bisect and get back to where I was?",
       "can i stay on the current commit instead?"),
    _h(REBASE, None, "How do I back out of a git rebase halfway through?",
       "can i stop it but leave HEAD where it is?"),
    _h(SQLITE, None, "What column types do I get from CREATE TABLE ... AS SELECT in SQLite?",
       "does it keep any constraints?"),
)  # fmt: skip
