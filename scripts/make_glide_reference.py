#!/usr/bin/env python3
"""make_glide_reference.py -- a tiny random GliDe drafter and a PyTorch
reference of its forward pass, for tests/test_glide.c.

    python3 scripts/make_glide_reference.py --out tests/data

Writes tests/data/models/glide-tiny/ (config.json with architectures
["GlideLlamaForCausalLM"], bf16 model.safetensors named as ColossalAI's
GlideLlamaForCausalLM names its weights) and tests/data/golden/glide-tiny.json.

The reference follows ColossalAI's glide_llama.py and the paper (Du et al.,
arXiv 2402.02082): each drafter layer is
    x = x + self_attn(input_norm(x))
    x = x + cross_o(cross_attention(cross_q(x)))   # only when the forward
                                                   # has one query token
    x = x + mlp(post_norm(x))
where cross_attention rotates its queries (verifier head count and head dim)
with the drafter's rotary embedding at position + n_spec_tokens (ColossalAI
shifts every drafter position by n_spec_tokens) and attends over the
verifier's last-layer KV cache. The verifier is tests/data/models/llama3-gqa
run by transformers (fp32 from its bf16 weights), whose cache supplies the
keys (already rotated) and values. Everything here runs on the CPU in fp32.
"""
import argparse
import json
import math
import os

import torch
from safetensors.torch import save_file

HIDDEN, HEADS, KV_HEADS, LAYERS, FFN, VOCAB = 32, 2, 2, 2, 64, 512
LARGE_HIDDEN, LARGE_HEADS = 64, 4  # llama3-gqa: 4 heads of 16
THETA, EPS = 10000.0, 1e-5
N_SPEC = 4


def rms(x, w):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + EPS) * w


