// test_emu_norm_wide.cc -- test_emu_norm.cc's cases through kernel_src/rmsnorm_wide.cu (see WIDE there)
#define WIDE 1
#include "test_emu_norm.cc"
