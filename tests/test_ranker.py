"""The learned ranker's model file: trees fitted by LightGBM, written, read back and scored
by onnxruntime, give LightGBM's own scores, and to the bit the trees' own sums; what
explain shows adds up to them; a bad file is refused with what is wrong with it."""

from __future__ import annotations

import json
import random
from pathlib import Path

import lightgbm
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nexusai.errors import InvalidInput
from nexusai.evaluation.learned import ranker_from_booster
from nexusai.ranking.features import FEATURES
from nexusai.ranking.model import Ranker, from_trees, load, save, shipped
from nexusai.ranking.onnx_trees import Tree


def booster(rows: int = 3000, seed: int = 3) -> tuple[lightgbm.Booster, np.ndarray]:
    rng = np.random.default_rng(seed)
    matrix = rng.normal(size=(rows, len(FEATURES)))
    matrix[:, 8] = rng.integers(0, 2, rows)  # a 0/1 feature, split at its boundary
    labels = (matrix[:, 0] + 2 * matrix[:, 8] - matrix[:, 3] * matrix[:, 5] > 1).astype(float)
    params = {"objective": "binary", "num_leaves": 15, "max_depth": 6, "verbose": -1}
    return lightgbm.train(params, lightgbm.Dataset(matrix, labels), num_boost_round=40), matrix


def test_scores_from_the_file_are_lightgbms_own(tmp_path: Path) -> None:
    fitted, matrix = booster()
    path = tmp_path / "ranker.json"
    save(ranker_from_booster(fitted.dump_model(), 50, {"by": "test"}), path)
    ranker = load(path)
    assert ranker.depth == 50
    assert ranker.trained_on == {"by": "test"}
    expected = fitted.predict(matrix, raw_score=True)
    assert np.allclose(ranker.scores(matrix), expected, rtol=0, atol=1e-9)
    assert not np.allclose(expected, expected[0])  # the trees do split


def walked(ranker: Ranker, row: np.ndarray) -> float:
    """A row's score as the model file says, in plain Python: down each tree in turn (left
    when the value is at most the split), its leaves' values added in the trees' order."""
    total = 0.0
    for tree in ranker.trees:
        node = 0
        while tree["feature"][node] >= 0:
            goes_left = row[int(tree["feature"][node])] <= tree["threshold"][node]
            node = int(tree["left"][node] if goes_left else tree["right"][node])
        total += tree["value"][node]
    return total


def test_scores_are_the_trees_walked_one_at_a_time_to_the_bit() -> None:
    fitted, matrix = booster()
    ranker = ranker_from_booster(fitted.dump_model(), 50, {})
    rows = matrix[:300].copy()
    rng = np.random.default_rng(5)
    splits = [(int(f), t) for tree in ranker.trees for f, t in zip(*_splits(tree), strict=True)]
    for row in rows[:100]:  # values that sit on a split, where `<=` and `<` differ
        for feature, threshold in (splits[i] for i in rng.choice(len(splits), 8)):
            row[feature] = threshold
    rows[100:110, rng.integers(0, len(FEATURES), 10)] = np.nan
    assert ranker.scores(rows).tolist() == [walked(ranker, row) for row in rows]
    real = shipped()  # and the shipped trees, on the same rows
    assert real.scores(rows).tolist() == [walked(real, row) for row in rows]


def _splits(tree: Tree) -> tuple[list[float], list[float]]:
    inner = [n for n, f in enumerate(tree["feature"]) if f >= 0]
    return [tree["feature"][n] for n in inner], [tree["threshold"][n] for n in inner]


def test_a_tree_of_one_leaf_adds_its_value() -> None:
    one_leaf: Tree = {
        "feature": [-1],
        "threshold": [0.0],
        "left": [0],
        "right": [0],
        "value": [0.25],
    }
    split: Tree = {
        "feature": [2, -1, -1],
        "threshold": [0.5, 0.0, 0.0],
        "left": [1, 0, 0],
        "right": [2, 0, 0],
        "value": [0.0, -1.0, 1.0],
    }
    ranker = from_trees([one_leaf, split, one_leaf], 50, {})
    rows = np.zeros((2, len(FEATURES)))
    rows[1, 2] = 0.75
    assert ranker.scores(rows).tolist() == [-0.5, 1.5]


