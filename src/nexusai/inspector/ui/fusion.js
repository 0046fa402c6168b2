// Weighted Reciprocal Rank Fusion, as the service does it (orchestration/fusion.py), so the
// page can re-fuse both legs' lists as a slider moves without asking the server again:
//   score(d) = ws / (k + semantic rank) + wk / (k + keyword rank)
// ranks 1-based, a list an episode is absent from adds nothing, and a contribution of 0
// brings no episode in (the spec's guard, on both sides). Ties go to the better single
// rank, then the lower id. The semantic term is added first, as on the server, so the
// floating-point sums are the same.
"use strict";

function fuseLegs(semanticIds, keywordIds, semanticWeight, keywordWeight, limit, k) {
  const scores = new Map();
  const ranks = { semantic: new Map(), keyword: new Map() };
  const sides = [
    ["semantic", semanticIds, semanticWeight],
    ["keyword", keywordIds, keywordWeight],
  ];
  for (const [side, ids, weight] of sides) {
    ids.forEach((id, index) => {
      const rank = index + 1;
      if (ranks[side].has(id)) return; // an id listed twice counts once, at its best rank
      ranks[side].set(id, rank);
      const contribution = weight / (k + rank);
      if (contribution > 0) scores.set(id, (scores.get(id) || 0) + contribution);
    });
  }
  const best = (id) =>
    Math.min(ranks.semantic.get(id) ?? Infinity, ranks.keyword.get(id) ?? Infinity);
  const ordered = [...scores.keys()].sort(
    (a, b) => scores.get(b) - scores.get(a) || best(a) - best(b) || a - b
  );
  return ordered.slice(0, Math.max(limit, 0)).map((id) => ({
    id,
    score: scores.get(id),
    semanticRank: ranks.semantic.get(id) ?? null,
    keywordRank: ranks.keyword.get(id) ?? null,
  }));
}

window.fuseLegs = fuseLegs;
