#!/usr/bin/env python3
"""bf16_round_emul.py -- where the first-step logits error of a bf16 forward comes
from, on the tiny test models (tests/data). A Llama forward in fp32 from the
checkpoint's modules (HF's rotary embedding for cos/sin), with a bf16 rounding at
each point kiln's GPU executor rounds (embedding, norm outputs, qkv GEMM output,
rope output = the KV cache and q, the unnormalised probabilities P of the P.V
product (exact running max), attention output, o GEMM, residual stream, gate/up
GEMM output, silu-mul output, down GEMM, final norm, logits). For each golden
prompt it prints ||got - golden|| / ||golden|| with every rounding on ("all-bf16",
what kiln does), with only one on ("only"), and with all but one ("all-but").
Sliding-window and Phi-3 models are not emulated.

    python3 scripts/bf16_round_emul.py llama3-gqa llama-dynamic   (CPU, ~15 s each)
"""
import json, os, sys, torch, itertools
from transformers import AutoModelForCausalLM
D=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data")
def bf(x): return x.to(torch.bfloat16).float()
def ident(x): return x
ALL=["emb","norm","qkv","rope","p","attn_out","o","resid","gu","act","down","final_norm","logits"]
def run(m, ids, R):
    r = {k:(bf if k in R else ident) for k in ALL}
    mm=m.model; cfg=m.config
    nh=cfg.num_attention_heads; nkv=cfg.num_key_value_heads; hd=getattr(cfg,"head_dim",None) or cfg.hidden_size//nh
    T=ids.shape[1]
    h=r["emb"](mm.embed_tokens(ids)[0])
    pos=torch.arange(T)[None]
    cos,sin=mm.rotary_emb(h[None],pos); cos=cos[0].float(); sin=sin[0].float()
    def rope(x):  # x [T, H, hd], rotate-half
        x1,x2=x[...,:hd//2],x[...,hd//2:]
        rot=torch.cat([-x2,x1],-1)
        return x*cos[:,None,:]+rot*sin[:,None,:]
    def rms(x,w,eps):
        v=x.pow(2).mean(-1,keepdim=True); return (x*torch.rsqrt(v+eps))*w
    for L in mm.layers:
        a=L.self_attn
        x=r["norm"](rms(h,L.input_layernorm.weight.float(),L.input_layernorm.variance_epsilon))
        q=r["qkv"](a.q_proj(x)).view(T,nh,hd); k=r["qkv"](a.k_proj(x)).view(T,nkv,hd); v=r["qkv"](a.v_proj(x)).view(T,nkv,hd)
        q=r["rope"](rope(q)); k=r["rope"](rope(k))
        g=nh//nkv
        k=k.repeat_interleave(g,1); v=v.repeat_interleave(g,1)
        s=torch.einsum("thd,shd->hts",q.double(),k.double())*a.scaling
        mask=torch.triu(torch.ones(T,T,dtype=torch.bool),1)
        s=s.masked_fill(mask,-1e300)
        mx=s.max(-1,keepdim=True).values
        p=torch.exp(s-mx)   # unnormalized, max=1 (kiln: exact running max)
        l=p.sum(-1,keepdim=True)
        o=torch.einsum("hts,shd->thd",r["p"](p.float()).double(),v.double())/l.permute(1,0,2)
        o=r["attn_out"](o.float()).reshape(T,nh*hd)
        o=r["o"](a.o_proj(o))
        h=r["resid"](h+o)
        x=r["norm"](rms(h,L.post_attention_layernorm.weight.float(),L.post_attention_layernorm.variance_epsilon))
        gu_g=r["gu"](L.mlp.gate_proj(x)); gu_u=r["gu"](L.mlp.up_proj(x))
        y=r["act"](torch.nn.functional.silu(gu_g)*gu_u)
        y=r["down"](L.mlp.down_proj(y))
        h=r["resid"](h+y)
    x=r["final_norm"](rms(h[-1:],mm.norm.weight.float(),mm.norm.variance_epsilon))
    return r["logits"](m.lm_head(x))[0]
def rel(a,b): return ((a-b).norm()/b.norm()).item()
for name in sys.argv[1:]:
    g=json.load(open(f"{D}/golden/{name}.json"))
    m=AutoModelForCausalLM.from_pretrained(f"{D}/models/{name}",dtype=torch.float32,attn_implementation="eager").eval()
    with torch.no_grad():
        for c in g["cases"]:
            ids=torch.tensor([c["prompt"]]); gold=torch.tensor(c["first_logits"])
            base=rel(run(m,ids,set()),gold)
            full=rel(run(m,ids,set(ALL)),gold)
            only={k:rel(run(m,ids,{k}),gold) for k in ALL}
            wo={k:rel(run(m,ids,set(ALL)-{k}),gold) for k in ALL}
            print(f"{name} len {len(c['prompt'])}: fp32 {base:.1e} all-bf16 {full:.3e}")
            print("   only:", " ".join(f"{k}={v:.2e}" for k,v in only.items()))
            print("   all-but:", " ".join(f"{k}={v:.2e}" for k,v in wo.items()))
