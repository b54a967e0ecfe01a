"""Sampling in the decoder, the bench and the CLI (the tiny mock model stands in for the real one).

Greedy stays the default and unchanged; every sampled request equals plain sampling with the same
seed token for token (tests/conftest.py checks each one a test decodes; the bench audits it);
bad settings are one line, exit 2, before any model loads. The distribution proof is
tests/test_sampling.py.
"""
from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import make_tiny_lm

import oilbird.model
from oilbird.__main__ import main
from oilbird.decoding import autoregressive
from oilbird.presets import make_decoder
from oilbird.sampled import Sampled, check_sampled_output, decisions_per_node, sampled_autoregressive
from oilbird.sampling import SamplingParams
from oilbird.trace import load_traces
from oilbird.verifier import Verifier

PROMPT = [1] + [3 + b for b in b"call f(x=1) then f(x=1) and f(x=1)"]


def _fails(argv, capsys, message):
    try:
        rc = main(argv)
    except SystemExit as exc:
        rc = exc.code
    err = capsys.readouterr().err
    assert rc == 2, err
    assert message in err, err
    assert len(err.strip().splitlines()) == 1, err


@pytest.mark.parametrize("cmd", [["decode", "hi"], ["bench", "--methods", "ar,goose"],
                                 ["trace", "--methods", "goose", "--out", "x.jsonl"]])
@pytest.mark.parametrize("flags, message", [
    (["--temperature", "-0.5"], "temperature must be a number >= 0"),
    (["--temperature", "hot"], "--temperature must be a number, not 'hot'"),
    (["--temperature", "1", "--top-p", "0"], "top-p must be in (0, 1]"),
    (["--temperature", "1", "--top-p", "1.01"], "top-p must be in (0, 1]"),
    (["--temperature", "1", "--top-p", "most"], "--top-p must be a number"),
    (["--temperature", "1", "--seed", "1.5"], "seed must be a whole number, not '1.5'"),
    (["--temperature", "1", "--seed", "abc"], "seed must be a whole number"),
])
def test_bad_sampling_flags_are_one_line_exit_2_before_the_model_loads(cmd, flags, message, capsys, monkeypatch):
    monkeypatch.setattr(oilbird.model, "load_model", lambda *a, **k: pytest.fail("model loaded"))
    _fails(cmd + flags, capsys, message)


def test_greedy_only_methods_are_refused_under_sampling(capsys, monkeypatch):
    monkeypatch.setattr(oilbird.model, "load_model", lambda *a, **k: pytest.fail("model loaded"))
    _fails(["bench", "--methods", "ar,hf-greedy", "--temperature", "0.7"], capsys, "cannot sample")


def test_check_sampled_output():
    eos = {2}
    assert check_sampled_output([5, 6, 2], 10, eos, 8) is None
    assert check_sampled_output([5, 6, 7], 10, eos, 3) is None
    assert "vocabulary" in check_sampled_output([5, 12, 2], 10, eos, 8)
    assert "before the end" in check_sampled_output([5, 2, 6], 10, eos, 8)
    assert "without end-of-sequence" in check_sampled_output([5, 6], 10, eos, 8)


def test_sampled_ar_reproduces_and_differs_by_seed(tiny_lm):
    v = Verifier(tiny_lm)
    a = sampled_autoregressive(v, PROMPT, 24, SamplingParams(1.0, 1.0, 7), "r")
    b = sampled_autoregressive(v, PROMPT, 24, SamplingParams(1.0, 1.0, 7), "r")
    c = sampled_autoregressive(v, PROMPT, 24, SamplingParams(1.0, 1.0, 8), "r")
    assert a.output_ids == b.output_ids and a.output_ids != c.output_ids
    assert a.forwards == len(a.output_ids)


@pytest.mark.parametrize("method", ["goose", "oilbird", "suffix-arctic"])
def test_sampled_decoder_commits_plain_sampling_whatever_its_store(tiny_lm, method):
    """One decoder decodes two requests: the second's output is plain sampling's for its own seed
    and id, the same as when a fresh decoder (empty store) decodes it; the first request changed
    the store and the drafts, not the tokens."""
    v = Verifier(tiny_lm)
    p = SamplingParams(0.3, 0.95, 3)
    other = [1] + [3 + b for b in b"call f(x=1) then f(x=1) or f(x=2)"]
    ref = sampled_autoregressive(v, PROMPT, 32, p, "b").output_ids
    dec = make_decoder(method, v)
    dec.run("a", other, 32, judge=Sampled(p, "a"))
    after = dec.run("b", PROMPT, 32, judge=Sampled(p, "b"))
    fresh = make_decoder(method, v).run("b", PROMPT, 32, judge=Sampled(p, "b"))
    assert after.output_ids == fresh.output_ids == ref
    assert [len(c.tokens) for c in after.cycles] != [len(c.tokens) for c in fresh.cycles]   # other drafts


