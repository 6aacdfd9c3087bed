# cmake -DSRC=kernel.cu -DDST=out.cu [-DKERNEL=name] -P emu_transform.cmake: a kernel source as host C++ for
# tests/emu: its dynamic shared memory declarations, and a static shared byte array (its size then a bound the
# launch's shared memory must meet: emu::static_smem), become the emulated block's buffer, extern "C" goes
# (several specializations link into one program). KERNEL: only the kernel of that name and what follows it in
# SRC (a kernel in a header that tests/emu replaces with a shim of its own: gemm_tc_common.cuh's reduction).
file(READ "${SRC}" text)
if(KERNEL)
  string(FIND "${text}" "${KERNEL}(" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "${SRC}: no kernel ${KERNEL}")
  endif()
  string(SUBSTRING "${text}" 0 ${at} head)
  string(FIND "${head}" "extern \"C\" __global__" from REVERSE)
  if(from EQUAL -1)
    message(FATAL_ERROR "${SRC}: ${KERNEL} is not an extern \"C\" __global__ function")
  endif()
  string(SUBSTRING "${text}" ${from} -1 text)
endif()
string(REGEX REPLACE "extern __shared__ __align__\\(([0-9]+)\\) unsigned char ([A-Za-z_0-9]+)\\[\\];"
       "unsigned char *const \\2 = emu::block_smem();" text "${text}")
string(REGEX REPLACE "extern __shared__ __align__\\(([0-9]+)\\) float4 ([A-Za-z_0-9]+)\\[\\];"
       "float4 *const \\2 = reinterpret_cast<float4 *>(emu::block_smem());" text "${text}")
string(REGEX REPLACE "extern __shared__ float4 ([A-Za-z_0-9]+)\\[\\];"
       "float4 *const \\1 = reinterpret_cast<float4 *>(emu::block_smem());" text "${text}")
string(REGEX REPLACE "__shared__ __align__\\(([0-9]+)\\) unsigned char ([A-Za-z_0-9]+)\\[([A-Za-z_0-9]+)\\];"
       "unsigned char *const \\2 = emu::static_smem(\\3);" text "${text}")
string(REPLACE "extern \"C\" __global__" "__global__" text "${text}")
string(FIND "${text}" "extern __shared__" left)
if(NOT left EQUAL -1)
  message(FATAL_ERROR "${SRC}: a shared-memory declaration emu_transform.cmake does not know")
endif()
file(WRITE "${DST}" "${text}")
