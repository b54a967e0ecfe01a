"""scripts/reach_decomposition.py: the diagnosis' key's reach, step by step down to the drafter's."""
import importlib.util
from pathlib import Path

import numpy as np

from oilbird.evaluation.diagnose import Pool, RequestDiagnosis

spec = importlib.util.spec_from_file_location(
    "reach_decomposition", Path(__file__).parents[1] / "scripts" / "reach_decomposition.py")
rd = importlib.util.module_from_spec(spec)
spec.loader.exec_module(rd)

E = np.eye(3, dtype=np.float32)


def pool() -> Pool:
    """Three earlier outputs: [3 7 4] and [3 6 4] (the root token 3, followed by the truth 7 in
    the first), and [2 3 7] (a record followed by the root, then the truth)."""
    p = Pool(3, k=1)
    p.add_document([3, 7, 4], E[[0, 0, 0]])
    p.add_document([3, 6, 4], E[[1, 1, 1]])
    p.add_document([2, 3, 7], E[[2, 0, 0]])
    return p


def diagnosis() -> RequestDiagnosis:
    """Output [3 7 8] after prompt [1 2]: position 1 (root 3, truth 7) is a gap position the
    diagnosis' key reaches and the drafter's does not; 0 is the prefill's, 2 no gap."""
    d = RequestDiagnosis("r", [3, 7, 8])
    d.present_2, d.oracle_hit = [False, True, False], [False, False, False]
    d.semantic_hit, d.drafter_hit = [False, True, False], [None, False, False]
    return d


def test_each_step_from_the_diagnosis_key_to_the_drafters():
    states = np.zeros((5, 3), dtype=np.float32)
    states[1], states[2] = E[0], E[1]          # the state before the root; the root's own (near [3 6 4])
    [row] = rd.steps(pool(), [1, 2], [3, 7, 8], states, diagnosis())
    # a record of 3 is followed by 7 (ceiling), but the one nearest the root's state is not;
    # the one record followed by 3 is followed by 7 after it (the lag's reach)
    assert row == {"own": True, "ceiling": True, "own_rooted": False, "lag_rooted": True, "drafter": False}
    states[2] = E[2]                           # the root's own state now nearest [2 3 7]'s 3
    assert rd.steps(pool(), [1, 2], [3, 7, 8], states, diagnosis())[0]["own_rooted"] is True


def test_the_tally_wraps_a_pool_class_and_counts_its_requests():
    class Wrapped(Pool):
        pass

    def label(self, request_id, prompt, output, states):
        return diagnosis()
    Wrapped.label = label
    tally = rd.Tally()
    tally.wrap(Wrapped)
    p = Wrapped(3, k=1)
    for tokens, rows in (([3, 7, 4], [0, 0, 0]), ([3, 6, 4], [1, 1, 1]), ([2, 3, 7], [2, 0, 0])):
        p.add_document(tokens, E[rows])
    states = np.zeros((5, 3), dtype=np.float32)
    states[1], states[2] = E[0], E[1]
    p.label("r", [1, 2], [3, 7, 8], states)
    assert tally.line() == ("1 gap positions a drafter drafts: own 100.0%, ceiling 100.0%, own_rooted 0.0%, "
                            "lag_rooted 100.0%, drafter 0.0%")
    assert rd.Tally().line() == "no gap position a drafter drafts"


def test_widen_sets_the_root_check_of_every_key_made_after_it(monkeypatch):
    from oilbird.sources import semantic as S
    monkeypatch.setattr(S.SemanticConfig, "__init__", S.SemanticConfig.__init__)   # undone after the test
    assert S.SemanticConfig().root_widen == 0          # the default: the exact check
    rd.widen(125)
    assert S.SemanticConfig().root_widen == 125 and S.SemanticConfig(top_k=4).top_k == 4
