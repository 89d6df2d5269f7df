// 4-bit blockwise dequantization (cdequantize_blockwise_<dtype>_<nf4|fp4>, kbit_dequantize_4bit):
// exact bytes against the formula RN_T(LUT[nibble] * absmax), on random bytes, special scales,
// FP4's -0.0, odd n, large tensors across threads (streaming stores) and unaligned outputs.
#include "kbit_nan_x86.h"
#include "test_4bit_util.h"

using namespace kbit_test;

namespace {

// Scales exercising every rounding case of the outputs: ordinary, zero, signed zero, infinities,
// NaN, values overflowing fp16, producing fp16/bf16 subnormals, and fp32 subnormals.
std::vector<float> scales(size_t blocks, uint32_t seed) {
    const float specials[] = {0.0f,     -0.0f,   INFINITY, -INFINITY, NAN,       70000.0f, 1e-5f,
                              3e-39f,   1e-40f,  65504.0f, 1e30f,     -2.5f,     0x1.0p-14f, 0x1.0p-24f,
                              FLT_MAX,  1.0f,    0.1f};
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> uni(0.0f, 2.0f);
    std::vector<float> v(blocks);
    for (size_t b = 0; b < blocks; ++b) v[b] = b < std::size(specials) ? specials[b] : uni(rng);
    return v;
}

// The definition, written out independently of the reference: one fp32 product (NaN results with
// x86's bits on every host, behaviour §1.1: kbit::mul_rn), one RN to T.
template <class T>
std::vector<T> expected(QuantType q, const std::vector<uint8_t>& packed, const std::vector<float>& absmax,
                        int64_t bs, int64_t n) {
    const float* lut = q == QuantType::NF4 ? kbit::kNf4Values : kbit::kFp4Values;
    std::vector<T> out(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
        const int nib = (i % 2 == 0) ? packed[i / 2] >> 4 : packed[i / 2] & 15;
        out[i] = kbit::Elem<T>::store(kbit::mul_rn(lut[nib], absmax[i / bs]));
    }
    return out;
}

}  // namespace

TEMPLATE_TEST_CASE("4bit dequantize: exact for every blocksize, odd n and special scales", "[4bit][dequantize]"
                   FN_4BIT_DEQUANTIZE, float, kbit_half, kbit_bf16) {
    using T = TestType;
    auto sizes = [](int64_t bs) {
        return std::vector<int64_t>{bs * 20, bs * 20 + 1, bs * 17 + bs / 2 + 31, int64_t{1}, bs - 1};
    };
    for_each_format_and_size<T>(kBlocksizes, sizes, [](QuantType q, int64_t bs, int64_t n) {
        const auto packed = random_bytes(static_cast<size_t>((n + 1) / 2), static_cast<uint32_t>(n));
        const auto absmax = scales(static_cast<size_t>((n + bs - 1) / bs), static_cast<uint32_t>(bs));
        const auto got = backend_dequantize<T>(q, packed, absmax, bs, n);
        const auto want = expected<T>(q, packed, absmax, bs, n);
        const long d = first_bit_difference(got, want);
        INFO("first difference at " << d);
        CHECK(d == -1);
        std::vector<T> ref(static_cast<size_t>(n));
        kbit::ref::dequantize_4bit(q, packed.data(), absmax.data(), ref.data(), bs, n);
        CHECK(first_bit_difference(got, ref) == -1);
    });
}

TEMPLATE_TEST_CASE("4bit dequantize: FP4 nibble 1000 is -0.0", "[4bit][dequantize]" FN_4BIT_DEQUANTIZE_FP4,
                   float, kbit_half, kbit_bf16) {
    using T = TestType;
    const std::vector<uint8_t> packed(32, 0x88);
    const std::vector<float> absmax(2, 3.0f);
    const auto got = backend_dequantize<T>(QuantType::FP4, packed, absmax, 32, 64);
    const uint32_t negative_zero = sizeof(T) == 4 ? 0x80000000u : 0x8000u;
    for (const T& v : got) CHECK(bits_of(v) == negative_zero);
}

TEMPLATE_TEST_CASE("4bit dequantize: large n across threads, streaming stores, unaligned output", "[4bit][dequantize]"
                   FN_4BIT_DEQUANTIZE, float, kbit_half, kbit_bf16) {
    using T = TestType;
    // Big enough for the CPU backend's non-temporal path (>= 8 MiB of output), odd, partial block.
    const int64_t n = (int64_t{9} << 20) / static_cast<int64_t>(sizeof(T)) + 77;
    auto sizes = [n](int64_t) { return std::vector<int64_t>{n}; };
    for_each_format_and_size<T>({32, 64, 4096}, sizes, [](QuantType q, int64_t bs, int64_t n) {
        const auto packed = random_bytes(static_cast<size_t>((n + 1) / 2), 9);
        const auto absmax = scales(static_cast<size_t>((n + bs - 1) / bs), 10);
        const auto want = expected<T>(q, packed, absmax, bs, n);
        CHECK(first_bit_difference(backend_dequantize<T>(q, packed, absmax, bs, n), want) == -1);
        // Output one element past an aligned address.
        DeviceBuffer<uint8_t> dq(packed);
        DeviceBuffer<float> da(absmax);
        DeviceBuffer<T> out(static_cast<size_t>(n + 1));
        out.fill_bytes(0x5A);
        require_ok(Fns4<T>::dequantize(q)(nullptr, dq.get(), da.get(), out.get() + 1, static_cast<int>(bs),
                                          static_cast<int>(n), nullptr),
                   "dequantize (unaligned)");
        auto got = out.download();
        CHECK(bits_of(got[0]) == (sizeof(T) == 4 ? 0x5A5A5A5Au : 0x5A5Au));  // before: untouched
        got.erase(got.begin());
        CHECK(first_bit_difference(got, want) == -1);
    });
}

TEMPLATE_TEST_CASE("4bit dequantize: kbit_dequantize_4bit equals the bitsandbytes-named functions", "[4bit][dequantize]"
                   "[fn:kbit_dequantize_4bit]" FN_4BIT_DEQUANTIZE, float, kbit_half, kbit_bf16) {
    using T = TestType;
    for (QuantType q : {QuantType::NF4, QuantType::FP4}) {
        DYNAMIC_SECTION(qt_name(q) << " " << kbit::Elem<T>::name << " blocksize 128") {
            const int64_t bs = 128, n = bs * 33 + 9;
            const auto packed = random_bytes(static_cast<size_t>((n + 1) / 2), 4);
            const auto absmax = scales(static_cast<size_t>((n + bs - 1) / bs), 5);
            DeviceBuffer<uint8_t> dq(packed);
            DeviceBuffer<float> da(absmax);
            DeviceBuffer<T> out(static_cast<size_t>(n)), named(static_cast<size_t>(n));
            require_ok(backend().fns_4bit.kbit_dequantize_4bit(static_cast<int32_t>(q), kbit::Elem<T>::dtype, dq.get(),
                                                         da.get(), out.get(), bs, n, nullptr),
                       "kbit_dequantize_4bit");
            require_ok(Fns4<T>::dequantize(q)(nullptr, dq.get(), da.get(), named.get(), static_cast<int>(bs),
                                              static_cast<int>(n), nullptr),
                       "cdequantize_blockwise_<dtype>_<format>");
            const auto got = out.download();
            CHECK(first_bit_difference(got, named.download()) == -1);
            CHECK(first_bit_difference(got, expected<T>(q, packed, absmax, bs, n)) == -1);
        }
    }
}
