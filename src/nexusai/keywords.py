"""The spec's query tokenization, shared by the keyword index (memory) and the pages and
tools that show which words matched (the inspector): lowercase, split on anything that is
not a letter or a number, drop stopwords and one-character tokens. Pure text: no FTS5 here
(the MATCH syntax is `memory.sqlite.fts`)."""

from __future__ import annotations

import unicodedata
from collections.abc import Mapping, Sequence

import regex

# The spec's split: any run of characters that is not a Unicode letter or number.
_SPLIT = regex.compile(r"[^\p{L}\p{N}]+")

# Deliberately conservative: function words and conversational filler that match almost
# every episode. Words that can carry meaning on their own (time, good, way, like, love,
# new, home) stay searchable. Add a word when it is seen producing noisy matches.
STOPWORDS: frozenset[str] = frozenset(
    """
    a an the this that these those some any each every all both either neither such i me my
    mine myself you your yours yourself yourselves he him his himself she her hers herself
    it its itself we us our ours ourselves they them their theirs themselves what which who
    whom whose how when where why whatever whoever am is are was were be been being have has
    had having do does did doing done will would shall should can could may might must don
    doesn didn isn aren wasn weren haven hasn hadn wouldn couldn shouldn ll re ve im ive
    about above after again against at before below between by down during for from in into
    of off on onto out over through to under until up upon with within without and but if or
    nor because as so than then though while whether there here just very too also only own
    same other more most once not no one ones thing things something anything oh yeah yes
    hey hi hello ok okay um uh wow
    """.split()  # noqa: SIM905 - a word list reads better as text
)


def tokenize(text: str) -> list[str]:
    """Lowercase and split on non-letter/number runs (NFC first, so accents stay whole)."""
    folded = unicodedata.normalize("NFC", text.lower())
    return [token for token in _SPLIT.split(folded) if token]


# Chinese and Japanese write words without spaces, so unicode61 keeps a whole clause as
# one token ("我们住在北京"). Their runs are indexed and searched as overlapping bigrams
# instead ("北京" finds it); every other script keeps the spec's rules.
# Scripts written without spaces between words, indexed as bigrams. Hangul is not among
# them: Korean puts spaces between words, which the index's own tokenizer splits on (the
# token count, `tokens.py`, counts Hangul a character at a time, as BPE nearly does).
_CJK = regex.compile(r"[\p{Han}\p{Hiragana}\p{Katakana}]+")


def bigrams(run: str) -> list[str]:
    return [run[i : i + 2] for i in range(len(run) - 1)]


def cjk_text(text: str) -> str:
    """What the `search_cjk` column indexes: the bigrams of each CJK run, space-separated."""
    folded = unicodedata.normalize("NFC", text.lower())
    return " ".join(pair for run in _CJK.findall(folded) for pair in bigrams(run))


def query_terms(text: str) -> list[str]:
    """The tokens that survive stopwords and the one-character rule, first occurrence only;
    a token with CJK in it stands for its CJK bigrams and what is left around them."""
    terms: dict[str, None] = {}
    for token in tokenize(text):
        pieces = [token] if not _CJK.search(token) else _cjk_pieces(token)
        for piece in pieces:
            if len(piece) > 1 and piece not in STOPWORDS:
                terms.setdefault(piece, None)
    return list(terms)


def _cjk_pieces(token: str) -> list[str]:
    rest = [part for part in _CJK.split(token) if part]
    return [pair for run in _CJK.findall(token) for pair in bigrams(run)] + rest


def within_budget(terms: Sequence[str], counts: Mapping[str, int], budget: int) -> list[str]:
    """The terms a keyword query keeps when it may read at most `budget` index entries
    (`counts`: how many episodes hold each term): the rarest first while they fit, and the
    rarest one always, in the query's own order. A term held by a large share of the
    episodes adds almost nothing to BM25 and costs the most to rank. Budget 0 keeps all."""
    if budget <= 0 or sum(counts.get(t, 0) for t in terms) <= budget:
        return list(terms)
    kept: set[str] = set()
    spent = 0
    for term in sorted(terms, key=lambda t: (counts.get(t, 0), terms.index(t))):
        if not kept or spent + counts.get(term, 0) <= budget:
            kept.add(term)
            spent += counts.get(term, 0)
    return [t for t in terms if t in kept]
