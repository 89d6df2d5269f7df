// optim_lanes.h — the per-thread work of the CUDA optimizer kernels as host/device code, so that
// tests/cuda/host_logic.cpp can run the kernels' exact decomposition (lanes, per-lane folds, the
// cross-lane max, tree levels) on the host and compare it with the reference (kbit::ref) bit for bit.
// The kernels (optim32.cu, optim8_blockwise.cu) add only loads, stores and the warp/CTA exchanges.
#pragma once

#include <cfloat>
#include <cstdint>

#include "kbit_optim_math.h"
#include "optim_rules.h"

// The lanes' arrays stay in registers only if their loops are unrolled (device code); nothing on
// the host, whose compiler (also nvcc's host pass) does not know the pragma.
#if defined(__CUDA_ARCH__)
#  define KBIT_LANE_UNROLL _Pragma("unroll")
#else
#  define KBIT_LANE_UNROLL
#endif

namespace kbit::cuda {

// ---- 32-bit update norm ---------------------------------------------------------------------------
// Lane `lane` of chunk `chunk`: the header's accumulator `lane`, i.e. the terms of elements chunk *
// kNormChunk + lane + kNormLanes * j added in order j = 0, 1, ... from +0.0f.
template <class T, optim::Kind K>
KBIT_HD float norm_lane_sum(const optim::Consts& c, const T* g, const float* s1, const float* s2, int64_t n,
                            int64_t chunk, int lane) {
    const int64_t begin = chunk * optim::kNormChunk;
    const int64_t end = begin + optim::kNormChunk < n ? begin + optim::kNormChunk : n;
    float a = 0.0f;
    for (int64_t i = begin + lane; i < end; i += optim::kNormLanes) {
        const float t = optim::norm_term32<T, K>(c, Elem<T>::load(g[i]), s1[i], optim::two_state(K) ? s2[i] : 0.0f);
        a = a + t;
    }
    return a;
}

// ---- 8-bit blockwise ----------------------------------------------------------------------------------
// One lane's kElems consecutive elements of a 256-element block (32 lanes per block).
template <class T, optim::Kind K>
struct Block8Lane {
    static constexpr int kElems = static_cast<int>(optim::kBlock) / 32;
    static constexpr bool kTwo = optim::two_state(K), kMix = K == optim::Kind::AdEMAMix;

    float g[kElems], p[kElems];        // inputs (padding lanes: 0)
    uint8_t c1[kElems], c2[kElems], c3[kElems];  // codes in (padding lanes: kPadCode1/2), codes out
    float s1[kElems], s2[kElems], s3[kElems], d[kElems];
    bool step[kElems];

    // Inputs of elements [i0, i0 + kElems), the padding of the header beyond n. m2 = AdEMAMix's
    // second first-moment codes (state1 + n).
    KBIT_HD void load(const T* gp, const T* pp, const uint8_t* q1, const uint8_t* q2, const uint8_t* m2, int64_t i0,
                      int64_t n) {
        KBIT_LANE_UNROLL
        for (int j = 0; j < kElems; ++j) {
            const bool pad = i0 + j >= n;
            g[j] = pad ? 0.0f : Elem<T>::load(gp[i0 + j]);
            p[j] = pad ? 0.0f : Elem<T>::load(pp[i0 + j]);
            c1[j] = pad ? optim::kPadCode1 : q1[i0 + j];
            c2[j] = kTwo ? (pad ? optim::kPadCode2 : q2[i0 + j]) : 0;
            c3[j] = kMix ? (pad ? optim::kPadCode1 : m2[i0 + j]) : 0;
        }
    }

    // Step 1 with the block's old scales; folds the new states into this lane's absmax partials
    // (started by the caller at -FLT_MAX).
    KBIT_HD void update(const optim::Consts& c, const float* code1, const float* code2, float a1, float a2, float a3,
                        float& new1, float& new2, float& new3) {
        KBIT_LANE_UNROLL
        for (int j = 0; j < kElems; ++j) {
            d[j] = 0.0f;
            s1[j] = optim::dequant8(code1, c1[j], a1);
            if (kTwo) {
                s2[j] = optim::dequant8(code2, c2[j], a2);
                s3[j] = kMix ? optim::dequant8(code1, c3[j], a3) : 0.0f;
                step[j] = optim::update8_two_state<K>(c, g[j], s1[j], s2[j], s3[j]);
                new2 = absmax_fold(new2, s2[j]);
                new3 = absmax_fold(new3, s3[j]);
            } else {
                s2[j] = s3[j] = 0.0f;
                step[j] = optim::update8_one_state<T, K>(c, g[j], p[j], s1[j], d[j]);
            }
            new1 = absmax_fold(new1, s1[j]);
        }
    }

    // Step 3 with the block's new scales: p (in T) and the codes (into c1, c2, c3). node1/node2 are
    // the tables' breadth-first search nodes (code8_search.h).
    KBIT_HD void finish(const optim::Consts& c, const float* code1, const float* node1, const float* code2,
                        const float* node2, float new1, float new2, float new3, T (&p_out)[kElems]) {
        KBIT_LANE_UNROLL
        for (int j = 0; j < kElems; ++j) {
            float pj = p[j];
            if (step[j])
                pj = kTwo ? optim::apply8_two_state<T, K>(c, pj, s1[j], s2[j], s3[j])
                          : optim::apply8_one_state<T, K>(c, g[j], pj, s1[j], d[j]);
            p_out[j] = Elem<T>::store(pj);
            c1[j] = quantize8_bfs(code1, node1, s1[j], new1, true);
            if (kTwo) c2[j] = quantize8_bfs(code2, node2, s2[j], new2, false);
            if (kMix) c3[j] = quantize8_bfs(code1, node1, s3[j], new3, true);
        }
    }
};

// The cross-lane combination of absmax partials: never NaN (absmax_fold skips NaN), so any order.
KBIT_HD float absmax_combine(float a, float b) { return b > a ? b : a; }

}  // namespace kbit::cuda
