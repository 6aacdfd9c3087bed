-- llama.lua -- Llama 2, Llama 3 and Llama 3.1 (LlamaForCausalLM).
-- q/k/v and gate/up fused, residual add fused into RMSNorm, rope fused into
-- the KV-cache write; rope scaling (llama3, linear, dynamic) comes from the
-- config. Options (--policy-options): fuse_qkv, fuse_gate_up,
-- fuse_residual_norm, fuse_rope_kv (booleans), attention_variant,
-- gemm_variant, norm_variant.
local K = require("kiln")

return function(facts)
  local cfg = facts.config
  local P = K.decoder(facts, {
    name = "llama",
    names = K.llama_names(),
    tied = cfg.tie_word_embeddings == true,
    qkv_bias = cfg.attention_bias == true,
  })
  return P:finish()
end
