"""Teacher forcing for fast replay: the local model's outputs at every recorded position,
computed once per conversation, past the model's context too, and kept on disk.

What :class:`TeacherForcer` gives, per turn of a conversation (prompt + recording of ``n``
tokens): the :class:`~oilbird.verifier.NodeOutputs` at the last prompt token and at every
recorded token (``n + 1`` rows: argmax, top-k ids and probabilities, the key-layer state), the
rows :class:`~oilbird.decoding.Replay` reads. How:

* **Conversation cache.** A turn whose tokens extend the previous turn's feeds only the new
  tokens on the conversation's KV cache. Where a rendering does not extend exactly (a
  tokenizer without a chat template ends each recording with an EOS the next prompt lacks),
  the cache is cropped back to what the next turn shares, and only the rest is fed.
* **Shared prefix.** Conversations that begin with the same tokens (a system prompt) reuse its
  KV cache: the first turn's prompt of a conversation is kept (one copy per run), and a later
  conversation whose first prompt shares at least :data:`MIN_SHARED` leading tokens with it
  starts from that cache cropped to the common part. If it shares less, its own first prompt
  becomes the kept one. The rows equal a fresh forward's up to floating-point rounding (the
  prefix is the same tokens at the same positions; only the matmul shapes that computed it differ).
* **Windowed states past the context.** A model sees at most ``context`` positions
  (``max_position_embeddings``). When a turn does not fit the current window, the window
  restarts on the last ``window`` tokens of that turn (default ``context // 2``; ``window <=
  context``), fed from position 0 as a fresh forward, and later turns extend it until the
  context is full again. So a recorded position past the context has a state computed from
  the ``window - n - 1`` to ``context`` tokens before it, not the whole conversation: its
  argmax, top-k and the semantic key's state are *windowed*. Everything before the first
  restart is exactly the unwindowed forward. What is not windowed: the copying sources (prompt
  lookup, suffix, the store's continuations) read the whole conversation's tokens, which replay
  hands every drafter in full. A single recording longer than the context cannot be
  teacher-forced at all (:class:`TooLong`): replay skips its conversation and counts it.
* **Disk cache** (:class:`TeacherCache`): a conversation's rows stored in one file per
  conversation, keyed by the model and every turn's token ids (so by rendering, tokenizer and
  content); a hit costs a file read.

* **Sliding-window models** (Gemma 2/3, gpt-oss...): their cache keeps the past of its
  windowed layers until it is cropped (:meth:`Verifier.new_cache`), so the crops above stay
  exact; a crop deeper than the last forward fed starts the next turn afresh instead.

What it does not know: which drafter reads the rows, and the outputs at rejected tree nodes
(fast replay's limit, ``oilbird.evaluation.replay``). It counts what it forwards (tokens and
attention pairs) so that replay can print the floor (:func:`floor_seconds`).
"""
from __future__ import annotations

import copy
import hashlib
import json
import os
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator, Protocol, Sequence

import numpy as np
import torch

from ..trace import common_prefix
from ..verifier import NodeOutputs, Verifier

MIN_SHARED = 32          # leading tokens two conversations must share before a prefix cache is reused
CACHE_FORMAT = 1


class TurnIds(Protocol):
    prompt_ids: list[int]
    recording_ids: list[int]


class TooLong(ValueError):
    """A recording (plus its last prompt token) is longer than the model's context."""


@dataclass
class TeacherStats:
    """What teacher forcing cost in a run: seconds, tokens fed to the model, attention pairs
    (query x key positions, for the floor's attention term), turns with windowed states, and
    shared-prefix and disk-cache use. ``seconds`` is all of it; ``cache_seconds`` the part spent
    reading conversations from the disk cache, which forwards nothing (the floor compares the rest)."""
    seconds: float = 0.0
    cache_seconds: float = 0.0
    tokens_forwarded: int = 0
    rows_kept: int = 0
    attention_pairs: int = 0
    windowed_turns: int = 0
    window_restarts: int = 0
    shared_prefix_tokens: int = 0
    cache_hits: int = 0
    cache_misses: int = 0
    cache_refused: list[str] = field(default_factory=list)

    def as_dict(self) -> dict:
        d = dict(self.__dict__)
        d["cache_refused"] = list(self.cache_refused)
        return d


