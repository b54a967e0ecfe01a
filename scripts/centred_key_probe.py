"""Probe: does the semantic key rank better once the states' shared mean is taken out?

    python scripts/centred_key_probe.py stats runs/tcache --out runs/centred
    python scripts/centred_key_probe.py replay --centre runs/centred --data agent-transcripts --limit 20 \\
        --methods oilbird,oilbird-no-semantic --cache runs/tcache --out runs/centred-20 --force

``stats DIR``: the key-layer states of a fast replay's teacher cache (``replay --cache DIR``'s
``.npz`` files, in name order) say how far from isotropic they are: the mean cosine of random
pairs before and after the mean is subtracted, the mean's norm against a state's, its largest
dimensions, and how many of each query's 8 nearest records stay the same (queries: 3,000 states
of the second half of the files; records: the first half). It writes ``mean.npy`` and
``map.npy`` to ``--out``: the monotone map from a centred cosine to a raw one, by matching the
quantiles of both kinds of top-64 similarities, so that every floor, tier, temperature and score
cell keeps the meaning it has on raw cosines and only the ranking changes.

``replay --centre DIR ...``: ``python -m oilbird replay`` (fast mode) with every state the
replay reads centred by ``DIR/mean.npy`` (the teacher rows, hence the store's records, the query,
the rejected pool's keys and the state-weighted suffix index's states) and every similarity put
back on the raw scale by ``DIR/map.npy``: the store's search, the suffix index's occurrence
weights, and the rejected pool's chains (its floor moved by the map's inverse). Nothing of the
library changes. Results: docs/results.md ("A centred key").
"""
from __future__ import annotations

import argparse
import glob
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

TOP = 64          # similarities per query the quantile map is fitted on
NEAREST = 8       # the key's neighbours (SemanticConfig.top_k)


def unit(x: np.ndarray) -> np.ndarray:
    return x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)


def quantile_map(centred: np.ndarray, raw: np.ndarray, points: int = 201) -> np.ndarray:
    """``[[centred cosine, raw cosine], ...]``, increasing in both: the raw cosine at the same
    quantile as each centred one, pinned to -1 -> the lowest raw value and 1 -> 1."""
    qs = np.linspace(0, 1, points)
    pairs = np.stack([np.quantile(centred, qs), np.quantile(raw, qs)], 1)
    pairs[0, 0], pairs[-1] = -1.0, (1.0, 1.0)
    return pairs.astype(np.float32)


def apply_map(x, pairs: np.ndarray):
    return np.interp(x, pairs[:, 0], pairs[:, 1])