def test_contributions_add_up_to_the_score() -> None:
    fitted, matrix = booster()
    ranker = ranker_from_booster(fitted.dump_model(), 50, {})
    moved = ranker.contributions(matrix[:200])
    assert np.allclose(moved.sum(axis=1) + ranker.bias, ranker.scores(matrix[:200]), atol=1e-9)
    # The labels were made from features 0, 3, 5 and 8: those move scores most.
    strongest = set(np.argsort(-np.abs(moved).mean(axis=0))[:4].tolist())
    assert strongest == {0, 3, 5, 8}


def test_the_shipped_ranker_loads_and_says_what_it_was_trained_on() -> None:
    ranker = shipped()
    assert len(ranker.trees) > 10
    assert set(ranker.trained_on["datasets"]) == {"locomo", "beam", "beam500k"}
    assert ranker.trained_on["unused"] == []  # every feature carried (docs/evaluation.md)


@pytest.mark.parametrize(
    ("content", "says"),
    [
        (None, "does not exist"),
        ("{not json", "not a readable JSON file"),
        ('{"format": "other"}', "not a nexusai ranker"),
        ("[1, 2]", "not a nexusai ranker"),
    ],
)
def test_a_bad_model_file_is_refused_saying_why(
    tmp_path: Path, content: str | None, says: str
) -> None:
    path = tmp_path / "ranker.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(InvalidInput, match=says):
        load(path)


def test_a_model_for_other_features_is_refused(tmp_path: Path) -> None:
    fitted, _ = booster(500)
    path = tmp_path / "ranker.json"
    save(ranker_from_booster(fitted.dump_model(), 50, {}), path)
    data = json.loads(path.read_text())
    data["features"] = data["features"][:-1]
    path.write_text(json.dumps(data))
    with pytest.raises(InvalidInput, match="train it again"):
        load(path)
    data["features"] = list(FEATURES)
    data["trees"][0]["left"][0] = 0  # a node pointing back up would never end
    path.write_text(json.dumps(data))
    with pytest.raises(InvalidInput, match="points outside it, or back up"):
        load(path)


def test_every_third_memory_of_a_learned_turn_is_rrfs_next_choice() -> None:
    """A ranker that scores the candidates both legs rank highest lowest: its own order is
    RRF's reversed, so every third place shows RRF's best not yet placed."""
    from nexusai.models import Episode
    from nexusai.orchestration.learned import rank_learned
    from nexusai.ranking.model import from_trees

    ranker = from_trees([_later_is_better(FEATURES.index("semantic_rank"), 7)], 50, {})
    found = [
        Episode(i, 1, "user", f"turn {i}", f"2024-01-0{i}T00:00:00Z", "", {}, score=1 - i / 10)
        for i in range(1, 8)
    ]
    ranked = [
        m.episode.id for m in rank_learned("turn", {"semantic": found, "keyword": found}, ranker, 6)
    ]
    assert ranked == [7, 6, 1, 5, 4, 2]
    assert [
        m.episode.id for m in rank_learned("turn", {"semantic": found, "keyword": found}, ranker, 2)
    ] == [7, 6]
    assert len(rank_learned("turn", {"semantic": found, "keyword": found}, ranker, 50)) == 7


def _later_is_better(feature: int, ranks: int) -> dict[str, list[float]]:
    """One tree, a chain of splits on `feature`: the higher its value, the higher the
    score (rank r scores r)."""
    tree: dict[str, list[float]] = {k: [] for k in ("feature", "threshold", "left", "right")}
    tree["value"] = []
    for r in range(1, ranks):
        node = len(tree["feature"])
        tree["feature"] += [feature, -1]
        tree["threshold"] += [r + 0.5, 0.0]
        tree["left"] += [node + 1, 0]
        tree["right"] += [node + 2, 0]
        tree["value"] += [float(r), float(r)]
    tree["feature"].append(-1)
    tree["threshold"].append(0.0)
    tree["left"].append(0)
    tree["right"].append(0)
    tree["value"].append(float(ranks))
    return tree