def rope(x, pos, hd):
    # x [heads, T, hd], pos [T] float; rotate-half, default rope of the drafter
    inv = 1.0 / (THETA ** (torch.arange(0, hd, 2, dtype=torch.int64).float() / hd))
    f = pos[:, None].float() * inv[None, :]
    emb = torch.cat([f, f], dim=-1)
    cos, sin = emb.cos(), emb.sin()
    x1, x2 = x[..., : hd // 2], x[..., hd // 2:]
    return x * cos + torch.cat([-x2, x1], dim=-1) * sin


def attend(q, k, v, causal_from=None):
    # q [hq, Tq, hd], k/v [hk, Tk, hd]; GQA by repeating kv heads
    rep = q.shape[0] // k.shape[0]
    k = k.repeat_interleave(rep, 0)
    v = v.repeat_interleave(rep, 0)
    s = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    if causal_from is not None:  # query i sits at key position causal_from + i
        Tq, Tk = q.shape[1], k.shape[1]
        qpos = torch.arange(Tq)[:, None] + causal_from
        s = s.masked_fill(torch.arange(Tk)[None, :] > qpos, float("-inf"))
    return torch.softmax(s, -1) @ v


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="tests/data")
    a = ap.parse_args()
    torch.manual_seed(7)
    hd = HIDDEN // HEADS
    lhd = LARGE_HIDDEN // LARGE_HEADS
    assert hd == lhd == 16
    W = {}

    def mat(name, r, c, std=0.15):
        W[name] = (torch.randn(r, c) * std).to(torch.bfloat16)

    mat("model.embed_tokens.weight", VOCAB, HIDDEN, 0.3)
    mat("lm_head.weight", VOCAB, HIDDEN, 0.3)
    W["model.norm.weight"] = (1 + 0.1 * torch.randn(HIDDEN)).to(torch.bfloat16)
    for l in range(LAYERS):
        p = f"model.layers.{l}."
        mat(p + "self_attn.q_proj.weight", HEADS * hd, HIDDEN)
        mat(p + "self_attn.k_proj.weight", KV_HEADS * hd, HIDDEN)
        mat(p + "self_attn.v_proj.weight", KV_HEADS * hd, HIDDEN)
        mat(p + "self_attn.o_proj.weight", HIDDEN, HEADS * hd)
        mat(p + "cross_attn.q_proj.weight", LARGE_HIDDEN, HIDDEN)
        mat(p + "cross_attn.o_proj.weight", HIDDEN, LARGE_HIDDEN)
        mat(p + "mlp.gate_proj.weight", FFN, HIDDEN)
        mat(p + "mlp.up_proj.weight", FFN, HIDDEN)
        mat(p + "mlp.down_proj.weight", HIDDEN, FFN)
        W[p + "input_layernorm.weight"] = (1 + 0.1 * torch.randn(HIDDEN)).to(torch.bfloat16)
        W[p + "post_attention_layernorm.weight"] = (1 + 0.1 * torch.randn(HIDDEN)).to(torch.bfloat16)

    mdir = os.path.join(a.out, "models", "glide-tiny")
    os.makedirs(mdir, exist_ok=True)
    save_file({k: v.contiguous() for k, v in W.items()}, os.path.join(mdir, "model.safetensors"),
              metadata={"format": "pt"})
    cfg = {
        "architectures": ["GlideLlamaForCausalLM"], "model_type": "llama", "hidden_size": HIDDEN,
        "intermediate_size": FFN, "num_hidden_layers": LAYERS, "num_attention_heads": HEADS,
        "num_key_value_heads": KV_HEADS, "vocab_size": VOCAB, "max_position_embeddings": 512,
        "rms_norm_eps": EPS, "rope_theta": THETA, "rope_scaling": None, "tie_word_embeddings": False,
        "hidden_act": "silu", "torch_dtype": "bfloat16", "large_hidden_size": LARGE_HIDDEN,
        "large_num_attention_heads": LARGE_HEADS, "bos_token_id": 0, "eos_token_id": 1,
    }
    with open(os.path.join(mdir, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)

    # the verifier: llama3-gqa through transformers, its last-layer cache
    from transformers import AutoModelForCausalLM
    vdir = os.path.join(a.out, "models", "llama3-gqa")
    verifier = AutoModelForCausalLM.from_pretrained(vdir, attn_implementation="eager").float().eval()
    g = torch.Generator().manual_seed(11)
    prompt = torch.randint(5, VOCAB, (12,), generator=g).tolist()
    nxt = int(torch.randint(5, VOCAB, (1,), generator=g))
    with torch.no_grad():
        out = verifier(torch.tensor([prompt]), use_cache=True)
    cache = out.past_key_values
    try:
        lk, lv = cache.layers[-1].keys, cache.layers[-1].values
    except AttributeError:
        lk, lv = cache[len(cache) - 1]
    lk, lv = lk[0].float(), lv[0].float()  # [kv_heads, n, hd]

    Wf = {k: v.float() for k, v in W.items()}

    def forward(tokens, start, self_cache):
        """tokens at positions start.., with ColossalAI's shifted positions."""
        T = len(tokens)
        pos = torch.arange(start, start + T) + N_SPEC
        x = Wf["model.embed_tokens.weight"][torch.tensor(tokens)]
        for l in range(LAYERS):
            p = f"model.layers.{l}."
            h = rms(x, Wf[p + "input_layernorm.weight"])
            q = (h @ Wf[p + "self_attn.q_proj.weight"].T).view(T, HEADS, hd).transpose(0, 1)
            k = (h @ Wf[p + "self_attn.k_proj.weight"].T).view(T, KV_HEADS, hd).transpose(0, 1)
            v = (h @ Wf[p + "self_attn.v_proj.weight"].T).view(T, KV_HEADS, hd).transpose(0, 1)
            q, k = rope(q, pos, hd), rope(k, pos, hd)
            if l in self_cache:
                k = torch.cat([self_cache[l][0], k], 1)
                v = torch.cat([self_cache[l][1], v], 1)
            self_cache[l] = (k, v)
            o = attend(q, k, v, causal_from=start).transpose(0, 1).reshape(T, HEADS * hd)
            x = x + o @ Wf[p + "self_attn.o_proj.weight"].T
            if T == 1:  # cross attention only when decoding one token
                cq = (x @ Wf[p + "cross_attn.q_proj.weight"].T).view(T, LARGE_HEADS, lhd).transpose(0, 1)
                cq = rope(cq, pos, lhd)
                co = attend(cq, lk, lv).transpose(0, 1).reshape(T, LARGE_HIDDEN)
                x = x + co @ Wf[p + "cross_attn.o_proj.weight"].T
            h = rms(x, Wf[p + "post_attention_layernorm.weight"])
            gt = h @ Wf[p + "mlp.gate_proj.weight"].T
            up = h @ Wf[p + "mlp.up_proj.weight"].T
            x = x + (torch.nn.functional.silu(gt) * up) @ Wf[p + "mlp.down_proj.weight"].T
        x = rms(x, Wf["model.norm.weight"])
        return (x[-1] @ Wf["lm_head.weight"].T).tolist()

    with torch.no_grad():
        sc = {}
        logits_a = forward(prompt, 0, sc)          # prefill: no cross attention
        logits_b = forward([nxt], len(prompt), sc)  # one token: glimpses the verifier
    gdir = os.path.join(a.out, "golden")
    os.makedirs(gdir, exist_ok=True)
    with open(os.path.join(gdir, "glide-tiny.json"), "w") as f:
        json.dump({"verifier": "llama3-gqa", "prompt": prompt, "next": nxt, "n_spec_tokens": N_SPEC,
                   "prefill_logits": [float(f"{v:.9g}") for v in logits_a],
                   "decode_logits": [float(f"{v:.9g}") for v in logits_b]}, f)
    print("wrote", mdir, "and", os.path.join(gdir, "glide-tiny.json"))


if __name__ == "__main__":
    main()
