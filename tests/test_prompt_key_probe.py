"""scripts/prompt_key_probe.py: the prompt-state key ranks the root's prompt occurrences by state."""
import importlib.util
from pathlib import Path

import numpy as np

from oilbird.sources.base import DraftContext

spec = importlib.util.spec_from_file_location("prompt_key_probe",
                                              Path(__file__).parents[1] / "scripts" / "prompt_key_probe.py")
pk = importlib.util.module_from_spec(spec)
spec.loader.exec_module(pk)


def test_the_occurrence_whose_preceding_state_is_nearest_proposes_what_followed_it():
    # prompt: root 5 occurs at 2 and 6; the state before 6 (row 5) is the query's, before 2 not
    prompt = [1, 9, 5, 3, 4, 8, 5, 7, 7, 2]
    S = np.zeros((len(prompt), 2), dtype=np.float16)
    S[:, 1] = 1
    S[5] = [1, 0]
    src = pk.PromptKeySource({"conv": (prompt + [6], S)})
    src.start_request(prompt, "conv#3")
    ctx = DraftContext(tokens=prompt + [8, 5], request_id="conv#3", query_state=np.array([1, 0], np.float32))
    p = src.propose(ctx, 11)
    assert p.chains[0].tokens == [7, 7, 2] and p.chains[0].score == 1.0
    assert p.chains[0].match == 2                    # ours end 8 5, the occurrence's 8 5
    assert len(p.chains) == 1                        # the other occurrence is below the floor
    # a turn whose prompt is not the stored prefix, or an unknown conversation: nothing
    src.start_request([2] + prompt, "conv#4")
    assert src.propose(ctx, 11).chains == []
    src.start_request(prompt, "other#0")
    assert src.propose(ctx, 11).chains == []


def test_refuses_anything_but_a_fast_replay(capsys):
    assert pk.main([]) == 2 and pk.main(["replay", "--exact"]) == 2
    assert "fast replay" in capsys.readouterr().err
