#!/usr/bin/env python3
"""Independent cross-check of tests/data goldens: a plain numpy (float64) forward.

    python3 scripts/check_goldens_numpy.py tests/data

Needs only numpy (no torch, no transformers). For every golden case it runs the
prompt through a ~100-line forward written from the model definitions (RMSNorm,
rotate-half rope with default / linear / dynamic-NTK / llama3 frequencies, GQA,
q/k/v bias, Mistral sliding window, Phi-3 fused qkv and gate_up, tied LM head)
and compares the last prompt position's logits with first_logits; then, teacher
forcing the golden greedy tokens, checks the argmax at every step (up to the
first step whose golden margin is < 1e-3).
It also serves as a short readable statement of what the C CPU backend computes.
"""
import json, math, sys, os, glob
import numpy as np
import struct

def load_file(path):  # minimal safetensors reader, BF16 only (no torch, no ml_dtypes)
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        hdr = json.loads(f.read(n)); data = f.read()
    out = {}
    for k, v in hdr.items():
        if k == "__metadata__": continue
        assert v["dtype"] == "BF16"
        a, b = v["data_offsets"]
        u = np.frombuffer(data[a:b], dtype=np.uint16).astype(np.uint32) << 16
        out[k] = u.view(np.float32).reshape(v["shape"])
    return out

def load_weights(d):
    w = {}
    for f in sorted(glob.glob(os.path.join(d, "*.safetensors"))):
        for k, v in load_file(f).items():
            w[k] = v.astype(np.float64)
    return w

def inv_freq_for(cfg, L):
    hd = cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"]
    if "rope_parameters" in cfg:
        rp = dict(cfg["rope_parameters"]); theta = rp["rope_theta"]
    else:
        rp = dict(cfg.get("rope_scaling") or {}); theta = cfg["rope_theta"]
    t = rp.get("rope_type", rp.get("type", "default"))
    dim = int(hd * rp.get("partial_rotary_factor", 1.0))
    if t == "dynamic":
        mp = cfg["max_position_embeddings"]; sl = max(L, mp); f = rp["factor"]
        theta = theta * ((f * sl / mp) - (f - 1)) ** (dim / (dim - 2))
    inv = 1.0 / (theta ** (np.arange(0, dim, 2) / dim))
    if t == "linear":
        inv = inv / rp["factor"]
    if t == "llama3":
        f, lo, hi, old = rp["factor"], rp["low_freq_factor"], rp["high_freq_factor"], rp["original_max_position_embeddings"]
        wl = 2 * math.pi / inv
        out = np.where(wl > old / lo, inv / f, inv)
        smooth = (old / wl - lo) / (hi - lo)
        sm = (1 - smooth) * out / f + smooth * out
        med = ~(wl < old / hi) & ~(wl > old / lo)
        inv = np.where(med, sm, out)
    return inv, hd

def rms(x, w, eps):
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * w

def rope(x, pos, inv):  # x [T, H, D], inv [T, D/2] (per position), rotate_half convention
    ang = pos[:, None] * inv  # [T, D/2]
    cos = np.cos(np.concatenate([ang, ang], -1))[:, None, :]
    sin = np.sin(np.concatenate([ang, ang], -1))[:, None, :]
    h = x.shape[-1] // 2
    rot = np.concatenate([-x[..., h:], x[..., :h]], -1)
    return x * cos + rot * sin