def model_context(lm) -> int:
    return int(getattr(lm.model.config, "max_position_embeddings", 0) or 0) or 10 ** 9


def _copy_prefix(cache, n: int):
    """A copy of ``cache`` cropped to its first ``n`` tokens."""
    out = copy.deepcopy(cache)
    extra = out.get_seq_length() - n
    if extra > 0:
        out.crop(-extra)                     # transformers 5: crop(-tokens_to_remove)
    return out


class TeacherForcer:
    """Teacher forcing over conversations (module docstring); one per run, so the shared
    prefix and the statistics span the run."""

    def __init__(self, verifier: Verifier, window: int | None = None, shared_prefix: bool = True,
                 cache: "TeacherCache | None" = None):
        self.verifier = verifier
        self.context = model_context(verifier.lm)
        self.window = self.context // 2 if window is None else int(window)
        if not 1 <= self.window <= self.context:
            raise ValueError(f"the window must be 1..{self.context} tokens (the model's context), not {window}")
        self.shared_prefix = shared_prefix
        self.disk = cache
        self.stats = TeacherStats()
        self._prefix_ids: list[int] = []
        self._prefix_cache = None

    def settings(self) -> dict:
        return {"context": self.context, "window": self.window}

    def fits(self, turns: Sequence[TurnIds]) -> bool:
        """Can every turn be teacher-forced: is each recording (plus its last prompt token)
        within the context? A longer one cannot be, even windowed (:class:`TooLong`)."""
        return all(len(t.recording_ids) + 1 <= self.context for t in turns)

    def conversation(self, turns: Sequence[TurnIds]) -> Iterator[tuple[NodeOutputs, bool]]:
        """Per turn, in order: (its ``n + 1`` teacher rows, whether they are windowed). From the
        disk cache when it holds the conversation; else computed (and stored)."""
        turns = list(turns)
        for t in turns:
            if not self.fits([t]):
                raise TooLong(f"a recording of {len(t.recording_ids)} tokens does not fit the model's context "
                              f"of {self.context}")
        if self.disk is not None:
            settings = self.settings()
            if any(a.prompt_ids[:len(b.prompt_ids) + len(b.recording_ids)] != list(b.prompt_ids) + list(b.recording_ids)
                   for b, a in zip(turns, turns[1:])):
                # a turn that does not extend the previous one is fed on the cropped cache (entries
                # written before that was so were computed afresh: equal up to rounding, kept apart)
                settings["crops"] = True
            key = self.disk.key(self.verifier, turns, settings)
            t0 = time.perf_counter()
            got = self.disk.load(key, turns, self.stats)
            if got is not None:
                self.stats.cache_hits += 1
                self.stats.windowed_turns += sum(w for _, w in got)
                took = time.perf_counter() - t0
                self.stats.seconds += took
                self.stats.cache_seconds += took
                yield from got
                return
            self.stats.cache_misses += 1
            rows = list(self._compute(turns))        # whole, then stored, then handed out
            self.disk.save(key, rows, self.stats)
            yield from rows
            return
        yield from self._compute(turns)

    def _compute(self, turns: Sequence[TurnIds]) -> Iterator[tuple[NodeOutputs, bool]]:
        v, st = self.verifier, self.stats
        cache, held, start = None, [], 0         # the model holds ids[start:len(held)] at positions 0..
        for k, t in enumerate(turns):
            t0 = time.perf_counter()
            rec = list(t.recording_ids)
            ids = list(t.prompt_ids) + rec
            keep = len(rec) + 1
            if held and ids[: len(held)] != held:
                cache, held, start = None, [], 0                    # not a continuation: start afresh
            if len(ids) - start > self.context:                     # past the window: restart it
                start = max(0, min(len(ids) - self.window, len(ids) - keep))
                cache, held = None, []
                st.window_restarts += 1
            if cache is None and start == 0 and self.shared_prefix:
                cache = self._shared(ids, keep)
            if cache is None:
                cache = v.new_cache()     # a windowed layer keeps its past until a crop
            fed_from = min(cache.get_seq_length(), len(ids) - start - keep)
            cache, out = v.prefill(ids[start:], cache, keep=keep)
            n_fed = len(ids) - start - fed_from
            st.tokens_forwarded += n_fed
            st.rows_kept += keep
            st.attention_pairs += n_fed * fed_from + n_fed * (n_fed + 1) // 2
            if start == 0 and self.shared_prefix and not held:
                self._keep_prefix(ids, cache, len(t.prompt_ids) - 1)
            windowed = start > 0
            held = ids
            if k + 1 < len(turns):
                cache, held = self._trim(cache, ids, start, n_fed, turns[k + 1])
                if cache is None:
                    start = 0
            st.windowed_turns += windowed
            st.seconds += time.perf_counter() - t0
            yield out, windowed

    def _trim(self, cache, ids: list[int], start: int, n_fed: int, nxt: TurnIds):
        """After a turn: the cache cropped to what the next turn shares with ``ids`` (at most up
        to its last prompt token, whose row it needs), and the ids it then holds; (None, [])
        where the next turn starts afresh (it shares nothing past the window's start, or a
        windowed layer cannot be cropped that deep)."""
        nxt_ids = list(nxt.prompt_ids) + list(nxt.recording_ids)
        to = min(common_prefix(ids, nxt_ids), len(nxt_ids) - len(nxt.recording_ids) - 1)
        remove = len(ids) - to
        if remove <= 0:
            if self.verifier.window:
                cache.crop(0)                   # the windowed layers back to their window
            return cache, ids
        if to - start < 1 or (self.verifier.window and remove > n_fed):
            return None, []
        cache.crop(-remove)
        return cache, ids[:to]

    def _shared(self, ids: list[int], keep: int):
        """The kept prefix's cache, cropped to what ``ids`` shares with it (None if too little)."""
        if self._prefix_cache is None:
            return None
        n = min(common_prefix(self._prefix_ids, ids), len(ids) - keep)
        if n < MIN_SHARED:
            return None
        self.stats.shared_prefix_tokens += n
        return _copy_prefix(self._prefix_cache, n)

    def _keep_prefix(self, ids: list[int], cache, n: int) -> None:
        """After a conversation's first forward (from position 0): keep its cache for its first
        ``n`` tokens unless the kept prefix already covers at least MIN_SHARED of them. The copy
        is kept whole (a windowed layer's past too) and cropped when used."""
        if n < MIN_SHARED or (self._prefix_cache is not None and common_prefix(self._prefix_ids, ids) >= MIN_SHARED):
            return
        self._prefix_ids, self._prefix_cache = list(ids[:n]), copy.deepcopy(cache)


