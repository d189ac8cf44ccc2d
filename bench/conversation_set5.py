"""A fifth tuning set for `ragdoll bench conversation` (part "tuned5"), written for
issue #19's extractive follow-up target before anything was measured on it: two-turn
conversations over the real manuals whose first question stands alone and whose
follow-up means little without it, phrased as people type them ("What about
dpkg-divert?", "and with someone's public key instead?", "And every week?", "which one
is faster?", "is it the same on Windows?", "Where is that setting kept?", "Can I
rely on that for security?", "That command, where does it save what I typed?"), some
naming a new thing that leans on the old one. `pages` are the PDF's 1-based pages
holding the follow-up's answer, read from the kept index's chunks (a chunk counts by
its first page); None for formats without pages. The author had read the tuning sets
and no held-out conversation; a test checks that no page of another set is reused.
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
from bench.conversation_set import two_turns as _t

TUNING5: tuple[TwoTurns, ...] = (
    # The Debian Reference
    _t(DEBREF, (91,), "What is the dpkg-statoverride command for?", "What about dpkg-divert?"),
    _t(
        DEBREF,
        (84,),
        "How can I check that the files of installed packages have not been changed?",
        "Can I rely on that for security?",
    ),
    _t(
        DEBREF,
        (218,),
        "How do I create a new GnuPG key pair?",
        "And how do I give my public key to someone?",
    ),
    _t(
        DEBREF,
        (185,),
        "Which tool creates an ext4 filesystem?",
        "And the one that checks it for errors?",
    ),
    _t(
        DEBREF,
        (209,),
        "How do I copy a whole directory tree to another host with rsync?",
        "is there a way with tar too?",
    ),
    _t(
        DEBREF,
        (207,),
        "Which compression tools are available on Debian?",
        "which one is faster than gzip?",
    ),
    _t(
        DEBREF,
        (220,),
        "How do I make an MD5 checksum file for some files?",
        "and check them against it later?",
    ),
    _t(
        DEBREF,
        (102,),
        "How do I make APT download through an HTTP proxy?",
        "Where is that setting kept?",
    ),
    _t(DEBREF, (184,), "What is a partition's UUID good for?", "How do I find it?"),
    _t(
        DEBREF,
        (99,),
        "How do I track testing but install a few packages from unstable?",
        "And have those follow unstable automatically?",
    ),
    _t(
        DEBREF,
        (51,),
        "How do I record everything I do in a shell session?",
        "That command, where does it save what I typed?",
    ),
    # The Bash reference
    _t(BASHREF, (26,), "How do I define a function in Bash?", "How do I return a value from it?"),
    _t(
        BASHREF,
        (16,),
        "What is the exit status of a pipeline in Bash?",
        "Can I make it fail when any command in it fails?",
    ),
    _t(
        BASHREF,
        (110,),
        "How do I change what the Bash prompt shows?",
        "Which escape gives the hostname?",
    ),
    _t(
        BASHREF,
        (32,),
        "What does a tilde at the start of a word expand to in Bash?",
        "And ~+ or ~-?",
    ),
    # gnuplot
    _t(
        GNUPLOT,
        (124,),
        "How do I give each line of a gnuplot plot its own title in the key?",
        "and leave one out of the key?",
    ),
    _t(
        GNUPLOT,
        (187,),
        "How do I plot a parametric curve in gnuplot?",
        "What range does the parameter take by default?",
    ),
    _t(GNUPLOT, (46,), "How do gnuplot's cairo terminals find fonts?", "and the png one?"),
    _t(
        GNUPLOT,
        (36, 57),
        "Where does gnuplot look for the user's start-up file?",
        "is it the same on Windows?",
    ),
    # Debian Policy
    _t(
        POLICY,
        (26,),
        "What does Debian Policy mean by a virtual package?",
        "So can another package just depend on it?",
    ),
    _t(
        POLICY,
        (90,),
        "May a Debian package install files into /usr/local?",
        "Who should own the directories it makes there?",
    ),
    # The Developer's Reference
    _t(
        DEVREF,
        (99,),
        "How do I give a Debian Maintainer permission to upload my package?",
        "Is there a tool that makes it simpler?",
    ),
    _t(
        DEVREF,
        (38,),
        "How should I test a package before uploading it?",
        "and the lintian check, how do I run it?",
    ),
    # The New Maintainers' Guide
    _t(
        MAINT,
        (55,),
        "How do I update my package to a new upstream release?",
        "Is there a tool that downloads it for me?",
    ),
    _t(MAINT, (41,), "What is the debian/watch file for?", "what about files on SourceForge?"),
    # The LaTeX class guide
    _t(
        CLS,
        (7, 11),
        "How does a LaTeX class load the class it is based on?",
        "and pass its own options along?",
    ),
    _t(
        CLS,
        (9,),
        "Why should a package no longer redefine \\document or \\enddocument?",
        "what should it use instead?",
    ),
    # Files without pages
    _t(
        REBASE,
        None,
        "When would I use the --onto option of git rebase?",
        "Can you show an example?",
    ),
    _t(
        BISECT,
        None,
        "How do I begin hunting for a bad commit with git bisect?",
        "And how do I get back to where I was when I'm done?",
    ),
    _t(
        SQLITE,
        None,
        "What does a GENERATED ALWAYS AS column do in SQLite?",
        "Can it be stored on disk?",
    ),
    _t(APT, None, "What does apt-get upgrade do?", "And if it needs to remove packages?"),
    _t(
        APT,
        None,
        "How do I install a package with apt-get?",
        "why would it pull in other packages?",
    ),
)
