// A whole LLM.int8 linear layer, Y = X * W^T + b with outlier threshold 6.0, run by a C engine through
// the 8-bit ABI alone (what bitsandbytes' Linear8bitLt does partly in Python), checked against an fp64
// product of the same fp16 inputs with a per-element bound derived from int8 quantization.
#include <catch2/catch.hpp>

#include "test_8bit_util.h"

using namespace kbit_test;

namespace {

constexpr double kU32 = 0x1.0p-24;  // fp32 unit roundoff
constexpr double kU16 = 0x1.0p-11;  // fp16 unit roundoff

struct Layer {
    int T, K, O;
    std::vector<kbit_half> X, W, bias;
};

// Activations ~ N(0, 1) with a few columns of large magnitude (LLM.int8's emergent outliers).
Layer make_layer(int T, int K, int O) {
    Layer l{T, K, O, {}, {}, {}};
    auto x = normal_floats(size_t(T) * K, 71);
    for (int t = 0; t < T; ++t)
        for (int c : {5, K / 3, K / 2 + 1, K - 2}) x[size_t(t) * K + c] *= 20.0f;
    l.X = to_elems<kbit_half>(x);
    l.W = to_elems<kbit_half>(normal_floats(size_t(O) * K, 72, 0.05f));
    l.bias = to_elems<kbit_half>(normal_floats(size_t(O), 73, 0.1f));
    return l;
}

float h(kbit_half v) { return kbit::half_to_float(v.bits); }

struct Run {
    std::vector<kbit_half> Y;
    std::vector<float> SCA, SCB;
    std::vector<uint8_t> outliers;
};

// The layer through the backend's functions only.
Run run_layer(const Layer& l, bool with_outlier_part) {
    const auto& b = backend().fns_8bit;
    const int T = l.T, K = l.K, O = l.O;
    DeviceBuffer<kbit_half> dX(l.X), dW(l.W), dbias(l.bias), dY(size_t(T) * O);
    DeviceBuffer<int8_t> dCA(size_t(T) * K), dCB(size_t(O) * K);
    DeviceBuffer<float> dSCA(T), dSCB(O);
    DeviceBuffer<uint8_t> doutliers(K);
    DeviceBuffer<int32_t> dacc(size_t(T) * O);
    // Weights: row-wise int8, no outliers (bitsandbytes quantizes them once with threshold 0).
    require_ok(b.cint8_vector_quant(dW.get(), dCB.get(), dSCB.get(), 0.0f, O, K, nullptr), "cint8_vector_quant");
    // Activations: row-wise int8, outlier columns flagged and zeroed.
    require_ok(b.kbit_int8_vectorwise_quant(dX.get(), dCA.get(), dSCA.get(), doutliers.get(), 6.0f, T, K, nullptr),
               "kbit_int8_vectorwise_quant");
    kbit_context* ctx = b.get_context();
    REQUIRE(ctx != nullptr);
    require_ok(b.cigemmlt_32(ctx, K, T, O, dCB.get(), dCA.get(), dacc.get(), nullptr, K, K, O, nullptr), "cigemmlt_32");
    b.kbit_context_destroy(ctx);
    require_ok(b.cdequant_mm_int32_fp16(dacc.get(), dSCA.get(), dSCB.get(), dY.get(), dbias.get(), T, O, nullptr),
               "cdequant_mm_int32_fp16");
    if (with_outlier_part)
        require_ok(b.kbit_int8_outlier_matmul_fp16(dX.get(), dCB.get(), dSCB.get(), doutliers.get(), dY.get(), T, O, K,
                                                   nullptr),
                   "kbit_int8_outlier_matmul_fp16");
    return {dY.download(), dSCA.download(), dSCB.download(), doutliers.download()};
}

// Per-element error bound of the int8 decomposition (see the comments), and the fp64 reference.
struct Bound {
    double ref, bound;
};

Bound bound_at(const Layer& l, const Run& r, int t, int o) {
    const int K = l.K;
    const double sa = r.SCA[t], sw = r.SCB[o];
    // A value x in [-s, s] quantized as rint(x * 127 / s) (fp32 scale: relative error ~1e-7) is within
    // half a step s / 254 of q * s / 127.
    const double ea = sa / 254.0 * (1 + 1e-4), ew = sw / 254.0 * (1 + 1e-4);
    const double c_err = std::fabs(double(0x1.040c20p-14f) * 16129.0 - 1.0);  // fp32(1/16129)
    double ref = h(l.bias[o]), e_int8 = 0, mag_in = 0, e_out = 0, mag_out = 0;
    int n_out = 0;
    for (int i = 0; i < K; ++i) {
        const double x = h(l.X[size_t(t) * K + i]), w = h(l.W[size_t(o) * K + i]);
        ref += x * w;
        if (r.outliers[i]) {
            // fp16 part: the weight is dequantized (half step) and rounded to fp16.
            e_out += std::fabs(x) * (ew + (std::fabs(w) + ew) * kU16);
            mag_out += std::fabs(x) * (std::fabs(w) + ew);
            ++n_out;
        } else {
            // |xw - x'w'| <= |x| |w - w'| + |x - x'| |w'|
            e_int8 += std::fabs(x) * ew + ea * (std::fabs(w) + ew);
            mag_in += (std::fabs(x) + ea) * (std::fabs(w) + ew);
        }
    }
    const double e_dequant = (4 * kU32 + c_err) * mag_in;       // fp32 products and the fused add
    const double e_sum = (n_out + 1) * kU32 * mag_out;           // fp32 sum of the outlier products
    const double magnitude = mag_in + mag_out + std::fabs(double(h(l.bias[o])));
    const double e_store = 2 * kU16 * magnitude + 2 * 0x1.0p-25;  // two fp16 roundings of the output
    return {ref, e_int8 + e_dequant + e_out + e_sum + e_store};
}

}  // namespace

