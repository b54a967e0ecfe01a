"""scripts/paper_pairs.py: the paper's section 6.2 hosts, handed the pool, with and without the key."""
import importlib.util
from pathlib import Path

from oilbird import methods as M, presets as PR
from oilbird.drafter import Drafter
from oilbird.methods import TreeConfig
from oilbird.store import Store

spec = importlib.util.spec_from_file_location("paper_pairs", Path(__file__).parents[1] / "scripts" / "paper_pairs.py")
pp = importlib.util.module_from_spec(spec)
spec.loader.exec_module(pp)


def test_the_pairs_are_hosts_with_the_pool_and_the_papers_fill(monkeypatch):
    monkeypatch.setattr(M, "PRESETS", dict(M.PRESETS))
    pp._install()
    store = Store(dim=4)
    for name, sources in pp.PAIRS.items():
        m = M.parse_method(name)
        assert m.sources == sources and "suffix" in sources       # the pool, under its exact key
        tree = m.tree(TreeConfig())
        assert tree.fill == "reserved" and m.fill is None          # as the paper published them
        assert tree.semantic_budget == (2 if "semantic" in sources else 0)
        built = PR.make_sources(m.sources, store, 4, 32)
        assert [s.name for s in built] == list(sources)
        Drafter(built, tree)                                       # roles known, names unique
    # each +sem preset is its host plus the key and nothing else
    assert set(pp.PAIRS["pld+pool+sem"]) - set(pp.PAIRS["pld+pool"]) == {"semantic"}
    assert set(pp.PAIRS["recycling+pool+sem"]) - set(pp.PAIRS["recycling+pool"]) == {"semantic"}


def test_without_a_command_it_says_how_to_call_it(capsys):
    assert pp.main([]) == 2
    err = capsys.readouterr().err
    assert "paper_pairs.py replay" in err and "--methods pld+pool" in err
