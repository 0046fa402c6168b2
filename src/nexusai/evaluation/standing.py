"""How well standing messages are recognised (`memory/standing.py`) on a labelled set:
how many messages are marked, of each kind, and the recall on the questions whose answer
is such a message (BEAM's instruction- and preference-following probes: their first
evidence message is where the user set the rule or stated the preference).

Precision needs a label for every marked message, which the sets do not have: a marked
message that is some probe's evidence is counted, a lower bound (docs/evaluation.md has
a reading of the rest by hand)."""

from __future__ import annotations

from collections import Counter
from typing import Any

from nexusai.evaluation.datasets import EvalSet
from nexusai.memory.standing import standing_kind

# The probe categories whose first evidence message is a standing one.
PROBES = ("instruction_following", "preference_following")


def standing_figures(evalset: EvalSet) -> dict[str, Any]:
    """{"messages", "marked", "byKind", "markedAreProbeEvidence", "probeRecall": {category:
    share of its questions whose first evidence message is marked}}."""
    kinds: Counter[str] = Counter()
    found: Counter[str] = Counter()
    asked: Counter[str] = Counter()
    messages, marked, probed = 0, set(), set()
    for item in evalset.conversations:
        said = {e.key: e.episode for s in item.conversation.sessions for e in s.episodes}
        messages += len(said)
        for key, episode in said.items():
            if (kind := standing_kind(episode.speaker, episode.content)) is not None:
                kinds[kind] += 1
                marked.add(key)
        for question in item.questions:
            if question.category in PROBES and question.evidence[:1]:
                asked[question.category] += 1
                probed.add(question.evidence[0])
                found[question.category] += question.evidence[0] in marked
    return {
        "messages": messages,
        "marked": len(marked),
        "byKind": dict(kinds),
        "markedAreProbeEvidence": len(marked & probed),
        "probeRecall": {c: found[c] / asked[c] for c in PROBES if asked[c]},
    }
