"""A fifth held-out set for `ragdoll bench conversation` (part "held_out5"), written
after the fourth held-out set (bench/conversation_set7.py) so that the next
change can be judged on conversations nothing was tuned on. Two-turn conversations
over the real manuals: the first question names its subject, the follow-up means
little without it, typed as people type them. Some follow-ups are answered on the page
of the first question's answer, others on another page of the same file.

How it was written (set8, blind to the product's results): the author read the form of
the earlier sets (bench/conversation_set.py and set 7's module and test), never
the bench's reports or figures for any conversation; pages were chosen among those no
other set uses (checked by a script printing only the (file, page) pairs already taken),
each follow-up's answer read on the page's own text (PDFium's text of that physical
page; the text itself for the txt and html files), and its page confirmed by a script
finding a distinctive phrase of the answer on exactly that page (40 phrases, one a
conversation, all found where listed; the html file's phrase was matched on its text
without markup, a first try on the raw html missing it only for the tags inside the
sentence; a second page is listed where the same answer is also stated there:
bashref.pdf 23 and 87). Two first picks, bashref.pdf 70 and 109, were misread off that
list; the set's test found them taken and they were replaced by 68 and 63 before the
commit. Nothing was searched, asked, embedded or benchmarked before the set was
committed. `pages` are 1-based PDF pages; None for formats without pages.
"""

from __future__ import annotations

from functools import partial

from bench.conversation_set import (
    APT,
    BASHREF,
    BISECT,
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


HELD_OUT5: tuple[TwoTurns, ...] = (
    # The bash manual page
    _h(MANPAGE, (82,), "How do I limit resources like core file size for programs run from bash?",
       "what's the difference between hard and soft?"),
    _h(MANPAGE, (81,), "How do I make a bash script run a command when it gets a signal?",
       "and to put the signal back how it was?"),
    _h(MANPAGE, (18,), "Can bash run something of mine right before each prompt?",
       "can it also shorten the long path in the prompt?"),
    _h(MANPAGE, (16,), "How do I keep repeated commands out of my bash history?",
       "and the ones i start with a space?"),
    _h(MANPAGE, (19,), "Can bash log me out by itself when I leave the terminal idle?",
       "does that apply to read too?"),
    _h(MANPAGE, (78,), "What does ** do in a bash glob pattern?",
       "and if i only want directories?"),
    # The Debian Reference
    _h(DEBREF, (85,), "How do I find out which package a file on my system came from?",
       "and for packages i haven't installed?"),
    _h(DEBREF, (167,), "Where does Debian keep its system logs these days?",
       "how do i write to the journal from a script?"),
    _h(DEBREF, (170,), "How can I keep a history of my changes to the files in /etc?",
       "which version control does it use by default?"),
    _h(DEBREF, (76,), "What are the basic apt and aptitude commands for managing packages?",
       "is there an option to just simulate it first?"),
    _h(DEBREF, (90,), "Where does dpkg keep the status of every installed package?",
       "is there a backup of that file somewhere?"),
    _h(DEBREF, (158,), "How do I set up locales on a fresh Debian system?",
       "where does the system wide default get written?"),
    _h(DEBREF, (128,), "How do I let NetworkManager handle my network on Debian?",
       "which interfaces does it leave alone?"),
    # gnuplot
    _h(GNUPLOT, (144,), "How do I plot data from a CSV file in gnuplot?",
       "what does it split the fields on otherwise?"),
    _h(GNUPLOT, (205,), "How do I save plotted points to a text file, not an image, in gnuplot?",
       "will it overwrite the file if it exists?"),
    _h(GNUPLOT, (194,), "How do I send the output of gnuplot's print command to a file?",
       "and how do i get it back on the terminal?"),
    _h(GNUPLOT, (96,), "How do I control when gnuplot's fit stops iterating?",
       "what happened to the old FIT_LIMIT variable?"),
    _h(GNUPLOT, (157,), "How many lines of command history does gnuplot save when I quit?",
       "can i make it keep all of them?"),
    _h(GNUPLOT, (102,), "How do I make a gnuplot script wait between plots?",
       "and until i press a key in the plot window?"),
    # The Bash Reference Manual
    _h(BASHREF, (23, 87), "How do I check a string against a regular expression in bash?",
       "where do the matched groups end up?"),
    _h(BASHREF, (121,), "How do I wait for background jobs to finish in a bash script?",
       "and just for whichever one ends first?"),
    _h(BASHREF, (122,), "How do I detach a background job from my bash session?",
       "what if i want it to stay in the jobs list?"),
    _h(BASHREF, (68,), "How do I print formatted text with printf in bash?",
       "can it go into a variable instead?"),
    _h(BASHREF, (63,), "How can a bash function tell where it was called from?",
       "can i get the whole call stack?"),
    _h(BASHREF, (20,), "How do I make a numbered menu in a bash script?",
       "what prompt does it show?"),
    # Debian Policy
    _h(POLICY, (36,), "How can someone building my package skip its test suite?",
       "and skip building the docs too?"),
    _h(POLICY, (114,), "Which editor should a Debian program start for the user?",
       "what if EDITOR isn't set?"),
    _h(POLICY, (38,), "What is the debian/watch file in a source package for?",
       "which tool reads it?"),
    _h(POLICY, (55,), "Which control field says where a package's packaging repository is?",
       "and the one for a web page to browse it?"),
    _h(POLICY, (108,), "What does policy require of the scripts that set up a package on install?",
       "do they have to configure every option?"),
    # The Developer's Reference
    _h(DEVREF, (49,), "What version number do I give a security update for stable?",
       "do i include the upstream tarball?"),
    _h(DEVREF, (19,), "How do I get my updated key into the Debian keyring?",
       "how often do they process those?"),
    _h(DEVREF, (27,), "What can I change about myself in the Debian developers database?",
       "can i put my ssh keys there as well?"),
    _h(DEVREF, (98,), "What should I check before sponsoring someone's package?",
       "how do i check debian/copyright?"),
    # The New Maintainers' Guide
    _h(MAINT, (20,), "How do I record my fix to the upstream Makefile as a Debian patch?",
       "and where do i describe what it does?"),
    _h(MAINT, (43,), "How do I apply a patch someone sent me to a 3.0 (quilt) source package?",
       "are patches with fuzz ok?"),
    _h(MAINT, (48,), "My upstream keeps its code in git, is there a tool to package from it?",
       "and if they use subversion?"),
    # Files without pages
    _h(APT, None, "How do I use APT as the install method in dselect?",
       "should i list the cd first or the mirror?"),
    _h(BISECT, None, "Can git bisect test each commit with a script for me?",
       "what if a commit can't even be built?"),
    _h(SQLITE, None, "How do I give a SQLite table a primary key?",
       "is it required for WITHOUT ROWID ones?"),
)  # fmt: skip