def test_rrfs_places_follow_fuse_ranked_exactly() -> None:
    """A learned turn takes RRF's order from its `rrf` feature column: the same order as
    `fuse_ranked` at (1, 1), ties included, on lists that overlap in part."""
    import random

    from nexusai.models import Episode
    from nexusai.orchestration.learned import _rrf_order, _ties
    from nexusai.ranking.features import candidates
    from tests.fused import fuse_ranked

    rng = random.Random(5)
    for _ in range(50):
        ids = rng.sample(range(1, 200), 80)
        found = {i: Episode(i, 1, "user", f"turn {i}", "2024-01-01T00:00:00Z", "", {}) for i in ids}
        semantic = [found[i] for i in rng.sample(ids, 50)]
        keyword = [found[i] for i in rng.sample(ids, 50)]
        pool = candidates("turn", semantic, keyword)
        fused = fuse_ranked(semantic, keyword, 1.0, 1.0, len(pool.episodes))
        assert [pool.episodes[i].id for i in _rrf_order(pool, _ties(pool))] == [
            f.episode.id for f in fused
        ]


def test_session_features_read_the_pool_by_session_and_neighbours() -> None:
    """Session 1 holds ids 10, 11 and 14 of the pool, session 2 holds 12: a candidate's
    session share, the best RRF of the rest of its session, and the best RRF of its
    session's candidates at most two ids away (never another session's)."""
    from nexusai.models import Episode
    from nexusai.ranking.features import candidates

    def said(i: int, session: int) -> Episode:
        return Episode(i, session, "user", f"turn {i}", "2024-01-01T00:00:00Z", "", {})

    semantic = [said(10, 1), said(12, 2), said(14, 1)]
    keyword = [said(11, 1), said(10, 1)]
    pool = candidates("turn", semantic, keyword)
    column = {name: pool.matrix[:, FEATURES.index(name)] for name in FEATURES}
    at = {e.id: i for i, e in enumerate(pool.episodes)}
    rrf = {i: column["rrf"][at[i]] for i in at}
    assert rrf[10] > rrf[11] > rrf[14]
    assert rrf[12] > rrf[14]

    def feature(name: str, i: int) -> float:
        return float(column[name][at[i]])

    assert [feature("session_share", i) for i in (10, 11, 12, 14)] == [0.75, 0.75, 0.25, 0.75]
    assert feature("session_best_rrf", 10) == pytest.approx(rrf[11])  # its session's next
    assert feature("session_best_rrf", 11) == pytest.approx(rrf[10])
    assert feature("session_best_rrf", 12) == 0.0  # alone in its session
    assert feature("adjacent_best_rrf", 10) == pytest.approx(rrf[11])
    assert feature("adjacent_best_rrf", 11) == pytest.approx(rrf[10])
    assert feature("adjacent_best_rrf", 14) == 0.0  # 12 is beside it, in another session
    assert feature("adjacent_best_rrf", 12) == 0.0


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(st.integers(1, 40), st.integers(1, 4)), min_size=1, max_size=30),
    st.randoms(use_true_random=False),
)
def test_session_features_are_their_definition_on_any_pool(
    stored: list[tuple[int, int]], rng: random.Random
) -> None:
    """The session columns, computed a whole column at a time, equal their definitions
    read one candidate at a time: any ids, sessions and ties of RRF score."""
    from nexusai.models import Episode
    from nexusai.ranking.features import candidates

    session_of = dict(stored)  # an id is in one session
    episodes = [
        Episode(i, s, "user", f"turn {i}", "2024-01-01T00:00:00Z", "", {})
        for i, s in session_of.items()
    ]
    semantic = rng.sample(episodes, rng.randint(0, len(episodes)))
    keyword = [e for e in episodes if e not in semantic or rng.random() < 0.5]
    pool = candidates("turn", semantic, keyword)
    column = {name: pool.matrix[:, FEATURES.index(name)].tolist() for name in FEATURES}
    rrf = column["rrf"]
    for i, episode in enumerate(pool.episodes):
        mates = [j for j, e in enumerate(pool.episodes) if e.session_id == episode.session_id]
        others = [j for j in mates if j != i]
        near = [j for j in others if abs(pool.episodes[j].id - episode.id) <= 2]
        assert column["session_share"][i] == len(mates) / len(pool.episodes)
        assert column["session_best_rrf"][i] == max((rrf[j] for j in others), default=0.0)
        assert column["adjacent_best_rrf"][i] == max((rrf[j] for j in near), default=0.0)
