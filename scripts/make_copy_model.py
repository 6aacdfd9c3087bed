#!/usr/bin/env python3
"""make_copy_model.py CONFIG OUT_DIR [--period P] [--seed S]

Writes a Llama checkpoint (config.json + model.safetensors, bf16) of the
shape CONFIG gives (a Hugging Face config.json, or a kiln built-in name such
as llama3-8b from engine/configs/) whose greedy output copies: at every
position i >= P - 1 the next token is the token at position i - (P - 1), so a
prompt made of one span of P tokens repeated (kiln bench --dataset repeat
--span P) continues with the same span forever. It is the "copy-heavy task"
of speculative decoding's n-gram (prompt lookup) drafter, at the real shape's
cost: every projection is there at full size, most of them zero.

How it copies (layer 0 does everything; the other layers' projections are
zero, so they add nothing to the residual stream):
  - embeddings: dimension 0 is 1 for every token, the rest random, each row
    scaled to RMS 1, so RMSNorm (weights 1) leaves them as they are;
  - q and k read only dimension 0, so they are the same for every token: per
    rotary pair f, q_f = s and k_f = s * exp(i * L * theta_f) (L = P - 1), and
    after RoPE the score of query i on key j is
    s^2 * sum_f cos((i - j - L) * theta_f) / sqrt(head_dim): largest, by a
    wide margin, at j = i - L;
  - v of KV head g copies embedding dimensions 1 + g * hd .. ; o_proj writes
    the first query head of each group back to those dimensions times C;
  - the MLPs are zero; lm_head is the embedding without dimension 0, so the
    logit of token y is about C * (e_y . e_{x[i-L]}) over those dimensions
    plus e_y . e_{x[i]}: token x[i - L] wins.
Needs numpy. Deterministic for a seed.
"""
import argparse
import json
import math
import os
import struct
import sys

import numpy as np


def bf16_bytes(a):
    """float32 array -> bf16 bytes (round to nearest even)."""
    u = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32)
    r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    return r.tobytes()


