"""End-to-end on the real default model (SmolLM2-135M-Instruct, fp32 on CPU)."""
import json

import pytest
import torch

from oilbird.audit import hf_greedy
from oilbird.evaluation.bench import run_bench
from oilbird.decoding import autoregressive
from oilbird.model import ModelError, hf_model_dir, load_model, load_tokenizer
from oilbird.drafter import TreeConfig
from oilbird.presets import PRESETS
from oilbird.data.requests import encode, load_api_bank, load_requests
from oilbird.tree import DraftTree, tree_attention
from oilbird.verifier import Verifier

pytestmark = pytest.mark.model


@pytest.fixture(scope="module")
def builtin_ids(real_lm):
    return [encode(real_lm.tokenizer, r) for r in load_requests("builtin", limit=4)]


def _fresh(v, ids):
    cache, _ = v.prefill(ids)
    return cache, len(ids)


@torch.inference_mode()
def _plain_logits(lm, ids):
    return lm.model(input_ids=torch.tensor([ids])).logits[0].float()


def test_tree_logits_equal_chain_forward_on_every_path(real_lm, builtin_ids):
    ids = builtin_ids[1]
    v = Verifier(real_lm)
    cache, pre = v.prefill(ids)
    root = int(pre.argmax[-1])
    #        0 root, 1 a, 2 b, 3 c(a), 4 d(a), 5 e(c), 6 f(b)
    tree = DraftTree(tokens=[root, 330, 7, 28, 314, 17, 2483], parents=[-1, 0, 0, 1, 1, 3, 2])
    mask, pos = tree_attention(tree.parents, len(ids))
    with torch.inference_mode():
        mask_out = real_lm.model(input_ids=torch.tensor([tree.tokens]), attention_mask=mask,
                                 position_ids=pos, cache=cache).logits[0].float()
    out = v.verify(*_fresh(v, ids), tree)         # the library path agrees on every argmax
    assert out.argmax.tolist() == mask_out.argmax(-1).tolist()
    for leaf_path in ([0, 1, 3, 5], [0, 1, 4], [0, 2, 6]):
        ref = _plain_logits(real_lm, ids + [tree.tokens[i] for i in leaf_path])
        for k, node in enumerate(leaf_path):
            torch.testing.assert_close(mask_out[node], ref[len(ids) + k], atol=2e-3, rtol=1e-3)
            assert int(mask_out[node].argmax()) == int(ref[len(ids) + k].argmax())


def test_commit_leaves_cache_equal_to_plain_prefill(real_lm, builtin_ids):
    ids = builtin_ids[2]
    v = Verifier(real_lm)
    cache, pre = v.prefill(ids)
    root = int(pre.argmax[-1])
    tree = DraftTree(tokens=[root, 11, 22, 33, 44], parents=[-1, 0, 0, 2, 1])
    v.verify(cache, len(ids), tree)
    accepted = [0, 2, 3]                       # not a prefix of the node order: exercises the copy
    Verifier.commit(cache, len(ids), accepted)
    kept = ids + [tree.tokens[i] for i in accepted]
    assert cache.get_seq_length() == len(kept)
    nxt = 555
    with torch.inference_mode():
        after = real_lm.model(input_ids=torch.tensor([[nxt]]), cache=cache).logits[0, -1].float()
    ref = _plain_logits(real_lm, kept + [nxt])[-1]
    torch.testing.assert_close(after, ref, atol=2e-3, rtol=1e-3)
    assert int(after.argmax()) == int(ref.argmax())


def test_ar_equals_hf_greedy_on_builtin(real_lm, builtin_ids):
    v = Verifier(real_lm)
    for ids in builtin_ids[:3]:
        assert autoregressive(v, ids, 24).output_ids == hf_greedy(real_lm, ids, 24)


def test_ar_equals_hf_greedy_on_api_bank(real_lm, api_bank_path):
    v = Verifier(real_lm)
    reqs = load_api_bank(api_bank_path)
    for r in (reqs[0], reqs[400]):
        ids = encode(real_lm.tokenizer, r)
        assert autoregressive(v, ids, 16).output_ids == hf_greedy(real_lm, ids, 16)


def test_every_preset_lossless_on_real_model(real_lm):
    """One bench run, all presets, built-in requests: the audit inside bench is the check."""
    reqs = load_requests("builtin", limit=4)[2:]     # the 2nd and 3rd call of a conversation
    res = run_bench(reqs, ["ar"] + list(PRESETS), Verifier(real_lm), max_new_tokens=16, progress=False)
    for m, r in res["methods"].items():
        assert r["lossless"], (m, r.get("first_failure"))
        if m != "ar":
            credited = sum(r["accepted_by_source"].values())
            assert credited == pytest.approx(r["tokens"]), m


