/* registry.c (nocuda build) -- the kernel registry has no CUDA dependency;
 * the same table is listed by `kiln kernels` in builds without CUDA. */
#include "../cuda/registry.c"
