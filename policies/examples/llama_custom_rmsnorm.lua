-- llama_custom_rmsnorm.lua -- an example of a policy bringing its own CUDA
-- kernel: the Llama plan, with every plain RMSNorm run by the kernel below
-- instead of kiln's (kernel_src/rmsnorm.cu). Use it with
--     kiln generate --model DIR --policy policies/examples/llama_custom_rmsnorm.lua
-- The kernel is compiled by NVRTC like kiln's own (cached on disk), with the
-- registry's defines (ACT, W) and signature for "rmsnorm":
--     (act_t *out, const act_t *x, const w_t *w, int rows, int dim, float eps)
-- kiln launches it with blocks of warps; this version gives each warp one
-- row and walks it with a lane stride, so it is correct for any launch kiln
-- picks. On the CPU backend the reference RMSNorm runs instead.
local K = require("kiln")

local SOURCE = [[
#include "kiln_common.cuh"
typedef ACT act_t;
typedef W w_t;
extern "C" __global__ void my_rmsnorm(act_t *out, const act_t *x, const w_t *w, int rows, int dim, float eps) {
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    int row = blockIdx.x * (blockDim.x / 32) + warp;
    if (row >= rows) return;
    const act_t *xr = x + (size_t)row * dim;
    float ss = 0.0f;
    for (int i = lane; i < dim; i += 32) { float v = to_f32(xr[i]); ss += v * v; }
    for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
    float r = rsqrtf(ss / (float)dim + eps);
    for (int i = lane; i < dim; i += 32)
        out[(size_t)row * dim + i] = from_f32<act_t>(to_f32(xr[i]) * r * to_f32(w[i]));
}
]]

return function(facts)
  local cfg = facts.config
  local P = K.decoder(facts, {
    name = "llama+custom_rmsnorm",
    names = K.llama_names(),
    tied = cfg.tie_word_embeddings == true,
    qkv_bias = cfg.attention_bias == true,
  })
  local v = P:kernel{ name = "my_rmsnorm", entry = "my_rmsnorm", replaces = "rmsnorm", source = SOURCE }
  for _, o in ipairs(P.program) do
    if o.op == "rmsnorm" then o.variant = v end
  end
  return P:finish()
end
