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
    # two earlier requests whose record 0 is near the query and is followed by the root 12
    for rid, state, tail in (("air-task1-trial0#2", _unit(1, 0.1, 0, 0), [13, 14]),
                             ("air-task2-trial0#5", _unit(1, 0.2, 0, 0), [15, 16])):
        for i, (t, s) in enumerate(zip([20, 12] + tail, [state, other, other, other])):
            store.add(rid, i, t, s)
        store.end_request()
    return store


def test_labels_come_from_the_request_id():
    assert op.label("tau-airline-task17-trial3#4") == "17"
    assert op.label("api-bank-7#0") is None and op.label(None) is None


def test_neighbours_of_the_requests_own_task_go_to_the_kin_source_the_rest_stay():
    split = op.SplitSemantic(_store())
    kin = op.KinSemantic(split)
    ctx = DraftContext(tokens=[5, 12], request_id="air-task1-trial1#2", query_state=_unit(1, 0, 0, 0),
                       lexical_match_len=2)
    mine = split.propose(ctx, 11)
    theirs = kin.propose(ctx, 11)
    assert [c.tokens for c in mine.chains] == [[15, 16]]          # task 2's neighbour
    assert [c.tokens for c in theirs.chains] == [[13, 14]]        # task 1's: the same task
    assert theirs.retrieval == "retrieved" and mine.retrieval == "retrieved"
    # a request without a label has no kin: the lookup is oilbird's whole
    alone = split.propose(DraftContext(tokens=[5, 12], request_id="chat-9#0", query_state=_unit(1, 0, 0, 0),
                                       lexical_match_len=2), 11)
    assert len(alone.chains) == 2 and kin.propose(ctx, 11).chains == []


def test_the_probe_preset_is_oilbird_with_the_key_split_in_two(monkeypatch):
    monkeypatch.setattr(M, "PRESETS", dict(M.PRESETS))
    monkeypatch.setattr(M, "PRESET_FILLS", dict(M.PRESET_FILLS))
    monkeypatch.setattr(PR, "make_sources", PR.make_sources)
    op._install()
    m = M.parse_method("oilbird-kin")
    assert m.fill == "expected" and set(m.sources) == set(M.PRESETS["oilbird"]) | {"semantic-kin"}
    sources = PR.make_sources(m.sources, _store(), 4, 32)
    assert [s.name for s in sources] == ["suffix", "pld", "recycling", "semantic", "semantic-kin", "rejected"]
    assert sources[m.sources.index("semantic-kin")].split is sources[m.sources.index("semantic")]
    Drafter(sources, m.tree(TreeConfig()))                        # names unique, roles known
    assert [s.name for s in PR.make_sources(("pld", "semantic"), _store(), 4, 32)] == ["pld", "semantic"]


def test_refuses_anything_but_a_fast_replay_and_a_bad_label(capsys):
    assert op.main([]) == 2 and op.main(["replay", "--exact"]) == 2
    assert op.main(["replay", "--label", "(", "--data", "x"]) == 2
    assert "fast replay" in capsys.readouterr().err
