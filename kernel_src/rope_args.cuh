// rope_args.cuh -- the rotary-embedding arguments kernel_src/rope_kv.cu and
// rope_kv_wide.cu take by value (the host's mirror: engine/cuda/ops_gpu.c):
// per-token positions, query / KV heads, head dim and rotated dims, the
// inverse frequencies, the attention scale factor and the dynamic-NTK inputs.
#pragma once

struct rope_args {
    const int *pos;
    int nq, nkv, hd, rot;
    const float *inv_freq;
    float mscale;
    const int *dyn_seq_len;
    int dyn_max;
    float dyn_base, dyn_factor;
};
