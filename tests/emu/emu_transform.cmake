# cmake -DSRC=kernel.cu -DDST=out.cu -P emu_transform.cmake: a kernel source as host C++ for tests/emu: its
# dynamic shared memory declarations become the emulated block's buffer, extern "C" goes (several
# specializations link into one program).
file(READ "${SRC}" text)
string(REGEX REPLACE "extern __shared__ __align__\\(([0-9]+)\\) unsigned char ([A-Za-z_0-9]+)\\[\\];"
       "unsigned char *const \\2 = emu::block_smem();" text "${text}")
string(REGEX REPLACE "extern __shared__ __align__\\(([0-9]+)\\) float4 ([A-Za-z_0-9]+)\\[\\];"
       "float4 *const \\2 = reinterpret_cast<float4 *>(emu::block_smem());" text "${text}")
string(REGEX REPLACE "extern __shared__ float4 ([A-Za-z_0-9]+)\\[\\];"
       "float4 *const \\1 = reinterpret_cast<float4 *>(emu::block_smem());" text "${text}")
string(REPLACE "extern \"C\" __global__" "__global__" text "${text}")
string(FIND "${text}" "extern __shared__" left)
if(NOT left EQUAL -1)
  message(FATAL_ERROR "${SRC}: a shared-memory declaration emu_transform.cmake does not know")
endif()
file(WRITE "${DST}" "${text}")