@pytest.mark.parametrize("method", ["goose", "oilbird", "pld"])
def test_sampled_decoder_reproduces_its_seed_and_emits_valid_tokens(tiny_lm, method):
    v = Verifier(tiny_lm)
    p = SamplingParams(0.7, 0.95, 3)
    outs = [make_decoder(method, v).run("r", PROMPT, 32, judge=Sampled(p, "r")) for _ in range(2)]
    assert outs[0].output_ids == outs[1].output_ids
    assert check_sampled_output(outs[0].output_ids, 259, {2}, 32) is None
    assert len(outs[0].cycles) == outs[0].forwards
    other = make_decoder(method, v).run("r", PROMPT, 32, judge=Sampled(SamplingParams(0.7, 0.95, 4), "r"))
    assert other.output_ids != outs[0].output_ids
    # the trace says how it was judged, whoever ran it (the views mark sampled traces by it)
    assert outs[0].meta["sampling"] == {"temperature": 0.7, "top_p": 0.95, "seed": 3}
    assert "sampling" not in make_decoder(method, v).run("r", PROMPT, 8).meta


def test_a_sampled_cycle_records_what_decided_each_tried_node(tiny_lm):
    v = Verifier(tiny_lm)
    dec = make_decoder("goose", v)
    tr = dec.run("r", PROMPT * 2, 40, judge=Sampled(SamplingParams(0.5, 1.0, 0), "r"))
    tried = [c for c in tr.cycles[1:] if any(x is not None for x in c.decided_prob)]
    assert tried, "no cycle had a child to try"
    for c in tried:
        assert len(c.decided_prob) == len(c.residual_mass) == len(c.tokens)
        assert c.decided_prob[0] is None                       # the root is never tried
        for i, (q, m) in enumerate(zip(c.decided_prob, c.residual_mass)):
            if q is not None:
                assert 0.0 <= q <= 1.0 and 0.0 < m <= 1.0 + 1e-9
                assert c.parents[i] in c.accepted               # only children of accepted nodes are tried
        for i in c.accepted[1:]:
            assert c.decided_prob[i] is not None


def test_greedy_default_is_unchanged(tiny_lm):
    """No judge, or temperature 0: the greedy path, equal to plain AR, with no sampling record."""
    v = Verifier(tiny_lm)
    ref = autoregressive(v, PROMPT, 24).output_ids
    tr = make_decoder("oilbird", v).run("r", PROMPT, 24)
    assert tr.output_ids == ref
    assert all(not c.decided_prob for c in tr.cycles)
    with pytest.raises(ValueError, match="greedy"):
        Sampled(SamplingParams(0.0, 1.0, 0))


def test_decisions_per_node():
    d = [{"node": 2, "token": 5, "prob": 0.25, "residual_mass": 1.0, "u": 0.5, "accepted": False},
         {"node": 1, "token": 4, "prob": 0.5, "residual_mass": 0.75, "u": 0.1, "accepted": True}]
    assert decisions_per_node(d, 4) == ([None, 0.5, 0.25, None], [None, 0.75, 1.0, None])


