// The optimizer operations (kbit_ops_optim8.h) on OpenCL: the 32-bit-state optimizers
// (kernels/optim32.cl), the 8-bit blockwise optimizers (kernels/optim8_blockwise.cl) and the fills.
// Paged memory is in managed_memory.cpp.
//
// Like bitsandbytes' optimizer functions, which have no stream parameter, everything runs on the
// default queue, asynchronously. The per-call constants are the kit's optim::make_consts, computed
// here (binary64 powers) and passed to the kernels by value; every per-element expression is evaluated
// on the device, in the order kbit_optim_math.h fixes, so each byte equals kbit's reference.
#include <algorithm>
#include <type_traits>

#include "device_memory.h"
#include "kbit_half.h"
#include "kbit_ops_optim8.h"
#include "programs.h"

namespace kbit::opencl {
namespace {

using optim::Kind;

// optim::Consts as kernels/common.cl declares it (bools as ints: a kernel argument holds no bool).
struct OptimConsts {
    float beta1, beta2, beta3, alpha, eps, lr, wd, gnorm_scale;
    float omb1, omb2, omb3;
    float c1, c2;
    float step_size, eps_c2, neg_lr, decay, rc1, rc2;
    float u, su;
    cl_int has_wd, first_step, skip_zeros;
};
static_assert(sizeof(OptimConsts) == 24 * 4, "OptimConsts is 21 floats and 3 ints, unpadded, as in common.cl");
// KIND_* of kernels/common.cl.
static_assert(static_cast<int>(Kind::Adam) == 0 && static_cast<int>(Kind::Momentum) == 1 &&
              static_cast<int>(Kind::RMSprop) == 2 && static_cast<int>(Kind::Lion) == 3 &&
              static_cast<int>(Kind::Adagrad) == 4 && static_cast<int>(Kind::AdEMAMix) == 5);

OptimConsts kernel_consts(const optim::Consts& c) {
    return OptimConsts{c.beta1, c.beta2, c.beta3, c.alpha, c.eps, c.lr, c.wd, c.gnorm_scale,
                       c.omb1, c.omb2, c.omb3, c.c1, c.c2, c.step_size, c.eps_c2, c.neg_lr, c.decay,
                       c.rc1, c.rc2, c.u, c.su, c.has_wd, c.first_step, c.skip_zeros};
}


constexpr size_t kUpdateGroup = 256;
constexpr size_t kNormGroup = 256;  // NORM_GROUP of optim32.cl: 16 chunks of 16 lanes
constexpr int64_t kChunksPerGroup = kNormGroup / optim::kNormLanes;
constexpr size_t kFinishGroup = 256;
constexpr size_t kBlockGroup = 256;       // BLOCK of optim8_blockwise.cl: one work-item per element
constexpr int64_t kMaxBlockGroups = 4096;  // groups walk the blocks; each loads the code tables once

// finish_norm's modes (optim32.cl).
enum FinishMode : cl_int { kStoreAndClip = 0, kClipFromUnorm = 1, kStoreOnly = 2 };

template <class T>
void run32(const char* fn, Kind kind, const optim::Hyper& h, T* g, T* p, float* state1, float* state2, float* unorm,
           float max_unorm, float param_norm, int64_t n) {
    const cl_command_queue q = queue_of(fn, nullptr);
    const optim::Consts consts = optim::make_consts(h);
    const OptimConsts c = kernel_consts(consts);
    const cl_int k = static_cast<cl_int>(kind), dt = Elem<T>::dtype;
    const DeviceArray G = resolve_array(fn, g, n, "g");
    const DeviceArray P = resolve_array(fn, p, n, "p");
    const DeviceArray S1 = resolve_array(fn, state1, kind == Kind::AdEMAMix ? 2 * n : n, "state1");
    const DeviceArray S2 = optim::two_state(kind) ? resolve_array(fn, state2, n, "state2") : kNoArray;
    auto update = [&](cl_int clipped, const DeviceArray& clip) {
        launch(fn, q, Program::Optim32, "update32", static_cast<size_t>(n), kUpdateGroup, G, P, S1, S2, clip, c,
               clipped, k, dt, n);
    };
    if (!(max_unorm > 0.0f) || kind == Kind::AdEMAMix) {  // AdEMAMix has no update-norm clipping
        update(0, kNoArray);
        return;
    }
    // Clipping. Scratch: the chunk sums, the other half of the tree's levels, the clip factor (u, su).
    const DeviceArray U = resolve_array(fn, unorm, 1, "unorm");
    const int64_t chunks = (n + optim::kNormChunk - 1) / optim::kNormChunk;
    const int64_t other = chunks / 2 + 1;
    const Scratch scratch(fn, static_cast<size_t>(chunks + other + 2) * sizeof(float));
    const DeviceArray sums = scratch.at(0), levels = scratch.at(chunks * sizeof(float)),
                      clip = scratch.at((chunks + other) * sizeof(float));
    const cl_int one_state = optim::two_state(kind) ? 0 : 1;
    auto finish = [&](FinishMode mode) {
        launch(fn, q, Program::Optim32, "finish_norm", kFinishGroup, kFinishGroup, sums, levels, U, clip, c,
               max_unorm, param_norm, one_state, static_cast<cl_int>(mode), chunks);
    };
    auto norm = [&](FinishMode mode) {
        const size_t groups = static_cast<size_t>((chunks + kChunksPerGroup - 1) / kChunksPerGroup);
        launch(fn, q, Program::Optim32, "norm_chunks", groups * kNormGroup, kNormGroup, G, S1, S2, sums, c, k, dt, n,
               chunks);
        finish(mode);
    };
    if (kind == Kind::Lion) {  // clips with the norm of the previous call, then stores its own
        finish(kClipFromUnorm);
        update(1, clip);
        norm(kStoreOnly);
    } else {
        norm(kStoreAndClip);
        update(1, clip);
    }
}

template <class T>
void run8(const char* fn, Kind kind, const optim::Hyper& h, T* p, T* g, unsigned char* state1, unsigned char* state2,
          float* quantiles1, float* quantiles2, float* absmax1, float* absmax2, int64_t n) {
    const bool two = optim::two_state(kind);
    const int64_t states1 = kind == Kind::AdEMAMix ? 2 : 1;  // AdEMAMix: [m1 | m2]
    const int64_t blocks = (n + optim::kBlock - 1) / optim::kBlock;
    const OptimConsts c = kernel_consts(optim::make_consts(h));
    const size_t groups = static_cast<size_t>(std::min(blocks, kMaxBlockGroups));
    launch(fn, queue_of(fn, nullptr), Program::Optim8Blockwise, "optim8_blockwise", groups * kBlockGroup, kBlockGroup,
           resolve_array(fn, p, n, "p"), resolve_array(fn, g, n, "g"), resolve_array(fn, state1, states1 * n, "state1"),
           two ? resolve_array(fn, state2, n, "state2") : kNoArray, resolve_array(fn, quantiles1, 256, "quantiles1"),
           two ? resolve_array(fn, quantiles2, 256, "quantiles2") : kNoArray,
           resolve_array(fn, absmax1, states1 * blocks, "absmax1"),
           two ? resolve_array(fn, absmax2, blocks, "absmax2") : kNoArray, c, static_cast<cl_int>(kind),
           static_cast<cl_int>(Elem<T>::dtype), n);
}

}  // namespace
}  // namespace kbit::opencl

