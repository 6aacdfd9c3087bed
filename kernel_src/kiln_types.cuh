// kiln_types.cuh -- the integer and number-storage types of every kiln kernel (bf16, fp16, fp8 as plain
// storage structs; conversions are in kiln_common.cuh). No code and no includes: also the types of the CPU
// emulation of kernels (tests/emu/cuda_emu.h). Specialization defines name these types directly (-DACT=bf16).
#pragma once

typedef unsigned char u8;
typedef unsigned short u16;
typedef unsigned int u32;
typedef unsigned long long u64;
typedef long long i64;

struct bf16 { u16 x; };
struct fp16 { u16 x; };
struct fp8_e5m2 { u8 x; };
struct fp8_e4m3 { u8 x; };
typedef float fp32;
