"""Oilbird as a vLLM speculative-decoding proposer (vLLM 0.32, ``method="custom_class"``).

    LLM(model=DIR, speculative_config={"method": "custom_class",
        "model": "oilbird.serving.vllm.OilbirdProposer", "num_speculative_tokens": 8})

vLLM builds the class in its worker with the engine's ``VllmConfig``, calls
``load_model(target_model)`` once, and then, after every engine step,
``propose(sampled_token_ids, num_tokens_no_spec, token_ids_cpu, slot_mappings)``
(``vllm/v1/worker/gpu_model_runner.py``, ``propose_draft_token_ids``, the ``custom_class``
branch). It answers one draft chain per batch slot (``[]`` allowed, lengths may differ) and
vLLM verifies each chain greedily, losslessly. Options come from the environment variable
``OILBIRD_VLLM_CONFIG`` (JSON of :class:`ProposerConfig` fields), since vLLM passes none.

What vLLM hands over, and what this module infers from it:

* **no request ids, no start or finish notices.** A request is recognised by its tokens:
  slot ``i`` continues the request last seen in slot ``i`` (or, after vLLM condensed its batch,
  in another slot) when its context is that request's context plus this step's sampled tokens
  (same length; first and last tokens compared). Anything else with sampled tokens is a new
  request, its prompt being the context minus the tokens sampled now. A request not seen in a
  call has left the batch: it is finished, and its output joins the store at once. (A
  preempted request therefore ends and comes back as a new one whose "prompt" holds what it had
  generated; two requests with identical contexts in one step are told apart by slot only.)
  Per-request state lives only while a request is in the batch, so memory is bounded by the
  batch size; the store is bounded by :attr:`ProposerConfig.store_max_records`.
* **what was accepted:** this step's sampled tokens of a slot are the accepted prefix of the
  chain sent last step, then vLLM's own next token.
* **no hidden states**, but ``load_model`` gets the target model: a forward hook on it (and, in
  eager mode, on the decoder layer of the semantic key) keeps each forward's states and the
  attention metadata's ``query_start_loc`` (``vllm.forward_context``), which say which rows
  belong to which slot. Rows are used only where the layout is the expected one (a decoding
  slot holds exactly 1 + the chain sent); otherwise that request drafts without a query state.

A proposer error never reaches another request: each slot is drafted in its own ``try``; a
slot that fails gets ``[]``, its request's state is dropped (it restarts as new), and
:meth:`BatchProposer.stats` counts it. The drafting itself is :mod:`oilbird.serving.chains`.
Nothing here imports vLLM at module level: the logic runs (and is tested) without it.
"""
from __future__ import annotations

import json
import logging
import os
import time
import traceback
from dataclasses import asdict, dataclass, field, fields

import numpy as np

from ..store_snapshot import default_state_layer
from .chains import SOURCES, ChainConfig, RequestDrafter, Shared

log = logging.getLogger(__name__)
CONFIG_ENV = "OILBIRD_VLLM_CONFIG"
_EDGE = 8            # context tokens compared at each end to recognise a request
FAILED_KEPT = 20     # failed requests' ids kept in the stats (a long-running server fails without bound)