def forward(d, ids, n_prompt=None):
    """Logits of every position of ids [T, V].

    n_prompt: the sequence is a prompt of n_prompt tokens followed by tokens
    generated one at a time with a KV cache. That matters only for dynamic NTK
    rope, where (as in transformers) each forward call uses the frequencies of
    its own length: prompt positions use seq_len = n_prompt, a generated token
    at position p uses seq_len = p + 1, and cached keys keep the rotation they
    were written with. Running the whole sequence at once with those
    per-position frequencies reproduces the incremental computation exactly.
    """
    cfg = json.load(open(os.path.join(d, "config.json")))
    w = load_weights(d)
    H, KV = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    L = len(ids)
    n_prompt = L if n_prompt is None else n_prompt
    inv = np.stack([inv_freq_for(cfg, max(n_prompt, p + 1))[0] for p in range(L)])
    D = inv_freq_for(cfg, L)[1]
    eps = cfg["rms_norm_eps"]
    win = cfg.get("sliding_window") if cfg["model_type"] == "mistral" else None
    x = w["model.embed_tokens.weight"][ids]
    pos = np.arange(L)
    mask = pos[None, :] <= pos[:, None]
    if win:
        mask &= pos[None, :] > pos[:, None] - win
    for l in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{l}."
        h = rms(x, w[p + "input_layernorm.weight"], eps)
        if p + "self_attn.qkv_proj.weight" in w:
            qkv = h @ w[p + "self_attn.qkv_proj.weight"].T
            q, k, v = np.split(qkv, [H * D, H * D + KV * D], -1)
        else:
            lin = lambda n: h @ w[p + f"self_attn.{n}.weight"].T + (w.get(p + f"self_attn.{n}.bias", 0))
            q, k, v = lin("q_proj"), lin("k_proj"), lin("v_proj")
        q = rope(q.reshape(L, H, D), pos, inv); k = rope(k.reshape(L, KV, D), pos, inv); v = v.reshape(L, KV, D)
        rep = H // KV
        k = np.repeat(k, rep, 1); v = np.repeat(v, rep, 1)
        s = np.einsum("qhd,khd->hqk", q, k) / math.sqrt(D)
        s = np.where(mask[None], s, -np.inf)
        s = np.exp(s - s.max(-1, keepdims=True)); s /= s.sum(-1, keepdims=True)
        o = np.einsum("hqk,khd->qhd", s, v).reshape(L, H * D)
        x = x + o @ w[p + "self_attn.o_proj.weight"].T
        h = rms(x, w[p + "post_attention_layernorm.weight"], eps)
        if p + "mlp.gate_up_proj.weight" in w:
            g, u = np.split(h @ w[p + "mlp.gate_up_proj.weight"].T, 2, -1)
        else:
            g = h @ w[p + "mlp.gate_proj.weight"].T; u = h @ w[p + "mlp.up_proj.weight"].T
        x = x + ((g / (1 + np.exp(-g))) * u) @ w[p + "mlp.down_proj.weight"].T
    x = rms(x, w["model.norm.weight"], eps)
    head = w.get("lm_head.weight", w["model.embed_tokens.weight"])
    return x @ head.T

root = sys.argv[1] if len(sys.argv) > 1 else "tests/data"
bad = 0
for g in sorted(glob.glob(os.path.join(root, "golden", "*.json"))):
    gold = json.load(open(g))
    names = [gold["model"]] + (["llama3-sharded"] if gold["model"] == "llama3-gqa" and not g.endswith("text.json") else [])
    for name in names:
        worst = 0
        for c in gold["cases"]:
            n = len(c["prompt"])
            seq = c["prompt"] + c["greedy"][:-1]
            all_logits = forward(os.path.join(root, "models", name), seq, n_prompt=n)
            ref = all_logits[n - 1]
            # Teacher-forced greedy: argmax at each step must be the golden token
            # unless the golden margin there is tiny (then stop comparing).
            for i, t in enumerate(c["greedy"]):
                if int(np.argmax(all_logits[n - 1 + i])) != t:
                    bad += 1
                    print(f"  {name}: prompt len {n}: step {i} argmax {int(np.argmax(all_logits[n - 1 + i]))} != {t}")
                    break
                if c["margins"][i] < 1e-3:
                    break
            gl = np.array(c["first_logits"])
            rel = np.abs(ref - gl).max() / np.abs(ref).max()
            worst = max(worst, rel)
        print(f"{os.path.basename(g):28s} {name:15s} max|ref - golden| / max|ref| = {worst:.2e}")
        if worst > 1e-4:
            bad += 1
sys.exit(1 if bad else 0)
