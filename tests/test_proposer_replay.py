"""scripts/proposer_replay.py: the vLLM proposer replayed on a serve-bench run's outputs."""
import importlib.util
import json
from pathlib import Path

spec = importlib.util.spec_from_file_location("proposer_replay",
                                              Path(__file__).parents[1] / "scripts" / "proposer_replay.py")
pr = importlib.util.module_from_spec(spec)
spec.loader.exec_module(pr)

ANSWER = [40 + (i * 7) % 50 for i in range(40)]


def _run(tmp_path) -> Path:
    """A serve-bench folder: two requests with the same answer to different prompts."""
    run = tmp_path / "sb"
    run.mkdir(parents=True)
    prompts = [{"id": "a", "ids": [1, 5, 6, 7, 8, 9]}, {"id": "b", "ids": [1, 3, 5, 6, 7, 8, 9]}]
    (run / "spec.json").write_text(json.dumps({"prompts": prompts}))
    (run / "engine-oilbird.json").write_text(json.dumps({"passes": {"1": {"outputs": {"a": ANSWER, "b": ANSWER}}}}))
    return run


def test_a_repeated_answer_is_drafted_from_the_store(tmp_path, tiny_lm):
    from oilbird.serving.vllm import BatchProposer, ProposerConfig
    reqs = pr.load_run(_run(tmp_path))
    assert [r[0] for r in reqs] == ["a", "b"] and pr.load_run(_run(tmp_path / "x"), 1) == reqs[:1]
    states = pr.hidden_states(tiny_lm, reqs)
    assert states["a"].shape[0] == 6 + len(ANSWER)
    dim = states["a"].shape[1]
    first = pr.replay(BatchProposer(dim, 256, 8, 1 << 20, ProposerConfig()), reqs[:1], states)
    both = pr.replay(BatchProposer(dim, 256, 8, 1 << 20, ProposerConfig()), reqs, states)
    assert first["tokens"] == len(ANSWER) and both["tokens"] == 2 * len(ANSWER) and both["failures"] == 0
    # the second request copies the first's answer from the store: most of it accepted as drafts
    assert both["accepted"] - first["accepted"] >= len(ANSWER) // 2
    assert both["tokens_per_step"] == both["tokens"] / (both["tokens"] - both["accepted"])
    assert both["steps"] == both["tokens"] - both["accepted"]      # each step commits accepted + 1


def test_a_folder_that_is_not_a_run_is_refused(tmp_path, capsys):
    assert pr.main([str(tmp_path / "none")]) == 2
    assert "not a serve-bench run" in capsys.readouterr().err
    assert pr.main([str(_run(tmp_path)), "--config", '{"min_prob": 2}']) == 2
    assert "min_prob" in capsys.readouterr().err
