"""How many tokens a text costs in a prompt, counted the same way everywhere: the API's
`tokens`, the `contextBudget` setting, `nexus eval`'s recall within a budget.

A token here is a word, a punctuation mark, one CJK character or a run of line breaks:
offline, no model file, a few microseconds a message. Line breaks count because a BPE
tokenizer gives them tokens, and a prompt of memories has one a line. On the development
sets it counts 7 to 12% more than OpenAI's o200k tokenizer (GPT-4o's) in total
(`docs/retrieval.md`), so a budget kept here is kept there too, with room.
"""

from __future__ import annotations

import re

# CJK characters one at a time (a BPE tokenizer gives them about a token each), then runs
# of other word characters, then each mark that is neither. `re`, not `regex`: twice as
# fast here, and a long reply is counted on the turn that first packs it.
# Hangul too, unlike the keyword index's bigrams (`keywords.py`): it is about a token a
# syllable to a BPE tokenizer, though Korean words are split by spaces for search.
_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af"
# A run of line breaks is one token, as a BPE tokenizer gives it: two texts that neither
# start nor end with one, joined by a line break, cost theirs and one.
_TOKEN = re.compile(rf"[{_CJK}]|[^\W{_CJK}]+|[^\w\s]|\n+")


def count_tokens(text: str) -> int:
    return len(tokens_of(text))


def tokens_of(text: str) -> list[str]:
    """The text's tokens, in order."""
    return _TOKEN.findall(text)