TEST_CASE("8bit layer: LLM.int8 linear layer with outliers through the ABI, threshold 6.0, fp16", "[8bit][layer]"
          "[fn:cint8_vector_quant][fn:get_context][fn:kbit_context_destroy][fn:cigemmlt_32][fn:cdequant_mm_int32_fp16]"
          "[fn:kbit_int8_vectorwise_quant][fn:kbit_int8_outlier_matmul_fp16]") {
    for (int T : {1, 64}) {
        const Layer l = make_layer(T, 512, 256);
        const Run r = run_layer(l, true);
        int outlier_cols = 0;
        for (uint8_t f : r.outliers) outlier_cols += f;
        INFO("tokens " << T << ", outlier columns " << outlier_cols);
        CHECK(outlier_cols >= 1);
        CHECK(outlier_cols <= 4);
        double worst = 0, mean_err = 0, mean_bound = 0;
        for (int t = 0; t < T; ++t)
            for (int o = 0; o < l.O; ++o) {
                const Bound b = bound_at(l, r, t, o);
                const double err = std::fabs(double(h(r.Y[size_t(t) * l.O + o])) - b.ref);
                INFO("t " << t << " o " << o << " y " << h(r.Y[size_t(t) * l.O + o]) << " ref " << b.ref);
                REQUIRE(err <= b.bound);
                worst = std::max(worst, err / b.bound);
                mean_err += err;
                mean_bound += b.bound;
            }
        // The bound is a worst case; typical errors are far below it (and not zero: a real check).
        INFO("worst error / bound " << worst << ", mean error " << mean_err / (T * l.O) << ", mean bound "
                                    << mean_bound / (T * l.O));
        CHECK(worst > 0.0);
        CHECK(mean_err < 0.5 * mean_bound);
    }
}

TEST_CASE("8bit layer: without the fp16 outlier part the same bound fails (the check can fail)", "[8bit][layer]"
          "[fn:cint8_vector_quant][fn:get_context][fn:kbit_context_destroy][fn:cigemmlt_32][fn:cdequant_mm_int32_fp16]"
          "[fn:kbit_int8_vectorwise_quant]") {
    const Layer l = make_layer(16, 512, 128);
    const Run r = run_layer(l, false);
    int violations = 0;
    for (int t = 0; t < l.T; ++t)
        for (int o = 0; o < l.O; ++o) {
            const Bound b = bound_at(l, r, t, o);
            violations += std::fabs(double(h(r.Y[size_t(t) * l.O + o])) - b.ref) > b.bound;
        }
    CHECK(violations > l.T * l.O / 2);
}
