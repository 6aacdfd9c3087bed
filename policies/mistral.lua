-- mistral.lua -- Mistral (MistralForCausalLM): the Llama decoder with
-- sliding-window attention when the config sets sliding_window.
local K = require("kiln")

return function(facts)
  local cfg = facts.config
  local window = 0
  if type(cfg.sliding_window) == "number" and cfg.use_sliding_window ~= false then
    window = cfg.sliding_window
  end
  local P = K.decoder(facts, {
    name = "mistral",
    names = K.llama_names(),
    tied = cfg.tie_word_embeddings == true,
    window = window,
  })
  return P:finish()
end
