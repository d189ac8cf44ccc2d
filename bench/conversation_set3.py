"""A third tuning set for `ragdoll bench conversation` (part "tuned3"), written for the
follow-up detector (engine/answer/conversation_dependence.py) by an engineer who had
not read either held-out set: two-turn conversations over the real documents whose
follow-ups are phrased the way people type them ("Any exceptions?", "What if I
don't?", "Can I change that?", "And symlinks?", "show me the command"), and short
questions that stand alone though they look like follow-ups (`STANDALONE3`: a pronoun
whose noun is in the question, a bare "What is anacron?"), to keep the detector from
taking first questions for follow-ups. `pages` are the PDF's 1-based pages holding
the follow-up's answer, read from each page's text (PDFium); None for files without
pages. Written and committed before the detector was measured on it.
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

TUNING3: tuple[TwoTurns, ...] = (
    # Bash reference: set -e's exceptions, arrays, echo, readonly, startup, rbash
    _t(BASHREF, (73,), "What does set -e do in Bash?", "Any exceptions?"),
    _t(
        BASHREF, (36, 107), "How do I declare an indexed array in Bash?", "How do I get its length?"
    ),
    _t(
        BASHREF,
        (65,),
        "How do I print text without a newline at the end in Bash?",
        "Do backslash escapes work too?",
    ),
    _t(
        BASHREF, (61,), "How do I make a shell variable read-only in Bash?", "Can I unset it later?"
    ),
    _t(BASHREF, (99,), "What is a login shell?", "Which files does it read when it starts?"),
    _t(BASHREF, (111,), "What can't a user do in a restricted Bash shell?", "How do I start one?"),
    # gnuplot: title font, SVG output, the key
    _t(GNUPLOT, (210,), "How do I put a title on a gnuplot graph?", "Can I change its font?"),
    _t(GNUPLOT, (285,), "How do I save a gnuplot plot as a PNG image?", "What about SVG?"),
    _t(
        GNUPLOT,
        (159, 161),
        "How do I show a legend on a gnuplot plot?",
        "Can I put it outside the graph?",
    ),
    # Debian Policy: Standards-Version, log files, maintainer scripts failing
    _t(
        POLICY,
        (29,),
        "What does the Standards-Version field of a Debian package say?",
        "How often should I update it?",
    ),
    _t(
        POLICY,
        (110,),
        "Where should a Debian package install its configuration files?",
        "Where do logs go?",
    ),
    _t(
        POLICY,
        (62,),
        "In what order does dpkg run the maintainer scripts during an upgrade?",
        "What if one of them fails?",
    ),
    # Developer's Reference: the DELAYED queue
    _t(DEVREF, (42,), "What is the DELAYED upload queue in Debian?", "How many days can I choose?"),
    # Debian Reference: login shell, sudo, scheduled jobs
    _t(DEBREF, (47,), "How do I change my login shell on Debian?", "Is that a good idea?"),
    _t(
        DEBREF,
        (33,),
        "How can a normal user get root privileges with sudo on Debian?",
        "Can I skip the password?",
    ),
    _t(
        DEBREF,
        (171,),
        "How do I run a program regularly on a schedule in Debian?",
        "What if the machine isn't on all day?",
    ),
    # New Maintainers' Guide: dh overrides, links
    _t(
        MAINT,
        (34,),
        "What does the dh command do in debian/rules?",
        "Can I change what one of its steps does?",
    ),
    _t(
        MAINT,
        (38,),
        "How do I install extra files into a package with debian/install?",
        "And symlinks?",
    ),
    # LaTeX class guide: passing options on, undeclared options
    _t(
        CLS,
        (13, 18),
        "How can a LaTeX class hand options on to another class?",
        "And to a package?",
    ),
    _t(
        CLS,
        (12,),
        "What happens when a LaTeX package gets an option it has not declared?",
        "Can I make that a warning?",
    ),
    # git-rebase: abort, autosquash's default, fixup
    _t(
        REBASE,
        None,
        "How do I continue a git rebase after fixing a conflict?",
        "And if I want to give up?",
    ),
    _t(REBASE, None, "What does --autosquash do in git rebase?", "Is that the default?"),
    _t(
        REBASE,
        None,
        "What does the squash command do in an interactive rebase?",
        "How is fixup different?",
    ),
    # git-bisect: log and replay, old/new terms
    _t(BISECT, None, "How do I see what I have done so far in a git bisect?", "Can I replay that?"),
    _t(
        BISECT,
        None,
        "Can git bisect look for the commit that fixed a bug instead of one that broke it?",
        "What do I call the commits then?",
    ),
    # SQLite CREATE TABLE: IF NOT EXISTS, AS SELECT, DEFAULT
    _t(SQLITE, None, "What does IF NOT EXISTS do in an SQLite CREATE TABLE?", "What if I don't?"),
    _t(
        SQLITE,
        None,
        "How do I create a table from the results of a query in SQLite?",
        "Does it keep the primary key?",
    ),
    _t(
        SQLITE,
        None,
        "What is the DEFAULT clause of a column in SQLite?",
        "Can it be an expression?",
    ),
    # APT guide: download only, updating the lists
    _t(
        APT,
        None,
        "How do I download packages with apt-get without installing them?",
        "How do I install them afterwards?",
    ),
    _t(APT, None, "How does apt-get learn about new versions of packages?", "show me the command"),
    _t(
        APT,
        None,
        "Should I look at what apt-get dist-upgrade is going to do before it runs?",
        "why?",
    ),
    _t(BASHREF, (77,), "What does set -u do in Bash?", "how do I turn it off again?"),
)

# Questions that stand alone (first questions of a conversation), short or holding a
# pronoun whose noun is in the question: none should be taken for a follow-up.
STANDALONE3: tuple[str, ...] = (
    "What is it that dpkg-divert does?",
    "What does fakeroot do?",
    "What is a coprocess?",
    "What is anacron?",
    "Who can sponsor an upload?",
    "What is debconf for?",
    "What is a tilde for in a Debian version number?",
    "What does git bisect skip do?",
    "Is it safe to rebase a branch that others have pulled?",
    "How do I undo a git rebase?",
    "Where are the Bash startup files?",
    "What is a conffile?",
    "How does gnuplot handle missing data?",
    "What is an epoch in a version number?",
    "What does the shopt builtin do?",
    "How do I find which package owns a file?",
    "Does Bash read .bashrc when it runs a script?",
    "What is a WITHOUT ROWID table and when should I use it?",
    "If a package is orphaned, who maintains it?",
    "How do I tell git bisect that a commit is good?",
    "Why does lintian complain about my package?",
    "What is the FHS?",
)