def test_a_live_run_in_the_app_reproduces_the_shipped_trace(real_lm):
    """The app's live runs draw the shipped traces' trees: in a fresh session (an empty store, as
    the shipped file's first request had), a live run of its first request commits the same
    tokens in the same cycles from the same trees, for the host and for Oilbird."""
    from workbench.app import TRACES_DIR
    from workbench.session import LIVE_MAX_NEW_TOKENS, ModelHolder, Session, decode_live
    from oilbird.trace import load_traces
    shipped = {(t.request_id, t.method): t for t in load_traces(TRACES_DIR / "builtin.jsonl")}
    req = load_requests("builtin", limit=1)[0]
    for method in ("goose", "oilbird"):
        ship = shipped[(req.id, method)]
        live = decode_live(Session(req.id, method, method), ModelHolder(None), real_lm, req, method,
                           LIVE_MAX_NEW_TOKENS, lambda *a, **k: None)
        assert live.output_ids == ship.output_ids, method
        assert [(c.tokens, c.parents, c.accepted) for c in live.cycles] == \
            [(c.tokens, c.parents, c.accepted) for c in ship.cycles], method


def test_live_runs_in_the_app_get_the_shipped_traces_gap_labels(real_lm):
    """A session's live runs are labelled against what its store held: run in the shipped file's
    order (its first two requests), they get the labels and drafter's reach that the file's own
    diagnosis gave them (``trace --diagnose``: the same outputs, the same pool, one teacher-forced
    forward each)."""
    from workbench.app import TRACES_DIR
    from workbench.session import LIVE_MAX_NEW_TOKENS, ModelHolder, Session, decode_live
    from oilbird.trace import load_traces
    shipped = {(t.request_id, t.method): t for t in load_traces(TRACES_DIR / "builtin.jsonl")}
    reqs = load_requests("builtin", limit=2)
    st = Session(reqs[0].id, "oilbird", "oilbird")
    for req in reqs:
        ship = shipped[(req.id, "oilbird")]
        live = decode_live(st, ModelHolder(None), real_lm, req, "oilbird", LIVE_MAX_NEW_TOKENS, lambda *a, **k: None)
        assert live.output_ids == ship.output_ids, req.id
        assert live.gap_labels == ship.gap_labels and live.drafter_reach == ship.drafter_reach, req.id
    assert set(live.gap_labels) > {"lexical_hit", "absent"}         # the second found the first in its pool


def test_expected_fill_lossless_on_real_model(real_lm):
    reqs = load_requests("builtin", limit=4)[2:]
    res = run_bench(reqs, ["ar", "goose", "oilbird:reserved", "oilbird"], Verifier(real_lm),
                    max_new_tokens=24, progress=False, tree=TreeConfig(budget=16))
    assert res["tree"]["budget"] == 16
    assert res["methods"]["oilbird"]["fill"] == "expected" and res["methods"]["oilbird:reserved"]["fill"] == "reserved"
    for m, r in res["methods"].items():
        assert r["lossless"], (m, r.get("first_failure"))


@pytest.mark.parametrize("load", [load_model, load_tokenizer, hf_model_dir])
def test_unknown_model_path_and_file(tmp_path, load):
    """The model, its tokenizer alone and its plain folder say the same of a bad path."""
    with pytest.raises(ModelError, match="does not exist"):
        load(tmp_path / "missing")
    (tmp_path / "x.bin").write_bytes(b"0")
    with pytest.raises(ModelError, match="not a .gguf"):
        load(tmp_path / "x.bin")
    with pytest.raises(ModelError, match="no config.json"):
        load(tmp_path)
    with pytest.raises(ModelError, match="The model path is empty"):     # not "'.' has no config.json"
        load("")


def test_model_folder_without_tokenizer_says_so(tmp_path, real_lm):
    """Weights saved without their tokenizer: the message names the missing files, where
    transformers' own error sends one off to install sentencepiece."""
    real_lm.model.config.to_json_file(tmp_path / "config.json")
    for load in (load_model, load_tokenizer, hf_model_dir):
        with pytest.raises(ModelError, match="no tokenizer files"):
            load(tmp_path)


