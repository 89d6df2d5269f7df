// bitsandbytes double quantization of the block scales (kbit_nested_absmax_quantize / _dequantize):
// offset, nested scales and codes against an independent nearest-code search, the restore formula,
// and a checkpoint-style round trip that reproduces bitsandbytes' restore bit for bit.
#include "kbit_code8.h"
#include "test_4bit_util.h"

using namespace kbit_test;

namespace {

// Nearest code with fp32 midpoints, a midpoint tie to the even index (kbit_8bit.h's rule), written
// as a linear scan.
int nearest_code(const std::vector<float>& c, float y) {
    if (std::isnan(y)) return 0;
    int j = 0;
    while (j < 255 && c[j + 1] <= y) ++j;
    if (j == 255 || y < c[0]) return y < c[0] ? 0 : 255;
    const float mid = (c[j] + c[j + 1]) * 0.5f;
    if (y < mid) return j;
    if (y > mid) return j + 1;
    return j % 2 == 0 ? j : j + 1;
}

struct Nested {
    std::vector<uint8_t> q;
    std::vector<float> nested;
    float offset = 0;
};

Nested backend_nested_quantize(const std::vector<float>& absmax, const std::vector<float>& code, int64_t nbs) {
    const int64_t blocks = static_cast<int64_t>(absmax.size());
    DeviceBuffer<float> da(absmax), dcode(code), dn(static_cast<size_t>((blocks + nbs - 1) / nbs)), doff(1);
    DeviceBuffer<uint8_t> dq(static_cast<size_t>(blocks));
    require_ok(backend().fns_4bit.kbit_nested_absmax_quantize(da.get(), dcode.get(), dq.get(), dn.get(), doff.get(), blocks,
                                                        nbs, nullptr),
               "kbit_nested_absmax_quantize");
    return {dq.download(), dn.download(), doff.download()[0]};
}

std::vector<float> backend_nested_dequantize(const Nested& n, const std::vector<float>& code, int64_t nbs) {
    const int64_t blocks = static_cast<int64_t>(n.q.size());
    DeviceBuffer<uint8_t> dq(n.q);
    DeviceBuffer<float> dcode(code), dn(n.nested), out(static_cast<size_t>(blocks));
    require_ok(backend().fns_4bit.kbit_nested_absmax_dequantize(dq.get(), dcode.get(), dn.get(), n.offset, out.get(),
                                                          blocks, nbs, nullptr),
               "kbit_nested_absmax_dequantize");
    return out.download();
}

}  // namespace

TEST_CASE("4bit nested: offset, nested absmax and codes", "[4bit][nested]" "[fn:kbit_nested_absmax_quantize]") {
    const auto code = dynamic_map(true);
    for (int64_t nbs : {int64_t{256}, int64_t{32}, int64_t{4096}}) {
        for (int64_t blocks : {int64_t{1}, int64_t{255}, int64_t{256}, int64_t{1000}, int64_t{65536 + 17}}) {
            DYNAMIC_SECTION("nested_blocksize " << nbs << " blocks " << blocks) {
                std::vector<float> absmax(static_cast<size_t>(blocks));
                std::mt19937 rng(static_cast<uint32_t>(blocks));
                std::uniform_real_distribution<float> uni(0.005f, 0.09f);
                for (auto& a : absmax) a = uni(rng);
                const Nested got = backend_nested_quantize(absmax, code, nbs);
                // offset: the double-precision mean rounded once to fp32
                double sum = 0;
                for (float a : absmax) sum += a;
                CHECK(bits_of(got.offset) == bits_of(static_cast<float>(sum / blocks)));
                for (int64_t nb = 0; nb * nbs < blocks; ++nb) {
                    const int64_t b0 = nb * nbs, b1 = std::min(blocks, b0 + nbs);
                    float amax = b1 - b0 < nbs ? 0.0f : -FLT_MAX;
                    for (int64_t b = b0; b < b1; ++b) amax = std::max(amax, std::fabs(absmax[b] - got.offset));
                    REQUIRE(bits_of(got.nested[nb]) == bits_of(amax));
                    const float r = 1.0f / amax;
                    for (int64_t b = b0; b < b1; ++b) {
                        INFO("block " << b);
                        REQUIRE(got.q[b] == nearest_code(code, (absmax[b] - got.offset) * r));
                    }
                }
                // and the reference, byte for byte
                std::vector<uint8_t> rq(static_cast<size_t>(blocks));
                std::vector<float> rn(got.nested.size());
                float roff = 0;
                kbit::ref::nested_absmax_quantize(absmax.data(), code.data(), rq.data(), rn.data(), &roff, blocks, nbs);
                CHECK(rq == got.q);
                CHECK(first_bit_difference(rn, got.nested) == -1);
                CHECK(bits_of(roff) == bits_of(got.offset));
            }
        }
    }
}

