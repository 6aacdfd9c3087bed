-- phi3.lua -- Phi-3 (Phi3ForCausalLM), added purely in Lua: its checkpoint
-- already fuses q/k/v (self_attn.qkv_proj) and gate/up (mlp.gate_up_proj), so
-- the policy maps row ranges of those tensors onto the same fused weights
-- and op program the Llama family uses. No C change was needed for it.
local K = require("kiln")

return function(facts)
  local cfg = facts.config
  local rs = cfg.rope_scaling
  if type(rs) == "table" and (rs.type == "longrope" or rs.rope_type == "longrope" or rs.type == "su") then
    K.fail("Phi-3 long-context rope scaling (longrope) is not supported by this policy")
  end
  -- transformers applies Phi-3's sliding window (e.g. 2047) in attention
  local window = 0
  if type(cfg.sliding_window) == "number" then window = cfg.sliding_window end
  local P = K.decoder(facts, {
    name = "phi3",
    window = window,
    names = K.llama_names(),
    prefused_qkv = true,
    prefused_gate_up = true,
    tied = cfg.tie_word_embeddings == true,
  })
  return P:finish()
end
