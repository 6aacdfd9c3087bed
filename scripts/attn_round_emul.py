#!/usr/bin/env python3
"""attn_round_emul.py -- numpy emulation of the online-softmax rounding of kiln's
prefill attention kernels (kernel_src/attn_prefill*.cu): P is rounded to bf16
for the P.V MMA, the row sums and O accumulate in fp32. Compares, against a
float64 reference on random bf16 q / K / V, the relative error of
  v1       the first kernel: the running max updated every 16 keys (P <= 1)
  lazy8    64-key tiles, the max moved only when it grows by 2^8 (P <= 256)
  exact64  64-key tiles, the max always exact (kernel_src/attn_prefill.cu now)
The lagging max rounds the row's largest weight too (an exact max makes it 1.0
exactly), which showed as 5-24% more error; exact64 matches v1 within ~2%.
Usage: python3 scripts/attn_round_emul.py (numpy; ~1 min).
"""
import numpy as np


def bf16(x):
    u = np.asarray(x, np.float32).view(np.uint32)
    r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint32) << 16
    return r.view(np.float32)


def attn(q, K, V, scale, tile, lazy):
    """one query row over keys K, values V (every key visible)"""
    sl2 = np.float32(scale * 1.4426950408889634)
    m, l, o = -np.inf, np.float32(0), np.zeros(V.shape[1], np.float32)
    for t0 in range(0, len(K), tile):
        s = (K[t0:t0 + tile] @ q).astype(np.float32)
        mc = float(s.max() * sl2)
        mnew = mc if mc > m + lazy else m
        alpha = np.float32(2.0 ** (m - mnew)) if m > -np.inf else np.float32(0)
        p = np.exp2(s * sl2 - mnew).astype(np.float32)
        m = mnew
        l = l * alpha + p.sum(dtype=np.float32)
        o = o * alpha + (bf16(p) @ V[t0:t0 + tile]).astype(np.float32)
    return bf16(o / l)


def main():
    rng = np.random.default_rng(0)
    schemes = {"v1": (16, 0.0), "lazy8": (64, 8.0), "exact64": (64, 0.0)}
    for hd, n, sig in [(16, 113, 1.0), (16, 113, 3.0), (128, 113, 1.0), (64, 500, 2.0)]:
        err = {k: [] for k in schemes}
        for _ in range(300):
            q = bf16(rng.standard_normal(hd) * sig)
            K = bf16(rng.standard_normal((n, hd)) * sig)
            V = bf16(rng.standard_normal((n, hd)))
            s = (K.astype(np.float64) @ q.astype(np.float64)) / np.sqrt(hd)
            p = np.exp(s - s.max())
            ref = (p @ V.astype(np.float64)) / p.sum()
            for k, (tile, lazy) in schemes.items():
                out = attn(q, K, V, 1 / np.sqrt(hd), tile, lazy).astype(np.float64)
                err[k].append(np.linalg.norm(out - ref) / np.linalg.norm(ref))
        print(f"head_dim {hd:3d} keys {n:3d} sigma {sig}: " +
              "  ".join(f"{k} {np.mean(v):.3e}" for k, v in err.items()))


if __name__ == "__main__":
    main()
