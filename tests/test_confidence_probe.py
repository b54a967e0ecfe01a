"""scripts/confidence_probe.py: the bin it splits the acceptance cells by, and that the patch
reaches the rates (a probe whose figures docs/results.md quotes)."""
import importlib.util
from pathlib import Path

import numpy as np

from oilbird.drafter import Drafter, TreeConfig
from oilbird.sources.base import Chain
from oilbird.verdict import TreeVerdict

SPEC = importlib.util.spec_from_file_location(
    "confidence_probe", Path(__file__).resolve().parents[1] / "scripts" / "confidence_probe.py")
probe = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(probe)


def _verdict(bonus, ids, probs, accepted=(0,)):
    n = 2
    return TreeVerdict(list(accepted), bonus, [0] * n, None, np.zeros(n, int), np.array([ids] * n),
                       np.array([probs] * n), np.zeros((n, 4), np.float32))


def test_the_bin_is_the_models_probability_of_the_committed_token():
    assert probe.confidence_bin(_verdict(7, [7, 3], [0.95, 0.05]), (0.5, 0.9)) == 2
    assert probe.confidence_bin(_verdict(3, [7, 3], [0.6, 0.4]), (0.5, 0.9)) == 0
    assert probe.confidence_bin(_verdict(7, [7, 3], [0.6, 0.4]), (0.5, 0.9)) == 1
    assert probe.confidence_bin(_verdict(9, [7, 3], [0.6, 0.4]), (0.3,)) == 0        # not in the top-k


def test_the_patch_splits_the_rates_cells(monkeypatch):
    from oilbird import drafter
    monkeypatch.setattr(drafter.Drafter, "update", drafter.Drafter.update)     # undone after the test
    probe.install((0.5,))

    class Spine(drafter.DraftSource):
        name, role = "suffix", "spine"

        def propose(self, ctx, budget):
            return drafter.Proposal([Chain([5], 0.9)], match_len=1)
    d = Drafter([Spine()], TreeConfig(budget=4, fill="expected"))
    tree, info = d.draft([1, 2], "r", None)
    v = TreeVerdict([0, 1], 7, [5, 7], None, np.array([5, 7]), np.array([[5], [7]]), np.array([[0.9], [0.8]]),
                    np.zeros((2, 4), np.float32))
    d.update(tree, v, info, [1, 2, 5, 7], "r", 1)
    assert d.rates.warm == (True, 1)
    assert d.rates.cell({"suffix"}, 1)[:3] == ("suffix", 1, (True, 1))
