"""What the indexes see of an episode: who said it, its text, an image caption, and the end
of the turn before it. FTS5 and the embedder read these texts, never the raw row."""

from __future__ import annotations

# Speakers that are roles, not names: "assistant: " before every other message says
# nothing a search can use, and measured, it cost semantic recall@10 0.02 on BEAM's
# user-assistant chats; a name ("Caroline: ") is what a question asks about (LoCoMo).
ROLES = frozenset({"user", "assistant", "system", "tool", "human", "ai", "bot"})


def prefix(speaker: str) -> str:
    return "" if speaker.strip().lower() in ROLES else f"{speaker}: "


def said(speaker: str, content: str) -> str:
    return prefix(speaker) + content


# How much of the turn before an episode is indexed and embedded with it. Its end is what a
# reply answers ("Yes, last Tuesday!"); all of a long answer would crowd the episode's own
# words out of its vector (the model reads 256 tokens) and index that answer twice.
CONTEXT_CHARS = 300


def compose_context_text(speaker: str, content: str) -> str:
    """The end of the previous turn, as said, cut at a word where one is near."""
    text = said(speaker, content)
    if len(text) <= CONTEXT_CHARS:
        return text
    tail = text[-CONTEXT_CHARS:]
    space = tail.find(" ")
    return f"{prefix(speaker)}…{tail[space + 1 :] if 0 <= space < 40 else tail}"


def compose_search_text(speaker: str, content: str, image_caption: str | None) -> str:
    """The episode as the indexes see it: who said what, and the caption of an image it
    shared. (The turn before it is indexed beside it, as `context_text`.)"""
    text = said(speaker, content)
    if image_caption and image_caption.strip():
        text += f" [image: {image_caption.strip()}]"
    return text
