-- glide_llama.lua -- the GliDe drafter (Du et al., "GliDe with a CaPE",
-- arXiv 2402.02082) as ColossalAI's GlideLlamaForCausalLM names it: a small
-- Llama whose layers, after self-attention, also cross-attend to the
-- verifier's KV cache (its last layer). Added in Lua on top of the shared
-- decoder: the only new op is cross_attention.
--
-- Per layer: x += self_attn(norm(x)); x += cross_o(cross_attention(cross_q(x)))
-- (cross attention only for sequences decoding one token, as ColossalAI
-- skips it at prefill); x += mlp(post_norm(x)). The cross query is rotated
-- at position + n_spec_tokens, as ColossalAI's drafter shifts its positions.
local K = require("kiln")

return function(facts)
  local cfg, m, t = facts.config, facts.model, facts.target
  if not t then K.fail("GliDe models are drafters: use them with --speculative-method glide") end
  if facts.tp.size ~= 1 then K.fail("the GliDe drafter runs unsharded (tensor-parallel size 1)") end
  local large_hidden = cfg.large_hidden_size
  local large_heads = cfg.large_num_attention_heads
  if type(large_hidden) ~= "number" or type(large_heads) ~= "number" then
    K.fail("config.json of a GliDe model needs large_hidden_size and large_num_attention_heads")
  end
  local large_hd = large_hidden // large_heads
  if large_hd ~= t.head_dim or large_heads ~= t.num_heads then
    K.fail(string.format("GliDe drafter expects a verifier with %d heads of %d, the model has %d of %d",
                         large_heads, large_hd, t.num_heads, t.head_dim))
  end
  if large_hd ~= m.head_dim then
    K.fail("GliDe needs the same head_dim in drafter and verifier (rotary tables are shared)")
  end
  local H = m.hidden_size
  local function after_attention(P, l)
    local L = "L" .. l .. "."
    local pre = "model.layers." .. l .. ".cross_attn."
    P:slot("cq", large_hidden)
    P:slot("cattn", large_hidden)
    P:weight{ id = L .. "cross_q", tensor = pre .. "q_proj.weight", shape = { large_hidden, H } }
    P:weight{ id = L .. "cross_o", tensor = pre .. "o_proj.weight", shape = { H, large_hidden } }
    P:op{ op = "add", out = "x", a = "x", b = "y", layer = l }
    P:op{ op = "gemm", out = "cq", input = "x", weight = L .. "cross_q", layer = l }
    P:op{ op = "cross_attention", out = "cattn", input = "cq", heads = large_heads, kv_heads = t.num_kv_heads,
          head_dim = large_hd, kv_layer = t.num_layers - 1, pos_offset = t.spec_k, layer = l }
    P:op{ op = "gemm", out = "y", input = "cattn", weight = L .. "cross_o", layer = l }
  end
  local P = K.decoder(facts, {
    name = "glide_llama",
    names = K.llama_names(),
    tied = cfg.tie_word_embeddings == true,
    after_attention = after_attention,
  })
  P.cross = { kv_heads = t.num_kv_heads, head_dim = large_hd }
  return P:finish()
end
