// 8-bit blockwise optimizers (bitsandbytes' c{adam,momentum,rmsprop,lion,adagrad,ademamix}_8bit_
// blockwise_grad_*): kbit::ops::optim8_blockwise (kbit_ops_optim8.h), on the legacy default stream as
// in bitsandbytes (no stream parameter). The block procedure of kbit_optim_math.h, one warp per
// 256-element block, each lane holding 8 consecutive elements in registers (Block8Lane,
// optim_lanes.h, host-tested):
//   1. dequantize (optim::dequant8) and update the states (optim::update8_two_state /
//      update8_one_state); padding lanes of a partial last block take g = 0, p = 0 and the padding
//      codes, as the header prescribes;
//   2. each state's new absmax: optim's absmax_fold over the lane's 8 values from -FLT_MAX, then the
//      max over the warp (folds are never NaN and max is exact, so this equals the header's fold);
//   3. parameter step (optim::apply8_*) and re-quantization: optim::quantize8 with the code search on
//      a breadth-first shared-memory copy of the table (quantize8_bfs, optim_rules.h).
// Compiled with --fmad=false, IEEE division and square root: every byte equals the CPU backend's
// (NaN payloads of p aside, which the header leaves unspecified).
#include <cfloat>

#include "cuda_check.h"
#include "cuda_elem.cuh"
#include "kbit_dtype.h"
#include "kbit_ops_optim8.h"
#include "optim_dispatch.h"
#include "optim_lanes.h"

namespace kbit::cuda {
namespace {

using optim::Consts;
using optim::Kind;

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
static_assert(Block8Lane<float, Kind::Adam>::kElems == 8, "the vector loads move 8 elements per lane");

// Memory of a call (ref::Mem8's layout): AdEMAMix keeps m2's codes at s1 + n and its scales at
// a1 + ceil(n / 256).
template <class T>
struct Args8 {
    T* p;
    const T* g;
    uint8_t* s1;
    uint8_t* s2;
    const float* q1;
    const float* q2;
    float* a1;
    float* a2;
    int64_t n;
};

// A code table in shared memory: the entries and their breadth-first search nodes.
struct Table {
    float code[256];
    float node[128];
};

__device__ __forceinline__ void load_table(Table& t, const float* __restrict__ q) {
    const int i = threadIdx.x;  // kThreads == 256: one entry per thread
    const float c = q[i];
    t.code[i] = c;
    const int e = code8_node_of(i);
    if (e != 0) t.node[e] = c;
}

// Eight consecutive elements of T as floats (exact conversions, NaN payloads kept); p 16-byte aligned.
template <class T>
__device__ __forceinline__ void load8_exact(const T* p, float (&v)[8]) {
    if constexpr (sizeof(T) == 4) {
        const float4 a = reinterpret_cast<const float4*>(p)[0], b = reinterpret_cast<const float4*>(p)[1];
        v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w, v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
    } else {
        const uint4 q = *reinterpret_cast<const uint4*>(p);
        const uint32_t w[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            v[2 * i] = Elem<T>::load(T{static_cast<uint16_t>(w[i] & 0xFFFFu)});
            v[2 * i + 1] = Elem<T>::load(T{static_cast<uint16_t>(w[i] >> 16)});
        }
    }
}

__device__ __forceinline__ void load8_codes(const uint8_t* c, uint8_t (&v)[8]) {
    const uint2 q = *reinterpret_cast<const uint2*>(c);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        v[i] = static_cast<uint8_t>(q.x >> (8 * i));
        v[i + 4] = static_cast<uint8_t>(q.y >> (8 * i));
    }
}

__device__ __forceinline__ void store8_codes(uint8_t* c, const uint8_t (&v)[8]) {
    uint2 q = make_uint2(0, 0);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        q.x |= uint32_t{v[i]} << (8 * i);
        q.y |= uint32_t{v[i + 4]} << (8 * i);
    }
    *reinterpret_cast<uint2*>(c) = q;
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) v = absmax_combine(v, __shfl_xor_sync(0xFFFFFFFFu, v, off));
    return v;
}

