-- qwen2.lua -- Qwen2 (Qwen2ForCausalLM): the Llama decoder with q/k/v
-- biases (fused like the weights, bias epilogue in the GEMM) and, for the
-- small models, tied embeddings.
local K = require("kiln")

return function(facts)
  local cfg = facts.config
  local window = 0
  if cfg.use_sliding_window == true and type(cfg.sliding_window) == "number" then
    window = cfg.sliding_window
  end
  local P = K.decoder(facts, {
    name = "qwen2",
    names = K.llama_names(),
    tied = cfg.tie_word_embeddings == true,
    qkv_bias = true,
    window = window,
  })
  return P:finish()
end