class StepCost:
    """What a draft row costs this engine, learned from its own decode steps.

    Each timed step gives (the requests it decoded, the draft tokens it verified for them, its
    wall time less Oilbird's own drafting, the tokens it committed). A least-squares plane
    seconds ~ a + b * requests + c * draft rows, its sums decayed by :attr:`DECAY` a step, says
    what one more draft row adds to a step (``c``), apart from what each request costs (its
    newest token, attention over its context), so that a batch that grows or shrinks is not
    read as dear rows. Sending one more draft token whose P(accepted) is p adds p tokens and
    ``c`` seconds to a step that commits ``tokens`` in ``seconds``; it raises tokens per second
    when p > c * tokens / seconds: :meth:`cut`. Before :attr:`MIN_STEPS` steps, or when the
    steps leave ``c`` undetermined (no spread in draft rows apart from the requests), or when
    ``c`` <= 0, the cut is 0 (send the chain whole).

    Example: steps of 0.10 s + 0.01 s a draft row at one request, 3 tokens per 0.12 s step
    (2 draft rows): cut = 0.01 * 3 / 0.12 = 0.25.
    """
    DECAY = 0.995                    # ~200 steps of memory
    MIN_STEPS = 32

    def __init__(self):
        self.xx = np.zeros((3, 3))       # decayed sums of x x^T, x = (1, requests, draft rows)
        self.xy = np.zeros(3)            # and of x * seconds
        self.tokens = 0.0                # decayed sums of tokens committed
        self.seconds = 0.0               # and of whole steps' seconds (drafting included)
        self.steps = 0

    def observe(self, requests: int, draft_rows: int, seconds: float, tokens: int,
                drafting: float = 0.0) -> None:
        """One decode step: ``seconds`` its wall time, ``drafting`` Oilbird's part of it."""
        x = np.array([1.0, float(requests), float(draft_rows)])
        d = self.DECAY
        self.xx = d * self.xx + np.outer(x, x)
        self.xy = d * self.xy + x * (float(seconds) - float(drafting))
        self.tokens = d * self.tokens + tokens
        self.seconds = d * self.seconds + float(seconds)
        self.steps += 1

    def fit(self) -> tuple[float, float, float] | None:
        """(seconds a step costs, seconds a request adds, seconds a draft row adds), or None."""
        if self.steps < self.MIN_STEPS:
            return None
        xx = self.xx
        # a small ridge on the requests' coefficient: at one batch size throughout, that column
        # is the intercept's, and the ridge leaves it to the intercept
        ridge = np.diag([0.0, 1e-6 * np.trace(xx), 0.0])
        try:
            beta = np.linalg.solve(xx + ridge, self.xy)
        except np.linalg.LinAlgError:
            return None
        rows = xx[2, 2] * xx[0, 0] - xx[0, 2] ** 2          # spread of draft rows
        if not np.all(np.isfinite(beta)) or rows <= 1e-9 * max(1.0, xx[2, 2] * xx[0, 0]):
            return None
        return float(beta[0]), float(beta[1]), float(beta[2])

    def cut(self, fit: tuple[float, float, float] | None = None) -> float:
        """The P(accepted) below which one more draft token lowers tokens per second
        (``fit``: :meth:`fit`'s answer when the caller has it already)."""
        f = self.fit() if fit is None else fit
        if f is None or f[2] <= 0 or self.seconds <= 0:
            return 0.0
        return min(1.0, f[2] * self.tokens / self.seconds)    # row cost x mean tokens / mean seconds


@dataclass
class ProposerConfig:
    budget: int = 16                 # Oilbird tree nodes (root included) behind each chain
    # cut a chain's tail below this estimated P(accepted) (0: send it whole); "auto": where one
    # more token costs more verify time than it saves, as this engine's steps measure it (StepCost)
    min_prob: float | str = 0.0
    sources: tuple = SOURCES         # suffix-state, pld, recycling, semantic, live
    state_layer: int | str | None = None   # semantic key: hidden_states index (None: round(0.85 L)), or "last"
    store_max_records: int | None = 500_000
    tenant: str = "default"
    # check the row layout: the model's output at each query row, through its own lm_head, must
    # predict the token vLLM sampled there (greedy); counts layout_checked / layout_check_failed
    check_layout: bool = False

    @classmethod
    def from_env(cls) -> "ProposerConfig":
        text = os.environ.get(CONFIG_ENV, "").strip()
        return cls.from_json(text, f"${CONFIG_ENV}") if text else cls()

    @classmethod
    def from_json(cls, text: str, where: str = "options") -> "ProposerConfig":
        """Options from a JSON object; a bad one raises ValueError naming ``where`` and the key."""
        try:
            d = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{where} is not JSON ({exc}): {text[:80]!r}") from None
        if not isinstance(d, dict):
            raise ValueError(f"{where} must be a JSON object of {', '.join(f.name for f in fields(cls))}")
        known = {f.name for f in fields(cls)}
        bad = sorted(set(d) - known)
        if bad:
            raise ValueError(f"{where}: unknown option {bad[0]!r}; known: {', '.join(sorted(known))}")
        for key, value in d.items():
            problem = _option_problem(key, value)
            if problem:
                raise ValueError(f"{where}: {key!r} must be {problem}, not {json.dumps(value)}")
        if "sources" in d:
            d["sources"] = tuple(d["sources"])
        cfg = cls(**d)
        cfg.chain_config()                     # validates budget, min_prob and the source names
        return cfg

    def chain_config(self) -> ChainConfig:
        if isinstance(self.min_prob, str) and self.min_prob != "auto":
            raise ValueError(f'min_prob must be a number in [0, 1] or "auto", not {self.min_prob!r}')
        fixed = 0.0 if self.min_prob == "auto" else self.min_prob    # "auto": set per step
        return ChainConfig(budget=self.budget, min_prob=fixed, sources=tuple(self.sources))


