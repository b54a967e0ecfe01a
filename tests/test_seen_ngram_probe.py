"""scripts/seen_ngram_probe.py: the context's n-grams it keeps, the flag it reads off a tree,
and that the patch reaches the fill's cells (a probe whose figures docs/results.md quotes)."""
import importlib.util
from pathlib import Path

from oilbird import acceptance, drafter
from oilbird.drafter import Drafter, TreeConfig
from oilbird.sources.base import Chain
from oilbird.tree import DraftTree

SPEC = importlib.util.spec_from_file_location(
    "seen_ngram_probe", Path(__file__).resolve().parents[1] / "scripts" / "seen_ngram_probe.py")
probe = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(probe)


def test_the_grams_grow_with_the_context_and_start_afresh_for_another():
    g = probe.ContextGrams(2)
    g.update([1, 2, 3])
    assert g.grams == {(1, 2), (2, 3)}
    g.update([1, 2, 3, 4])                 # extended: only the new gram is added
    assert g.grams == {(1, 2), (2, 3), (3, 4)}
    g.update([7, 2, 3])                    # another context: nothing of the last one stays
    assert g.grams == {(7, 2), (2, 3)}


def test_a_nodes_gram_runs_up_its_path_and_into_the_context():
    g = probe.ContextGrams(3)
    g.update([1, 2, 3, 4, 2, 3, 9])        # the root is 9
    tree = DraftTree.root(9)
    a = tree.add(0, 4, "s", 1.0)           # (3, 9, 4): not in the context
    b = tree.add(0, 2, "s", 1.0)           # (3, 9, 2): not either
    c = tree.add(b, 3, "s", 1.0)           # (9, 2, 3): no
    assert [g.seen(tree, tree.parents[i], tree.tokens[i]) for i in (a, b, c)] == [False, False, False]
    g.update([3, 9, 4, 2, 9, 2, 3, 0, 3, 9])   # another context, the same root: "9 2 3" and "3 9 4" occur
    assert g.seen(tree, b, 3) and g.seen(tree, 0, 4) and not g.seen(tree, 0, 2)
    g2 = probe.ContextGrams(2)
    g2.update([9, 5, 9])                   # the root is 9 again
    assert g2.seen(tree, 0, 2) is False and g2.seen(tree, 0, 5) is True
    assert probe.ContextGrams(4).seen(tree, 0, 2) is False    # a context shorter than the gram


def test_the_patch_adds_the_flag_to_every_cell_the_fill_prices(monkeypatch):
    rates_cls = acceptance.AcceptanceRates
    for name in ("candidate_cell", "node_cell"):
        monkeypatch.setattr(rates_cls, name, getattr(rates_cls, name))     # undone after the test
    monkeypatch.setattr(drafter.Drafter, "draft", drafter.Drafter.draft)
    probe.install(2)

    class Chains(drafter.DraftSource):
        name, role = "rejected", "chains"

        def propose(self, ctx, budget):
            return drafter.Proposal([Chain([2, 5], 0.96)], match_len=1)
    priced = []
    monkeypatch.setattr(rates_cls, "rate", lambda self, c: priced.append(c) or 0.5)
    d = Drafter([Chains()], TreeConfig(budget=4, fill="expected"))
    tree, _ = d.draft([1, 2, 1], "r", None)     # (1, 2) occurs in the context, (2, 5) does not
    assert tree.tokens == [1, 2, 5]
    plain = rates_cls.cell(d.rates, {"rejected"}, 1, 0.96, 0, set())
    assert [len(c) for c in priced] == [len(plain) + 1] * 2
    assert [(c[1], c[-1]) for c in priced] == [(1, True), (2, False)]
    assert d.rates.node_cell(tree, 2, 2)[-1] is False and d.rates.node_cell(tree, 1, 1)[-1] is True


def test_the_stats_group_the_finest_cells_by_the_flag():
    rates = acceptance.AcceptanceRates(score_bins=(0.9,), match_bins=(1, 2), runs=True)
    for cell, tested, hits in [(("semantic", 1, False, 2, 1, True, True), 150, 30),
                               (("semantic", 1, False, 1, 1, True, True), 100, 10),   # another score bin
                               (("semantic", 1, False, 2, 1, True, False), 300, 15),
                               (("semantic", 1, False), 550, 55),                    # a coarser cell
                               (("pld", 5, True, 0, 2, False, True), 90, 9)]:        # tested too rarely
        rates.tested[cell], rates.hits[cell] = tested, hits
    assert probe.by_flag(rates) == [("semantic", 1, 1, False, 300, 0.05), ("semantic", 1, 1, True, 250, 0.16)]
    no_scores = acceptance.AcceptanceRates(match_bins=(1, 2))       # the agreement bin right after warm
    no_scores.tested[("pld", 2, True, 2, False)], no_scores.hits[("pld", 2, True, 2, False)] = 300, 30
    assert probe.by_flag(no_scores) == [("pld", 2, 2, False, 300, 0.1)]
