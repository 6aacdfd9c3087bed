-- index.lua -- maps Hugging Face architectures (config.json "architectures"[1])
-- to the policy module that builds their plan. Adding a family that only
-- recombines existing ops is: a new policies/<family>.lua and one line here.
return {
  LlamaForCausalLM = "llama",
  MistralForCausalLM = "mistral",
  Qwen2ForCausalLM = "qwen2",
  Phi3ForCausalLM = "phi3",
  GlideLlamaForCausalLM = "glide_llama",
}
