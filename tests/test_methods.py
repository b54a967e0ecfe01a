"""The method registry (oilbird.methods): one parser for every caller, trees resolved once."""
from dataclasses import replace
import subprocess
import sys

import pytest

from oilbird.methods import (FILLS, PRESETS, Method, TreeConfig, known_methods, parse_method,
                             parse_methods)


def test_parse_method_kinds_and_fills():
    assert parse_method("ar") == Method("ar", "ar", "baseline")
    assert parse_method("hf-pld").kind == "peer" and not parse_method("hf-pld").drafts_tree
    arctic = parse_method("suffix-arctic:expected")
    assert (arctic.kind, arctic.sources, arctic.fill, arctic.drafts_tree) == ("peer", ("arctic",), "expected", True)
    m = parse_method(" oilbird:expected ")
    assert (m.name, m.base, m.kind, m.sources, m.fill) == ("oilbird:expected", "oilbird", "tree",
                                                           PRESETS["oilbird"], "expected")
    for bad, msg in (("nope", "unknown method 'nope'"), ("ar:expected", "only tree methods"),
                     ("goose:cost-aware", "one fill"), ("goose:expected:reserved", "one fill")):
        with pytest.raises(ValueError, match=msg):
            parse_method(bad)


def test_parse_methods_refuses_a_name_twice_and_untraceable_methods():
    assert [m.name for m in parse_methods(" ar, oilbird:expected ,goose")] == ["ar", "oilbird:expected", "goose"]
    with pytest.raises(ValueError, match="method 'goose' is named twice"):
        parse_methods("ar,goose,goose")
    with pytest.raises(ValueError, match="'ar' drafts no tree"):
        parse_methods("goose,ar", traced=True)
    with pytest.raises(ValueError, match="no method given"):
        parse_methods(" , ")
    # another fill is a different method: both may run in one bench; the preset's own fill is not
    assert len(parse_methods("oilbird,oilbird:reserved")) == 2
    with pytest.raises(ValueError, match="'oilbird:expected' is 'oilbird' again"):
        parse_methods("oilbird,oilbird:expected")


def test_a_method_resolves_its_tree_once():
    base = TreeConfig(budget=16, semantic_budget=4)
    assert parse_method("goose:reserved").tree(base) == replace(base, semantic_budget=0)
    # the Oilbird presets fill by expected acceptance unless the name asks for the paper's fill
    assert parse_method("oilbird").tree(base) == replace(base, fill="expected")
    assert parse_method("oilbird-no-semantic").tree(base).fill == "expected"
    assert parse_method("oilbird:reserved").tree(base) == base
    assert parse_method("goose").tree(base).fill == parse_method("pld+sem").tree(base).fill == "reserved"
    # no source pays from the semantic pass: nothing is reserved for it
    assert parse_method("goose").tree(base).semantic_budget == 0
    assert parse_method("recycling+sem").tree(base).semantic_budget == 4
    assert parse_method("goose").tree().budget == TreeConfig().budget


def test_tree_options():
    # a small --budget shrinks the default reserve instead of failing on a flag not given
    assert TreeConfig.sized(2).semantic_budget == 1
    assert TreeConfig.sized(1).semantic_budget == 0
    assert TreeConfig.sized() == TreeConfig()
    assert TreeConfig.sized(20, 5) == TreeConfig(budget=20, semantic_budget=5)
    for bad in (dict(budget=0), dict(semantic_budget=-1), dict(budget=4, semantic_budget=4), dict(fill="both")):
        with pytest.raises(ValueError):
            TreeConfig(**bad)
    assert FILLS == ("reserved", "expected", "open")
    assert not TreeConfig().valued and TreeConfig(fill="expected").valued and TreeConfig(fill="open").valued


def test_semantic_flags_follow_the_sources():
    assert parse_method("oilbird").has_semantic and parse_method("oilbird").semantic_gated
    assert not parse_method("oilbird-ungated").semantic_gated
    assert not parse_method("goose").has_semantic and not parse_method("suffix-arctic").has_semantic
    assert set(known_methods()) >= {"ar", "hf-greedy", "hf-pld", "suffix-arctic", *PRESETS}


def test_the_registry_and_results_load_without_torch():
    """The views read the registry and results without the model stack."""
    code = ("import sys; import oilbird.methods, oilbird.evaluation.results; "
            "assert 'torch' not in sys.modules, 'torch was imported'")
    subprocess.run([sys.executable, "-c", code], check=True)
