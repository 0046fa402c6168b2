from __future__ import annotations

from itertools import pairwise

from nexusai.memory.chunks import MAX_WINDOWS, OVERLAP, STRIDE, episode_of, point_ids, windows


def test_a_short_turn_is_one_window_with_its_context() -> None:
    assert windows("user: hi there", "bot: hello", 700) == ["user: hi there\nbot: hello"]
    assert windows("user: hi there", "", 700) == ["user: hi there"]


def test_a_long_turn_is_overlapping_windows_cut_at_spaces() -> None:
    words = [f"w{i:04d}" for i in range(600)]  # 3,599 characters
    text = " ".join(words)
    parts = windows(text, "bot: the question", 700)
    assert parts[0].endswith("\nbot: the question")
    bodies = [parts[0].removesuffix("\nbot: the question"), *parts[1:]]
    assert all(len(b) <= 700 for b in bodies)
    assert all(set(b.split()) <= set(words) for b in bodies)  # no word cut in two
    assert bodies[0].split()[0] == words[0]
    assert bodies[-1].split()[-1] == words[-1]
    for before, after in pairwise(bodies):  # neighbours share text
        shared = set(before.split()) & set(after.split())
        assert OVERLAP // 6 <= len(shared) <= OVERLAP // 4


def test_a_very_long_turn_stops_at_the_window_cap() -> None:
    parts = windows("word " * 10_000, "", 700)
    assert len(parts) == MAX_WINDOWS


def test_text_without_spaces_is_cut_anyway() -> None:
    parts = windows("x" * 2000, "", 700)
    assert "".join(p for p in parts).count("x") >= 2000
    assert all(len(p) <= 700 for p in parts)


def test_point_ids_map_back_to_their_episode() -> None:
    ids = point_ids(42)
    assert ids[0] == 42
    assert len(ids) == MAX_WINDOWS
    assert ids[1] == 42 + STRIDE
    assert {episode_of(p) for p in ids} == {42}
    assert max(point_ids(2**40 - 1)) < 2**63
