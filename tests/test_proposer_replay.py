"""scripts/proposer_replay.py: the vLLM proposer replayed on a serve-bench run's outputs."""
import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest
import torch

spec = importlib.util.spec_from_file_location("proposer_replay",
                                              Path(__file__).parents[1] / "scripts" / "proposer_replay.py")
pr = importlib.util.module_from_spec(spec)
spec.loader.exec_module(pr)

ANSWER = [40 + (i * 7) % 50 for i in range(40)]
PROMPTS = {"a": [1, 5, 6, 7, 8, 9], "b": [1, 3, 5, 6, 7, 8, 9]}


def _run(folder: Path, outputs: dict, temperature: float = 0.0) -> Path:
    """A serve-bench --out folder holding what the script reads."""
    folder.mkdir(parents=True)
    (folder / "spec.json").write_text(json.dumps({"prompts": [{"id": k, "ids": v} for k, v in PROMPTS.items()]}))
    (folder / "job-oilbird.json").write_text(json.dumps({"method": "oilbird", "k": 8, "temperature": temperature}))
    (folder / "engine-oilbird.json").write_text(json.dumps({"passes": {"1": {"outputs": outputs}}}))
    return folder


def _proposer(dim, check_layout=False):
    from oilbird.serving.vllm import BatchProposer, ProposerConfig
    p = BatchProposer(dim, 300, 8, 1 << 20, ProposerConfig(check_layout=check_layout))
    p.logits_fn = lambda rows: rows           # the replay's output rows are logits already
    return p


def test_a_repeated_answer_is_drafted_from_the_store(tmp_path, tiny_lm):
    reqs, job = pr.load_run(_run(tmp_path / "sb", {"a": ANSWER, "b": ANSWER}))
    assert [r[0] for r in reqs] == ["a", "b"] and job["k"] == 8
    states = pr.hidden_states(tiny_lm, reqs)
    assert states["a"].shape[0] == len(PROMPTS["a"]) + len(ANSWER)
    dim = states["a"].shape[1]
    first = pr.replay(_proposer(dim), reqs[:1], states)
    both = pr.replay(_proposer(dim), reqs, states)
    assert both["failures"] == 0 and both["layout_mismatch"] == 0 and both["store_requests"] == 2
    assert both["states_used"] == both["steps"]            # the key had its state at every step
    # the second request copies the first's answer from the store: most of it accepted as drafts
    assert both["accepted"] - first["accepted"] >= len(ANSWER) // 2
    # a chain that reaches the output's end is accepted to the end, with no engine token after it
    assert both["steps"] > both["tokens"] - both["accepted"]
    assert both["tokens_per_step"] == both["tokens"] / both["steps"]


def test_the_rows_handed_over_are_the_ones_vllm_would_hand(tmp_path, tiny_lm):
    """Greedy outputs of the tiny model, its logits as the forward's output rows: the proposer's
    layout check (the query row must predict the token the engine sampled) holds at every step."""
    outputs = {}
    for rid, prompt in PROMPTS.items():
        ids = list(prompt)
        with torch.no_grad():
            for _ in range(24):
                ids.append(int(tiny_lm.model(torch.tensor([ids])).logits[0, -1].argmax()))
        outputs[rid] = ids[len(prompt):]
    reqs, _ = pr.load_run(_run(tmp_path / "sb", outputs))
    states = pr.hidden_states(tiny_lm, reqs)
    with torch.no_grad():
        logits = {rid: tiny_lm.model(torch.tensor([p + o])).logits[0].float().numpy() for rid, p, o in reqs}
    res = pr.replay(_proposer(states["a"].shape[1], check_layout=True), reqs, states, logits)
    assert res["layout_checked"] == res["steps"] and res["layout_check_failed"] == 0
    # the same check catches rows read one position off
    shifted = {rid: np.roll(v, 1, axis=0) for rid, v in logits.items()}
    assert pr.replay(_proposer(states["a"].shape[1], check_layout=True), reqs, states, shifted)[
        "layout_check_failed"] > 0


@pytest.mark.parametrize("case, message", [
    ("missing", "not a serve-bench run"),
    ("sampled", "a sampled run"),
    ("no-pass", "no batch-1 pass"),
    ("no-output", "no prompt of spec.json has an output"),
])
def test_a_folder_it_cannot_replay_is_refused_with_why(tmp_path, capsys, case, message):
    run = tmp_path / "sb"
    if case == "sampled":
        _run(run, {"a": ANSWER}, temperature=0.7)
    elif case == "no-pass":
        _run(run, {"a": ANSWER})
        (run / "engine-oilbird.json").write_text(json.dumps({"passes": {"8": {"outputs": {"a": ANSWER}}}}))
    elif case == "no-output":
        _run(run, {"zz": ANSWER})
    assert pr.main([str(run)]) == 2
    assert message in capsys.readouterr().err


