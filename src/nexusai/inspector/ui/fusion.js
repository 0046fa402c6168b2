// Weighted Reciprocal Rank Fusion, as the service does it (orchestration/fusion.py), so the
// page can re-fuse the lists as a slider moves without asking the server again:
//   score(d) = sum over lists L of  w_L / (k + rank_L(d))
// ranks 1-based, a list an episode is absent from adds nothing, and a contribution of 0
// brings no episode in (every list guarded). Ties go to the better single rank, then the
// lower id. The lists are summed in the order given (the semantic one first, as on the
// server), so the floating-point sums are the same. Each memory keeps its rank in each
// list that holds it, by the list's name (`ranks`).
"use strict";

function fuseLists(lists, weights, limit, k) {
  const scores = new Map();
  const ranks = Object.fromEntries(Object.keys(lists).map((name) => [name, new Map()]));
  for (const [name, ids] of Object.entries(lists)) {
    const weight = weights[name] || 0;
    ids.forEach((id, index) => {
      const rank = index + 1;
      if (ranks[name].has(id)) return; // an id listed twice counts once, at its best rank
      ranks[name].set(id, rank);
      const contribution = weight / (k + rank);
      if (contribution > 0) scores.set(id, (scores.get(id) || 0) + contribution);
    });
  }
  const named = (id) =>
    Object.fromEntries(Object.entries(ranks).filter(([, found]) => found.has(id)).map(([name, found]) => [name, found.get(id)]));
  const best = (id) => Math.min(...Object.values(named(id)));
  const ordered = [...scores.keys()].sort(
    (a, b) => scores.get(b) - scores.get(a) || best(a) - best(b) || a - b
  );
  return ordered.slice(0, Math.max(limit, 0)).map((id) => {
    const byName = named(id);
    return {
      id,
      score: scores.get(id),
      ranks: byName,
      semanticRank: byName.semantic ?? null,
      keywordRank: byName.keyword ?? null,
    };
  });
}

// The spec's two legs at their two weights.
function fuseLegs(semanticIds, keywordIds, semanticWeight, keywordWeight, limit, k) {
  const lists = { semantic: semanticIds, keyword: keywordIds };
  return fuseLists(lists, { semantic: semanticWeight, keyword: keywordWeight }, limit, k);
}

window.fuseLists = fuseLists;
window.fuseLegs = fuseLegs;
