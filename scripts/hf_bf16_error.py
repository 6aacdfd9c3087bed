#!/usr/bin/env python3
"""How far transformers' own bf16 forward is from its fp32 reference on the
golden prompts (tests/data/golden), and a bf16 forward whose residual stream
stays fp32 (what kiln's GPU executor does): ||a - b|| / ||b|| of the last
position's logits, per prompt. CPU, eager attention (the goldens' setting).

    python3 scripts/hf_bf16_error.py llama3-gqa llama2-mha ...
"""
import json, os, sys, types

import torch
from transformers import AutoModelForCausalLM
torch.manual_seed(0)
D = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data")

def rms_fp32_out_act(norm, act_dtype):
    def f(self, h):
        hf = h.float()
        var = hf.pow(2).mean(-1, keepdim=True)
        return (self.weight.float() * (hf * torch.rsqrt(var + self.variance_epsilon))).to(act_dtype)
    return types.MethodType(f, norm)

def patch_fp32_resid(model, act):
    m = model.model
    def layer_fwd(self, hidden_states, attention_mask=None, position_ids=None, cache=None, use_cache=False, position_embeddings=None, **kw):
        residual = hidden_states.float()
        h = self.input_layernorm(residual)
        h, _ = self.self_attn(hidden_states=h, attention_mask=attention_mask, position_ids=position_ids, cache=cache,
                              use_cache=use_cache, position_embeddings=position_embeddings, **kw)
        residual = residual + h.float()
        h = self.post_attention_layernorm(residual)
        h = self.mlp(h)
        return residual + h.float()
    for L in m.layers:
        L.input_layernorm.forward = rms_fp32_out_act(L.input_layernorm, act)
        L.post_attention_layernorm.forward = rms_fp32_out_act(L.post_attention_layernorm, act)
        L.forward = types.MethodType(layer_fwd, L)
    m.norm.forward = rms_fp32_out_act(m.norm, act)

def rel(a, b): return ((a - b).norm() / b.norm()).item()

names = sys.argv[1:] or ["llama3-gqa"]
for name in names:
    g = json.load(open(f"{D}/golden/{name}.json"))
    mdir = f"{D}/models/{name}"
    ref = AutoModelForCausalLM.from_pretrained(mdir, dtype=torch.float32, attn_implementation="eager").eval()
    bf = AutoModelForCausalLM.from_pretrained(mdir, dtype=torch.bfloat16, attn_implementation="eager").eval()
    bf_sdpa = AutoModelForCausalLM.from_pretrained(mdir, dtype=torch.bfloat16, attn_implementation="sdpa").eval()
    sim = AutoModelForCausalLM.from_pretrained(mdir, dtype=torch.bfloat16, attn_implementation="eager").eval()
    ok_patch = hasattr(sim.model.layers[0], "post_attention_layernorm") and not hasattr(sim.model.layers[0], "resid_attn_dropout")
    if ok_patch: patch_fp32_resid(sim, torch.bfloat16)
    with torch.no_grad():
        for c in g["cases"]:
            ids = torch.tensor([c["prompt"]])
            gold = torch.tensor(c["first_logits"], dtype=torch.float32)
            r = ref(input_ids=ids, use_cache=False).logits[0, -1].float()
            b = bf(input_ids=ids, use_cache=False).logits[0, -1].float()
            bs = bf_sdpa(input_ids=ids, use_cache=False).logits[0, -1].float()
            s = sim(input_ids=ids, use_cache=False).logits[0, -1].float() if ok_patch else None
            print(f"{name:14s} len {len(c['prompt']):3d}: fp32-vs-golden {rel(r, gold):.2e}  HF bf16(eager) {rel(b, gold):.3e}  HF bf16(sdpa) {rel(bs, gold):.3e}  "
                  + (f"bf16+fp32-resid sim {rel(s, gold):.3e}" if s is not None else "sim n/a"))