def _option_problem(key: str, value) -> str | None:
    """What a :class:`ProposerConfig` option must be when ``value`` is not that, else None
    (so that a wrong type is one line before an engine starts, not a traceback inside it)."""
    def whole(v, low):
        return isinstance(v, int) and not isinstance(v, bool) and v >= low
    checks = {
        "budget": (lambda v: whole(v, 1), "a whole number of tree nodes (the root included), at least 1"),
        "min_prob": (lambda v: v == "auto" or (isinstance(v, (int, float)) and not isinstance(v, bool)
                                               and 0 <= v <= 1), 'a number in [0, 1] or "auto"'),
        "sources": (lambda v: isinstance(v, list) and v and all(isinstance(x, str) for x in v),
                    "a non-empty list of source names"),
        "state_layer": (lambda v: v is None or v == "last" or whole(v, 1),
                        'a decoder layer (1 = the first layer\'s output), "last" or null'),
        "store_max_records": (lambda v: v is None or whole(v, 1), "a whole number of records (1 or more) or null"),
        "tenant": (lambda v: isinstance(v, str) and v != "", "a non-empty string"),
        "check_layout": (lambda v: isinstance(v, bool), "true or false"),
    }
    ok, wanted = checks.get(key, (lambda v: True, ""))
    return None if ok(value) else wanted


@dataclass
class Forward:
    """One target forward as the hooks saw it: ``hidden`` [tokens, dim] (a torch tensor) and
    ``qsl``, the start row of each batch slot plus the end (``query_start_loc``)."""
    hidden: object
    qsl: np.ndarray
    final: object = None             # the model's output rows (check_layout only)


@dataclass
class _Req:
    key: int
    drafter: RequestDrafter
    tokens: list[int]                # prompt + generated so far
    slot: int
    sent: int = 0                    # length of the chain sent last step


@dataclass
class _Stats:
    calls: int = 0
    requests_started: int = 0
    requests_finished: int = 0
    drafts: int = 0
    draft_tokens: int = 0
    accepted_tokens: int = 0
    failures: int = 0
    last_failure: str = ""
    propose_seconds: float = 0.0
    timed_steps: int = 0             # decode steps timed (no request started in them)
    timed_step_seconds: float = 0.0  # wall time between consecutive propose calls
    timed_draft_seconds: float = 0.0 # propose time inside those steps
    states_used: int = 0
    layout_mismatch: int = 0
    layout_checked: int = 0
    layout_check_failed: int = 0
    hook_errors: int = 0
    key_layer_missed: int = 0        # forwards whose key layer's hook did not fire (compiled): last layer used
    store_records: int = 0
    store_requests: int = 0
    failed_requests: list = field(default_factory=list)     # the last FAILED_KEPT of them (failures counts all)


