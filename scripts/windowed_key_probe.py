"""Probe: does the semantic key identify better when it carries a few positions of history?

    python scripts/windowed_key_probe.py stats runs/tcache --window 4 --decay 0.5 --out runs/windowed-w4
    python scripts/windowed_key_probe.py replay --windowed runs/windowed-w4 --data agent-transcripts --limit 20 \\
        --methods oilbird --cache runs/tcache --out runs/win-w4-20 --force

The key today is one position's state (the token before the root). Two records can hold nearly
the same state and differ in what came a few tokens earlier: a neighbour that is right should
agree on that history too. Here every state the replay reads (the teacher rows, hence the
store's records, the query, the rejected pool's keys and the suffix index's occurrence states)
is replaced by ``sum_j decay**j * unit(s[t - j])`` over ``j < window``, within one turn's rows
(a turn's first rows have fewer terms), so query and records are keyed alike.

``stats DIR``: fits, on a replay ``--cache`` folder, the monotone map from a windowed cosine to a
raw one (matching the quantiles of both kinds' top-64 similarities, as
``scripts/centred_key_probe.py`` does), so every floor, tier and score cell keeps its meaning and
only the ranking changes; prints how many of each query's 8 nearest records stay the same, and
writes ``window.json`` and ``map.npy`` to ``--out``. ``replay --windowed DIR ...``: a fast
``python -m oilbird replay`` with that key. Nothing of the library changes. Results:
docs/results.md ("A key with history, and stores that say whose states they hold").
"""
from __future__ import annotations

import argparse
import glob
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from centred_key_probe import NEAREST, TOP, install, quantile_map, replay_with, unit  # noqa: E402


def windowed(states: np.ndarray, starts: list[int], window: int, decay: float) -> np.ndarray:
    """Each row replaced by ``sum_j decay**j * unit(row - j)``, ``j < window``, never reaching
    back across a turn's first row (``starts``: each turn's first row, increasing).

    >>> s = np.array([[1., 0.], [0., 2.], [3., 0.]])
    >>> windowed(s, [0, 2], 2, 0.5).tolist()
    [[1.0, 0.0], [0.5, 1.0], [1.0, 0.0]]
    """
    u = unit(np.asarray(states, dtype=np.float32))
    out = u.copy()
    first = np.zeros(len(u), dtype=np.int64)
    bounds = sorted({int(b) for b in starts if 0 <= b < len(u)} | {0}) + [len(u)]
    for a, b in zip(bounds, bounds[1:]):
        first[a:b] = a
    rows = np.arange(len(u))
    for j in range(1, window):
        ok = rows - j >= first
        out[ok] += (decay ** j) * u[rows[ok] - j]
    return out


def fit(files: list[str], window: int, decay: float, queries: int = 3000, seed: int = 0) -> tuple[dict, np.ndarray]:
    """(what ``stats`` prints, the quantile map) over a teacher cache's files: queries from the
    second half of the files, records from the first half."""
    raw_s, win_s = [], []
    for f in files:
        z = np.load(f)
        raw_s.append(unit(z["states"].astype(np.float32)))
        win_s.append(unit(windowed(z["states"], [int(o) for o in np.asarray(z["offsets"]).ravel()], window, decay)))
    half = max(1, len(files) // 2)
    rng = np.random.default_rng(seed)
    Rr, Rw = np.concatenate(raw_s[:half]), np.concatenate(win_s[:half])
    Qr, Qw = np.concatenate(raw_s[half:]), np.concatenate(win_s[half:])
    pick = rng.choice(len(Qr), min(queries, len(Qr)), replace=False)
    raw, win = Qr[pick] @ Rr.T, Qw[pick] @ Rw.T
    k, top = min(NEAREST, len(Rr)), min(TOP, len(Rr))
    nr, nw = np.argsort(-raw, 1)[:, :k], np.argsort(-win, 1)[:, :k]
    out = {"window": window, "decay": decay, "files": len(files),
           "nearest_shared": float(np.mean([len(set(a) & set(b)) for a, b in zip(nr, nw)])), "nearest": k}
    return out, quantile_map(np.sort(win, 1)[:, -top:].ravel(), np.sort(raw, 1)[:, -top:].ravel())


def install_window(window: int, decay: float, pairs: np.ndarray) -> None:
    """Window every teacher row the replay reads, then map similarities back (module doc)."""
    import torch
    from oilbird import decoding as D
    from oilbird.verifier import NodeOutputs
    init = D.Replay.__init__

    def replay_init(self, recording, teacher=None):
        if teacher is not None:        # one turn's rows
            w = torch.from_numpy(windowed(teacher.states.numpy(), [0], window, decay))
            teacher = NodeOutputs(teacher.argmax, teacher.topk_ids, teacher.topk_probs, w)
        init(self, recording, teacher)

    D.Replay.__init__ = replay_init
    install(np.zeros(1, dtype=np.float32), pairs)       # no centring: the similarity map alone


def main(argv: list[str]) -> int:
    if argv[:1] == ["stats"]:
        ap = argparse.ArgumentParser(prog="windowed_key_probe.py stats")
        ap.add_argument("cache", help="a replay --cache folder (.npz teacher rows)")
        ap.add_argument("--window", type=int, default=4)
        ap.add_argument("--decay", type=float, default=0.5)
        ap.add_argument("--out", required=True, help="where window.json and map.npy are written")
        args = ap.parse_args(argv[1:])
        files = sorted(glob.glob(str(Path(args.cache) / "*.npz")))
        if len(files) < 2 or args.window < 1:
            print(f"windowed_key_probe: '{args.cache}' holds {len(files)} .npz files; a replay --cache folder of "
                  "at least two conversations and --window >= 1 are needed", file=sys.stderr)
            return 2
        out, pairs = fit(files, args.window, args.decay)
        Path(args.out).mkdir(parents=True, exist_ok=True)
        np.save(Path(args.out) / "map.npy", pairs)
        (Path(args.out) / "window.json").write_text(json.dumps({"window": args.window, "decay": args.decay}))
        print(json.dumps(out, indent=1))
        return 0
    def setup(folder: Path) -> None:
        w = json.loads((folder / "window.json").read_text())
        install_window(int(w["window"]), float(w["decay"]), np.load(folder / "map.npy"))
    return replay_with(argv, "windowed_key_probe.py", "--windowed", setup)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
