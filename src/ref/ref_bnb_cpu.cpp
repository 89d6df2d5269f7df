// Scalar reference of the bitsandbytes-CPU GEMV (ref_bnb_cpu.h).
#include "ref_bnb_cpu.h"

#include "ref_4bit.h"

namespace kbit::ref {

void bnb_cpu_gemv_4bit_groups(QuantType qt, int64_t M, int64_t N, int64_t K, const kbit_bf16* x,
                              const uint8_t* w, const kbit_bf16* absmax, kbit_bf16* out, int64_t blocksize,
                              int64_t x_stride, int64_t out_stride, int64_t g0, int64_t g1) {
    const float* lut = lut_4bit(qt);
    for (int64_t mi = 0; mi < M; ++mi) {
        const kbit_bf16* xr = x + mi * x_stride;
        for (int64_t o = 32 * g0; o < 32 * g1; ++o) {
            float total = 0.0f;
            for (int64_t k0 = 0; k0 < K; k0 += blocksize) {
                float sum = 0.0f;
                for (int64_t k = k0; k < k0 + blocksize; ++k) {
                    const float prod = bf16_to_float(xr[k].bits) * lut[bnb_cpu_nibble(w, K, o, k)];
                    sum = sum + prod;
                }
                const float scaled = sum * bf16_to_float(absmax[(k0 / blocksize) * N + o].bits);
                total = total + scaled;
            }
            out[mi * out_stride + o] = kbit_bf16{float_to_bf16(total)};
        }
    }
}

}  // namespace kbit::ref
