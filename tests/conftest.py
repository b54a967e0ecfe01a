"""Shared fixtures.

* ``tiny_lm``: a 2-layer Llama with random weights built in-process (no files, no download) and
  a byte tokenizer: fast, for unit tests of the runtime and the sources.
  ``make_windowed_lm``: the same kind of model with sliding-window layers (Gemma 3's).
* ``real_lm``: the real default model, SmolLM2-135M-Instruct (session-scoped; the first load
  dequantizes the GGUF and caches it). Tests that use it are marked ``model``.
"""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from oilbird.model import LoadedModel  # noqa: E402

SHARED = ROOT.parent / "shared" / "data"


class ByteTokenizer:
    """Bytes 0..255 are tokens 3..258; 0 pad, 1 bos, 2 eos. Enough for traces and tests."""
    eos_token_id = 2
    pad_token_id = 0
    chat_template = None

    def __call__(self, text):
        return {"input_ids": [1] + [b + 3 for b in text.encode()]}

    def decode(self, ids, **_):
        return bytes(i - 3 for i in ids if i >= 3).decode("utf-8", errors="replace")

    def apply_chat_template(self, messages, add_generation_prompt=True, tokenize=True):
        return self("".join(f"<{m['role']}>{m['content']}" for m in messages) + "<assistant>")["input_ids"]


def make_tiny_lm(seed: int = 0, vocab: int = 259) -> LoadedModel:
    from transformers import LlamaConfig, LlamaForCausalLM
    torch.manual_seed(seed)
    cfg = LlamaConfig(vocab_size=vocab, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512,
                      bos_token_id=1, eos_token_id=2, pad_token_id=0)
    model = LlamaForCausalLM(cfg).eval()
    # sharpen the logits so greedy paths are not near ties
    with torch.no_grad():
        model.lm_head.weight.mul_(8)
    return LoadedModel(model=model, tokenizer=ByteTokenizer(), name="tiny-llama",
                       device=torch.device("cpu"), dtype=torch.float32, num_layers=2, state_layer=2)


def make_windowed_lm(window: int = 8, kind: str = "gemma3", attn: str = "sdpa") -> LoadedModel:
    """A 3-layer model with random weights whose attention slides over ``window`` tokens:
    ``gemma3``: two sliding layers and one full (a mask per layer kind); ``mistral``: every layer
    sliding, one mask. ``attn``: transformers' attention implementation ("eager" adds the mask
    to the scores; Gemma 2 and gpt-oss have no other)."""
    import transformers as T
    torch.manual_seed(0)
    common = dict(vocab_size=259, hidden_size=32, intermediate_size=64, num_hidden_layers=3, num_attention_heads=2,
                  num_key_value_heads=1, sliding_window=window, max_position_embeddings=512, bos_token_id=1,
                  eos_token_id=2, pad_token_id=0)
    if kind == "gemma3":
        cfg = T.Gemma3TextConfig(head_dim=16, layer_types=["sliding_attention", "sliding_attention", "full_attention"],
                                 **common)
        model = T.Gemma3ForCausalLM(cfg)
    else:
        model = T.MistralForCausalLM(T.MistralConfig(**common))
    model.eval()
    model.set_attn_implementation(attn)
    with torch.no_grad():
        model.lm_head.weight.mul_(8)
    return LoadedModel(model=model, tokenizer=ByteTokenizer(), name=f"tiny-{kind}", device=torch.device("cpu"),
                       dtype=torch.float32, num_layers=3, state_layer=2)


@torch.inference_mode()
def greedy_without_cache(model, ids, n, eos=(2,), pick=None):
    """Greedy decoding with no cache at all (the whole sequence each step): the most independent
    reference there is for the decoder's output. ``pick`` (logits -> token) replaces the argmax:
    plain sampling with :func:`sampled_pick`."""
    x = torch.tensor([ids])
    out = []
    for _ in range(n):
        logits = model(input_ids=x).logits[0, -1]
        nxt = int(logits.argmax()) if pick is None else pick(logits)
        out.append(nxt)
        if nxt in eos:
            break
        x = torch.cat([x, torch.tensor([[nxt]])], dim=1)
    return out


