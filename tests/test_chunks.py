from __future__ import annotations

from itertools import pairwise
from pathlib import Path

from nexusai.memory.chunks import (
    MAX_WINDOWS,
    OVERLAP,
    STRIDE,
    EpisodeVectors,
    episode_of,
    point_ids,
    windows,
)
from nexusai.memory.vectors.edge import EdgeVectorIndex


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


def test_an_older_stores_windows_never_crowd_out_episodes(tmp_path: Path) -> None:
    """Episodes 1-3 kept eight windows each, all nearer the query than episodes 4-7, which
    are one vector each (as an episode is embedded now): a search for five episodes still
    gets five, each once, by its best window."""
    vectors = EpisodeVectors(EdgeVectorIndex(tmp_path / "episodes", 2))
    near = [(episode, [[1.0, 0.01 * (episode + w)] for w in range(8)], 1) for episode in (1, 2, 3)]
    far = [(episode, [[1.0, 0.2 * episode]], 1) for episode in (4, 5, 6, 7)]
    vectors.upsert([*near, *far])
    try:
        found = vectors.search([1.0, 0.0], None, [], 5)
        assert [episode for episode, _ in found] == [1, 2, 3, 4, 5]
        assert vectors.search([1.0, 0.0], None, [1], 3)[0][0] == 2
    finally:
        vectors.index.close()