def inv_freq(cfg, hd):
    theta = float(cfg.get("rope_theta", 10000.0))
    f = 1.0 / theta ** (np.arange(0, hd, 2, dtype=np.float64) / hd)
    rs = cfg.get("rope_scaling") or {}
    kind = rs.get("rope_type", rs.get("type"))
    if kind == "llama3":  # as transformers' _compute_llama3_parameters
        factor, lo, hi = rs["factor"], rs["low_freq_factor"], rs["high_freq_factor"]
        old = rs["original_max_position_embeddings"]
        lo_wl, hi_wl = old / lo, old / hi
        wl = 2 * math.pi / f
        out = np.where(wl > lo_wl, f / factor, f)
        smooth = (old / wl - lo) / (hi - lo)
        mid = (1 - smooth) * out / factor + smooth * out
        is_mid = (wl >= hi_wl) & (wl <= lo_wl)
        f = np.where(is_mid, mid, out)
    elif kind not in (None, "default"):
        sys.exit(f"make_copy_model: rope_scaling type {kind!r} is not supported (default or llama3)")
    return f


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[2])
    ap.add_argument("config")
    ap.add_argument("out")
    ap.add_argument("--period", type=int, default=32, help="span length P of the repeated prompt (copy offset P - 1)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--scale", type=float, default=0.0, help="q/k magnitude s (0: picked from the margin)")
    ap.add_argument("--gain", type=float, default=8.0, help="o_proj gain C")
    a = ap.parse_args()

    path = a.config
    if not os.path.exists(path):  # a built-in name: engine/configs of the checkout (or of the cwd)
        here = os.path.dirname(os.path.abspath(__file__))
        for root in (os.path.join(here, ".."), os.getcwd()):
            path = os.path.join(root, "engine", "configs", a.config + ".json")
            if os.path.exists(path):
                break
        else:
            sys.exit(f"make_copy_model: no config {a.config!r} (a config.json, a model directory or a built-in name)")
    if os.path.isdir(path):
        path = os.path.join(path, "config.json")
    cfg = json.load(open(path))
    H, V, nl = cfg["hidden_size"], cfg["vocab_size"], cfg["num_hidden_layers"]
    nq = cfg["num_attention_heads"]
    nkv = cfg.get("num_key_value_heads", nq)
    hd = cfg.get("head_dim") or H // nq
    inter = cfg["intermediate_size"]
    L = a.period - 1
    if L < 1:
        sys.exit("make_copy_model: --period must be at least 2")
    vdim = min(nkv * hd, H - 1)
    rng = np.random.default_rng(a.seed)

    # q / k magnitude: the score at the copy offset must beat every other
    # offset in the context by >= 20 (softmax weight of the rest < 1e-5)
    f = inv_freq(cfg, hd)
    maxpos = int(cfg.get("max_position_embeddings", 8192))
    d = np.arange(-L, maxpos, dtype=np.float64)
    d = d[d != 0]  # d = (i - j) - L over the keys a query can see, but the copy one
    gap = len(f) - np.max(np.cos(np.outer(d, f)).sum(axis=1))
    s = a.scale or math.sqrt(20.0 * math.sqrt(hd) / max(gap, 1e-3))
    print(f"make_copy_model: {cfg.get('architectures', ['?'])[0]} H={H} layers={nl} heads={nq}/{nkv} hd={hd} V={V}; "
          f"period {a.period}, q/k scale {s:.2f} (score gap {gap:.3f} x s^2 / sqrt(hd) = {gap * s * s / math.sqrt(hd):.1f})",
          file=sys.stderr)

    # embeddings: dim 0 = 1, the rest random, RMS 1 per row
    E = rng.standard_normal((V, H), dtype=np.float32)
    E[:, 0] = 0.0
    E *= np.sqrt((H - 1) / np.maximum((E * E).sum(axis=1, keepdims=True), 1e-6)).astype(np.float32)
    E[:, 0] = 1.0
    LM = E.copy()
    LM[:, 0] = 0.0

    Wq = np.zeros((nq * hd, H), np.float32)
    Wk = np.zeros((nkv * hd, H), np.float32)
    half = hd // 2
    for h in range(nq):  # rotate-half pairs (d, d + hd/2): q_f = s
        Wq[h * hd: h * hd + half, 0] = s
    for g in range(nkv):  # k_f = s * exp(i L theta_f)
        Wk[g * hd: g * hd + half, 0] = s * np.cos(L * f)
        Wk[g * hd + half: g * hd + hd, 0] = s * np.sin(L * f)
    Wv = np.zeros((nkv * hd, H), np.float32)
    Wo = np.zeros((H, nq * hd), np.float32)
    grp = nq // nkv
    for c in range(vdim):
        g, dd = divmod(c, hd)
        Wv[g * hd + dd, 1 + c] = 1.0
        Wo[1 + c, (g * grp) * hd + dd] = a.gain

    tensors = []  # (name, shape, values or None for zeros) in file order
    ones = np.ones(H, np.float32)
    tensors.append(("model.embed_tokens.weight", (V, H), E))
    for l in range(nl):
        p = f"model.layers.{l}."
        first = l == 0
        tensors.append((p + "input_layernorm.weight", (H,), ones))
        tensors.append((p + "post_attention_layernorm.weight", (H,), ones))
        tensors.append((p + "self_attn.q_proj.weight", (nq * hd, H), Wq if first else None))
        tensors.append((p + "self_attn.k_proj.weight", (nkv * hd, H), Wk if first else None))
        tensors.append((p + "self_attn.v_proj.weight", (nkv * hd, H), Wv if first else None))
        tensors.append((p + "self_attn.o_proj.weight", (H, nq * hd), Wo if first else None))
        tensors.append((p + "mlp.gate_proj.weight", (inter, H), None))
        tensors.append((p + "mlp.up_proj.weight", (inter, H), None))
        tensors.append((p + "mlp.down_proj.weight", (H, inter), None))
    tensors.append(("model.norm.weight", (H,), ones))
    tensors.append(("lm_head.weight", (V, H), LM))

    header, off = {}, 0
    for name, shape, _ in tensors:
        n = 2 * int(np.prod(shape))
        header[name] = {"dtype": "BF16", "shape": list(shape), "data_offsets": [off, off + n]}
        off += n
    header["__metadata__"] = {"format": "pt", "kiln": f"copy model, period {a.period}, seed {a.seed}"}
    hj = json.dumps(header, separators=(",", ":")).encode()
    hj += b" " * ((8 - len(hj) % 8) % 8)
    os.makedirs(a.out, exist_ok=True)
    zero = bytes(1 << 24)
    with open(os.path.join(a.out, "model.safetensors"), "wb") as fo:
        fo.write(struct.pack("<Q", len(hj)))
        fo.write(hj)
        for name, shape, arr in tensors:
            n = 2 * int(np.prod(shape))
            if arr is None:
                while n:
                    k = min(n, len(zero))
                    fo.write(zero[:k])
                    n -= k
            else:
                rows = max(1, (1 << 26) // max(1, arr[0].size if arr.ndim > 1 else arr.size))
                for r0 in range(0, arr.shape[0], rows):
                    fo.write(bf16_bytes(arr[r0:r0 + rows]))
    out_cfg = dict(cfg)
    out_cfg["tie_word_embeddings"] = False
    out_cfg["torch_dtype"] = "bfloat16"
    out_cfg["kiln_copy_model"] = {"period": a.period, "seed": a.seed, "scale": s, "gain": a.gain}
    json.dump(out_cfg, open(os.path.join(a.out, "config.json"), "w"), indent=1)
    print(f"make_copy_model: wrote {a.out}/model.safetensors ({(8 + len(hj) + off) / 1e9:.2f} GB)", file=sys.stderr)


if __name__ == "__main__":
    main()