class BatchProposer:
    """The proposer's logic on plain arrays (what vLLM passes), without vLLM."""

    def __init__(self, dim: int, vocab_size: int, k: int, max_model_len: int,
                 config: ProposerConfig | None = None, eos: tuple = ()):
        self.cfg = config or ProposerConfig()
        self.eos = tuple(eos)        # token ids that end an output (the store keeps it up to the first)
        self.dim, self.vocab_size, self.k, self.max_model_len = int(dim), int(vocab_size), int(k), int(max_model_len)
        self.logits_fn = None        # rows -> logits, for check_layout (set by OilbirdProposer.load_model)
        self.reset()

    def reset(self) -> None:
        """Forget everything learned (store, tables, rates) and every request; zero the stats."""
        kw = {"max_records": self.cfg.store_max_records} if self.cfg.store_max_records else {}
        self.shared = Shared(self.dim, self.vocab_size, self.cfg.chain_config(), eos=self.eos,
                             tenant=self.cfg.tenant, **kw)
        self.active: dict[int, _Req] = {}
        self.by_slot: dict[int, int] = {}
        self._next_key = 0
        self._stat = _Stats()
        self._last_start: float | None = None
        self._last_seconds = 0.0
        self.cost = StepCost()

    # -- request identity ------------------------------------------------------------------
    @staticmethod
    def _continues(r: _Req, row, n: int, n_new: int) -> bool:
        m = len(r.tokens)
        if n - n_new != m or m == 0:
            return False
        e = min(_EDGE, m)
        return (list(map(int, row[:e])) == r.tokens[:e]
                and list(map(int, row[m - e:m])) == r.tokens[m - e:])

    def _find(self, i: int, row, n: int, n_new: int, claimed: set) -> _Req | None:
        key = self.by_slot.get(i)
        r = self.active.get(key) if key is not None else None
        if r is not None and key not in claimed and self._continues(r, row, n, n_new):
            return r
        for r in self.active.values():
            if r.key not in claimed and self._continues(r, row, n, n_new):
                return r
        return None

    def _start(self, i: int, row, n: int, n_new: int) -> _Req:
        tokens = [int(t) for t in row[:n]]
        key = self._next_key
        self._next_key += 1
        d = RequestDrafter(self.shared, f"vllm-{key}", tokens[:n - n_new])
        r = self.active[key] = _Req(key, d, tokens, i)
        self._stat.requests_started += 1
        return r

    # -- one engine step -------------------------------------------------------------------
    def propose(self, sampled_token_ids: list[list[int]], num_tokens_no_spec, token_ids_cpu,
                forward: Forward | None = None) -> list[list[int]]:
        t0 = time.perf_counter()
        st = self._stat
        st.calls += 1
        out: list[list[int]] = [[] for _ in sampled_token_ids]
        claimed: set = set()
        started = False
        fwd = forward if forward is not None and len(forward.qsl) == len(sampled_token_ids) + 1 else None
        cut = self.cost.cut() if self.cfg.min_prob == "auto" else None
        decoded = draft_rows = committed = 0       # what the step just ended verified and committed
        chunked = False                            # it also ran a prefill chunk: not a decode step
        # 1) which running request each slot continues (None: a new one)
        slots = []
        for i, sampled in enumerate(sampled_token_ids):
            try:
                n = int(num_tokens_no_spec[i])
                row = token_ids_cpu[i]
                r = self._find(i, row, n, len(sampled), claimed)
                if r is not None:
                    claimed.add(r.key)
                slots.append((i, sampled, n, row, r))
            except Exception as exc:  # noqa: BLE001 - one request's failure must not reach the others
                self._fail(None, i, exc)
        # 2) a request no slot continues has left the batch: its output joins the store now,
        #    before this step's drafts, so a request that replaces it already drafts from it
        for key in [k for k in self.active if k not in claimed]:
            self._finish(self.active.pop(key))
        # 3) learn from what each slot committed, and draft
        for i, sampled, n, row, r in slots:
            try:
                n_new = len(sampled)
                if n_new == 0:            # a prefill chunk (or discarded tokens): nothing to draft
                    chunked = True
                    continue
                if r is None:
                    r = self._start(i, row, n, n_new)
                    started = True
                    new = True
                else:
                    new = False
                    r.tokens.extend(int(t) for t in row[n - n_new:n])
                    decoded, draft_rows, committed = decoded + 1, draft_rows + r.sent, committed + n_new
                self.by_slot[i] = r.key
                r.slot = i
                states, query = self._states(fwd, i, r, n_new, new, int(sampled[-1]))
                if not new:
                    st.accepted_tokens += r.drafter.learn(r.tokens, [int(t) for t in sampled], states)
                max_len = min(self.k, self.max_model_len - n - 1)
                draft = r.drafter.propose(r.tokens, query, max_len, cut) if max_len > 0 else []
                r.sent = len(draft)
                out[i] = draft
                if draft:
                    st.drafts += 1
                    st.draft_tokens += len(draft)
            except Exception as exc:  # noqa: BLE001 - one request's failure must not reach the others
                self._fail(r, i, exc)
                out[i] = []
        self.by_slot = {s: k for s, k in self.by_slot.items() if k in self.active}
        # timing: the wall time between two calls is one engine step (drafting included); steps
        # in which a request started hold its prefill (and any idle wait), so they are left out
        seconds = time.perf_counter() - t0
        st.propose_seconds += seconds
        if self._last_start is not None and not started:
            st.timed_steps += 1
            st.timed_step_seconds += t0 - self._last_start
            st.timed_draft_seconds += self._last_seconds
            if decoded and not chunked:             # a pure decode step: what its rows cost
                self.cost.observe(decoded, draft_rows, t0 - self._last_start, committed, self._last_seconds)
        self._last_start, self._last_seconds = t0, seconds
        return out

    def _states(self, fwd: Forward | None, i: int, r: _Req, n_new: int, new: bool, sampled_last: int):
        """(states of the root and the accepted tokens, query state) for slot ``i``, or Nones."""
        if fwd is None:
            return None, None
        q0, q1 = int(fwd.qsl[i]), int(fwd.qsl[i + 1])
        if new:                       # the prefill's last row: the prompt's last token
            rows, query_row = None, q1 - 1
        elif q1 - q0 == 1 + r.sent:   # root + the chain sent: the layout we expect
            rows, query_row = list(range(q0, q0 + n_new)), q0 + n_new - 1
        else:
            self._stat.layout_mismatch += 1
            return None, None
        if query_row < q0 or q1 > len(fwd.hidden):
            self._stat.layout_mismatch += 1
            return None, None
        self._stat.states_used += 1
        if fwd.final is not None and self.logits_fn is not None:
            self._stat.layout_checked += 1
            pred = int(self.logits_fn(fwd.final[query_row:query_row + 1]).argmax(-1).reshape(-1)[0])
            self._stat.layout_check_failed += int(pred != sampled_last)
        # only the rows this slot needs leave the device (a GPU's states cannot become numpy there)
        states = fwd.hidden[rows].float().cpu().numpy() if rows else None
        query = fwd.hidden[query_row].float().cpu().numpy()
        return states, query

    def _fail(self, r: _Req | None, i: int, exc: Exception) -> None:
        st = self._stat
        st.failures += 1
        st.last_failure = f"slot {i}: {type(exc).__name__}: {exc}"
        if r is not None:
            st.failed_requests = st.failed_requests[-(FAILED_KEPT - 1):] + [r.drafter.request_id]
            self.active.pop(r.key, None)       # its state may be half-updated: start it afresh, but
            try:                               # what it committed so far still joins the store
                r.drafter.end(r.tokens)
            except Exception:  # noqa: BLE001
                self._forget(r)
        if st.failures <= 3:
            log.warning("Oilbird proposer failed on slot %d (draft []): %s", i, traceback.format_exc())

    def _finish(self, r: _Req) -> None:
        try:
            r.drafter.end(r.tokens)
            self._stat.requests_finished += 1
        except Exception as exc:  # noqa: BLE001
            self._forget(r)
            self._fail(None, r.slot, exc)

    def _forget(self, r: _Req) -> None:
        """A request dropped without ending cleanly: only running requests' outputs stay in the
        live registry (an ended one closes its own entry)."""
        if self.shared.live is not None:
            self.shared.live.close(r.drafter.request_id)

    def stats(self) -> dict:
        st = self._stat
        st.store_records = len(self.shared.store)
        st.store_requests = self.shared.store.n_requests
        d = asdict(st)
        d["draft_share_of_step"] = (st.timed_draft_seconds / st.timed_step_seconds
                                    if st.timed_step_seconds > 0 else None)
        d["draft_ms_per_step"] = (1000 * st.timed_draft_seconds / st.timed_steps if st.timed_steps else None)
        f = self.cost.fit()
        d["step_cost"] = {"steps": self.cost.steps, "step_s": f[0] if f else None,
                          "request_s": f[1] if f else None, "draft_row_s": f[2] if f else None,
                          "cut": self.cost.cut(f) if self.cfg.min_prob == "auto" else None}
        d["config"] = asdict(self.cfg)
        return d