def stats(states: list[np.ndarray], queries: int = 3000, seed: int = 0) -> tuple[dict, np.ndarray, np.ndarray]:
    """(the numbers ``stats`` prints, the mean state, the quantile map) over per-file state arrays."""
    S = np.concatenate(states)
    mu = S.mean(0)
    rng = np.random.default_rng(seed)
    half = max(1, len(states) // 2)
    R, Q = np.concatenate(states[:half]), np.concatenate(states[half:])
    Q = Q[rng.choice(len(Q), min(queries, len(Q)), replace=False)]
    raw, cen = unit(Q) @ unit(R).T, unit(Q - mu) @ unit(R - mu).T
    pick = rng.choice(len(S), min(2000, len(S)), replace=False)
    pairs = np.triu_indices(len(pick), 1)
    k = min(NEAREST, R.shape[0])
    near_raw, near_cen = np.argsort(-raw, axis=1)[:, :k], np.argsort(-cen, axis=1)[:, :k]
    top = min(TOP, R.shape[0])
    out = {"states": int(len(S)), "files": len(states),
           "mean_pair_cosine_raw": float((unit(S[pick]) @ unit(S[pick]).T)[pairs].mean()),
           "mean_pair_cosine_centred": float((unit(S[pick] - mu) @ unit(S[pick] - mu).T)[pairs].mean()),
           "mean_norm": float(np.linalg.norm(mu)), "state_norm": float(np.linalg.norm(S, axis=1).mean()),
           "largest_mean_dims": [round(float(v), 1) for v in np.sort(np.abs(mu))[::-1][:5]],
           "nearest_shared": float(np.mean([len(set(a) & set(b)) for a, b in zip(near_raw, near_cen)])),
           "nearest": k}
    fit = quantile_map(np.sort(cen, axis=1)[:, -top:].ravel(), np.sort(raw, axis=1)[:, -top:].ravel())
    return out, mu.astype(np.float32), fit


def install(mu: np.ndarray, pairs: np.ndarray) -> None:
    """Centre the replay's states by ``mu`` and map its similarities by ``pairs`` (module doc)."""
    import torch
    from oilbird import decoding as D, store as ST
    from oilbird.sources import rejected as RJ, suffix as SX
    from oilbird.verifier import NodeOutputs
    shift = torch.from_numpy(np.asarray(mu, dtype=np.float32))
    init, search, weights = D.Replay.__init__, ST.Store.search, SX.occurrence_weights
    propose, rj_init = RJ.RejectedPoolSource.propose, RJ.RejectedPoolSource.__init__

    def replay_init(self, recording, teacher=None):
        if teacher is not None:
            teacher = NodeOutputs(teacher.argmax, teacher.topk_ids, teacher.topk_probs, teacher.states - shift)
        init(self, recording, teacher)

    def mapped_search(self, *a, **k):
        return [(r, float(apply_map(s, pairs))) for r, s in search(self, *a, **k)]

    def mapped_weights(sims, temp):
        return weights([None if s is None else float(apply_map(s, pairs)) for s in sims], temp)

    def rejected_init(self, *a, **k):
        rj_init(self, *a, **k)
        floor = float(np.interp(self.cfg.min_similarity, pairs[:, 1], pairs[:, 0]))   # the map's inverse
        self.cfg = type(self.cfg)(**{**self.cfg.__dict__, "min_similarity": floor})

    def mapped_propose(self, ctx, budget):
        p = propose(self, ctx, budget)
        for c in p.chains:
            c.score = float(apply_map(c.score, pairs))
        return p

    D.Replay.__init__, ST.Store.search, SX.occurrence_weights = replay_init, mapped_search, mapped_weights
    RJ.RejectedPoolSource.__init__, RJ.RejectedPoolSource.propose = rejected_init, mapped_propose


def main(argv: list[str]) -> int:
    if argv[:1] == ["stats"]:
        ap = argparse.ArgumentParser(prog="centred_key_probe.py stats")
        ap.add_argument("cache", help="a replay --cache folder (.npz teacher rows)")
        ap.add_argument("--out", required=True, help="where mean.npy and map.npy are written")
        args = ap.parse_args(argv[1:])
        files = sorted(glob.glob(str(Path(args.cache) / "*.npz")))
        if len(files) < 2:
            print(f"centred_key_probe: '{args.cache}' holds {len(files)} .npz files; a replay --cache folder of "
                  "at least two conversations is needed", file=sys.stderr)
            return 2
        out, mu, fit = stats([np.load(f)["states"] for f in files])
        Path(args.out).mkdir(parents=True, exist_ok=True)
        np.save(Path(args.out) / "mean.npy", mu)
        np.save(Path(args.out) / "map.npy", fit)
        print(json.dumps(out, indent=1))
        return 0
    return replay_with(argv, "centred_key_probe.py", "--centre",
                       lambda folder: install(np.load(folder / "mean.npy"), np.load(folder / "map.npy")))


def replay_with(argv: list[str], prog: str, flag: str, setup) -> int:
    """``replay FLAG DIR ...``: ``setup(DIR)`` patches the replay, then ``python -m oilbird replay``
    runs with the other arguments (fast mode only); anything else is the usage line, exit 2.
    Shared by the key probes that replay with another key (this one, windowed_key_probe.py)."""
    if argv[:1] != ["replay"] or "--exact" in argv or flag not in argv[:-1]:
        print(f"usage: {prog} stats CACHE --out DIR | replay {flag} DIR ... (a fast replay)", file=sys.stderr)
        return 2
    argv = list(argv)
    i = argv.index(flag)
    folder = Path(argv[i + 1])
    del argv[i:i + 2]
    setup(folder)
    from oilbird.__main__ import main as oilbird_main
    return oilbird_main(argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
