"""Standing messages: a rule the user set for the assistant ("Always include version
numbers when I ask about libraries") or a lasting preference ("I prefer simple, minimal
dependencies", "I'm lactose intolerant"). Recognised by patterns when an episode is
stored, with no LLM call, so that a later turn can carry them although it does not repeat
their words (`orchestration/standing.py`).

Precision and recall on the development sets are in docs/evaluation.md; `nexus eval`
measures the recall on the probes whose evidence is such a message.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any, Literal

StandingKind = Literal["instruction", "preference"]
KINDS: tuple[StandingKind, ...] = ("instruction", "preference")

# The speakers that are the user: only the user's own rules are the user's. An assistant's
# "Always double-check" or a third person's "Always bring snacks" ("Maria", in a chat
# between people) is a memory like any other.
THE_USER = frozenset({"user", "human"})

_SENTENCE_START = r"(?:^|(?<=[.!?\n])\s*)"
# An imperative rule: a sentence opening with "always"/"never" and a verb the assistant
# could do ("Always here to help" is a pleasantry, not a rule), or a trigger clause.
_RULE_VERBS = (
    "use|include|format|provide|write|reply|respond|answer|add|show|keep|mention|call|"
    "remind|ask|report|highlight|maintain|tailor|combine|confirm|list|cite|put|say|start|"
    "end|explain|suggest|recommend|double-check|check|avoid|assume|refer|address|speak|"
    "talk|send|break|present|summari[sz]e|translate|label|round|convert"
)
# What may open a rule's sentence before its verb: a word of assent and a comma ("Great,
# always answer with a packing list").
_LEAD = r"(?:(?:ok(?:ay)?|great|thanks|perfect|also|and|so|oh|yes|cool),?\s+)?"
# The verbs a "don't" rule forbids: what the assistant writes, never a human's "don't say
# that" or "don't ask".
_FORBIDDEN_VERBS = "use|include|add|mention|format|write|reply|respond|answer|send|put|list"
_OPENING = _SENTENCE_START + _LEAD + r"(?:please\s+)?"
_ANSWER_VERBS = (
    "r[ée]ponds|r[ée]pondez|[ée]cris|[ée]crivez|antworte|antworten|schreibe|schreiben|"
    "responde|responda|respondas|contesta|escribe|escreva|responder|utilise|utilisez"
)
_ALWAYS = "toujours|jamais|immer|nie|niemals|siempre|nunca|sempre|jam[aá]s"
_INSTRUCTION = re.compile(
    _OPENING + r"(?:always|never|don't ever|do not ever)\s+"
    # "Always be concise.": "be" and one word closing the sentence, never "always be there"
    rf"(?:be\s+(?=\w+[.!]?$)|(?:{_RULE_VERBS})\b)"
    rf"|{_OPENING}(?:don't|do not)\s+(?:{_FORBIDDEN_VERBS})\b"
    rf"|{_OPENING}(?:{_RULE_VERBS})\b[^.!?\n]*\bfrom now on\b"
    r"|\bfrom now on,?\s+(?:please\s+)?(?:you\s+|always\s+|never\s+|don't\s+)?"
    rf"(?:{_RULE_VERBS})\b"
    r"|\bI(?:'d| would) (?:rather|prefer) (?:that )?you\b"
    r"|\bwhen(?:ever)? I ask (?:you )?(?:about|for)\b"
    # "Call me Sam", "Please keep your answers short": how to address and answer the user.
    r"|\b(?:call|address) me (?:as )?(?-i:[A-Z])[\w'-]*\b"
    r"|\bkeep (?:your|the|all) (?:answers|replies|responses|messages)\b"
    # The same rules in the languages users most often write them in besides English: a
    # verb of answering or writing with always or never ("Réponds toujours en français",
    # "Antworte immer auf Deutsch", "Siempre responde en español", "Responda sempre ...").
    rf"|{_SENTENCE_START}(?=[^.!?\n]*\b(?:{_ANSWER_VERBS})\b)[^.!?\n]*\b(?:{_ALWAYS})\b",
    re.IGNORECASE | re.MULTILINE,
)
_PREFERENCE = re.compile(
    r"\bI(?:'d| would)? (?:really |much |strongly |generally |usually )?prefer\b"
    r"|\bI(?:'m| am) (?:a )?(?:vegetarian|vegan|pescatarian|allergic|lactose|gluten|"
    r"diabetic|celiac|coeliac|kosher|halal)"
    r"|\bI have (?:type [12] )?(?:diabetes|celiac|coeliac|a \w+ allergy)\b"
    # "Je suis végétarien", "Soy alérgico al maní", "Ich bin Vegetarierin", "Sou vegana".
    r"|\b(?:je suis|soy|sou|ich bin)\s+(?:\w+\s+)?(?:v[ée]g[ée]tari\w*|v[ée]g[ée]talien\w*"
    r"|vegan\w*|vegetari\w*|al[ée]rgi\w*|allergi\w*|c[ée]liaque|cel[ií]ac\w*|diab[ée]ti\w*"
    r"|diabetiker\w*)"
    r"|\bI (?:don't|do not|never|can't|cannot) (?:eat|drink)\b"
    # A favourite stated ("my favorite book is", "is my favourite"), not one in passing
    # ("on my favorite blanket").
    r"|\bmy fav(?:ou?rite) (?:\w+ ){0,2}(?:is|are)\b"
    r"|\b(?:is|are) (?:one of )?my fav(?:ou?rite)s?\b",
    re.IGNORECASE,
)


def standing_kind(speaker: str, content: str) -> StandingKind | None:
    """Whether the message sets a rule or states a lasting preference, and which."""
    if speaker.strip().lower() not in THE_USER:
        return None
    if _INSTRUCTION.search(content):
        return "instruction"
    if _PREFERENCE.search(content):
        return "preference"
    return None


def changed(rows: Iterable[Any]) -> list[tuple[str | None, int]]:
    """(kind or None, id) for each stored (id, speaker, content, standing) row whose mark
    the patterns now read otherwise: what a migration writes when they change."""
    return [
        (kind, int(row[0]))
        for row in rows
        if (kind := standing_kind(str(row[1]), str(row[2]))) != row[3]
    ]


def classified(rows: Iterable[Any]) -> list[tuple[str, int]]:
    """(kind, id) for each stored (id, speaker, content) row that is standing: what a
    migration writes to classify the episodes stored before there were standing ones."""
    return [
        (kind, int(row[0]))
        for row in rows
        if (kind := standing_kind(str(row[1]), str(row[2]))) is not None
    ]
