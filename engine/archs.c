/* archs.c -- TEMPORARY list until the policy index lands. */
#include "model.h"
const char *kiln_supported_architectures(void) { return "LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM"; }
bool kiln_architecture_supported(const char *arch) { return strstr(kiln_supported_architectures(), arch) != NULL && *arch; }
const char *kiln_builtin_config(const char *name) { (void)name; return NULL; }
const char *kiln_builtin_config_names(void) { return ""; }
