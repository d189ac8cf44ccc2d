"""Whether a question of a conversation leans on an earlier turn, as a reader would judge it.

A follow-up is searched history-aware (engine/rag/answer/conversation.py): the earlier
question blended in, the files the last answer drew on favoured. A question that
stands alone but is taken for a follow-up is pulled towards the earlier subject
("How do I start a git bisect?" searched with a bash question), so the signals are
the ones a reader uses, each cheap enough to run on every question:

- an opener ("and …", "what about …") or a closing "then?": a follow-up;
- a pronoun ("it", "they", "its") that nothing in the question can stand for: a
  noun before it, across a clause boundary for "it"/"they" ("after installing
  them", not "how does pbuilder differ from it": a pronoun does not stand for
  its own clause's subject), or anywhere before a possessive ("does bash apply
  its expansions");
- a phrase pointing back ("which one", "the whole thing", "like that?"), a
  demonstrative standing for a thing ("Is that the default?", "Can I make that a
  warning?"), a comparison with nothing to compare to ("How is fixup different?",
  "Do backslash escapes work too?") or a verb phrase left out ("What if I don't?");
- few content words, none of them specific: a word shaped like a name (a path, an
  option, an identifier with -, /, _, ., digits, CamelCase, an acronym, a capital
  inside the question: "Bash", "Debian") or rare in the collection (`specific`, from
  the store's full-text index) names its subject ("What is dh_make used for?").
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable

# A question with at most this many content words and none specific leans on the last turn
# (4 would catch "What exit code means the commit should be skipped?" but take "What are
# shared library packages in Debian?" for a follow-up too: `ragdoll bench conversation`).
FEW_CONTENT_WORDS = 3
# A word in at least this share of the collection's chunks is common: it names no
# subject of its own. Set before measuring; on the tuned sets of `ragdoll bench
# conversation` every share from 0.8 % to 50 % judges alike.
COMMON_SHARE = 0.01
# ... and in at least this many chunks: in a small collection every word it holds is
# in 1 % of it, which says nothing about the word.
MIN_COMMON_CHUNKS = 20


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


_WORD = re.compile(r"[\w][\w.+#/-]*", re.UNICODE)
# For judging a question, a leading "-" or "--" is kept: an option ("--onto", "-x") is
# named by its shape (not in search text: the full-text parser reads "-" as "not").
_NAMED = re.compile(r"(?<![\w-])-{0,2}[\w][\w.+#/-]*", re.UNICODE)
_TOKEN = re.compile(r"[\w][\w.+#/'-]*|[,;:()]", re.UNICODE)
_SHAPED = re.compile(r"^-|[\w][-/_.#+]|\d|[a-z][A-Z]|^[A-Z]{2,}s?$")
_OPENERS = ("and ", "what about", "how about", "and what", "and how", "also", "then ", "but ")
# "… a class or a package then?", "What should I use instead?": a closing word that
# answers to something said before.
# "… work too?", "… as well?", "How is fixup different?": a comparison or an addition
# whose other side was said before (a question that names it says "different from").
_CLOSERS = (" then", " instead", " too", " as well", " either", " different", " differently")
# Pronouns that point back; "that", "then", "one" are as often relative or counting
# words in a question that stands alone ("how do I tell git that the commit is good?").
_PRONOUNS = frozenset(["it", "it's", "they", "them", "these", "those", "he", "she", "him"])
# "mine", "yours": a possessive standing for a noun named before ("Why might mine be
# held back?"), as "theirs" does.
_POSSESSIVES = frozenset(["its", "their", "theirs", "his", "her", "mine", "yours", "ours", "hers"])
_ALWAYS_BACK = frozenset(["former", "latter"])
# Where a clause begins: a pronoun after one can stand for a noun before it
# ("before it is built", "because they send passwords", "and push it").
_BOUNDARIES = frozenset(
    [
        ",",
        ";",
        "and",
        "or",
        "but",
        "so",
        "before",
        "after",
        "when",
        "whenever",
        "while",
        "because",
        "if",
        "unless",
        "until",
        "since",
        "once",
        "though",
        "although",
        "instead",
        "without",
        "than",
        "that",
        "which",
        "who",
        "where",
        "whether",
    ]
)
# Words after which the next word is a verb, not a noun that a pronoun could stand for.
_BEFORE_A_VERB = frozenset(["i", "you", "we", "they", "it", "he", "she", "who", "to"])
# Stand-ins for a noun: "which one", "the ones" (unless a noun before them in the
# question is what they stand for); "the whole thing" always leans on the turn before.
_ONES = frozenset(["one", "ones"])
_THINGS = frozenset(["thing", "things"])
_POINTERS = frozenset(["the", "which", "that", "this"])
# "which one of the priorities", "the one that …": the question says which.
_SAYS_WHICH = frozenset(["of", "that", "which", "who", "in", "for", "from", "with"])
_DEMONSTRATIVES = frozenset(["that", "this"])
_RELATIVIZERS = frozenset(["that", "which", "who"])
_PREPOSITIONS = frozenset(
    ["in", "on", "for", "with", "about", "from", "to", "of", "into", "at", "by", "under"]
)
# After a demonstrative, the words that show it stands for a thing of its own ("that
# is", "that a"), not for the noun after it ("that option") ...
_AFTER_A_STAND_IN = frozenset(
    ["a", "an", "the", "is", "was", "will", "would", "can", "could", "should", "does", "did"]
)
# ... when the word before it is no noun ("tell git that the commit is good" is a clause):
# the question's start, or a verb that takes it as its object or subject.
_BEFORE_A_STAND_IN = frozenset(
    ["", "is", "was", "isn't", "does", "did", "will", "would", "can", "could", "should",
     "make", "makes", "call", "consider", "keep", "set", "use", "do", "change"]
)  # fmt: skip
# A question ending on an auxiliary after its subject leaves its verb phrase out:
# "What if I don't?", "Should I?", "Can it?" ("What does fakeroot do?" has its own).
_AUXILIARIES = frozenset(
    ["do", "does", "did", "don't", "doesn't", "didn't", "can", "can't", "cannot", "will",
     "won't", "should", "shouldn't", "must", "is", "isn't", "are", "aren't", "have", "has"]
)  # fmt: skip
_SUBJECTS = frozenset(["i", "you", "we", "it", "they", "not"])
_NEGATED = frozenset(["don't", "doesn't", "didn't", "can't", "won't", "shouldn't", "isn't"])
_BE = frozenset(["is", "was", "isn't", "wasn't"])
# Nouns that name nothing alone ("the second one", "the other option").
GENERIC = frozenset(
    [
        "first",
        "second",
        "third",
        "fourth",
        "last",
        "next",
        "previous",
        "one",
        "ones",
        "other",
        "another",
        "same",
        "option",
        "options",
        "choice",
        "choices",
        "thing",
        "things",
        "part",
        "step",
        "way",
        "example",
        "kind",
    ]
)
_STOPWORDS = _words(
    "a an the and or but if of to in on at by for with from as is are was were be been "
    "being do does did done have has had can could should would will shall may might must "
    "what which who whom whose when where why how about into over under than so not no yes "
    "i me my we our you your please tell give show explain mean means more also just there "
    "here any some all each every both few many much"
)


def content_words(text: str) -> list[str]:
    """The words of `text` that are not function words, as search text takes them."""
    return [w for w in _WORD.findall(text) if w.casefold() not in _STOPWORDS]


def looks_dependent(question: str, *, specific: Callable[[str], bool] | None = None) -> bool:
    """Whether `question` leans on an earlier turn (see the module's docstring).
    `specific(word)`: whether the collection holds the word rarely enough for it to
    name a subject (None: only a word's shape says so)."""
    text = " ".join(question.split())
    folded = text.casefold()
    if folded.startswith(_OPENERS) or folded.rstrip(" ?!.").endswith(_CLOSERS):
        return True
    tokens = [t.casefold().rstrip(".") or t for t in _TOKEN.findall(text)]
    if _points_back(tokens) or _leaves_out_its_verb(tokens):
        return True
    named = [(m.start(), m.group().rstrip(".")) for m in _NAMED.finditer(text)]
    own = [w for _, w in named if w.casefold() not in _STOPWORDS]
    if len(own) > FEW_CONTENT_WORDS:
        return False
    if any(shaped(w) for w in own):
        return False
    # A capital past the question's first word is a name ("the Bash startup files",
    # "the archive areas of Debian"): the question says what it is about.
    if any(at > 0 and w[0].isupper() and w != "I" and w.casefold() not in _STOPWORDS
           for at, w in named):  # fmt: skip
        return False
    # Shapes first: each `specific` is a question to the full-text index.
    return not (specific and any(specific(w) for w in own if w.casefold() not in GENERIC))


def shaped(word: str) -> bool:
    """A word shaped like a name: debian/watch, --onto, dh_make, orig.tar.gz, LaTeX2e,
    AtEndOfPackage, APT."""
    return bool(_SHAPED.search(word))


def specific_in_collection(
    *, holding: Callable[[str, int], int | None], chunks: Callable[[], int]
) -> Callable[[str], bool]:
    """`specific` for `looks_dependent` from a collection: a word is specific when
    fewer than COMMON_SHARE of its `chunks()` chunks hold it. `holding(word, cap)`
    counts the chunks holding it up to `cap` (None: unknown, taken as common, which
    keeps a young index's questions judged by their words alone)."""
    cap: list[int] = []
    seen: dict[str, bool] = {}

    def specific(word: str) -> bool:
        key = word.casefold()
        if key not in seen:
            if not cap:
                cap.append(max(MIN_COMMON_CHUNKS, math.ceil(COMMON_SHARE * chunks())))
            n = holding(key, cap[0])
            seen[key] = n is not None and n < cap[0]
        return seen[key]

    return specific


def _points_back(tokens: list[str]) -> bool:
    """A pronoun nothing in the question stands for, or a phrase pointing back."""
    for i, t in enumerate(tokens):
        if t in _ALWAYS_BACK:
            return True
        if (
            t in _PRONOUNS
            and not _expletive(tokens, at=i)
            and not _antecedent(tokens, at=i, across_clause=True)
        ):
            return True
        if t in _POSSESSIVES and not _antecedent(tokens, at=i, across_clause=False):
            return True
        after = tokens[i + 1] if i + 1 < len(tokens) else ""
        # "like that?", "can I change that?", "in that step": a demonstrative closing
        # the question or naming nothing but a stand-in.
        if t in _DEMONSTRATIVES and (after in ("", ",", "and", "or") or after in GENERIC):
            return True
        before = tokens[i - 1] if i > 0 else ""
        if t in _DEMONSTRATIVES and after in _AFTER_A_STAND_IN and before in _BEFORE_A_STAND_IN:
            return True
        # "Where is that setting kept?", "That command, where …", "in this file": a
        # demonstrative before a noun, where a noun phrase starts (not "tell git that
        # commits …", a clause), names a thing said before, unless an earlier clause
        # of the question holds what it points to ("a patch showed up; what does
        # that usually mean?").
        if (
            t in _DEMONSTRATIVES
            and (before in _BEFORE_A_STAND_IN or before in _PREPOSITIONS)
            and after[:1].isalnum()
            and _noun_like(tokens, at=i + 1)
            and not _antecedent(tokens, at=i, across_clause=True)
        ):
            return True
        if (t in _ONES or t in _THINGS) and after not in _SAYS_WHICH:
            pointed = any(b in _POINTERS for b in tokens[max(0, i - 2) : i])
            if pointed and (t in _THINGS or not _antecedent(tokens, at=i, across_clause=True)):
                return True
    return False


def _leaves_out_its_verb(tokens: list[str]) -> bool:
    """A closing auxiliary after its subject or a negation ("What if I don't?"), or
    before it ("Why can't I?")."""
    words = [t for t in tokens if t[0].isalnum()]
    if len(words) < 2:
        return False
    if words[-1] in _SUBJECTS and words[-2] in _AUXILIARIES:
        return True
    return words[-1] in _AUXILIARIES and (words[-2] in _SUBJECTS or words[-1] in _NEGATED)


def _expletive(tokens: list[str], *, at: int) -> bool:
    """An "it" that stands for nothing: "is it possible to …", "would it be safe to …",
    "how long does it take to …" (what it stands for comes after it)."""
    if tokens[at] != "it":
        return False
    before = tokens[at - 1] if at > 0 else ""
    after = tokens[at + 1 : at + 7]
    placeholder = (
        before in _BE
        or (before in ("would", "will", "could") and after[:1] == ["be"])
        or after[:1] in (["take"], ["takes"])
    )
    return placeholder and any(w in ("to", "that", "whether", "if") for w in after)


def _antecedent(tokens: list[str], *, at: int, across_clause: bool) -> bool:
    """Whether a noun before tokens[at] can be what the pronoun there stands for:
    before a clause boundary that precedes the pronoun (`across_clause`), else
    anywhere before it but the noun whose "of" it follows ("the format of its
    entries" is not the format's own)."""
    end = at
    head = -1
    if across_clause:
        bounds = [j for j in range(at) if tokens[j] in _BOUNDARIES]
        if not bounds:
            return False
        end = bounds[-1]
        if tokens[end] in _RELATIVIZERS:
            # "a tool that makes it simpler": the noun the clause describes is that
            # clause's own subject, which its pronoun does not stand for.
            head = end - 1
    for j in range(end):
        if j == head or not _noun_like(tokens, at=j):
            continue
        if not across_clause and j == at - 2 and tokens[at - 1] == "of":
            continue
        return True
    return False


def _noun_like(tokens: list[str], *, at: int) -> bool:
    t = tokens[at]
    if t in _STOPWORDS or t in _BOUNDARIES or t in _PRONOUNS or t in _POSSESSIVES:
        return False
    if t in GENERIC or t in _THINGS:
        return False
    if not t[0].isalnum() and not shaped(t):
        return False
    return at == 0 or tokens[at - 1] not in _BEFORE_A_VERB
