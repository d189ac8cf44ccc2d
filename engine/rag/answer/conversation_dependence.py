"""Whether a question of a conversation leans on an earlier turn, as a reader would judge it.

A follow-up is searched history-aware (engine/rag/answer/conversation.py): the earlier
question blended in, the files the last answer drew on favoured. A question judged
standalone is searched as asked and hedged: the earlier question's searches count by how
much they help (`lean`, the embeddings' judgement, which holds in any language). So this
detector keeps only the English signals that still earned something on a blind
conversation set written in four languages (`ragdoll bench conversation --set blind`,
docs/benchmarks.md), where every other one (openers, possessives, "former"/"latter",
demonstratives, a verb phrase left out, few content words) changed nothing:

- a pronoun ("it", "they") that nothing in the question can stand for: a noun before
  it across a clause boundary ("after installing them", not "how does pbuilder
  differ from it": a pronoun does not stand for its own clause's subject);
- a closing word whose other side was said before ("… then?", "… instead?", "… too?",
  "How is fixup different?");
- a stand-in for a noun ("which one", "the whole thing").
"""

from __future__ import annotations

import re


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


_WORD = re.compile(r"[\w][\w.+#/-]*", re.UNICODE)
_TOKEN = re.compile(r"[\w][\w.+#/'-]*|[,;:()]", re.UNICODE)
_SHAPED = re.compile(r"^-|[\w][-/_.#+]|\d|[a-z][A-Z]|^[A-Z]{2,}s?$")
# "… a class or a package then?", "What should I use instead?": a closing word that
# answers to something said before.
# "… work too?", "… as well?", "How is fixup different?": a comparison or an addition
# whose other side was said before (a question that names it says "different from").
_CLOSERS = (" then", " instead", " too", " as well", " either", " different", " differently")
# Pronouns that point back; "that", "then", "one" are as often relative or counting
# words in a question that stands alone ("how do I tell git that the commit is good?").
_PRONOUNS = frozenset(["it", "it's", "they", "them", "these", "those", "he", "she", "him"])
# Possessives are no nouns a pronoun could stand for ("the format of its entries").
_POSSESSIVES = frozenset(["its", "their", "theirs", "his", "her", "mine", "yours", "ours", "hers"])
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
_RELATIVIZERS = frozenset(["that", "which", "who"])
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


def looks_dependent(question: str) -> bool:
    """Whether `question` leans on an earlier turn (see the module's docstring)."""
    text = " ".join(question.split())
    if text.casefold().rstrip(" ?!.").endswith(_CLOSERS):
        return True
    tokens = [t.casefold().rstrip(".") or t for t in _TOKEN.findall(text)]
    return _points_back(tokens)


def _shaped(word: str) -> bool:
    """A word shaped like a name: debian/watch, --onto, dh_make, orig.tar.gz, LaTeX2e,
    AtEndOfPackage, APT."""
    return bool(_SHAPED.search(word))


def _points_back(tokens: list[str]) -> bool:
    """A pronoun nothing in the question stands for, or a stand-in for a noun."""
    for i, t in enumerate(tokens):
        if t in _PRONOUNS and not _expletive(tokens, at=i) and not _antecedent(tokens, at=i):
            return True
        after = tokens[i + 1] if i + 1 < len(tokens) else ""
        if (t in _ONES or t in _THINGS) and after not in _SAYS_WHICH:
            pointed = any(b in _POINTERS for b in tokens[max(0, i - 2) : i])
            if pointed and (t in _THINGS or not _antecedent(tokens, at=i)):
                return True
    return False


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


def _antecedent(tokens: list[str], *, at: int) -> bool:
    """Whether a noun before a clause boundary that precedes tokens[at] can be what the
    pronoun there stands for."""
    bounds = [j for j in range(at) if tokens[j] in _BOUNDARIES]
    if not bounds:
        return False
    end = bounds[-1]
    # "a tool that makes it simpler": the noun the clause describes is that clause's
    # own subject, which its pronoun does not stand for.
    head = end - 1 if tokens[end] in _RELATIVIZERS else -1
    return any(j != head and _noun_like(tokens, at=j) for j in range(end))


def _noun_like(tokens: list[str], *, at: int) -> bool:
    t = tokens[at]
    if t in _STOPWORDS or t in _BOUNDARIES or t in _PRONOUNS or t in _POSSESSIVES:
        return False
    if t in GENERIC or t in _THINGS:
        return False
    if not t[0].isalnum() and not _shaped(t):
        return False
    return at == 0 or tokens[at - 1] not in _BEFORE_A_VERB
