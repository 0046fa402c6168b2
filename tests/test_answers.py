"""Answer recall's words: SQuAD's normalisation, what the evidence states, what the prompt
holds."""

from __future__ import annotations

from nexusai.evaluation.answers import answer_recall, answer_words, normalized
from nexusai.evaluation.datasets import Question


def test_answers_are_normalised_as_squad_normalises_them() -> None:
    assert normalized("The  Beagle, called “Biscuit”!") == "beagle called biscuit"
    assert normalized("An apple a day") == "apple day"


def test_answer_words_are_the_references_content_words_the_evidence_states() -> None:
    evidence = ["I adopted a puppy called Biscuit last week, a beagle."]
    found = answer_words("Biscuit, a beagle puppy from Porto", "What is my puppy called?", evidence)
    assert found == {"biscuit", "beagle"}  # "puppy" is the question's; Porto is not stated
    assert answer_words(None, "q", evidence) == frozenset()
    assert answer_words("Porto", "q", evidence) == frozenset()


def test_answer_recall_is_the_share_the_prompt_holds_and_none_without_words() -> None:
    wanted = frozenset({"biscuit", "beagle"})
    assert answer_recall(wanted, "user: I adopted Biscuit") == 0.5
    assert answer_recall(wanted, "user: Biscuit the Beagle!") == 1.0
    assert answer_recall(frozenset(), "anything") is None


def test_a_question_keeps_its_reference_answer() -> None:
    assert Question("q", ["k"], "all").answer is None
    assert Question("q", ["k"], "all", "Biscuit").answer == "Biscuit"
