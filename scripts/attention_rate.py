"""How fast this machine runs the default model's attention, against the matmul the replay floor
assumes for everything.

    python scripts/attention_rate.py [--threads 2]

torch's ``scaled_dot_product_attention`` as teacher forcing calls it on a cached prefix (SmolLM2's
9 heads of 64; new tokens see the cache and the new tokens before them, a boolean mask), timed
best of 5, in GFLOP/s on the query-key pairs the mask keeps (4 FLOP per pair and head dimension:
QK^T and AV); then the fp32 matmul shape of ``oilbird.evaluation.teacher``'s floor. Their ratio
says how much of teacher forcing's excess over the floor attention explains (docs/replay.md, "Speed").
"""
from __future__ import annotations

import argparse
import time

import torch
import torch.nn.functional as F


def best_seconds(fn, reps: int) -> float:
    fn()
    best = float("inf")
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    ap.add_argument("--threads", type=int, default=torch.get_num_threads())
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    heads, dim = 9, 64
    for new, cached in ((512, 4096), (256, 2048)):
        q, k, v = (torch.randn(1, heads, n, dim) for n in (new, cached, cached))
        mask = torch.ones(new, cached, dtype=torch.bool).tril(cached - new)
        s = best_seconds(lambda: F.scaled_dot_product_attention(q, k, v, attn_mask=mask), 5)
        flops = int(mask.sum()) * heads * dim * 4
        print(f"attention, {new} new tokens on {cached}: {s * 1e3:.1f} ms, {flops / s / 1e9:.0f} GFLOP/s")
    a, b = torch.randn(512, 576), torch.randn(576, 1536)
    s = best_seconds(lambda: a @ b, 20)
    print(f"matmul 512x576x1536 (the floor's): {2 * 512 * 576 * 1536 / s / 1e9:.0f} GFLOP/s "
          f"({args.threads} threads)")


if __name__ == "__main__":
    main()
