"""scripts/origin_probe.py: the semantic key's neighbours split by the label of their request."""
import importlib.util
from pathlib import Path

import numpy as np

from oilbird import methods as M, presets as PR
from oilbird.drafter import Drafter
from oilbird.methods import TreeConfig
from oilbird.sources.base import DraftContext
from oilbird.store import Store

spec = importlib.util.spec_from_file_location("origin_probe", Path(__file__).parents[1] / "scripts" / "origin_probe.py")
op = importlib.util.module_from_spec(spec)
spec.loader.exec_module(op)


def _unit(*v):
    v = np.asarray(v, dtype=np.float32)
    return v / np.linalg.norm(v)


def _store():
    store = Store(dim=4)
    other = _unit(0, 0, 0, 1)
    # three earlier requests whose record 0 is near the query and is followed by the root 12: an
    # earlier turn of the same conversation, another trial of the same task, another task
    for rid, state, tail in (("air-task1-trial1#0", _unit(1, 0.05, 0, 0), [17, 18]),
                             ("air-task1-trial0#2", _unit(1, 0.1, 0, 0), [13, 14]),
                             ("air-task2-trial0#5", _unit(1, 0.2, 0, 0), [15, 16])):
        for i, (t, s) in enumerate(zip([20, 12] + tail, [state, other, other, other])):
            store.add(rid, i, t, s)
        store.end_request()
    return store


def test_labels_conversations_and_origins_come_from_the_request_ids():
    assert op.label("tau-airline-task17-trial3#4") == "17"
    assert op.label("api-bank-7#0") is None and op.label(None) is None
    assert op.conversation("tau-airline-task17-trial3#4") == "tau-airline-task17-trial3"
    assert op.origin("air-task1-trial1#2", "air-task1-trial1#0") == "self"
    assert op.origin("air-task1-trial1#2", "air-task1-trial0#0") == "kin"
    assert op.origin("air-task1-trial1#2", "air-task2-trial1#0") == ""
    assert op.origin("chat-9#1", "chat-8#0") == ""                 # no label: no kin


def test_each_neighbour_goes_to_the_source_of_its_origin():
    split = op.SplitSemantic(_store())
    own, kin = op.OriginSemantic(split, "self"), op.OriginSemantic(split, "kin")
    assert (own.name, kin.name) == ("semantic-self", "semantic-kin")
    ctx = DraftContext(tokens=[5, 12], request_id="air-task1-trial1#2", query_state=_unit(1, 0, 0, 0),
                       lexical_match_len=2)
    rest = split.propose(ctx, 11)
    assert [c.tokens for c in rest.chains] == [[15, 16]]               # task 2's neighbour
    assert [c.tokens for c in own.propose(ctx, 11).chains] == [[17, 18]]   # this conversation's earlier turn
    assert [c.tokens for c in kin.propose(ctx, 11).chains] == [[13, 14]]   # task 1, another trial
    assert rest.retrieval == "retrieved"
    # a request of another conversation without a label: every neighbour stays with the key
    alone = split.propose(DraftContext(tokens=[5, 12], request_id="chat-9#0", query_state=_unit(1, 0, 0, 0),
                                       lexical_match_len=2), 11)
    assert len(alone.chains) == 3 and own.propose(ctx, 11).chains == [] == kin.propose(ctx, 11).chains
    # a cycle that retrieves nothing holds nothing over from the last
    split.propose(ctx, 11)
    split.propose(DraftContext(tokens=[5, 12], request_id="air-task1-trial1#2", lexical_match_len=0), 11)
    assert own.propose(ctx, 11).chains == [] == kin.propose(ctx, 11).chains


def test_the_probe_preset_is_oilbird_with_the_key_split_in_three(monkeypatch):
    monkeypatch.setattr(M, "PRESETS", dict(M.PRESETS))
    monkeypatch.setattr(M, "PRESET_FILLS", dict(M.PRESET_FILLS))
    monkeypatch.setattr(PR, "make_sources", PR.make_sources)
    op._install()
    m = M.parse_method("oilbird-kin")
    assert m.fill == "expected" and set(m.sources) == set(M.PRESETS["oilbird"]) | {"semantic-self", "semantic-kin"}
    sources = PR.make_sources(m.sources, _store(), 4, 32)
    assert [s.name for s in sources] == ["suffix", "pld", "recycling", "semantic", "semantic-self", "semantic-kin",
                                         "rejected"]
    assert sources[4].split is sources[3] is sources[5].split
    Drafter(sources, m.tree(TreeConfig()))                        # names unique, roles known
    assert [s.name for s in PR.make_sources(("pld", "semantic"), _store(), 4, 32)] == ["pld", "semantic"]


def test_refuses_anything_but_a_fast_replay_and_a_bad_label(capsys):
    assert op.main([]) == 2 and op.main(["replay", "--exact"]) == 2
    assert "fast replay" in capsys.readouterr().err
    assert op.main(["replay", "--label", "(", "--data", "x"]) == 2
    assert op.main(["replay", "--label=task", "--data", "x"]) == 2
    assert "needs a group" in capsys.readouterr().err
    assert op.LABEL.pattern == r"task(\d+)"                         # a refused label leaves the default