def test_bad_options_are_refused_before_the_model_loads(tmp_path, capsys):
    run = _run(tmp_path / "sb", {"a": ANSWER})
    assert pr.main([str(run), "--config", '{"min_prob": 2}']) == 2
    assert "min_prob" in capsys.readouterr().err
    assert pr.main([str(run), "--config", '{"min_prob": "auto"}']) == 2
    assert "step time" in capsys.readouterr().err
    assert pr.main([str(run), "--limit", "0"]) == 2
    assert "--limit must be at least 1" in capsys.readouterr().err


def test_recorded_traffic_or_a_run_one_of_the_two(tmp_path, capsys, monkeypatch):
    """--recording DATA replaces the run folder; both, neither or a bad recording are one line
    before the model loads."""
    import oilbird.model
    monkeypatch.setattr(oilbird.model, "load_model", lambda *a, **k: pytest.fail("model loaded"))
    run = _run(tmp_path / "sb", {"a": ANSWER})
    assert pr.main([str(run), "--recording", "agent-builtin"]) == 2
    assert "one of the two" in capsys.readouterr().err
    assert pr.main([]) == 2
    assert "one of the two" in capsys.readouterr().err
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"messages": [{"role": "robot", "content": "x"}]}\n')
    assert pr.main(["--recording", str(bad)]) == 2
    assert "unknown role 'robot'" in capsys.readouterr().err
    assert pr.main(["--recording", "agent-builtin", "--k", "0"]) == 2
    assert "--k must be at least 1" in capsys.readouterr().err


def test_a_recordings_bad_lines_stop_it_unless_skipped(tmp_path, capsys, monkeypatch):
    """A bad line stops --recording with replay's hint; --skip-bad leaves it out, says so and goes
    on to the model (stopped here by a refusal); --skip-bad without a recording is refused."""
    import oilbird.model
    from oilbird.model import ModelError

    def refuse(*a, **k):
        raise ModelError("no model in this test")
    monkeypatch.setattr(oilbird.model, "load_model", refuse)
    good = {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]}
    rec = tmp_path / "rec.jsonl"
    rec.write_text(json.dumps(good) + "\n{not json\n" + json.dumps(good) + "\n")
    assert pr.main(["--recording", str(rec)]) == 2
    err = capsys.readouterr().err
    assert "--skip-bad replays the other lines" in err and len(err.strip().splitlines()) == 1
    assert pr.main(["--recording", str(rec), "--skip-bad"]) == 2
    err = capsys.readouterr().err
    assert "left out 1 bad line of the recording" in err and "no model in this test" in err
    assert pr.main([str(_run(tmp_path / "sb", {"a": ANSWER})), "--skip-bad"]) == 2
    assert "--skip-bad is for --recording" in capsys.readouterr().err


def test_a_recorded_conversation_is_served_turn_by_turn(tiny_lm):
    """Each assistant turn is one request (prompt: the conversation so far; output: the
    recording), in serving order; a turn past the context is skipped and counted."""
    from oilbird.data.conversations import load_conversations
    convs = load_conversations("agent-builtin", 1)
    reqs, skipped = pr.load_recording(tiny_lm.tokenizer, convs, 10 ** 6, tiny_lm.eos_token_ids)
    assert skipped == 0 and len(reqs) >= 3
    conv = reqs[0][0].split("#")[0]
    assert [r[0] for r in reqs] == [f"{conv}#{i}" for i in range(len(reqs))]
    assert all(len(r[1]) < len(n[1]) for r, n in zip(reqs, reqs[1:]))     # the prompt grows turn by turn
    states = pr.hidden_states(tiny_lm, reqs)
    res = pr.replay(_proposer(states[reqs[0][0]].shape[1]), reqs, states)
    assert res["requests"] == len(reqs) and res["tokens"] == sum(len(r[2]) for r in reqs)
    assert res["failures"] == 0 and res["store_requests"] == len(reqs)
    longest = max(len(r[1]) + len(r[2]) for r in reqs)
    short, dropped = pr.load_recording(tiny_lm.tokenizer, convs, longest - 1, tiny_lm.eos_token_ids)
    assert dropped >= 1 and len(short) == len(reqs) - dropped