class _Capture:
    """Forward hooks that keep the last forward's states and slot layout (see the module doc)."""

    def __init__(self, proposer: BatchProposer):
        self.proposer = proposer
        self.last: Forward | None = None
        self._layer_out = None
        self.layer_hooked = False        # a hook on the key's decoder layer was registered

    def on_layer(self, module, args, out) -> None:
        try:
            h, res = (out[0], out[1]) if isinstance(out, tuple) else (out, None)
            # vLLM's decoder layers return (hidden, residual): the residual stream is their sum
            self._layer_out = (h + res) if res is not None else h
        except Exception:  # noqa: BLE001 - never break the engine's forward
            self._layer_out = None
            self.proposer._stat.hook_errors += 1

    def on_model(self, module, args, out) -> None:
        try:
            from vllm.forward_context import get_forward_context
            md = get_forward_context().attn_metadata
            if isinstance(md, list):          # micro-batches (DBO): layout unknown here
                self.last = None
                return
            meta = next(iter(md.values())) if md else None
            qsl = getattr(meta, "query_start_loc", None)
            if qsl is None:
                self.last = None
                return
            qsl = np.asarray(qsl.cpu() if hasattr(qsl, "cpu") else qsl, dtype=np.int64)
            final = out[0] if isinstance(out, tuple) else out
            h = self._layer_out if self._layer_out is not None else final
            if self.layer_hooked and self._layer_out is None:
                # compiled (torch.compile, CUDA graphs): the layer ran inside the graph, its hook
                # never fired; the key reads the model's output (last layer, normed) instead
                if not self.proposer._stat.key_layer_missed:
                    log.warning("oilbird: the key layer's hook did not fire (a compiled model?): the semantic "
                                "key reads the last layer instead; run vLLM with enforce_eager=True for the "
                                "configured layer")
                self.proposer._stat.key_layer_missed += 1
            n = int(qsl[-1])
            self.last = Forward(h[:n].detach().clone() if h is not self._layer_out else h[:n].detach(), qsl,
                                final[:n].detach().clone() if self.proposer.cfg.check_layout else None)
        except Exception:  # noqa: BLE001
            self.last = None
            self.proposer._stat.hook_errors += 1
        finally:
            self._layer_out = None


