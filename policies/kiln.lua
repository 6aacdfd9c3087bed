-- kiln.lua -- the shared helper library for policies.
--
-- A policy is a Lua module returning function(facts) -> plan. `facts` is
-- read-only: facts.config (config.json as a table), facts.model (normalised
-- numbers: hidden_size, num_layers, num_heads, num_kv_heads, head_dim,
-- vocab_size, intermediate_size, rms_norm_eps, rope = {...}, ...),
-- facts.device ({kind = "cpu"|"cuda", name, sm, memory}), facts.tp
-- ({rank, size}), facts.options (user --policy-options), facts.dtype and
-- facts.kv_cache_dtype.
--
-- The plan lists weights (which checkpoint tensors, fused how, sharded how),
-- activation slots, the flat op program, the KV cache shape and optional
-- custom CUDA kernels. C validates it and names the bad key and the policy
-- line (every entry built here records where it was made).
local K = {}

-- where(level): "file:line" of the policy code that called into this library.
K.where = kiln_where

local function fail(msg, level)
  error(msg, (level or 1) + 1)
end
K.fail = fail

-- ------------------------------------------------------------ plan builder
local Plan = {}
Plan.__index = Plan

function K.plan(facts, name)
  local p = setmetatable({
    name = name, facts = facts,
    weights = {}, slots = {}, program = {}, kernels = {},
    kv_cache_dtype = facts.kv_cache_dtype or "auto",
    _weight_ids = {}, _slot_ids = {},
  }, Plan)
  return p
end