# ---------------------------------------------------------------- the disk cache

def model_fingerprint(lm) -> str:
    """The model's name, config, key layer, dtype, device kind and matmul kernels (``lm.gemm``),
    and a hash of a slice of every weight matrix's bytes: two models that differ in any of them
    do not share cache entries (another device or kernel rounds differently, and a near tie's
    argmax can flip)."""
    h = hashlib.sha256()
    cfg = lm.model.config.to_dict() if hasattr(lm.model.config, "to_dict") else {}
    h.update(json.dumps({"name": lm.name, "config": cfg, "state_layer": lm.state_layer, "dtype": str(lm.dtype),
                         "device": torch.device(lm.device).type, "gemm": lm.gemm},
                        sort_keys=True, default=str).encode())
    with torch.no_grad():
        for name, p in lm.model.named_parameters():
            flat = p.detach().reshape(-1)
            h.update(name.encode())
            h.update(flat[:64].float().cpu().numpy().tobytes())
            h.update(flat[-64:].float().cpu().numpy().tobytes())
            h.update(str(float(flat.float().sum())).encode())
    return h.hexdigest()


class TeacherCache:
    """Teacher-forced rows on disk, one ``.npz`` file per conversation, in ``folder``.

    The key hashes the model (:func:`model_fingerprint`), the teacher settings (top-k, context,
    window) and every turn's prompt and recording ids, so a different model, tokenizer,
    rendering or conversation never reads another's rows; the key is also stored inside the
    entry and checked. Per turn it stores its ``n + 1`` rows: argmax (int32), top-k ids
    (int32) and probabilities (float32), the key-layer state (float32, as computed: a warm
    run's numbers are the cold run's, the device and kernels being in the key), and whether they
    were windowed. That is ``4 + 8k +
    4d`` bytes per row (2,388 bytes for SmolLM2-135M, d = 576, k = 10), about 2.4 MB per 1,000
    recorded tokens. ``max_bytes`` bounds the folder: past it, new entries are not written (one
    line says so) and the run computes them instead. An entry that cannot be read or does not
    match (partial, corrupt, another key) is said in one line and recomputed, never used.
    """

    def __init__(self, folder: str | os.PathLike, max_bytes: int = 4 << 30):
        self.folder = Path(folder).expanduser()
        if self.folder.exists() and not self.folder.is_dir():
            raise ValueError(f"--cache '{self.folder}' is a file; it names a folder (made if absent)")
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ValueError(f"--cache '{self.folder}': cannot create the folder ({exc.strerror})") from None
        if not os.access(self.folder, os.W_OK):
            raise ValueError(f"--cache '{self.folder}': the folder is not writable")
        self.max_bytes = int(max_bytes)
        self._fingerprints: dict[int, str] = {}
        self._full_said = False

    def key(self, verifier: Verifier, turns: Sequence[TurnIds], settings: dict) -> str:
        lm = verifier.lm
        fp = self._fingerprints.get(id(lm))
        if fp is None:
            fp = self._fingerprints[id(lm)] = model_fingerprint(lm)
        h = hashlib.sha256(f"{CACHE_FORMAT}|{fp}|topk={verifier.topk}|{json.dumps(settings, sort_keys=True)}".encode())
        for t in turns:
            p, r = np.asarray(t.prompt_ids, dtype=np.int64), np.asarray(t.recording_ids, dtype=np.int64)
            h.update(np.asarray([len(p), len(r)], dtype=np.int64).tobytes())
            h.update(p.tobytes())
            h.update(r.tobytes())
        return h.hexdigest()

    def path(self, key: str) -> Path:
        return self.folder / f"{key[:40]}.npz"

    def size(self) -> int:
        return sum(p.stat().st_size for p in self.folder.glob("*.npz") if p.is_file())

    def load(self, key: str, turns: Sequence[TurnIds], stats: TeacherStats) -> list[tuple[NodeOutputs, bool]] | None:
        p = self.path(key)
        if not p.exists():
            return None
        try:
            with np.load(p, allow_pickle=False) as z:
                if str(z["key"]) != key:
                    raise ValueError("it holds another conversation's key")
                offsets, windowed = z["offsets"], z["windowed"]
                arrays = [z["argmax"], z["topk_ids"], z["topk_probs"], z["states"]]
            want = np.cumsum([0] + [len(t.recording_ids) + 1 for t in turns])
            if offsets.shape != want.shape or not np.array_equal(offsets, want) or len(windowed) != len(turns) \
                    or any(len(a) != want[-1] for a in arrays):
                raise ValueError("its rows do not match the conversation's turns")
        except Exception as exc:          # partial, corrupt or foreign: any failure means recompute
            line = f"teacher cache: entry '{p.name}' unreadable ({exc}); recomputed"
            print(line, file=sys.stderr)
            stats.cache_refused.append(line)
            return None
        am, ti, tp, sv = (torch.from_numpy(np.ascontiguousarray(a)) for a in arrays)
        am, ti = am.long(), ti.long()
        return [(NodeOutputs(am[a:b], ti[a:b], tp[a:b], sv[a:b]), bool(w))
                for a, b, w in zip(offsets[:-1], offsets[1:], windowed)]

    def save(self, key: str, rows: list[tuple[NodeOutputs, bool]], stats: TeacherStats) -> None:
        outs = [r for r, _ in rows]
        arrays = {"key": np.asarray(key),
                  "offsets": np.cumsum([0] + [len(o.argmax) for o in outs]),
                  "windowed": np.asarray([w for _, w in rows], dtype=bool),
                  "argmax": torch.cat([o.argmax for o in outs]).numpy().astype(np.int32),
                  "topk_ids": torch.cat([o.topk_ids for o in outs]).numpy().astype(np.int32),
                  "topk_probs": torch.cat([o.topk_probs for o in outs]).numpy().astype(np.float32),
                  "states": torch.cat([o.states for o in outs]).numpy().astype(np.float32)}
        need = sum(a.nbytes for a in arrays.values())
        if self.size() + need > self.max_bytes:
            if not self._full_said:
                line = (f"teacher cache: '{self.folder}' would pass its bound of {self.max_bytes / 2**30:.1f} GiB; "
                        "further conversations are computed, not stored")
                print(line, file=sys.stderr)
                stats.cache_refused.append(line)
                self._full_said = True
            return
        fd, tmp = tempfile.mkstemp(dir=self.folder, suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as f:
                np.savez(f, **arrays)
            os.replace(tmp, self.path(key))       # whole or not at all: a crash leaves no partial entry
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise


# ---------------------------------------------------------------- the floor

def flops_per_token(lm) -> dict:
    """FLOPs of one forwarded token, from the model's shapes: ``linear`` = 2 x the decoder layers'
    weight-matrix entries (every token), ``lm_head`` = 2 x vocab x hidden (kept rows only; the
    logits are cut to them), ``attention_per_pair`` = 4 x layers x query width (QK^T and AV, per
    query-key pair)."""
    cfg = lm.model.config
    layers = getattr(getattr(lm.model, "model", lm.model), "layers", None)
    if layers is not None:
        linear = sum(p.numel() for p in layers.parameters() if p.dim() == 2)
    else:
        linear = sum(p.numel() for p in lm.model.parameters() if p.dim() == 2)
    hidden = int(cfg.hidden_size)
    heads = int(getattr(cfg, "num_attention_heads", 1))
    head_dim = int(getattr(cfg, "head_dim", None) or hidden // heads)
    return {"linear": 2 * linear, "lm_head": 2 * int(cfg.vocab_size) * hidden,
            "attention_per_pair": 4 * int(cfg.num_hidden_layers) * heads * head_dim}


def matmul_gflops(lm, seconds: float = 1.0) -> dict:
    """This machine's fp32 matmul throughput on the model's own MLP shape: a [512, hidden] x
    [hidden, intermediate] ``torch.matmul`` on the model's device, repeated for about
    ``seconds``; the best repetition counts (so a busy machine lowers it less)."""
    cfg = lm.model.config
    d = int(cfg.hidden_size)
    i = int(getattr(cfg, "intermediate_size", 4 * d))
    dev = lm.device
    a = torch.randn(512, d, device=dev, dtype=torch.float32)
    b = torch.randn(d, i, device=dev, dtype=torch.float32)
    flop = 2 * 512 * d * i
    best, reps, t_end = float("inf"), 0, time.perf_counter() + seconds
    with torch.inference_mode():
        torch.matmul(a, b)
        while reps < 3 or time.perf_counter() < t_end:
            if dev.type == "cuda":
                torch.cuda.synchronize()
            t0 = time.perf_counter()
            torch.matmul(a, b)
            if dev.type == "cuda":
                torch.cuda.synchronize()
            best = min(best, time.perf_counter() - t0)
            reps += 1
    return {"gflops": flop / best / 1e9, "shape": [512, d, i], "repetitions": reps, "threads": torch.get_num_threads()}


def floor_seconds(stats: TeacherStats, flops: dict, gflops: float) -> dict:
    """The teacher forcing's FLOPs and the time they take at the measured matmul throughput."""
    total = (stats.tokens_forwarded * flops["linear"] + stats.rows_kept * flops["lm_head"]
             + stats.attention_pairs * flops["attention_per_pair"])
    return {"flops": total, "seconds": total / (gflops * 1e9) if gflops > 0 else None}