class OilbirdProposer:
    """The class vLLM loads by name (``speculative_config={"method": "custom_class", ...}``)."""

    def __init__(self, vllm_config):
        spec = vllm_config.speculative_config
        mc = vllm_config.model_config
        hf = getattr(mc, "hf_text_config", None) or mc.hf_config
        self.num_layers = int(hf.num_hidden_layers)
        eos = getattr(mc.hf_config, "eos_token_id", None)
        self.core = BatchProposer(dim=int(hf.hidden_size), vocab_size=int(hf.vocab_size),
                                  k=int(spec.num_speculative_tokens), max_model_len=int(mc.max_model_len),
                                  config=ProposerConfig.from_env(),
                                  eos=() if eos is None else (eos,) if isinstance(eos, int) else tuple(eos))
        self.capture: _Capture | None = None
        self.enabled = True           # False: every draft empty (vLLM's plain greedy step)

    def load_model(self, target_model=None, *args, **kwargs) -> None:
        """vLLM's CPU runner calls this with the target model: hook it for the sources that read
        states (the semantic key, the suffix source's state weighting) and the layout check."""
        uses_states = {"semantic", "suffix-state"} & set(self.core.cfg.sources)
        if target_model is None or not (uses_states or self.core.cfg.check_layout):
            return
        self.capture = cap = _Capture(self.core)
        if self.core.cfg.check_layout and hasattr(target_model, "compute_logits"):
            self.core.logits_fn = target_model.compute_logits
        layer = self.core.cfg.state_layer
        if layer is None:
            layer = default_state_layer(self.num_layers)
        elif layer != "last" and int(layer) > self.num_layers:
            raise ValueError(f"${CONFIG_ENV}: state_layer {layer} is past this model's {self.num_layers} decoder "
                             f"layers (1..{self.num_layers}, or \"last\")")
        layers = getattr(getattr(target_model, "model", None), "layers", None)
        if layer != "last" and layers is not None and 1 <= int(layer) <= len(layers):
            # hidden_states[L] (as transformers numbers them) is the output of decoder layer L - 1.
            # Under torch.compile this hook does not fire (the layer runs inside the graph); the
            # model's output (last layer, normed) is used then.
            layers[int(layer) - 1].register_forward_hook(cap.on_layer)
            cap.layer_hooked = True
        target_model.register_forward_hook(cap.on_model)

    def propose(self, sampled_token_ids, num_tokens_no_spec, token_ids_cpu, slot_mappings=None,
                *args, **kwargs) -> list[list[int]]:
        fwd = self.capture.last if self.capture is not None else None
        if not self.enabled:
            return [[] for _ in sampled_token_ids]
        try:
            return self.core.propose(sampled_token_ids, num_tokens_no_spec, token_ids_cpu, fwd)
        except Exception as exc:  # noqa: BLE001 - the whole batch drafts nothing rather than fail
            self.core._fail(None, -1, exc)
            return [[] for _ in sampled_token_ids]
        finally:
            if self.capture is not None:
                self.capture.last = None

    def stats(self) -> dict:
        return self.core.stats()

    def reset(self) -> None:
        self.core.reset()
