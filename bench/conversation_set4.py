"""A fourth tuning set for `ragdoll bench conversation` (part "tuned4"), written for
the soft follow-up search (issue #19, eighth round) before any change was tried on it:
two-turn conversations over the real manuals, on pages no other set uses (a test
checks), whose second turn is either a follow-up that means little alone, phrased in
many ways (a pronoun, ellipsis, "what about X", "and the default?", "how do I undo
that", a comparison, "why", "in which file"), or a standalone question on another
subject (`SWITCHES4`: a conversation that changes topic must keep the new question's
own results). `pages` are the PDF's 1-based pages holding the second turn's answer,
read from the kept index's chunks (a chunk counts by its first page). The author had
read the tuning sets and no held-out conversation.
"""

from __future__ import annotations

from bench.conversation_set import (
    BASHREF,
    DEBREF,
    DEVREF,
    GNUPLOT,
    POLICY,
    TwoTurns,
)
from bench.conversation_set import two_turns as _t

TUNING4: tuple[TwoTurns, ...] = (
    # The Debian Reference
    _t(
        DEBREF,
        (41,),
        "What is the difference between a hard link and a symbolic link?",
        "How do I make one?",
    ),
    _t(
        DEBREF,
        (141, 142),
        "How do I log in to a remote machine with SSH without typing a password?",
        "And how do I avoid typing the passphrase every time?",
    ),
    _t(
        DEBREF,
        (194,),
        "How do I split a large file into smaller pieces?",
        "How do I put them back together?",
    ),
    _t(DEBREF, (189,), "How do I make a disk image file of a partition?", "And then mount it?"),
    _t(
        DEBREF,
        (230,),
        "How do I convert a text file from DOS line endings to Unix ones?",
        "What about tabs?",
    ),
    _t(
        DEBREF,
        (257,),
        "How do I compile and install a program from source that uses autotools?",
        "how do I undo that?",
    ),
    _t(
        DEBREF,
        (198,),
        "How do I encrypt a USB memory stick with dm-crypt/LUKS?",
        "How do I mount it afterwards?",
    ),
    _t(
        DEBREF,
        (164,),
        "What is the screen program good for?",
        "How do I get my session back after I log in again?",
    ),
    _t(DEBREF, (219,), "How do I create a GnuPG key?", "And encrypt a file with it?"),
    _t(DEBREF, (172,), "How do I find which process has a file open?", "And a network socket?"),
    _t(
        DEBREF,
        (179,),
        "How do I set the hardware clock?",
        "Should it be kept in UTC or local time?",
    ),
    _t(DEBREF, (157,), "How do I change the locale on a Debian system?", "Why UTF-8?"),
    # gnuplot
    _t(GNUPLOT, (143,), "How do I plot a CSV file in gnuplot?", "What about missing values?"),
    _t(
        GNUPLOT,
        (94,),
        "How do I fit a function to my data in gnuplot?",
        "How far can I trust the errors it reports?",
    ),
    _t(GNUPLOT, (72, 73), "How do I draw a histogram in gnuplot?", "Can I stack the bars?"),
    _t(
        GNUPLOT,
        (65,),
        "How do I draw a box-and-whisker plot in gnuplot?",
        "How far do the whiskers reach by default?",
    ),
    _t(
        GNUPLOT,
        (131, 132),
        "How do I put an arrow on a gnuplot graph?",
        "Can I change what its head looks like?",
    ),
    _t(
        GNUPLOT,
        (209,),
        "How do I plot time series data in gnuplot?",
        "How do I tell it the format of my dates?",
    ),
    _t(
        GNUPLOT,
        (219, 220),
        "How do I control the tic marks on the x axis in gnuplot?",
        "Can I label them with my own text instead?",
    ),
    _t(
        GNUPLOT,
        (195,),
        "How do I change how many points gnuplot samples a function at?",
        "and the default?",
    ),
    # Debian Policy
    _t(POLICY, (49,), "What is an epoch in a Debian version number?", "Should I use them often?"),
    _t(
        POLICY,
        (71, 72),
        "What does the Breaks field mean in a Debian package?",
        "How is Conflicts different?",
    ),
    _t(
        POLICY,
        (106,),
        "What does Debian Policy say about symbolic links in packages?",
        "Absolute or relative?",
    ),
    _t(
        POLICY,
        (92,),
        "How are user and group IDs for system accounts allocated in Debian?",
        "Which range can a package take on its own?",
    ),
    # The Developer's Reference
    _t(
        DEVREF,
        (74,),
        "How should I write the short description of a Debian package?",
        "And the long one?",
    ),
    _t(
        DEVREF, (106,), "What does lintian check in a Debian package?", "How does piuparts compare?"
    ),
    _t(
        DEVREF,
        (76,),
        "What makes a useful changelog entry for a Debian package?",
        "And how do I pick its urgency?",
    ),
    _t(
        DEVREF,
        (65,),
        "How does a package migrate from unstable to testing?",
        "Why might mine be held back?",
    ),
    # The Bash reference
    _t(
        BASHREF,
        (30, 31),
        "How does brace expansion work in Bash?",
        "Can it make a sequence of numbers?",
    ),
    _t(
        BASHREF,
        (162,),
        "What are event designators in Bash history expansion?",
        "And word designators?",
    ),
    _t(
        BASHREF,
        (19,),
        "How do I write a case statement in Bash?",
        "Can one pattern fall through to the next?",
    ),
    _t(
        BASHREF,
        (119, 120),
        "How do I run a command in the background in Bash?",
        "How do I bring it back?",
    ),
    _t(
        BASHREF,
        (126,),
        "How do I bind a key to a readline command in Bash?",
        "In which file do I put that?",
    ),
)

# Second turns that change the subject: found when their own file and page are in the
# top 3, as a follow-up is (the first turn, on another subject, must not pull them).
SWITCHES4: tuple[TwoTurns, ...] = (
    _t(
        DEBREF,
        (192,),
        "How do I draw a histogram in gnuplot?",
        "How do I mount an ISO9660 image file?",
    ),
    _t(
        POLICY,
        (47,),
        "How do I split a large file into smaller pieces?",
        "What does the Standards-Version field of a Debian package mean?",
    ),
    _t(
        BASHREF,
        (116,),
        "How do I create a GnuPG key?",
        "What are the shell compatibility levels of Bash?",
    ),
    _t(
        GNUPLOT,
        (68, 69),
        "What does lintian check in a Debian package?",
        "How do I draw a filled curve in gnuplot?",
    ),
    _t(
        DEBREF,
        (195,),
        "How does brace expansion work in Bash?",
        "How do I erase an entire hard disk on Debian?",
    ),
    _t(
        DEVREF,
        (97,),
        "How do I put an arrow on a gnuplot graph?",
        "How do I sponsor a new package as a Debian developer?",
    ),
    _t(
        DEVREF,
        (75,),
        "What is an epoch in a Debian version number?",
        "What are the Vcs-Browser and Vcs-Git fields for?",
    ),
    _t(
        DEBREF,
        (178,),
        "How do I write a case statement in Bash?",
        "How do I see who else is logged in to the system?",
    ),
    _t(
        DEVREF,
        (90,),
        "How do I plot a CSV file in gnuplot?",
        "How are debug packages built automatically in Debian?",
    ),
    _t(
        GNUPLOT,
        (101,),
        "What makes a useful changelog entry for a Debian package?",
        "How do I run gnuplot commands from a file?",
    ),
    _t(
        DEVREF,
        (111,),
        "How do I set the hardware clock?",
        "What does the reportbug tool do?",
    ),
)