-- weight{id=, shard=, parts={{tensor=, shape={...}, rows={r0, n}, shard=, unit=}, ...}}
-- A single-tensor weight may give tensor/shape/shard/unit directly.
function Plan:weight(w)
  if type(w.id) ~= "string" then fail("weight needs a string id", 2) end
  if self._weight_ids[w.id] then fail("duplicate weight id '" .. w.id .. "'", 2) end
  if not w.parts then
    w.parts = { { tensor = w.tensor, shape = w.shape, rows = w.rows, shard = w.shard, unit = w.unit } }
    w.tensor, w.shape, w.rows, w.unit = nil, nil, nil, nil
  end
  for _, part in ipairs(w.parts) do
    part.shard = part.shard or w.shard or "replicated"
  end
  w.shard = w.shard or w.parts[1].shard
  w.where = w.where or K.where(2)
  self.weights[#self.weights + 1] = w
  self._weight_ids[w.id] = true
  return w.id
end

function Plan:has_weight(id) return self._weight_ids[id] == true end

-- slot(name, width[, rows]): an activation buffer [n_tokens, width], or
-- [n_out, width] when rows == "out" (one row per sequence needing logits).
function Plan:slot(name, width, rows)
  if self._slot_ids[name] then
    local s = self._slot_ids[name]
    if s.width ~= width or (s.rows or "tokens") ~= (rows or "tokens") then
      fail("slot '" .. name .. "' redeclared with another shape", 2)
    end
    return name
  end
  local s = { name = name, width = width, rows = rows or "tokens", where = K.where(2) }
  self.slots[#self.slots + 1] = s
  self._slot_ids[name] = s
  return name
end

-- op{op = kind, ...operands}: append one op to the program.
function Plan:op(o)
  if type(o.op) ~= "string" then fail("op needs an 'op' kind string", 2) end
  o.where = o.where or K.where(2)
  self.program[#self.program + 1] = o
  return o
end

-- kernel{name=, source=, entry=, replaces=}: a custom CUDA kernel that
-- replaces the GPU variant of an op kind wherever an op names
-- variant = "custom:<name>".
function Plan:kernel(k)
  k.where = k.where or K.where(2)
  self.kernels[#self.kernels + 1] = k
  return "custom:" .. k.name
end

function Plan:finish(extra)
  local out = {
    name = self.name, kv_cache_dtype = self.kv_cache_dtype,
    weights = self.weights, slots = self.slots, program = self.program,
    kernels = self.kernels, rope = self.rope, kv = self.kv, vocab = self.vocab,
    logits = self.logits, cross = self.cross,
  }
  for k, v in pairs(extra or {}) do out[k] = v end
  return out
end

-- --------------------------------------------------------------- helpers

-- Local share of n units across the tensor-parallel group; errors (at the
-- policy's line) when it does not divide.
function K.split(n, tp, what, level)
  if n % tp ~= 0 then
    fail(string.format("%s = %d is not divisible by the tensor-parallel size %d", what, n, tp), (level or 1) + 1)
  end
  return n // tp
end

-- KV heads per rank: split when there are at least as many as ranks,
-- else replicated (each rank keeps one head).
function K.local_kv_heads(nkv, tp)
  if nkv >= tp then return K.split(nkv, tp, "num_key_value_heads", 2) end
  if tp % nkv ~= 0 then
    fail(string.format("tensor-parallel size %d is not a multiple of num_key_value_heads %d", tp, nkv), 2)
  end
  return 1
end

function K.rope_from_config(m)
  local r = m.rope
  local rot = math.floor(m.head_dim * (r.partial_rotary_factor or 1))
  return {
    type = r.type, theta = r.theta, factor = r.factor,
    low_freq_factor = r.low_freq_factor, high_freq_factor = r.high_freq_factor,
    original_max_position = r.original_max_position,
    rot_dim = rot, interleaved = false,
  }
end

-- -------------------------------------------------- the pre-norm decoder
--
-- K.decoder(facts, spec) builds the Llama-style decoder used by Llama,
-- Mistral, Qwen2 and Phi-3. spec fields (all optional except names):
--   names.embed, names.final_norm, names.lm_head   tensor names
--   names.layer(l, part) -> tensor name for part in q, k, v, o, gate, up,
--     down, qkv (pre-fused), gate_up (pre-fused), q_bias, k_bias, v_bias,
--     input_norm, post_norm
--   prefused_qkv, prefused_gate_up   checkpoint already fuses them (Phi-3)
--   qkv_bias          q/k/v carry biases (Qwen2)
--   tied              lm_head is the embedding
--   window            sliding-window attention size (Mistral)
--   fuse_qkv, fuse_gate_up, fuse_residual_norm, fuse_rope_kv   (default true)
--   attention_variant, gemm_variant, norm_variant  op variants
--   after_attention(P, l)  hook: extra ops after layer l's attention block
function K.decoder(facts, spec)
  local m, tp = facts.model, facts.tp.size
  local opt = facts.options or {}
  local function flag(name, default)
    if opt[name] ~= nil then return opt[name] end
    if spec[name] ~= nil then return spec[name] end
    return default
  end
  local P = K.plan(facts, spec.name)
  local H, I, hd = m.hidden_size, m.intermediate_size, m.head_dim
  local nq, nkv = m.num_heads, m.num_kv_heads
  local nq_l = K.split(nq, tp, "num_attention_heads", 2)
  local nkv_l = K.local_kv_heads(nkv, tp)
  local I_l = K.split(I, tp, "intermediate_size", 2)
  local V = m.vocab_size
  local V_l = K.split(V, tp, "vocab_size", 2)
  local eps = m.rms_norm_eps
  local names = spec.names
  local fuse_qkv = flag("fuse_qkv", true)
  local fuse_gu = flag("fuse_gate_up", true)
  local fuse_norm = flag("fuse_residual_norm", true)
  local fuse_rope_kv = flag("fuse_rope_kv", true)
  local attn_variant = opt.attention_variant or spec.attention_variant or "auto"
  local gemm_variant = opt.gemm_variant or spec.gemm_variant or "auto"
  local norm_variant = opt.norm_variant or spec.norm_variant or "auto"
  if spec.prefused_qkv then fuse_qkv = true end
  if spec.prefused_gate_up then fuse_gu = true end

  P.rope = K.rope_from_config(m)
  P.kv = { layers = m.num_layers, heads = nkv_l, head_dim = hd }
  P.vocab = { size = V, count = V_l, start = facts.tp.rank * V_l }

  -- slots (widths are per rank)
  local q_w, kv_w = nq_l * hd, nkv_l * hd
  P:slot("x", H)                       -- residual stream
  P:slot("h", H)                       -- normed hidden
  P:slot("qkv", q_w + 2 * kv_w)        -- [q | k | v]
  P:slot("attn", q_w)
  P:slot("y", H)                       -- block output before the residual add
  P:slot("gu", 2 * I_l)                -- [gate | up]
  P:slot("act", I_l)
  P:slot("hl", H, "out")               -- last position of each sequence
  P:slot("logits", V_l, "out")

  P:weight{ id = "embed", tensor = names.embed, shape = { V, H }, shard = "vocab" }

  local function w2(l, part, shape, shard, unit)
    return { tensor = names.layer(l, part), shape = shape, shard = shard, unit = unit }
  end

  for l = 0, m.num_layers - 1 do
    local L = "L" .. l .. "."
    -- weights
    P:weight{ id = L .. "input_norm", tensor = names.layer(l, "input_norm"), shape = { H }, shard = "replicated" }
    P:weight{ id = L .. "post_norm", tensor = names.layer(l, "post_norm"), shape = { H }, shard = "replicated" }
    local qkv_parts
    local total = (nq + 2 * nkv) * hd
    if spec.prefused_qkv then
      local t = names.layer(l, "qkv")
      qkv_parts = {
        { tensor = t, shape = { total, H }, rows = { 0, nq * hd }, shard = "column", unit = hd },
        { tensor = t, shape = { total, H }, rows = { nq * hd, nkv * hd }, shard = "kv_heads", unit = hd },
        { tensor = t, shape = { total, H }, rows = { (nq + nkv) * hd, nkv * hd }, shard = "kv_heads", unit = hd },
      }
    else
      qkv_parts = {
        w2(l, "q", { nq * hd, H }, "column", hd),
        w2(l, "k", { nkv * hd, H }, "kv_heads", hd),
        w2(l, "v", { nkv * hd, H }, "kv_heads", hd),
      }
    end
    local bias_parts
    if spec.qkv_bias then
      bias_parts = {
        w2(l, "q_bias", { nq * hd }, "column", hd),
        w2(l, "k_bias", { nkv * hd }, "kv_heads", hd),
        w2(l, "v_bias", { nkv * hd }, "kv_heads", hd),
      }
    end
    if fuse_qkv then
      P:weight{ id = L .. "qkv", shard = "column", parts = qkv_parts }
      if bias_parts then P:weight{ id = L .. "qkv_bias", shard = "column", parts = bias_parts } end
    else
      for i, nm in ipairs({ "q", "k", "v" }) do
        P:weight{ id = L .. nm, shard = qkv_parts[i].shard, parts = { qkv_parts[i] } }
        if bias_parts then P:weight{ id = L .. nm .. "_bias", shard = bias_parts[i].shard, parts = { bias_parts[i] } } end
      end
    end
    P:weight{ id = L .. "o", tensor = names.layer(l, "o"), shape = { H, nq * hd }, shard = "row", unit = hd }
    local gu_parts
    if spec.prefused_gate_up then
      local t = names.layer(l, "gate_up")
      gu_parts = {
        { tensor = t, shape = { 2 * I, H }, rows = { 0, I }, shard = "column" },
        { tensor = t, shape = { 2 * I, H }, rows = { I, I }, shard = "column" },
      }
    else
      gu_parts = { w2(l, "gate", { I, H }, "column"), w2(l, "up", { I, H }, "column") }
    end
    if fuse_gu then
      P:weight{ id = L .. "gate_up", shard = "column", parts = gu_parts }
    else
      P:weight{ id = L .. "gate", shard = "column", parts = { gu_parts[1] } }
      P:weight{ id = L .. "up", shard = "column", parts = { gu_parts[2] } }
    end
    P:weight{ id = L .. "down", tensor = names.layer(l, "down"), shape = { H, I }, shard = "row" }

    -- program
    if l == 0 then
      P:op{ op = "embed", out = "x", weight = "embed" }
      -- vocabulary-parallel embedding: each rank holds its rows, zeros elsewhere
      if tp > 1 then P:op{ op = "all_reduce", slot = "x" } end
      P:op{ op = "rmsnorm", out = "h", input = "x", weight = L .. "input_norm", eps = eps, layer = l, variant = norm_variant }
    elseif fuse_norm then
      P:op{ op = "add_rmsnorm", out = "h", input = "y", residual = "x", weight = L .. "input_norm", eps = eps, layer = l, variant = norm_variant }
    else
      P:op{ op = "add", out = "x", a = "x", b = "y", layer = l }
      P:op{ op = "rmsnorm", out = "h", input = "x", weight = L .. "input_norm", eps = eps, layer = l, variant = norm_variant }
    end
    if fuse_qkv then
      P:op{ op = "gemm", out = "qkv", input = "h", weight = L .. "qkv", bias = spec.qkv_bias and (L .. "qkv_bias") or nil, layer = l, variant = gemm_variant }
    else
      local col = 0
      for _, nm in ipairs({ "q", "k", "v" }) do
        P:op{ op = "gemm", out = "qkv", out_col = col, input = "h", weight = L .. nm, bias = spec.qkv_bias and (L .. nm .. "_bias") or nil, layer = l, variant = gemm_variant }
        col = col + (nm == "q" and q_w or kv_w)
      end
    end
    local heads = { heads = nq_l, kv_heads = nkv_l, head_dim = hd }
    if fuse_rope_kv then
      P:op{ op = "rope_kv_write", qkv = "qkv", kv_layer = l, heads = nq_l, kv_heads = nkv_l, head_dim = hd, layer = l }
    else
      P:op{ op = "rope", qkv = "qkv", heads = nq_l, kv_heads = nkv_l, head_dim = hd, layer = l }
      P:op{ op = "kv_write", qkv = "qkv", kv_layer = l, heads = nq_l, kv_heads = nkv_l, head_dim = hd, layer = l }
    end
    P:op{ op = "attention", out = "attn", qkv = "qkv", kv_layer = l, heads = nq_l, kv_heads = nkv_l, head_dim = hd,
          scale = 1.0 / math.sqrt(hd), window = spec.window or 0, layer = l, variant = attn_variant }
    P:op{ op = "gemm", out = "y", input = "attn", weight = L .. "o", layer = l, variant = gemm_variant }
    if tp > 1 then P:op{ op = "all_reduce", slot = "y", layer = l } end
    -- a family may insert ops here: they see the residual stream x and the
    -- attention block's output y, and leave in y what is added to x next
    if spec.after_attention then spec.after_attention(P, l) end
    if fuse_norm then
      P:op{ op = "add_rmsnorm", out = "h", input = "y", residual = "x", weight = L .. "post_norm", eps = eps, layer = l, variant = norm_variant }
    else
      P:op{ op = "add", out = "x", a = "x", b = "y", layer = l }
      P:op{ op = "rmsnorm", out = "h", input = "x", weight = L .. "post_norm", eps = eps, layer = l, variant = norm_variant }
    end
    if fuse_gu then
      P:op{ op = "gemm", out = "gu", input = "h", weight = L .. "gate_up", layer = l, variant = gemm_variant }
    else
      P:op{ op = "gemm", out = "gu", input = "h", weight = L .. "gate", layer = l, variant = gemm_variant }
      P:op{ op = "gemm", out = "gu", out_col = I_l, input = "h", weight = L .. "up", layer = l, variant = gemm_variant }
    end
    P:op{ op = "silu_mul", out = "act", input = "gu", layer = l }
    P:op{ op = "gemm", out = "y", input = "act", weight = L .. "down", layer = l, variant = gemm_variant }
    if tp > 1 then P:op{ op = "all_reduce", slot = "y", layer = l } end
  end

  P:weight{ id = "final_norm", tensor = names.final_norm, shape = { H }, shard = "replicated" }
  if fuse_norm then
    P:op{ op = "add_rmsnorm", out = "h", input = "y", residual = "x", weight = "final_norm", eps = eps, variant = norm_variant }
  else
    P:op{ op = "add", out = "x", a = "x", b = "y" }
    P:op{ op = "rmsnorm", out = "h", input = "x", weight = "final_norm", eps = eps, variant = norm_variant }
  end
  P:op{ op = "gather_last", out = "hl", input = "h" }
  local head = spec.tied and names.embed or names.lm_head
  P:weight{ id = "lm_head", tensor = head, shape = { V, H }, shard = "vocab" }
  P:op{ op = "gemm", out = "logits", input = "hl", weight = "lm_head", variant = gemm_variant }
  if tp > 1 then
    P:slot("logits_full", V, "out")
    P:op{ op = "all_gather", out = "logits_full", input = "logits" }
    P.logits = "logits_full"
  else
    P.logits = "logits"
  end
  return P
end

-- Tensor names as Hugging Face's LlamaForCausalLM and its relatives write them.
function K.llama_names(prefix)
  prefix = prefix or "model."
  local parts = {
    q = "self_attn.q_proj.weight", k = "self_attn.k_proj.weight", v = "self_attn.v_proj.weight",
    o = "self_attn.o_proj.weight", q_bias = "self_attn.q_proj.bias", k_bias = "self_attn.k_proj.bias",
    v_bias = "self_attn.v_proj.bias", gate = "mlp.gate_proj.weight", up = "mlp.up_proj.weight",
    down = "mlp.down_proj.weight", input_norm = "input_layernorm.weight",
    post_norm = "post_attention_layernorm.weight", qkv = "self_attn.qkv_proj.weight",
    gate_up = "mlp.gate_up_proj.weight",
  }
  return {
    embed = prefix .. "embed_tokens.weight",
    final_norm = prefix .. "norm.weight",
    lm_head = "lm_head.weight",
    layer = function(l, part)
      local p = parts[part]
      if not p then fail("unknown layer tensor part '" .. tostring(part) .. "'", 2) end
      return prefix .. "layers." .. l .. "." .. p
    end,
  }
end

return K