def test_an_earlier_turns_rows_come_from_the_later_turns_forward(tiny_lm):
    """A request whose tokens begin the next one's (a chat template's earlier turn) takes its
    rows from that forward: the same rows as its own forward, one forward fewer."""
    first = ("c#0", [1, 5, 6, 7], [40, 41, 42])
    second = ("c#1", [1, 5, 6, 7, 40, 41, 42, 9, 9], [43, 44])
    other = ("d#0", [1, 3], [50, 51])
    calls = []
    real = tiny_lm.model.model.forward if hasattr(tiny_lm.model, "model") else None

    def counted(*a, **k):
        calls.append(1)
        return real(*a, **k)
    tiny_lm.model.model.forward = counted
    try:
        shared = pr.hidden_states(tiny_lm, [first, second, other])
    finally:
        del tiny_lm.model.model.forward
    assert len(calls) == 2                            # d#0 and c#1; c#0 is a slice of c#1's rows
    alone = pr.hidden_states(tiny_lm, [first])
    assert shared["c#0"].shape == alone["c#0"].shape
    assert np.allclose(shared["c#0"], alone["c#0"], atol=1e-4)


def test_the_engine_loop_counts_steps_as_vllm_does():
    """A drafter that always knows the next k tokens: each step commits k + 1 of them, and a chain
    that runs past the output's end saves no step (vLLM counts the step, then drops the rest)."""
    out = list(range(100, 120))                    # 20 tokens: the prefill's, then 19 in steps of 4

    def oracle(k):
        return lambda rid, prompt, o, pos=0, draft=None, sampled=(): o[pos + len(sampled):][:k] + [999] * k
    first = lambda rid, prompt, o: oracle(3)(rid, prompt, o, 1)
    res = pr.drive([("r", [1, 2], out)], first, oracle(3))
    assert res["steps"] == 1 + 5 and res["tokens"] == 20          # ceil(19 / 4) verify steps
    # 4 steps of 3 accepted + the engine's token, then the last 3 tokens as accepted drafts
    assert res["accepted"] == 4 * 3 + 3 and res["tokens_per_step"] == 20 / 6
    nothing = pr.drive([("r", [1, 2], out)], lambda *a: [], lambda *a: [])
    assert nothing["steps"] == 20 and nothing["accepted"] == 0


def test_vllms_suffix_proposer_drafts_a_repeated_answer_from_its_cache(tmp_path):
    pytest.importorskip("arctic_inference.suffix_decoding")
    reqs, job = pr.load_run(_run(tmp_path / "sb", {"a": ANSWER, "b": ANSWER}))
    first = pr.replay_suffix(reqs[:1], job["k"])
    both = pr.replay_suffix(reqs, job["k"])
    # the second request's answer is the first one's: drafted from the cache, in few steps (arctic
    # drafts at most max_spec_factor x the pattern's match length, so its first chains are short)
    assert both["steps"] - first["steps"] <= len(ANSWER) // 4
    assert both["accepted"] - first["accepted"] >= len(ANSWER) - len(ANSWER) // 4
    assert both["tokens"] == 2 * len(ANSWER) and first["accepted"] < len(ANSWER) // 2


def test_the_suffix_replay_uses_the_installed_vllms_suffix_defaults():
    """--suffix replays vLLM's proposer with the defaults it had when written: an upgraded vLLM
    whose suffix_decoding_* defaults moved fails here instead of skewing the comparison."""
    import subprocess
    from oilbird.serving.serve_bench import vllm_python
    py = vllm_python()
    if not Path(py).is_file():
        pytest.skip("no vLLM environment (scripts/setup_vllm_env.sh; $OILBIRD_VLLM_PYTHON)")
    code = ("import dataclasses, json\nfrom vllm.config.speculative import SpeculativeConfig\n"
            "print(json.dumps({f.name[16:]: f.default for f in dataclasses.fields(SpeculativeConfig)"
            " if f.name.startswith('suffix_decoding_')}))")
    res = subprocess.run([py, "-c", code], capture_output=True, text=True, timeout=300)
    if res.returncode != 0:
        pytest.skip("the vLLM environment does not import: " + res.stderr[-300:])
    assert json.loads(res.stdout.strip().splitlines()[-1]) == pr.SUFFIX_DEFAULTS