def sampled_pick(params, rng):
    """logits -> one token of plain sampling with ``params``, one draw of ``rng`` per token."""
    from oilbird.sampling import sample_from, target_probs
    return lambda logits: sample_from(target_probs(logits, params.temperature, params.top_p), rng)


@pytest.fixture(autouse=True)
def every_request_on_a_mock_model_is_lossless(monkeypatch):
    """The standard, enforced: every request a test decodes to the end with a live judge
    (``SpeculativeDecoder.run``) on an in-process mock model must equal cacheless decoding, token
    for token, whatever the test itself goes on to check: greedy's output for the greedy judge,
    and for the sampling judge plain sampling's output with the same generator state (one draw
    per token, :mod:`oilbird.sampling`). (The real model's tests compare with ``generate``
    themselves; replay has the recording as its judge.)"""
    import copy

    from oilbird.decoding import Greedy, SpeculativeDecoder
    from oilbird.sampled import Sampled
    run = SpeculativeDecoder.run

    def checked(self, request_id, ids, max_new_tokens, on_cycle=None, judge=None):
        rng = copy.deepcopy(judge.rng) if type(judge) is Sampled else None
        tr = run(self, request_id, ids, max_new_tokens, on_cycle=on_cycle, judge=judge)
        lm = self.verifier.lm
        if (judge is None or type(judge) in (Greedy, Sampled)) and lm.name.startswith("tiny-"):
            pick = None if rng is None else sampled_pick(judge.params, rng)
            ref = greedy_without_cache(lm.model, list(ids), max_new_tokens, tuple(lm.eos_token_ids), pick)
            if tr.stop == "stopped":            # on_cycle stopped it: what it committed is a prefix
                ref = ref[:len(tr.output_ids)]
            assert tr.output_ids == ref, (f"{self.method} on {request_id!r} is not "
                                          f"{'greedy' if rng is None else 'plain sampling'}'s output: "
                                          f"{tr.output_ids} vs {ref}")
        return tr

    monkeypatch.setattr(SpeculativeDecoder, "run", checked)


@pytest.fixture(scope="session")
def tiny_lm() -> LoadedModel:
    return make_tiny_lm()


@pytest.fixture(scope="session")
def real_lm() -> LoadedModel:
    from oilbird.model import load_model
    return load_model()


@pytest.fixture(scope="session")
def api_bank_path() -> Path:
    p = Path(os.environ.get("OILBIRD_DATA", SHARED)) / "api-bank"
    if not (p / "test-data" / "level-1-api.json").is_file():
        pytest.skip("API-Bank data not found in ../shared/data (never committed here)")
    return p


def make_verdict(tree, argmax, topk_ids, topk_probs, states=None, accepted=(0,), tokens=(0,)):
    """A verification verdict from literal lists, for source tests (states default to ones, d=4)."""
    from oilbird.sources.base import Verdict
    n = len(tree)
    return Verdict(tree=tree, argmax=np.asarray(argmax), topk_ids=np.asarray(topk_ids),
                   topk_probs=np.asarray(topk_probs, dtype=np.float32),
                   states=np.asarray(states if states is not None else np.ones((n, 4)), dtype=np.float32),
                   accepted=list(accepted), tokens=list(tokens),
                   request_id="r")


CHATML = ("{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + "
          "'<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}")


@pytest.fixture(scope="session")
def bpe_chatml():
    """A real fast Hugging Face tokenizer (byte-level BPE trained in-process on the built-in agent's
    text) with a ChatML template: what encode_conversation's piece-by-piece path runs on."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    from oilbird.data.agent_workload import generate_conversations
    tk = Tokenizer(models.BPE())
    tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tk.decoder = decoders.ByteLevel()
    tk.train_from_iterator([json.dumps(c) for c in generate_conversations(n=4)], trainers.BpeTrainer(
        vocab_size=700, special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False))
    return PreTrainedTokenizerFast(tokenizer_object=tk, eos_token="<|im_end|>", chat_template=CHATML)