// `vec`: p and g are 16-byte aligned, the code arrays (and AdEMAMix's m2 codes) 8-byte aligned, so
// full blocks use vector loads and stores. The arithmetic is Block8Lane's (optim_lanes.h).
template <class T, Kind K>
__global__ void __launch_bounds__(kThreads)
blockwise8_kernel(Consts c, T* __restrict__ p, const T* __restrict__ g, uint8_t* __restrict__ s1,
                  uint8_t* __restrict__ s2, const float* __restrict__ q1, const float* __restrict__ q2,
                  float* __restrict__ a1, float* __restrict__ a2, int64_t n, bool vec) {
    using Lane = Block8Lane<T, K>;
    __shared__ Table t1;
    __shared__ Table t2;
    load_table(t1, q1);
    if (Lane::kTwo) load_table(t2, q2);
    __syncthreads();

    const int lane = threadIdx.x % 32;
    const int64_t blocks = (n + optim::kBlock - 1) / optim::kBlock;
    uint8_t* const m2 = s1 + n;  // AdEMAMix's second first moment
    for (int64_t b = int64_t{blockIdx.x} * kWarps + threadIdx.x / 32; b < blocks; b += int64_t{gridDim.x} * kWarps) {
        const int64_t i0 = b * optim::kBlock + lane * Lane::kElems;  // this lane's first element
        const bool full = vec && n - b * optim::kBlock >= optim::kBlock;
        Lane w;
        if (full) {
            load8_exact(g + i0, w.g);
            load8_exact(p + i0, w.p);
            load8_codes(s1 + i0, w.c1);
            if (Lane::kTwo) load8_codes(s2 + i0, w.c2);
            if (Lane::kMix) load8_codes(m2 + i0, w.c3);
        } else {
            w.load(g, p, s1, s2, m2, i0, n);
        }
        // Old scales, read by every lane before lane 0 overwrites them (the shuffles below order it).
        const float old1 = a1[b], old2 = Lane::kTwo ? a2[b] : 0.0f, old3 = Lane::kMix ? a1[blocks + b] : 0.0f;
        float new1 = -FLT_MAX, new2 = -FLT_MAX, new3 = -FLT_MAX;
        w.update(c, t1.code, t2.code, old1, old2, old3, new1, new2, new3);
        new1 = warp_max(new1);
        if (Lane::kTwo) new2 = warp_max(new2);
        if (Lane::kMix) new3 = warp_max(new3);
        if (lane == 0) {
            a1[b] = new1;
            if (Lane::kTwo) a2[b] = new2;
            if (Lane::kMix) a1[blocks + b] = new3;
        }
        T po[Lane::kElems];
        w.finish(c, t1.code, t1.node, t2.code, t2.node, new1, new2, new3, po);
        if (full) {
            store8(p, i0, n, true, po);
            store8_codes(s1 + i0, w.c1);
            if (Lane::kTwo) store8_codes(s2 + i0, w.c2);
            if (Lane::kMix) store8_codes(m2 + i0, w.c3);
        } else {
            for (int j = 0; j < Lane::kElems && i0 + j < n; ++j) {
                p[i0 + j] = po[j];
                s1[i0 + j] = w.c1[j];
                if (Lane::kTwo) s2[i0 + j] = w.c2[j];
                if (Lane::kMix) m2[i0 + j] = w.c3[j];
            }
        }
    }
}

bool aligned(const void* ptr, unsigned bytes) { return reinterpret_cast<uintptr_t>(ptr) % bytes == 0; }

template <class T, Kind K>
kbit_status run(const char* fn, const optim::Hyper& h, const Args8<T>& m, cudaStream_t stream) {
    const Consts c = optim::make_consts(h);
    const int64_t blocks = (m.n + optim::kBlock - 1) / optim::kBlock;
    const bool vec = aligned(m.p, 16) && aligned(m.g, 16) && aligned(m.s1, 8) &&
                     (m.s2 == nullptr || aligned(m.s2, 8)) && (K != Kind::AdEMAMix || aligned(m.s1 + m.n, 8));
    blockwise8_kernel<T, K><<<grid_for((blocks + kWarps - 1) / kWarps, 8), kThreads, 0, stream>>>(
        c, m.p, m.g, m.s1, m.s2, m.q1, m.q2, m.a1, m.a2, m.n, vec);
    return check_launch(fn, "blockwise8_kernel");
}

}  // namespace
}  // namespace kbit::cuda

namespace kbit::ops {

template <class T>
kbit_status optim8_blockwise(const char* fn, optim::Kind kind, const optim::Hyper& h, T* p, T* g,
                             unsigned char* state1, unsigned char* state2, float* quantiles1, float* quantiles2,
                             float* absmax1, float* absmax2, int64_t n) {
    const cuda::Args8<T> m{p, g, state1, state2, quantiles1, quantiles2, absmax1, absmax2, n};
    return cuda::with_kind(kind, [&](auto k) { return cuda::run<T, decltype(k)::value>(fn, h, m, nullptr); });
}

KBIT_INSTANTIATE_FOR_ELEMENT_TYPES(optim8_blockwise);

}  // namespace kbit::ops
