// Scalar reference of the optimizer interface (see ref_optim8.h): one element at a time, in the
// order of kbit_optim_math.h, code search by code8_index itself.
#include "ref_optim8.h"

#include <algorithm>

#include "kbit_half.h"

namespace kbit::ref {
namespace {

using namespace kbit::optim;

template <class T>
float load(const void* base, int64_t i) {
    return Elem<T>::load(static_cast<const T*>(base)[i]);
}
template <class T>
void store(void* base, int64_t i, float x) {
    static_cast<T*>(base)[i] = Elem<T>::store(x);
}

template <class T, Kind K>
struct Scalar {
    static float norm_chunk(const Consts& c, const Mem32& m, int64_t chunk) {
        float acc[kNormLanes] = {};
        const int64_t begin = chunk * kNormChunk, end = std::min(begin + kNormChunk, m.n);
        for (int64_t i = begin; i < end; ++i) {
            const float s2 = two_state(K) ? m.s2[i] : 0.0f;
            float& a = acc[(i - begin) % kNormLanes];
            a = a + norm_term32<T, K>(c, load<T>(m.g, i), m.s1[i], s2);
        }
        return fold_lanes(acc);
    }

    static void update32(const Consts& c, const Mem32& m, int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) {
            float p = load<T>(m.p, i), s1 = m.s1[i];
            float s2 = two_state(K) ? m.s2[i] : 0.0f;
            float s3 = K == Kind::AdEMAMix ? m.s1[m.n + i] : 0.0f;
            step32<T, K>(c, load<T>(m.g, i), p, s1, s2, s3);
            store<T>(m.p, i, p);
            m.s1[i] = s1;
            if (two_state(K)) m.s2[i] = s2;
            if (K == Kind::AdEMAMix) m.s1[m.n + i] = s3;
        }
    }

    static void blocks8(const Consts& c, const Mem8& m, int64_t block_begin, int64_t block_end) {
        const int64_t blocks = (m.n + kBlock - 1) / kBlock;
        float g[kBlock], p[kBlock], s1[kBlock], s2[kBlock], s3[kBlock], d[kBlock];
        bool step[kBlock];
        for (int64_t b = block_begin; b < block_end; ++b) {
            const int64_t base = b * kBlock;
            const int valid = static_cast<int>(std::min(kBlock, m.n - base));
            const float a1 = m.a1[b];
            const float a2 = two_state(K) ? m.a2[b] : 0.0f;
            const float a3 = K == Kind::AdEMAMix ? m.a1[blocks + b] : 0.0f;
            float new1 = -FLT_MAX, new2 = -FLT_MAX, new3 = -FLT_MAX;
            for (int j = 0; j < kBlock; ++j) {
                const bool pad = j >= valid;
                const int64_t i = base + j;
                g[j] = pad ? 0.0f : load<T>(m.g, i);
                p[j] = pad ? 0.0f : load<T>(m.p, i);
                s1[j] = dequant8(m.q1, pad ? kPadCode1 : m.s1[i], a1);
                if (two_state(K)) {
                    s2[j] = dequant8(m.q2, pad ? kPadCode2 : m.s2[i], a2);
                    s3[j] = K == Kind::AdEMAMix ? dequant8(m.q1, pad ? kPadCode1 : m.s1[m.n + i], a3) : 0.0f;
                    step[j] = update8_two_state<K>(c, g[j], s1[j], s2[j], s3[j]);
                    new2 = absmax_fold(new2, s2[j]);
                    new3 = absmax_fold(new3, s3[j]);
                } else {
                    step[j] = update8_one_state<T, K>(c, g[j], p[j], s1[j], d[j]);
                }
                new1 = absmax_fold(new1, s1[j]);
            }
            m.a1[b] = new1;
            if (two_state(K)) m.a2[b] = new2;
            if (K == Kind::AdEMAMix) m.a1[blocks + b] = new3;
            for (int j = 0; j < valid; ++j) {
                const int64_t i = base + j;
                float pj = p[j];
                if (step[j])
                    pj = two_state(K) ? apply8_two_state<T, K>(c, pj, s1[j], s2[j], s3[j])
                                      : apply8_one_state<T, K>(c, g[j], pj, s1[j], d[j]);
                store<T>(m.p, i, pj);
                m.s1[i] = quantize8(m.q1, s1[j], new1, true);
                if (two_state(K)) m.s2[i] = quantize8(m.q2, s2[j], new2, false);
                if (K == Kind::AdEMAMix) m.s1[m.n + i] = quantize8(m.q1, s3[j], new3, true);
            }
        }
    }
};

const auto serial = [](int64_t count, auto&& fn) {
    if (count > 0) fn(int64_t{0}, count);
};

}  // namespace

const OptimKernels& optim_kernels() {
    static const OptimKernels k = make_kernels<Scalar>();
    return k;
}

void optim32_step(int32_t dtype, Kind kind, const Hyper& h, const Mem32& m, float* unorm, float max_unorm,
                  float param_norm) {
    run32(optim_kernels(), dtype, kind, h, m, unorm, max_unorm, param_norm, serial);
}

void optim8_step(int32_t dtype, Kind kind, const Hyper& h, const Mem8& m) {
    run8(optim_kernels(), dtype, kind, h, m, serial);
}

}  // namespace kbit::ref