def test_sampled_bench_audits_every_method_against_plain_sampling(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(oilbird.model, "load_model", lambda *a, **k: make_tiny_lm())
    data = tmp_path / "reqs.jsonl"
    data.write_text("".join(json.dumps({"id": f"q{i}", "prompt": f"call f({i}) twice"}) + "\n" for i in range(2)))
    out = tmp_path / "run"
    rc = main(["bench", "--data", str(data), "--methods", "ar,goose,oilbird", "--max-new-tokens", "12",
               "--out", str(out), "--temperature", "0.7", "--seed", "5"])
    printed = capsys.readouterr().out
    assert rc == 0, printed
    res = json.loads((out / "results.json").read_text())
    assert res["sampling"]["temperature"] == 0.7 and "plain sampling" in res["sampling"]["checked"]
    for r in res["methods"].values():
        assert r["lossless"] is True and r["valid"] is True and "reproducible" not in r
    assert "lossless (sampled)" in printed and "seed-reproducible" not in printed
    import csv
    rows = list(csv.DictReader((out / "results.csv").open()))
    assert rows and all(r.get("lossless") == "True" for r in rows), rows


def test_sampled_decode_is_audited_against_plain_sampling(capsys, monkeypatch):
    monkeypatch.setattr(oilbird.model, "load_model", lambda *a, **k: make_tiny_lm())
    assert main(["decode", "call f(x=1) then f(x=1)", "--method", "oilbird", "--max-new-tokens", "16",
                 "--temperature", "0.5", "--seed", "3"]) == 0
    err = capsys.readouterr().err
    assert "sampled (T=0.5, top-p=1, seed=3)" in err and "tokens equal plain sampling with the same seed" in err


def test_the_sampled_audit_fails_a_method_that_draws_differently(tiny_lm, monkeypatch):
    """The audit can fail: a judge whose generator is offset by one draw (what a rule that
    spends a draw per tried child would do) commits other tokens, and the bench says so."""
    from oilbird.data.requests import Request
    from oilbird.evaluation import sampled_bench
    from oilbird.evaluation.bench import run_bench

    class OffByOne(Sampled):
        def __init__(self, params, request_id=""):
            super().__init__(params, request_id)
            self.rng.random()
    monkeypatch.setattr(sampled_bench, "Sampled", OffByOne)
    reqs = [Request(f"q{i}", [{"role": "user", "content": f"call f({i}) twice"}]) for i in range(2)]
    res = run_bench(reqs, ["ar", "goose"], Verifier(tiny_lm), max_new_tokens=16, progress=False,
                    sampling=SamplingParams(1.0, 1.0, 5))
    assert res["methods"]["ar"]["lossless"] is True
    assert res["methods"]["goose"]["lossless"] is False
    failure = res["methods"]["goose"]["first_failure"]
    assert "there plain sampling with the same seed preferred its token by" in failure, failure
    assert "not a rounding near tie" in failure, failure


def test_sampled_trace_carries_the_settings(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(oilbird.model, "load_model", lambda *a, **k: make_tiny_lm())
    data = tmp_path / "reqs.jsonl"
    data.write_text(json.dumps({"id": "q0", "prompt": "call f(1) then f(1)"}) + "\n")
    out = tmp_path / "t.jsonl"
    assert main(["trace", "--data", str(data), "--methods", "goose", "--max-new-tokens", "12", "--out", str(out),
                 "--temperature", "1.0", "--top-p", "0.9", "--seed", "2"]) == 0
    assert "sampled (T=1, top-p=0.9, seed=2)" in capsys.readouterr().out
    tr = load_traces(out)[0]
    assert tr.meta["sampling"] == {"temperature": 1.0, "top_p": 0.9, "seed": 2}
    assert tr.lossless is True          # audited against plain sampling with the same seed


def test_request_generators_depend_on_seed_and_id_only():
    from oilbird.sampling import request_rng
    p = SamplingParams(1.0, 1.0, 9)
    assert request_rng(p, "a").random() == request_rng(p, "a").random()
    assert request_rng(p, "a").random() != request_rng(p, "b").random()
    draws = {request_rng(SamplingParams(1.0, 1.0, s), "a").random() for s in (-3, 3, 2**40, 2**40 + 2**32)}
    assert len(draws) == 4          # a negative seed is not its absolute value; no seed is cut to 32 bits


@pytest.mark.parametrize("method", ["goose", "oilbird"])
def test_sampling_near_temperature_zero_is_greedy_through_the_whole_decoder(tiny_lm, method):
    """At T = 1e-4 every node's p is one-hot on its argmax for all practical purposes: the sampled
    decoder must then commit greedy's output, which it can only do if each node's distribution
    is read from that node's own row of the verify forward (and the prefill's last row)."""
    v = Verifier(tiny_lm)
    ref = autoregressive(v, PROMPT, 32).output_ids
    dec = make_decoder(method, v)
    tr = dec.run("r", PROMPT, 32, judge=Sampled(SamplingParams(1e-4, 1.0, 0), "r"))
    assert tr.output_ids == ref
    assert any(len(c.accepted) > 1 for c in tr.cycles)          # drafts were accepted along the way
