"""Answer recall: whether the answer's facts reached the model, not only which messages
were named. A question's answer words are the content words of its reference answer
(normalised as SQuAD normalises answers: lower case, no punctuation, no articles; our
stopwords and the question's own words left out) that its evidence messages state; its
answer recall within a turn is the share of them the turn's prompt holds.

It counts words, so a word can match by chance (a common one in any long prompt), and a
paraphrase never matches; a question with no reference answer, or whose reference no
evidence message states in its words, has none (evidence recall alone speaks for it).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable

from nexusai.keywords import STOPWORDS

_ARTICLES = re.compile(r"\b(?:a|an|the)\b")


def normalized(text: str) -> str:
    """SQuAD's normalisation, with every Unicode punctuation mark removed (curly quotes
    too): lower case, no punctuation, no articles, single spaces."""
    folded = unicodedata.normalize("NFC", text.lower())
    bare = "".join(c for c in folded if not unicodedata.category(c).startswith("P"))
    return " ".join(_ARTICLES.sub(" ", bare).split())


def words(text: str) -> set[str]:
    return set(normalized(text).split())


def answer_words(reference: str | None, question: str, evidence: Iterable[str]) -> frozenset[str]:
    """The reference's content words that the evidence messages state, less the question's
    own (empty: no answer recall for this question)."""
    if not reference:
        return frozenset()
    wanted = words(reference) - STOPWORDS - words(question)
    stated: set[str] = set()
    for text in evidence:
        stated |= words(text)
    return frozenset(wanted & stated)


def answer_recall(wanted: frozenset[str], prompt: str) -> float | None:
    """The share of `wanted` the prompt holds; None when there is nothing to find."""
    if not wanted:
        return None
    return len(wanted & words(prompt)) / len(wanted)
