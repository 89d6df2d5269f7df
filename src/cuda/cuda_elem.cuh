// cuda_elem.cuh — element loads and stores for CUDA kernels, bit-identical to kbit::Elem<T>
// (kbit_half.h) but using the hardware conversions where they agree: fp32 -> fp16 with cvt.rn is
// IEEE round-to-nearest-even, so only NaN (whose payload the hardware canonicalises) takes the
// shared code path. bf16 uses the shared integer rounding directly. Loads of fp16 use cvt.f32.f16,
// exact for every non-NaN value; kernels whose outputs could carry an input NaN load through
// kbit::Elem instead.
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "host_align.h"
#include "kbit_formats.h"
#include "kbit_half.h"
#include "kbit_nan_x86.h"

namespace kbit::cuda {

template <class T> struct Dev;

template <> struct Dev<float> {
    __device__ __forceinline__ static float load(float x) { return x; }
    __device__ __forceinline__ static float store(float x) { return x; }
};

template <> struct Dev<kbit_half> {
    __device__ __forceinline__ static float load(kbit_half x) { return __half2float(__ushort_as_half(x.bits)); }
    __device__ __forceinline__ static kbit_half store(float x) {
        uint16_t b = __half_as_ushort(__float2half_rn(x));
        if (x != x) b = kbit::float_to_half(x);
        return kbit_half{b};
    }
};

template <> struct Dev<kbit_bf16> {
    __device__ __forceinline__ static float load(kbit_bf16 x) { return kbit::bf16_to_float(x.bits); }
    __device__ __forceinline__ static kbit_bf16 store(float x) { return kbit_bf16{kbit::float_to_bf16(x)}; }
};

// Storage bits of an element (for packing vector stores).
__device__ __forceinline__ uint32_t elem_bits(float x) { return __float_as_uint(x); }
__device__ __forceinline__ uint32_t elem_bits(kbit_half x) { return x.bits; }
__device__ __forceinline__ uint32_t elem_bits(kbit_bf16 x) { return x.bits; }

__device__ __forceinline__ uint4 load16(const void* p) { return __ldg(static_cast<const uint4*>(p)); }
__device__ __forceinline__ void store16(void* p, uint4 v) { *static_cast<uint4*>(p) = v; }

__device__ __forceinline__ bool aligned(const void* p, unsigned bytes) {
    return (reinterpret_cast<uintptr_t>(p) & (bytes - 1)) == 0;
}

// Eight consecutive elements as floats from one 16-byte (16-bit types) or two (fp32) vector loads;
// `p` must be 16-byte aligned.
template <class T> __device__ __forceinline__ void load8_vec(const T* p, float (&v)[8]);

template <> __device__ __forceinline__ void load8_vec<float>(const float* p, float (&v)[8]) {
    const float4 a = __ldg(reinterpret_cast<const float4*>(p));
    const float4 b = __ldg(reinterpret_cast<const float4*>(p) + 1);
    v[0] = a.x; v[1] = a.y; v[2] = a.z; v[3] = a.w;
    v[4] = b.x; v[5] = b.y; v[6] = b.z; v[7] = b.w;
}

template <class T16> __device__ __forceinline__ void load8_vec16(const T16* p, float (&v)[8]) {
    const uint4 q = load16(p);
    const uint32_t w[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        v[2 * i] = Dev<T16>::load(T16{static_cast<uint16_t>(w[i] & 0xFFFFu)});
        v[2 * i + 1] = Dev<T16>::load(T16{static_cast<uint16_t>(w[i] >> 16)});
    }
}
template <> __device__ __forceinline__ void load8_vec<kbit_half>(const kbit_half* p, float (&v)[8]) { load8_vec16(p, v); }
template <> __device__ __forceinline__ void load8_vec<kbit_bf16>(const kbit_bf16* p, float (&v)[8]) { load8_vec16(p, v); }

// Elements [i0, i0 + 8) of A as floats; `vec` = A is 16-byte aligned. Elements at or past n read 0.
template <class T>
__device__ __forceinline__ void load8(const T* A, int64_t i0, int64_t n, bool vec, float (&v)[8]) {
    if (vec && i0 + 8 <= n) {
        load8_vec(A + i0, v);
        return;
    }
#pragma unroll
    for (int e = 0; e < 8; ++e) v[e] = i0 + e < n ? Dev<T>::load(A[i0 + e]) : 0.0f;
}

// Stores eight values (already in storage form) to out[i0, i0 + 8); `vec` = out is 16-byte aligned.
template <class T>
__device__ __forceinline__ void store8(T* out, int64_t i0, int64_t n, bool vec, const T (&v)[8]) {
    if (vec && i0 + 8 <= n) {
        if constexpr (sizeof(T) == 4) {
            store16(out + i0, make_uint4(elem_bits(v[0]), elem_bits(v[1]), elem_bits(v[2]), elem_bits(v[3])));
            store16(out + i0 + 4, make_uint4(elem_bits(v[4]), elem_bits(v[5]), elem_bits(v[6]), elem_bits(v[7])));
        } else {
            store16(out + i0, make_uint4(elem_bits(v[0]) | elem_bits(v[1]) << 16, elem_bits(v[2]) | elem_bits(v[3]) << 16,
                                         elem_bits(v[4]) | elem_bits(v[5]) << 16, elem_bits(v[6]) | elem_bits(v[7]) << 16));
        }
        return;
    }
#pragma unroll
    for (int e = 0; e < 8; ++e)
        if (i0 + e < n) out[i0 + e] = v[e];
}

// 16 floats passed by value to a kernel (a fixed 4-bit lookup table).
struct Lut16 {
    float v[16];
};

// The built-in table of NF4 or FP4 (kbit_formats.h).
inline Lut16 builtin_lut(QuantType type) {
    static constexpr Lut16 nf4{{KBIT_NF4_VALUES}};
    static constexpr Lut16 fp4{{KBIT_FP4_VALUES}};
    return type == QuantType::NF4 ? nf4 : fp4;
}

}  // namespace kbit::cuda
