// ref_optim8.h — scalar reference of the optimizer interface: the test oracle, and the kernels the
// CPU backend runs under KBIT_CPU_ISA=ref. Written directly from kbit_optim_math.h, one element at a
// time; the SIMD kernels must equal it bit for bit.
#pragma once

#include <cstdint>
#include <vector>

#include "kbit/kbit_core.h"
#include "kbit_optim_math.h"

namespace kbit::ref {

using optim::Consts;
using optim::Hyper;
using optim::Kind;

// Memory of a 32-bit call (g and p point to n elements of the call's type).
struct Mem32 {
    const void* g;
    void* p;
    float* s1;  // n floats; AdEMAMix 2n (m1, then m2)
    float* s2;  // n floats, or nullptr for 1-state optimizers
    int64_t n;
};

// Memory of an 8-bit blockwise call.
struct Mem8 {
    void* p;
    const void* g;
    uint8_t* s1;  // n codes; AdEMAMix 2n (m1, then m2)
    uint8_t* s2;  // n codes, or nullptr for 1-state optimizers
    const float* q1;
    const float* q2;
    float* a1;  // ceil(n/256) scales; AdEMAMix 2 * ceil(n/256)
    float* a2;
    int64_t n;
};

// Kernels on a part of a call, type-erased so that backends can hold them in tables indexed by
// [KBIT_DTYPE_*][Kind]. All are pure functions of their ranges, so any split over threads gives the
// same bytes.
using NormChunkFn = float (*)(const Consts& c, const Mem32& m, int64_t chunk);  // chunk sum
using Update32Fn = void (*)(const Consts& c, const Mem32& m, int64_t begin, int64_t end);
using Blocks8Fn = void (*)(const Consts& c, const Mem8& m, int64_t block_begin, int64_t block_end);

struct OptimKernels {
    NormChunkFn norm_chunk[3][optim::kKinds];
    Update32Fn update32[3][optim::kKinds];
    Blocks8Fn blocks8[3][optim::kKinds];
};

// A kernel table from Impl<T, K>, a class template with static functions norm_chunk, update32 and
// blocks8 of the types above, for T = float, kbit_half, kbit_bf16 and every Kind.
template <template <class, Kind> class Impl, class T, Kind K>
void add_kernels(OptimKernels& k, int d) {
    k.norm_chunk[d][static_cast<int>(K)] = &Impl<T, K>::norm_chunk;
    k.update32[d][static_cast<int>(K)] = &Impl<T, K>::update32;
    k.blocks8[d][static_cast<int>(K)] = &Impl<T, K>::blocks8;
}
template <template <class, Kind> class Impl, class T>
void add_kernels(OptimKernels& k, int d) {
    add_kernels<Impl, T, Kind::Adam>(k, d);
    add_kernels<Impl, T, Kind::Momentum>(k, d);
    add_kernels<Impl, T, Kind::RMSprop>(k, d);
    add_kernels<Impl, T, Kind::Lion>(k, d);
    add_kernels<Impl, T, Kind::Adagrad>(k, d);
    add_kernels<Impl, T, Kind::AdEMAMix>(k, d);
}
template <template <class, Kind> class Impl>
OptimKernels make_kernels() {
    OptimKernels k{};
    add_kernels<Impl, float>(k, 0);
    add_kernels<Impl, kbit_half>(k, 1);
    add_kernels<Impl, kbit_bf16>(k, 2);
    return k;
}

// The scalar kernels.
const OptimKernels& optim_kernels();

inline int dtype_index(int32_t dtype) { return dtype == KBIT_DTYPE_FP16 ? 1 : dtype == KBIT_DTYPE_BF16 ? 2 : 0; }

// The order of one 32-bit call, shared by the oracle and the backend: `parallel(count, fn)` must call
// fn(i0, i1) on disjoint ranges covering [0, count) (serially or from several threads).
// Update-norm clipping (max_unorm > 0, not AdEMAMix): the chunk sums are reduced with
// optim::tree_sum and stored in *unorm; the clip factor comes from that sum, except for Lion, whose
// step uses the *unorm left by the previous call and which stores the norm of its updated state
// afterwards (bitsandbytes' order).
template <class Parallel>
void run32(const OptimKernels& k, int32_t dtype, Kind kind, const Hyper& h, const Mem32& m, float* unorm,
           float max_unorm, float param_norm, Parallel&& parallel) {
    const int d = dtype_index(dtype), o = static_cast<int>(kind);
    Consts c = optim::make_consts(h);
    const bool clip = max_unorm > 0.0f && kind != Kind::AdEMAMix;
    const int64_t chunks = (m.n + optim::kNormChunk - 1) / optim::kNormChunk;
    auto norm = [&] {
        std::vector<float> sums(static_cast<size_t>(chunks));
        const NormChunkFn fn = k.norm_chunk[d][o];
        parallel(chunks, [&](int64_t c0, int64_t c1) {
            for (int64_t i = c0; i < c1; ++i) sums[static_cast<size_t>(i)] = fn(c, m, i);
        });
        return optim::tree_sum(sums.data(), chunks);
    };
    if (clip && kind != Kind::Lion) *unorm = norm();
    if (clip) optim::set_clip(c, *unorm, max_unorm, param_norm, !optim::two_state(kind));
    const Update32Fn update = k.update32[d][o];
    parallel(chunks, [&](int64_t c0, int64_t c1) {
        update(c, m, c0 * optim::kNormChunk, c1 * optim::kNormChunk < m.n ? c1 * optim::kNormChunk : m.n);
    });
    if (clip && kind == Kind::Lion) *unorm = norm();
}

// The order of one 8-bit call: blocks are independent.
template <class Parallel>
void run8(const OptimKernels& k, int32_t dtype, Kind kind, const Hyper& h, const Mem8& m, Parallel&& parallel) {
    const Consts c = optim::make_consts(h);
    const Blocks8Fn fn = k.blocks8[dtype_index(dtype)][static_cast<int>(kind)];
    parallel((m.n + optim::kBlock - 1) / optim::kBlock, [&](int64_t b0, int64_t b1) { fn(c, m, b0, b1); });
}

// One whole step, single-threaded: the oracle for the backends' 32-bit and 8-bit functions. dtype is
// KBIT_DTYPE_*; unorm / max_unorm / param_norm as in the C interface.
void optim32_step(int32_t dtype, Kind kind, const Hyper& h, const Mem32& m, float* unorm, float max_unorm,
                  float param_norm);
void optim8_step(int32_t dtype, Kind kind, const Hyper& h, const Mem8& m);

}  // namespace kbit::ref