def test_a_load_draws_no_progress_bar_of_transformers(tmp_path, real_lm, capfd):
    """transformers' "Loading weights" bar took a second and stayed at 0% in a saved notebook
    (a hang to whoever reads it); a load draws none, and leaves the switch as it found it."""
    from transformers import LlamaConfig, LlamaForCausalLM
    from transformers.utils import logging as hf_logging
    cfg = LlamaConfig(vocab_size=len(real_lm.tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512)
    LlamaForCausalLM(cfg).save_pretrained(tmp_path)
    real_lm.tokenizer.save_pretrained(tmp_path)
    capfd.readouterr()
    assert load_model(tmp_path, device="cpu").num_layers == 2
    assert "Loading weights" not in capfd.readouterr().err and hf_logging.is_progress_bar_enabled()


def test_the_tokenizer_alone_is_the_models(real_lm):
    """load_tokenizer (the template check before the weights load) reads the tokenizer load_model
    gives: the same chat template and the same ids."""
    tok = load_tokenizer()
    assert tok.chat_template == real_lm.tokenizer.chat_template
    text = "Book flight UA 123 from JFK"
    assert tok(text)["input_ids"] == real_lm.tokenizer(text)["input_ids"]


def test_gguf_cache_is_keyed_by_content(tmp_path, monkeypatch):
    """Two GGUF files of one name and size but different bytes never share a cache entry."""
    import oilbird.model as M
    monkeypatch.setenv("OILBIRD_CACHE", str(tmp_path / "cache"))
    a, b = tmp_path / "a" / "m.gguf", tmp_path / "b" / "m.gguf"
    for f, byte in ((a, b"\x01"), (b, b"\x02")):
        f.parent.mkdir()
        f.write_bytes(byte * 4096)
    cached = tmp_path / "cache" / "models" / f"m-{M._content_key(a)}"
    cached.mkdir(parents=True)
    (cached / "config.json").write_text("{}")
    assert M._dequantized_copy(a, "m") == cached      # a's own entry, not re-read

    def dequantize(*_args):
        raise LookupError("dequantizing b")
    monkeypatch.setattr(M, "_from_pretrained", dequantize)
    with pytest.raises(LookupError, match="dequantizing b"):         # b is read, not given a's weights
        M._dequantized_copy(b, "m")


def test_a_rewritten_gguf_is_hashed_again(tmp_path):
    """The content key is remembered per file version (a load asks for it up to three times), so
    a file rewritten in place gets its new key."""
    import os
    import oilbird.model as M
    f = tmp_path / "m.gguf"
    f.write_bytes(b"\x01" * 4096)
    first = M._content_key(f)
    assert M._content_key(f) == first
    f.write_bytes(b"\x02" * 4096)
    st = f.stat()
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns + 10 ** 9))      # a later write, as a clock would date it
    assert M._content_key(f) != first


@pytest.mark.parametrize("config,msg", [
    ({"model_type": "mamba", "hidden_size": 8, "num_hidden_layers": 1, "vocab_size": 10}, "not supported"),
    ({"model_type": "llama4_text", "layer_types": ["chunked_attention", "full_attention"], "hidden_size": 8,
      "num_hidden_layers": 2, "vocab_size": 10}, "layers of kind 'chunked_attention'"),
])
def test_unsupported_architectures_are_refused(tmp_path, config, msg):
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(ModelError, match=msg):
        load_model(tmp_path)


def test_a_state_layer_past_the_last_is_refused_before_the_weights_load(tmp_path):
    """A folder with a config alone: the layer count is read from it, so the refusal comes
    before the tokenizer and weights are looked for."""
    (tmp_path / "config.json").write_text(json.dumps(
        {"model_type": "llama", "hidden_size": 8, "num_hidden_layers": 2, "num_attention_heads": 2,
         "intermediate_size": 16, "vocab_size": 10}))
    with pytest.raises(ModelError, match=r"state_layer 5 is outside 0\.\.2"):
        load_model(tmp_path, state_layer=5)
    with pytest.raises(ModelError, match="no tokenizer files"):     # a layer in range gets past it
        load_model(tmp_path, state_layer=2)


def test_which_configs_verify_trees_and_with_what_window():
    """The window comes from the decoder's own config and counts only where some layer slides;
    a multimodal wrapper, and a model whose cache shares keys between layers (Gemma 3n), are
    refused by name."""
    import transformers as T
    from oilbird.model import check_tree_compatible, sliding_window
    assert sliding_window(T.Qwen2Config()) is None
    assert sliding_window(T.Qwen2Config(use_sliding_window=True, max_window_layers=5, num_hidden_layers=3)) is None
    assert sliding_window(T.Qwen2Config(use_sliding_window=True, max_window_layers=1, num_hidden_layers=3)) == 4096
    assert sliding_window(T.MistralConfig(sliding_window=None)) is None
    assert sliding_window(T.MistralConfig(sliding_window=4096)) == 4096
    assert sliding_window(T.Gemma3TextConfig(sliding_window=512)) == 512
    for ok in (T.Gemma3TextConfig(), T.MistralConfig(sliding_window=4096), T.LlamaConfig()):
        check_tree_compatible(ok)
    with pytest.raises(ModelError, match="'gemma3' is not supported.*multimodal.*'gemma3_text'"):
        check_tree_compatible(T.Gemma3Config())
    with pytest.raises(ModelError, match="layers of kind 'DummyLayer'"):
        check_tree_compatible(T.Gemma3nTextConfig())


