"""One verification forward over a draft tree, and the KV-cache bookkeeping around it.

Knows nothing about where drafts come from. Given the tokens already in the cache and a
:class:`~oilbird.tree.DraftTree` whose root is the newest committed token, it runs the model
once and returns, per node: the argmax (what greedy decoding would emit next), the top-k ids and
probabilities (food for the token-adjacency source) and the hidden state at the key layer (food
for the semantic store). ``commit`` then keeps exactly the accepted nodes in the cache.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from transformers import DynamicCache

from .model import LoadedModel
from .tree import DraftTree, tree_attention


@dataclass
class NodeOutputs:
    """What one forward says about each of its n input positions.

    argmax: long [n]; topk_ids: long [n, k]; topk_probs: float [n, k];
    states: float32 [n, d], hidden state at the key layer (not normalised).
    logits: float32 [n, V] on the CPU, only when asked for (``keep_logits``: sampling needs the
    full next-token distribution; greedy never pays for the copy).
    """
    argmax: torch.Tensor
    topk_ids: torch.Tensor
    topk_probs: torch.Tensor
    states: torch.Tensor
    logits: torch.Tensor | None = None


class Verifier:
    """Wraps a loaded model with prefill / step / verify-tree / commit."""

    def __init__(self, lm: LoadedModel, topk: int = 10):
        if topk < 1:
            raise ValueError("topk must be >= 1")
        self.lm = lm
        self.model = lm.model
        self.topk = topk
        self.device = lm.device
        # transformers 5 keeps only the selected hidden states (the others are None), instead
        # of every layer's [n, d] output to read one of them
        self._state_layers = [lm.state_layer]
        # sliding-window attention (all layers, or some: then the forward takes a mask per layer type)
        self.window = lm.sliding_window
        text = lm.model.config.get_text_config(decoder=True)
        self._hybrid = {"full_attention", "sliding_attention"} <= set(getattr(text, "layer_types", None) or ())
        # eager attention adds the mask to the scores: it needs 0 / -inf, not True / False
        self._additive = getattr(lm.model.config, "_attn_implementation", "sdpa") == "eager"

    def new_cache(self) -> DynamicCache:
        """An empty KV cache for this model. A sliding-window layer's cache keeps every position
        until it is cropped (``activate_past_recording``), so a verify's rejected nodes never push
        the prefix out of the window before :meth:`commit` drops them; :meth:`commit` then trims
        it back to the window (and the nodes it kept)."""
        cache = DynamicCache(config=self.model.config)
        if self.window:
            cache.activate_past_recording()
        return cache

    def _outputs(self, out, keep_states: bool = True, keep_logits: bool = False) -> NodeOutputs:
        logits = out.logits[0].float()                       # [n, V]
        probs = torch.softmax(logits, dim=-1)
        top_p, top_i = probs.topk(self.topk, dim=-1)
        states = out.hidden_states[self.lm.state_layer][0].float() if keep_states else None
        return NodeOutputs(argmax=logits.argmax(-1).cpu(), topk_ids=top_i.cpu(),
                           topk_probs=top_p.cpu(), states=None if states is None else states.cpu(),
                           logits=logits.cpu() if keep_logits else None)

    @torch.inference_mode()
    def prefill(self, ids: list[int], cache: DynamicCache | None = None, keep: int = 1,
                keep_logits: bool = False) -> tuple[DynamicCache, NodeOutputs]:
        """Run the prompt; return the cache and the outputs at its last ``keep`` positions.

        ``cache`` (optional) already holds the first ``cache.get_seq_length()`` tokens of
        ``ids`` (multi-turn prefix reuse): only the rest is fed. ``keep`` > 1 is teacher
        forcing: ``ids`` ends with a recorded continuation whose outputs are wanted too.
        """
        if not ids:
            raise ValueError("empty prompt")
        if cache is None:
            cache = self.new_cache()
        start = cache.get_seq_length()
        if start > len(ids) - keep and self.window:
            # a sliding-window layer cropped before may no longer hold what this crop needs
            cache, start = self.new_cache(), 0
        if start > len(ids) - keep:            # re-feed what the outputs are wanted for
            cache.crop(-(start - (len(ids) - keep)))  # transformers 5: crop(-tokens_to_remove)
            start = len(ids) - keep
        x = torch.tensor([ids[start:]], device=self.device)
        out = self.model(input_ids=x, cache=cache, use_cache=True, logits_to_keep=keep,
                         output_hidden_states=self._state_layers)
        res = self._outputs(out, keep_states=False, keep_logits=keep_logits)
        res.states = out.hidden_states[self.lm.state_layer][0, -keep:].float().cpu()
        return cache, res

    @torch.inference_mode()
    def step(self, cache: DynamicCache, token: int) -> int:
        """Plain autoregressive step: feed one token, return the argmax (the AR baseline)."""
        x = torch.tensor([[token]], device=self.device)
        out = self.model(input_ids=x, cache=cache, use_cache=True)
        return int(out.logits[0, -1].argmax())

    @torch.inference_mode()
    def step_logits(self, cache: DynamicCache, token: int) -> torch.Tensor:
        """Plain autoregressive step that returns the next-token logits ([V], float32, CPU):
        the sampled AR baseline."""
        x = torch.tensor([[token]], device=self.device)
        return self.model(input_ids=x, cache=cache, use_cache=True).logits[0, -1].float().cpu()

    @torch.inference_mode()
    def verify(self, cache: DynamicCache, prefix_len: int, tree: DraftTree,
               keep_logits: bool = False) -> NodeOutputs:
        """One forward over the whole tree on top of ``prefix_len`` cached tokens
        (``keep_logits``: also return every node's logits, for sampling).

        Afterwards the cache holds prefix + all n tree nodes; call :meth:`commit` next.
        """
        if cache.get_seq_length() != prefix_len:
            raise RuntimeError(f"cache holds {cache.get_seq_length()} tokens, expected {prefix_len}")
        mask, pos = tree_attention(tree.parents, prefix_len, self.device)
        if self.window:                 # sliding-window layers: each its own mask (transformers takes a dict)
            local, _ = tree_attention(tree.parents, prefix_len, self.device, window=self.window)
            mask = {"full_attention": mask, "sliding_attention": local} if self._hybrid else local
        if self._additive:
            low = torch.finfo(self.lm.dtype).min
            add = lambda m: torch.zeros(m.shape, dtype=self.lm.dtype, device=m.device).masked_fill(~m, low)  # noqa: E731
            mask = {k: add(m) for k, m in mask.items()} if isinstance(mask, dict) else add(mask)
        x = torch.tensor([tree.tokens], device=self.device)
        out = self.model(input_ids=x, attention_mask=mask, position_ids=pos, cache=cache,
                         use_cache=True, output_hidden_states=self._state_layers)
        return self._outputs(out, keep_logits=keep_logits)

    @staticmethod
    @torch.inference_mode()
    def commit(cache: DynamicCache, prefix_len: int, accepted: list[int]) -> None:
        """Keep the prefix and the accepted tree nodes (in path order); drop the rest.

        ``accepted`` are tree node indices, root first, strictly increasing (a root path in a
        topologically ordered tree). When they are 0..k-1 this is a plain crop.
        """
        keep = len(accepted)
        contiguous = accepted == list(range(keep))
        idx = None if contiguous else torch.tensor(accepted, device=cache.layers[0].keys.device) + prefix_len
        for layer in cache.layers:
            # a sliding-window layer cropped earlier holds only its last positions: slot = position - off
            sliding = getattr(layer, "is_sliding", False)
            off = layer.cumulative_length - layer.keys.shape[-2] if sliding else 0
            at = prefix_len - off
            if idx is not None:
                # copy accepted slots down into place (in-place, no full-cache copy)
                layer.keys[..., at:at + keep, :] = layer.keys.index_select(-2, idx - off)
                layer.values[..., at:at + keep, :] = layer.values.index_select(-2, idx - off)
            layer.keys = layer.keys[..., :at + keep, :]
            layer.values = layer.values[..., :at + keep, :]
            if sliding:
                layer.cumulative_length = prefix_len + keep
                # what the window needs next, and the accepted nodes (a request cut inside them
                # crops them back, SpeculativeDecoder._keep): the rest is memory only
                drop = layer.keys.shape[-2] - (layer.sliding_window - 1 + keep)
                if drop > 0:
                    layer.keys = layer.keys[..., drop:, :]
                    layer.values = layer.values[..., drop:, :]
