"""Probe: the fill's acceptance cells split by the local model's confidence in the token it just
committed (docs/results.md, "The model's own confidence as a cell"; not kept: every split lost).

    python scripts/confidence_probe.py --bins 0.5,0.9 replay --data agent-transcripts --limit 20 \\
        --methods oilbird --cache runs/tcache --out runs/conf-0.5-0.9 --force

Everything after the probe's own ``--bins`` is ``python -m oilbird``'s command line. For that
run, after every verdict (:meth:`oilbird.drafter.Drafter.update`) the acceptance rates' per-cycle
``warm`` field becomes ``(warm, bin)``: the bin, among ``--bins``, of the probability the model's
top-k at the last accepted node gave the token committed after it (the bonus; 0 where it is not
among the top-k). So every cell (proposer, depth, warm, ...) is split by that bin, as ``warm``
splits them. Nothing of the library changes on disk.
"""
from __future__ import annotations

import runpy
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def confidence_bin(verdict, bins: tuple[float, ...]) -> int:
    """How many of ``bins`` the model's probability of ``verdict.bonus`` at the last accepted
    node reaches (0 where that node's outputs were not seen or the bonus is not in its top-k)."""
    row = verdict._row(verdict.accepted[-1])
    if row is None:
        return 0
    hit = np.nonzero(np.asarray(verdict.topk_ids[row]) == verdict.bonus)[0]
    p = float(verdict.topk_probs[row][hit[0]]) if len(hit) else 0.0
    return sum(p >= b for b in bins)


def install(bins: tuple[float, ...]) -> None:
    """Patch :meth:`Drafter.update` (in this process) to split the rates' cells by the bin."""
    from oilbird import drafter
    update = drafter.Drafter.update

    def split(self, tree, verdict, info, tokens, request_id, root_index):
        update(self, tree, verdict, info, tokens, request_id, root_index)
        if self.rates is not None:
            self.rates.warm = (bool(self.rates.warm), confidence_bin(verdict, bins))

    drafter.Drafter.update = split


def main(argv: list[str]) -> None:
    if len(argv) < 2 or argv[0] != "--bins":
        raise SystemExit("usage: confidence_probe.py --bins B1[,B2...] <python -m oilbird arguments>")
    install(tuple(float(b) for b in argv[1].split(",")))
    sys.argv = ["oilbird"] + argv[2:]
    runpy.run_module("oilbird", run_name="__main__")


if __name__ == "__main__":
    main(sys.argv[1:])
