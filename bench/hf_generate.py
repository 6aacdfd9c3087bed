#!/usr/bin/env python3
"""hf_generate.py -- Hugging Face transformers `generate` on a Llama-3-8B-shaped model
with random bf16 weights (the slow, well-known baseline kiln's bench prints beside
itself). Run on the GPU machine in the same call as `kiln bench`:

    python3 bench/hf_generate.py -b 32 -s 128 -o 256 [--json]

Greedy, EOS ignored (min_new_tokens = max_new_tokens), static shapes; reports output
tokens/s of the timed run after one warm-up.
"""
import argparse
import json
import sys
import time

import torch
from transformers import LlamaConfig, LlamaForCausalLM


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-b", type=int, action="append")
    ap.add_argument("-s", type=int, default=128)
    ap.add_argument("-o", type=int, default=256)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    cfg = LlamaConfig(vocab_size=128256, hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
                      num_attention_heads=32, num_key_value_heads=8, max_position_embeddings=8192,
                      rms_norm_eps=1e-5, rope_theta=500000.0, tie_word_embeddings=False)
    torch.manual_seed(0)
    with torch.device("cuda"):
        model = LlamaForCausalLM(cfg).to(torch.bfloat16).eval()
    results = []
    for b in a.b or [32]:
        ids = torch.randint(1000, 100000, (b, a.s), device="cuda")
        kw = dict(max_new_tokens=a.o, min_new_tokens=a.o, do_sample=False, pad_token_id=0)
        with torch.inference_mode():
            model.generate(ids, max_new_tokens=4, min_new_tokens=4, do_sample=False, pad_token_id=0)
            torch.cuda.synchronize()
            t0 = time.time()
            model.generate(ids, **kw)
            torch.cuda.synchronize()
            dt = time.time() - t0
        r = {"peer": "hf_generate", "batch": b, "input": a.s, "output": a.o, "seconds": dt,
             "output_tok_s": b * a.o / dt}
        print(f"hf_generate: B={b} in={a.s} out={a.o}: {dt:.2f}s  output {b * a.o / dt:.0f} tok/s",
              file=sys.stderr, flush=True)
        results.append(r)
    if a.json:
        print(json.dumps(results))


if __name__ == "__main__":
    main()