TEST_CASE("4bit nested: dequantize is a product and a separate add", "[4bit][nested]"
          "[fn:kbit_nested_absmax_dequantize]") {
    const auto code = dynamic_map(true);
    for (int64_t nbs : {int64_t{256}, int64_t{64}}) {
        DYNAMIC_SECTION("nested_blocksize " << nbs) {
            Nested n;
            const int64_t blocks = 3 * nbs + 5;
            std::mt19937 rng(3);
            for (int64_t b = 0; b < blocks; ++b) n.q.push_back(static_cast<uint8_t>(rng()));
            n.nested = {0.031f, 0.0005f, 17.0f, 1e-30f};
            n.offset = 0.0123f;
            const auto got = backend_nested_dequantize(n, code, nbs);
            for (int64_t b = 0; b < blocks; ++b) {
                volatile float product = code[n.q[b]] * n.nested[b / nbs];  // rounded to fp32 first
                const float want = product + n.offset;
                REQUIRE(bits_of(got[b]) == bits_of(want));
            }
        }
    }
}

TEMPLATE_TEST_CASE("4bit nested: checkpoint round trip reproduces bitsandbytes' restore", "[4bit][nested]"
                   FN_4BIT_QUANTIZE FN_4BIT_DEQUANTIZE
                   "[fn:kbit_nested_absmax_quantize][fn:kbit_nested_absmax_dequantize]", float, kbit_half, kbit_bf16) {
    using T = TestType;
    const auto code = dynamic_map(true);
    for (QuantType q : {QuantType::NF4, QuantType::FP4}) {
        for (int64_t bs : {int64_t{64}, int64_t{128}}) {
            DYNAMIC_SECTION(qt_name(q) << " " << kbit::Elem<T>::name << " blocksize " << bs) {
                const int64_t n = 256 * bs * 3 + 7 * bs + 3;  // several nested blocks, partial last ones
                const auto x = weights<T>(static_cast<size_t>(n), 8);
                // quantize_4bit -> compress_statistics (what a transformers checkpoint stores) ...
                std::vector<uint8_t> packed;
                std::vector<float> absmax;
                backend_quantize(q, x, bs, &packed, &absmax);
                const Nested nested = backend_nested_quantize(absmax, code, 256);
                // ... -> restore -> dequantize, all through the backend
                const auto restored = backend_nested_dequantize(nested, code, 256);
                const auto got = backend_dequantize<T>(q, packed, restored, bs, n);
                // bitsandbytes: absmax = dequantize_blockwise(qabsmax, state2) (fp32 product, RN), then
                // absmax += offset (fp32 add); then out = RN_T(LUT[nibble] * absmax).
                const float* lut = kbit::ref::lut_4bit(q);
                for (int64_t i = 0; i < n; ++i) {
                    const int64_t b = i / bs;
                    volatile float product = code[nested.q[b]] * nested.nested[b / 256];
                    const float a = product + nested.offset;
                    REQUIRE(bits_of(got[i]) == bits_of(kbit::Elem<T>::store(lut[kbit::nibble_at(packed.data(), i)] * a)));
                }
                // The restored scales are close to the originals (8-bit dynamic code of the centred values).
                for (size_t b = 0; b < absmax.size(); ++b)
                    CHECK(std::fabs(restored[b] - absmax[b]) <= 0.02 * nested.nested[b / 256] + 1e-7);
            }
        }
    }
}
