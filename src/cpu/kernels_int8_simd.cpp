// LLM.int8 element kernels (Highway): row-wise int8 quantization, outlier-column flags, the int32
// product's fp16 dequantization and the fp16 outlier product. Each evaluates exactly the reference
// formula of ref_8bit.cpp, lane by lane; the scalar tails call the shared rules (kbit_int8_rules.h).
#include <cmath>

#include "cpu_isa.h"
#include "kbit_half.h"
#include "kbit_int8_rules.h"
#include "kbit_nan_x86.h"
#include "kernels_8bit.h"
#include "ref_8bit.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels_int8_simd.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "hwy_elem-inl.h"

#if KBIT_HWY_KERNEL_TARGET
HWY_BEFORE_NAMESPACE();
namespace kbit::cpu::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

void VectorQuant(const kbit_half* A, int8_t* out, float* rowStats, float threshold, int64_t cols, int64_t r0,
                 int64_t r1) {
    const hn::ScalableTag<float> df;
    const hn::RebindToSigned<decltype(df)> di;
    const hn::Rebind<uint8_t, decltype(df)> d8;
    const int64_t N = static_cast<int64_t>(hn::Lanes(df));
    const bool sparse = int8_has_outliers(threshold);
    const float threshold_half = int8_threshold_fp16(threshold);
    const auto vth_half = hn::Set(df, threshold_half);
    const auto vth = hn::Set(df, threshold);
    for (int64_t r = r0; r < r1; ++r) {
        const kbit_half* row = A + r * cols;
        int8_t* q = out + r * cols;
        auto vmax = hn::Zero(df);
        int64_t c = 0;
        for (; c + N <= cols; c += N) {
            auto v = hn::Abs(LoadAsFloat(df, row + c));
            if (sparse) v = hn::IfThenElseZero(hn::Lt(v, vth_half), v);
            vmax = MaxIgnoringNaN(v, vmax);
        }
        float amax = hn::GetLane(hn::MaxOfLanes(df, vmax));
        for (; c < cols; ++c)
            amax = int8_row_stat_fold(amax, std::fabs(half_to_float(row[c].bits)), threshold, threshold_half);
        rowStats[r] = amax;
        const float scale = int8_row_scale(amax);
        const auto vscale = hn::Set(df, scale);
        for (c = 0; c + N <= cols; c += N) {
            const auto a = LoadAsFloat(df, row + c);
            auto y = hn::Mul(a, vscale);
            // int8_low_byte_rn: NaN -> 0, round half to even, saturate to int32, low 8 bits.
            y = hn::IfThenZeroElse(hn::IsNaN(y), y);
            auto i32 = hn::ConvertTo(di, hn::Round(y));
            if (sparse) i32 = hn::IfThenZeroElse(hn::RebindMask(di, hn::Not(hn::Lt(hn::Abs(a), vth))), i32);
            const auto low = hn::And(i32, hn::Set(di, 0xFF));
            hn::StoreU(hn::DemoteTo(d8, low), d8, reinterpret_cast<uint8_t*>(q + c));
        }
        for (; c < cols; ++c) q[c] = int8_quantize_element(half_to_float(row[c].bits), scale, threshold);
    }
}

void OutlierFlags(const kbit_half* A, uint8_t* flags, float threshold, int64_t cols, int64_t r0, int64_t r1) {
    const hn::ScalableTag<float> df;
    const hn::RebindToSigned<decltype(df)> di;
    const hn::Rebind<uint8_t, decltype(df)> d8;
    const int64_t N = static_cast<int64_t>(hn::Lanes(df));
    const float threshold_half = int8_threshold_fp16(threshold);
    const auto vth = hn::Set(df, threshold_half);
    for (int64_t r = r0; r < r1; ++r) {
        const kbit_half* row = A + r * cols;
        int64_t c = 0;
        for (; c + N <= cols; c += N) {
            const auto hit = hn::Ge(hn::Abs(LoadAsFloat(df, row + c)), vth);
            if (hn::AllFalse(df, hit)) continue;
            const auto bits = hn::DemoteTo(d8, hn::IfThenElseZero(hn::RebindMask(di, hit), hn::Set(di, 1)));
            hn::StoreU(hn::Or(hn::LoadU(d8, flags + c), bits), d8, flags + c);
        }
        for (; c < cols; ++c)
            if (int8_is_outlier(std::fabs(half_to_float(row[c].bits)), threshold_half)) flags[c] = 1;
    }
}

void DequantMm(const int32_t* A, const float* rowStats, const float* colStats, kbit_half* out, const kbit_half* bias,
               int64_t cols, int64_t r0, int64_t r1) {
    const hn::ScalableTag<float> df;
    const hn::RebindToSigned<decltype(df)> di;
    const int64_t N = static_cast<int64_t>(hn::Lanes(df));
    const auto k = hn::Set(df, kMmDequantScale);
    for (int64_t r = r0; r < r1; ++r) {
        const int32_t* a = A + r * cols;
        kbit_half* y = out + r * cols;
        const auto rs = hn::Set(df, rowStats[r]);
        int64_t c = 0;
        for (; c + N <= cols; c += N) {
            const auto scaled =
                MulX86Nan(df, MulX86Nan(df, hn::ConvertTo(df, hn::LoadU(di, a + c)), rs), hn::LoadU(df, colStats + c));
            const auto b = bias != nullptr ? LoadAsFloat(df, bias + c) : hn::Zero(df);
            StoreFromFloat(df, MulAddX86Nan(df, scaled, k, b), y + c);  // one fused rounding, as fmaf
        }
        if (c < cols)
            ref::dequant_mm_int32_fp16(a + c, rowStats + r, colStats + c, y + c, bias != nullptr ? bias + c : nullptr, 1,
                                       cols - c);
    }
}

void OutlierMatmul(const kbit_half* A, int64_t in_features, const int64_t* cols, int64_t count, const float* w,
                   kbit_half* out, int64_t out_features, int64_t r0, int64_t r1) {
    const hn::ScalableTag<float> df;
    const int64_t N = static_cast<int64_t>(hn::Lanes(df));
    for (int64_t t = r0; t < r1; ++t) {
        const kbit_half* a = A + t * in_features;
        kbit_half* y = out + t * out_features;
        int64_t o = 0;
        for (; o + N <= out_features; o += N) {
            auto acc = hn::Set(df, -0.0f);
            for (int64_t j = 0; j < count; ++j) {
                const auto p = MulX86Nan(df, hn::Set(df, half_to_float(a[cols[j]].bits)), hn::LoadU(df, w + j * out_features + o));
                acc = FirstNanX86(df, hn::Add(acc, p), acc, p);
            }
            const auto before = LoadAsFloat(df, y + o);
            StoreFromFloat(df, FirstNanX86(df, hn::Add(before, acc), before, acc), y + o);
        }
        for (; o < out_features; ++o) {
            float acc = -0.0f;
            for (int64_t j = 0; j < count; ++j) acc = add_rn(acc, mul_rn(half_to_float(a[cols[j]].bits), w[j * out_features + o]));
            y[o].bits = float_to_half(add_rn(half_to_float(y[o].bits), acc));
        }
    }
}

void OverrideInt8(Int8Kernels& t) {
    t.vector_quant = &VectorQuant;
    t.dequant_mm = &DequantMm;
    t.outlier_flags = &OutlierFlags;
    t.outlier_matmul = &OutlierMatmul;
}

}  // namespace kbit::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();
#endif  // KBIT_HWY_KERNEL_TARGET
