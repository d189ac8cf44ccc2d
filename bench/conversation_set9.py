"""A sixth held-out set for `ragdoll bench conversation` (part "held_out6"), written
after the fifth held-out set (bench/conversation_set8.py) so that the next
change can be judged on conversations nothing was tuned on. Two-turn conversations
over the real manuals: the first question names its subject, the follow-up means
little without it, typed as people type them. Some follow-ups are answered on the page
of the first question's answer, others on another page of the same file.

How it was written (set9, blind to the product's results): the author read the form of
the earlier sets (set 8's docstring, a few of its entries and its test, and the shared
checks in tests/bench/blind_set_checks.py), never the bench's reports or figures
for any conversation; pages were chosen among those no other set uses (checked by a
script printing only the (file, page) pairs already taken), each follow-up's answer read
on the page's own text (PDFium's text of that physical page; the text itself for the txt
and html files), and its page confirmed by a script finding a distinctive phrase of the
answer on exactly the listed pages and no other page of that file (41 checks: a phrase
a conversation, and a second one for bash-manpage.pdf 79; all found where listed, 0
failures; whitespace, quote marks and PDFium's hyphenation marks were normalised before
matching, and the html file's phrase was matched on its text without markup). A second
page is listed where the same answer is also stated there: bash-manpage.pdf 27 and 79,
bashref.pdf 143 and 144. Two first picks were changed before the commit: a phrase first
taken for bashref.pdf 143 was also found on an index page, so a phrase of the answer's
own text was used, which found it stated again on 144; and a bash-manpage.pdf 83 pick
too close in subject to an earlier set's was replaced by another answer on that page.
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
    SQLITE,
    TwoTurns,
    two_turns,
)
from bench.conversation_set6 import MANPAGE

_h = partial(two_turns, held_out=True)


HELD_OUT6: tuple[TwoTurns, ...] = (
    # The bash manual page
    _h(MANPAGE, (75,), "How do I stop bash from clobbering an existing file when I use >?",
       "how do i force it for one file anyway?"),
    _h(MANPAGE, (31,), "What's the shortest way in bash to send stdout and stderr to one file?",
       "and to append to it instead?"),
    _h(MANPAGE, (27, 79), "What does bash do with a glob pattern that matches no files?",
       "can i make it just vanish instead?"),
    _h(MANPAGE, (83,), "How do I check the file creation mask from bash?",
       "can it print it like rwx instead of octal?"),
    _h(MANPAGE, (71,), "How do I push a directory onto bash's directory stack?",
       "can it do that without cd'ing there?"),
    # The Debian Reference
    _h(DEBREF, (82,), "How do I purge the config files that removed packages left behind?",
       "can i see the list before purging?"),
    _h(DEBREF, (98,), "How do I keep apt from pulling in certain packages via Recommends?",
       "and to install one thing from unstable?"),
    _h(DEBREF, (38,), "What decides the permissions of newly created files on Debian?",
       "where do i set it so it sticks?"),
    _h(DEBREF, (122,), "How can I give users limited root powers on Debian and log what they do?",
       "is there a sample config somewhere?"),
    _h(DEBREF, (191,), "How do I create an empty disk image file that can grow to a few gigabytes?",
       "is there a tool made for that besides dd?"),
    _h(DEBREF, (196,), "Can I recover a file I deleted while a program still has it open?",
       "how do i find it if i don't know the pid?"),
    _h(DEBREF, (223,), "How do I set my name and email globally for git?",
       "and how do i check what's set?"),
    # gnuplot
    _h(GNUPLOT, (250,), "Can gnuplot draw a plot with plain ascii characters in the terminal?",
       "how big is it by default?"),
    _h(GNUPLOT, (174,), "How do I put small ticks between the major ones on gnuplot's x axis?",
       "and how do i remove them again?"),
    _h(GNUPLOT, (145,), "How do I get gnuplot to show a comma as the decimal point on tick labels?",
       "does that change how it reads my data too?"),
    _h(GNUPLOT, (225,), "How do I draw a horizontal line at y=0 across a gnuplot graph?",
       "can i make it thicker and in another color?"),
    _h(GNUPLOT, (168,), "How do I set the margins around a gnuplot plot by hand?",
       "how do i go back to automatic?"),
    _h(GNUPLOT, (158,), "My points in gnuplot overlap exactly, how can I spread them out a bit?",
       "can it shift them vertically instead?"),
    # The Bash Reference Manual
    _h(BASHREF, (78,), "Is there a shell option so typing just a directory name cds into it?",
       "and one that fixes typos in cd paths?"),
    _h(BASHREF, (165,), "After compiling bash from source, how do I remove the object files?",
       "and the files configure created too?"),
    _h(BASHREF, (128,), "How do I make bash's tab completion ignore upper and lower case?",
       "can it treat dashes and underscores alike?"),
    _h(BASHREF, (101,), "How can a startup script check whether bash is running interactively?",
       "any other way than looking at $-?"),
    _h(BASHREF, (160,), "How do I delete one entry from my bash history?",
       "what about several in a row?"),
    _h(BASHREF, (143, 144), "Which readline key swaps the two characters before the cursor?",
       "is there one for whole words?"),
    # The Debian Policy Manual
    _h(POLICY, (93,), "What home directory should a system user get if it shouldn't have one?",
       "do the autobuilders use that too?"),
    _h(POLICY, (112,), "Do file names a package installs in the PATH directories have to be ASCII?",
       "and the files outside of those?"),
    _h(POLICY, (121,), "Where should a package put its manual pages, and in what form?",
       "should they be compressed?"),
    _h(POLICY, (91,), "Which directory is the system-wide mail spool on Debian?",
       "what about /var/spool/mail?"),
    _h(POLICY, (54,), "What should the Homepage field of a source package contain?",
       "can i wrap it in angle brackets?"),
    # The Developer's Reference
    _h(DEVREF, (58,), "Do the autobuilders build packages from non-free?",
       "who do i write to about it?"),
    _h(DEVREF, (73,), "Any advice on writing the one-line synopsis of a Debian package?",
       "should it end with a full stop?"),
    _h(DEVREF, (109,), "What tool makes a dummy package just to satisfy a dependency?",
       "is it also used for meta-packages?"),
    _h(DEVREF, (50,), "How do I move one of my packages from non-free to main?",
       "and if it's only the subsection?"),
    # The New Maintainers' Guide
    _h(MAINT, (17,), "What characters may a Debian source package name contain?",
       "how long should it be?"),
    _h(MAINT, (51,), "How do I check my .changes file for common packaging mistakes?",
       "what does a W: line mean?"),
    _h(MAINT, (53,), "A bug was filed against my package; how do I make a new Debian revision?",
       "can the bug get closed automatically?"),
    # The LaTeX class guide
    _h(CLS, (15,), "In the LaTeX class guide's newsletter example, what class does it build on?",
       "how does it turn off section numbers?"),
    # Files without pages
    _h(APT, None, "Can apt-get fetch packages without installing them?",
       "how do i install them later on?"),
    _h(BISECT, None, "During git bisect, how do I skip a commit I can't test?",
       "can i skip a whole range at once?"),
    _h(SQLITE, None, "Is there a limit on the number of columns in an SQLite table?",
       "and how much can one row hold?"),
)  # fmt: skip