namespace kbit::ops {

using namespace kbit::opencl;

template <class T>
kbit_status optim32(const char* fn, optim::Kind kind, const optim::Hyper& h, T* g, T* p, float* state1, float* state2,
                    float* unorm, float max_unorm, float param_norm, int64_t n) {
    return run([&] { run32(fn, kind, h, g, p, state1, state2, unorm, max_unorm, param_norm, n); });
}

template <class T>
kbit_status optim8_blockwise(const char* fn, optim::Kind kind, const optim::Hyper& h, T* p, T* g,
                             unsigned char* state1, unsigned char* state2, float* quantiles1, float* quantiles2,
                             float* absmax1, float* absmax2, int64_t n) {
    return run([&] { run8(fn, kind, h, p, g, state1, state2, quantiles1, quantiles2, absmax1, absmax2, n); });
}

// Both fills are clEnqueueFillBuffer with the value's bytes as the pattern (exact for any float,
// NaN payloads included); resolve_array keeps the range inside A's allocation and element-aligned,
// as the call requires of its offset.
template <class T>
kbit_status fill(const char* fn, T* A, T value, int64_t n) {
    return run([&] {
        const DeviceArray a = resolve_array(fn, A, n, "A");
        check(fn, "clEnqueueFillBuffer",
              clEnqueueFillBuffer(queue_of(fn, nullptr), a.buffer, &value, sizeof(T), a.offset,
                                  static_cast<size_t>(n) * sizeof(T), 0, nullptr, nullptr));
    });
}

#define KBIT_OPENCL_OPTIM(T)                                      \
    template decltype(optim32<T>) optim32<T>;                     \
    template decltype(optim8_blockwise<T>) optim8_blockwise<T>;
KBIT_OPENCL_OPTIM(float)
KBIT_OPENCL_OPTIM(kbit_half)
KBIT_OPENCL_OPTIM(kbit_bf16)
template decltype(fill<float>) fill<float>;
template decltype(fill<unsigned char>) fill<unsigned char>;

}  // namespace kbit::ops
