"""Probe: would a hidden-state key over the request's *own prompt* add accepted tokens?

    python scripts/prompt_key_probe.py replay --data agent-transcripts --limit 20 \\
        --methods oilbird,oilbird-pk --cache runs/tcache --out runs/prompt-key --force

The store indexes generated tokens only, so the semantic key never sees a prompt position (the
user's words, the tool results, the system prompt). This probe adds, for one run, a preset
``oilbird-pk``: ``oilbird`` plus a source ``promptkey`` that ranks the occurrences ``j`` of the
root token in the request's prompt by the cosine of the prompt's state at ``j - 1`` with the
query (the state before the root: the semantic key's own lag), and lets the best ``PK_TOPK``
(default 2) at or above ``PK_FLOOR`` (0.85) propose ``prompt[j + 1 : j + 1 + PK_NTOK]`` (16),
with their context agreement, into the same ``expected`` fill. The prompt states come from one
forward over each conversation's last prompt (every earlier turn's prompt is its prefix; a
turn whose prompt is not, or a conversation over ``MAX_PROMPT`` tokens, gets none), kept as
fp16 in ``--states-dir`` (default ``runs/prompt-states``) for the next run. Fast replay only;
nothing of the library changes. Results: docs/results.md ("The fill at a plateau").
"""
from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from oilbird import methods as M, presets as PR  # noqa: E402
from oilbird.evaluation import replay as R  # noqa: E402
from oilbird.sources.base import Chain, DraftSource, Proposal  # noqa: E402
from oilbird.trace import common_prefix  # noqa: E402

TOPK = int(os.environ.get("PK_TOPK", "2"))
FLOOR = float(os.environ.get("PK_FLOOR", "0.85"))
NTOK = int(os.environ.get("PK_NTOK", "16"))
CAP = 16                 # the longest context agreement credited (as the semantic key's)
MAX_PROMPT = 8000        # longer prompts: no states (one forward must fit the context)
PROMPT_STATES: dict[str, tuple[list[int], np.ndarray]] = {}   # conversation -> (prompt ids, unit states)


class PromptKeySource(DraftSource):
    """The root token's occurrences in this request's prompt, ranked by the state before them."""
    name = "promptkey"
    role = "chains"

    def __init__(self, states: dict | None = None):
        self.states = PROMPT_STATES if states is None else states
        self.ids: list[int] = []
        self.S = None
        self.pos: dict[int, np.ndarray] = {}

    def start_request(self, tokens, request_id):
        self.S, self.pos = None, {}
        got = self.states.get(str(request_id).rsplit("#", 1)[0])
        if got is None or len(tokens) > len(got[0]) or got[0][:len(tokens)] != list(tokens):
            return
        self.ids, self.S = list(tokens), got[1][:len(tokens)]
        arr = np.asarray(self.ids, dtype=np.int64)
        for j in range(1, len(arr) - 1):          # a state before it and a token after it
            self.pos.setdefault(int(arr[j]), []).append(j)
        self.pos = {t: np.asarray(js) for t, js in self.pos.items()}

    def propose(self, ctx, budget):
        js = self.pos.get(int(ctx.tokens[-1])) if self.S is not None and ctx.query_state is not None else None
        if js is None:
            return Proposal()
        sims = self.S[js - 1].astype(np.float32) @ ctx.query_state
        mine = list(ctx.tokens[::-1][:CAP])
        out = []
        for b in np.argsort(-sims, kind="stable")[:TOPK]:
            if sims[b] < FLOOR:
                break
            j = int(js[b])
            m = common_prefix(self.ids[max(0, j - CAP + 1): j + 1][::-1], mine)
            out.append(Chain(self.ids[j + 1: j + 1 + NTOK], float(sims[b]), match=m))
        return Proposal(out)


def _install(states_dir: Path) -> None:
    M.PRESETS["oilbird-pk"] = M.PRESETS["oilbird"] + ("promptkey",)
    M.PRESET_FILLS["oilbird-pk"] = "expected"
    make_sources, replay = PR.make_sources, R.replay

    def _make_sources(names, *a, **k):
        names = list(names)
        mine = [PromptKeySource()] if "promptkey" in names else []
        return make_sources([n for n in names if n != "promptkey"], *a, **k) + mine

    def _replay(conversations, methods, verifier, *a, **k):
        import torch
        conversations = [list(c) for c in conversations]
        t0, n = time.perf_counter(), 0
        states_dir.mkdir(parents=True, exist_ok=True)
        for conv in conversations:
            ids = list(conv[-1].prompt_ids)
            if len(ids) > MAX_PROMPT:
                continue
            f = states_dir / f"{conv[-1].conversation}-{len(ids)}.npy"
            if f.exists():
                S = np.load(f)
            else:
                with torch.inference_mode():
                    out = verifier.model(input_ids=torch.tensor([ids], device=verifier.device), use_cache=False,
                                         logits_to_keep=1, output_hidden_states=True)
                S = out.hidden_states[verifier.lm.state_layer][0].float().cpu().numpy()
                S = (S / np.maximum(np.linalg.norm(S, axis=1, keepdims=True), 1e-9)).astype(np.float16)
                np.save(f, S)
            PROMPT_STATES[conv[-1].conversation] = (ids, S)
            n += 1
        print(f"[prompt_key_probe] prompt states for {n} of {len(conversations)} conversations "
              f"({time.perf_counter() - t0:.0f} s)", file=sys.stderr)
        return replay(conversations, methods, verifier, *a, **k)

    PR.make_sources, R.replay = _make_sources, _replay


def main(argv: list[str]) -> int:
    from oilbird.__main__ import main as oilbird_main
    if not argv or argv[0] != "replay" or "--exact" in argv:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        print("(a fast replay: python scripts/prompt_key_probe.py replay ... --methods oilbird,oilbird-pk)",
              file=sys.stderr)
        return 2
    argv = list(argv)
    states_dir = Path("runs/prompt-states")
    if "--states-dir" in argv[:-1]:
        i = argv.index("--states-dir")
        states_dir = Path(argv[i + 1])
        del argv[i:i + 2]
    _install(states_dir)
    return oilbird_main(argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