def test_a_sliding_window_model_passes_the_architecture_check(tmp_path):
    """Sliding windows are verifiable (a mask per layer kind): Mistral's config goes on to the
    next check, here the missing tokenizer."""
    (tmp_path / "config.json").write_text(json.dumps(
        {"model_type": "mistral", "sliding_window": 4096, "hidden_size": 8, "num_hidden_layers": 1,
         "num_attention_heads": 1, "vocab_size": 10}))
    with pytest.raises(ModelError, match="no tokenizer files"):
        load_model(tmp_path)


def test_an_unsupported_gguf_is_refused_before_it_is_dequantized(tmp_path, monkeypatch):
    """A .gguf's header is read first: an architecture the tree cannot verify (recurrent state)
    is refused before the dequantization runs and writes a copy into the cache."""
    import oilbird.model as M
    from transformers import LlamaConfig, MambaConfig
    monkeypatch.setenv("OILBIRD_CACHE", str(tmp_path / "cache"))
    gguf = tmp_path / "mamba.gguf"
    gguf.write_bytes(b"GGUF and the rest")
    monkeypatch.setattr(M, "_gguf_config", lambda p: MambaConfig())
    monkeypatch.setattr(M, "_from_pretrained", lambda *a: pytest.fail("dequantized"))
    with pytest.raises(ModelError, match="not supported"):
        load_model(gguf)
    assert not (tmp_path / "cache").exists()

    def unreadable(p):
        raise ValueError("not a GGUF header")
    monkeypatch.setattr(M, "_gguf_config", unreadable)
    with pytest.raises(ModelError, match="Cannot read .* as a GGUF model: the file is truncated or damaged.*"
                                         "not a GGUF header"):
        load_model(gguf)
    # a header that reads and weights that do not (a file cut short): said the same way
    monkeypatch.setattr(M, "_gguf_config", lambda p: LlamaConfig(num_hidden_layers=2))

    def cut(*a):
        raise ValueError("cannot reshape array of size 214336 into shape (49152,612)")
    monkeypatch.setattr(M, "_from_pretrained", cut)
    with pytest.raises(ModelError, match="Cannot load the weights of .*truncated or damaged.*cannot reshape"):
        load_model(gguf)


def test_cpu_verify_keeps_gqa_with_the_tree_mask(real_lm):
    """load_model turns on transformers' GQA-with-mask switch on CPU (a 12-node verify: 260 ->
    221 ms, docs/results.md); the tree-logits test above checks the outputs under it."""
    import os
    if real_lm.device.type == "cpu":
        assert os.environ.get("TRANSFORMERS_SDPA_FORCE_GQA") in ("1", "0")   # "0": the user opted out
        from transformers.integrations.sdpa_attention import use_gqa_in_sdpa
        k = torch.zeros(1, 3, 5, 64)
        assert use_gqa_in_sdpa(torch.ones(1, 1, 2, 5, dtype=torch.bool), k, k) == \
            (os.environ["TRANSFORMERS_SDPA_FORCE_GQA"] == "1")


@pytest.mark.parametrize("method", [*PRESETS, "suffix-arctic"])
def test_exact_replay_of_greedy_output_is_the_live_run_on_the_real_model(real_lm, builtin_ids, method):
    """The replay invariant on SmolLM2: exact-mode replay of the model's own greedy output gives
    the live run's trees, verdicts, neighbours and tau, request after request."""
    from oilbird.decoding import Replay
    from oilbird.methods import parse_method
    from oilbird.evaluation.replay import make_replay_decoder
    from oilbird.sources.arctic import arctic_available
    if method == "suffix-arctic" and not arctic_available():
        pytest.skip("arctic-inference not installed")
    m = parse_method(method)
    v = Verifier(real_lm)
    live_dec = make_replay_decoder(m, v, None, trace=True)
    live_dec.reuse_prefix = False                   # a plain live decoder
    rep = make_replay_decoder(m, v, None, trace=True)
    for i, ids in enumerate(builtin_ids[:3]):
        live = live_dec.run(f"r{i}", ids, 24)
        greedy = autoregressive(v, ids, 40).output_ids     # goes on past the cut at 24
        tr = rep.run(f"r{i}", ids, 24, judge=Replay(greedy))
        assert tr.output_ids == live.output_ids == greedy[:len(live.output_ids)]
        for a, b in zip(tr.cycles, live.cycles, strict=True):
            assert (a.tokens, a.parents, a.sources, a.accepted, a.committed, a.retrieval) == \
                   (b.tokens, b.parents, b.sources, b.accepted, b.committed, b.retrieval), (method, i, a.cycle)
            assert [n.record for n in a.neighbours] == [n.record for n in b.neighbours]
        assert tr.tau == live.tau
