// 4-bit blockwise quantization (cquantize_blockwise_<dtype>_<nf4|fp4>, kbit_quantize_4bit): exact
// bytes and absmax against the scalar reference and against the format rules, special blocks,
// threshold edges, thread boundaries, round-trip error.
#include "test_4bit_util.h"

using namespace kbit_test;

namespace {

// Independent statement of the expected outputs of one block (docs/behaviour.md §2.2).
template <class T>
void check_block_rules(QuantType q, const std::vector<T>& x, int64_t blocksize, const std::vector<uint8_t>& packed,
                       const std::vector<float>& absmax) {
    const int64_t n = static_cast<int64_t>(x.size());
    for (int64_t b = 0; b * blocksize < n; ++b) {
        const int64_t begin = b * blocksize, end = std::min(n, begin + blocksize);
        float amax = end - begin < blocksize ? 0.0f : -FLT_MAX;
        for (int64_t i = begin; i < end; ++i) {
            const float a = std::fabs(kbit::Elem<T>::load(x[i]));
            if (!std::isnan(a)) amax = std::max(amax, a);
        }
        INFO("block " << b);
        REQUIRE(bits_of(absmax[b]) == bits_of(amax));
        const float r = 1.0f / amax;
        for (int64_t i = begin; i < end; ++i) {
            const float y = kbit::Elem<T>::load(x[i]) * r;
            int expected = 0;
            if (q == QuantType::NF4) {
                for (float t : kbit::kNf4Thresholds) expected += y > t;
            } else {
                expected = kbit::fp4_index(y);
            }
            INFO("element " << i << " y " << y);
            REQUIRE(kbit::nibble_at(packed.data(), i) == expected);
        }
    }
    if (n % 2) {  // the padding nibble codes 0 * r
        const float r = 1.0f / absmax.back();
        REQUIRE(kbit::nibble_at(packed.data(), n) == kbit::ref::index_4bit(q, 0.0f * r));
    }
}

template <class T>
void check_against_ref(QuantType q, const std::vector<T>& x, int64_t blocksize) {
    std::vector<uint8_t> packed;
    std::vector<float> absmax;
    backend_quantize(q, x, blocksize, &packed, &absmax);
    const int64_t n = static_cast<int64_t>(x.size());
    std::vector<uint8_t> ref_packed((n + 1) / 2);
    std::vector<float> ref_absmax((n + blocksize - 1) / blocksize);
    kbit::ref::quantize_4bit(q, x.data(), ref_absmax.data(), ref_packed.data(), blocksize, n);
    CHECK(first_bit_difference(absmax, ref_absmax) == -1);
    CHECK(first_bit_difference(packed, ref_packed) == -1);
}

struct Quantized {
    std::vector<uint8_t> packed;
    std::vector<float> absmax;
};

// The backend's bytes and absmax for x equal the reference's and follow the block rules; returns them.
template <class T>
Quantized check_quantize(QuantType q, const std::vector<T>& x, int64_t blocksize) {
    check_against_ref(q, x, blocksize);
    Quantized out;
    backend_quantize(q, x, blocksize, &out.packed, &out.absmax);
    check_block_rules(q, x, blocksize, out.packed, out.absmax);
    return out;
}

// Blocks with special contents, then a partial all-NaN block (n odd).
template <class T>
std::vector<T> special_blocks(int64_t bs) {
    std::vector<float> v;
    auto normal = normal_floats(static_cast<size_t>(bs), 11, 0.3f);
    auto block = [&](auto f) {
        for (int64_t i = 0; i < bs; ++i) v.push_back(f(i));
    };
    block([](int64_t) { return 0.0f; });                                      // zero block
    block([&](int64_t i) { return i % 5 == 3 ? NAN : normal[i]; });          // NaN inside
    block([](int64_t) { return NAN; });                                       // all-NaN full block
    block([&](int64_t i) { return i == 7 ? INFINITY : normal[i]; });         // +Inf
    block([&](int64_t i) { return i == 2 ? -INFINITY : (i == 9 ? NAN : normal[i]); });
    block([&](int64_t i) { return i % 2 ? -0.0f : 0.0f; });                  // signed zeros
    block([&](int64_t i) { return normal[i] * 1e-30f; });                    // tiny values (fp32 only)
    block([&](int64_t i) { return i == 0 ? 65504.0f : normal[i]; });
    for (int i = 0; i < 3; ++i) v.push_back(NAN);                             // partial all-NaN block
    return to_elems<T>(v);
}

// One block per threshold: absmax 1 (first element), then every threshold, its neighbours and
// their negatives, as exactly as T can hold them.
template <class T>
std::vector<T> threshold_edges(QuantType q, int64_t bs) {
    std::vector<float> edges;
    if (q == QuantType::NF4) {
        for (float t : kbit::kNf4Thresholds) edges.push_back(t);
    } else {
        for (uint32_t bits : {0x3b2aaab9u, 0x3db00000u, 0x3e555555u, 0x3e955555u, 0x3ed55556u, 0x3f155550u,
                              0x3f555555u})
            edges.push_back(kbit::bits_float(bits));
    }
    std::vector<float> vals;
    for (float t : edges) {
        for (float e : {t, std::nextafter(t, 2.0f), std::nextafter(t, -2.0f)}) {
            const float as_t = kbit::Elem<T>::load(kbit::Elem<T>::store(e));
            vals.push_back(as_t);
            vals.push_back(-as_t);
            // neighbours in T's own precision
            const float up = kbit::Elem<T>::load(kbit::Elem<T>::store(as_t * (1.0f + static_cast<float>(unit_roundoff<T>()) * 2)));
            vals.push_back(up);
            vals.push_back(-up);
        }
    }
    std::vector<float> v;
    size_t j = 0;
    while (j < vals.size()) {
        v.push_back(1.0f);
        for (int64_t i = 1; i < bs; ++i) v.push_back(j < vals.size() ? vals[j++] : 0.5f);
    }
    return to_elems<T>(v);
}

}  // namespace

TEMPLATE_TEST_CASE("4bit quantize: bytes and absmax equal the reference and the format rules", "[4bit][quantize]"
                   FN_4BIT_QUANTIZE, float, kbit_half, kbit_bf16) {
    using T = TestType;
    auto sizes = [](int64_t bs) {
        return std::vector<int64_t>{bs * 5, bs * 5 + 1, bs * 3 + bs / 2 + 1, bs - 2, int64_t{1}, int64_t{2}};
    };
    for_each_format_and_size<T>(kBlocksizes, sizes, [](QuantType q, int64_t bs, int64_t n) {
        check_quantize(q, weights<T>(static_cast<size_t>(n), static_cast<uint32_t>(n + bs)), bs);
    });
}

TEMPLATE_TEST_CASE("4bit quantize: zero, NaN, Inf and all-NaN blocks", "[4bit][quantize]" FN_4BIT_QUANTIZE,
                   float, kbit_half, kbit_bf16) {
    using T = TestType;
    for_each_format<T>(kBlocksizes, [](QuantType q, int64_t bs) {
        const auto [packed, absmax] = check_quantize(q, special_blocks<T>(bs), bs);
        // Spelled out (docs/behaviour.md §2.2): zero block -> absmax 0, every nibble 0.
        CHECK(bits_of(absmax[0]) == 0u);
        for (int64_t i = 0; i < bs / 2; ++i) CHECK(packed[i] == 0);
        // All-NaN full block: absmax -FLT_MAX (the reduction's start), every nibble 0.
        CHECK(absmax[2] == -FLT_MAX);
        for (int64_t i = bs; i < 3 * bs / 2; ++i) CHECK(packed[i] == 0);
        // +Inf block: absmax +inf; finite elements code 0 * x, the Inf element (NaN) 0.
        CHECK(absmax[3] == INFINITY);
        CHECK(kbit::nibble_at(packed.data(), 3 * bs + 7) == 0);
        CHECK(kbit::nibble_at(packed.data(), 3 * bs + 8) == (q == QuantType::NF4 ? 7 : 0));
        // Partial all-NaN last block: the zero padding wins the reduction -> absmax 0.
        CHECK(bits_of(absmax.back()) == 0u);
    });
}

// Long runs of blocks (backends may treat several blocks at once, the CPU one 16 small blocks of
// 16-bit values): each special block of special_blocks() alone at every position in a run of 40
// normal blocks, so it meets each slot of a group.
TEMPLATE_TEST_CASE("4bit quantize: special blocks at every position of a long run", "[4bit][quantize]" FN_4BIT_QUANTIZE,
                   float, kbit_half, kbit_bf16) {
    using T = TestType;
    for_each_format<T>({32, 64, 128}, [](QuantType q, int64_t bs) {
        const auto specials = special_blocks<T>(bs);
        const auto normal = weights<T>(static_cast<size_t>(40 * bs), static_cast<uint32_t>(bs));
        for (int64_t kind = 0; kind < 7; ++kind) {
            for (int64_t at = 0; at < 40; at += kind + 1) {
                auto x = normal;
                std::copy(specials.begin() + kind * bs, specials.begin() + (kind + 1) * bs, x.begin() + at * bs);
                INFO("special block " << kind << " at block " << at);
                check_against_ref(q, x, bs);
            }
        }
    });
}

TEMPLATE_TEST_CASE("4bit quantize: threshold literals and their neighbours", "[4bit][quantize]" FN_4BIT_QUANTIZE,
                   float, kbit_half, kbit_bf16) {
    using T = TestType;
    for_each_format<T>({32, 64, 256}, [](QuantType q, int64_t bs) {
        check_quantize(q, threshold_edges<T>(q, bs), bs);
    });
    if constexpr (std::is_same_v<T, float>) {
        // A value exactly on an NF4 threshold goes to the lower index; one ulp above to the upper.
        std::vector<float> x(64, 0.0f);
        x[0] = 1.0f;
        x[1] = kbit::kNf4Thresholds[8];
        x[2] = std::nextafter(kbit::kNf4Thresholds[8], 2.0f);
        std::vector<uint8_t> packed;
        std::vector<float> absmax;
        backend_quantize(QuantType::NF4, x, 64, &packed, &absmax);
        CHECK(kbit::nibble_at(packed.data(), 1) == 8);
        CHECK(kbit::nibble_at(packed.data(), 2) == 9);
    }
}

// fp32 NaNs with any payload code 0, like the quiet NaN (a kernel that reads a bucket or table
// index from a value's low bits must not take one from a NaN's payload).
TEST_CASE("4bit quantize: fp32 NaN payloads code 0", "[4bit][quantize]"
          "[fn:cquantize_blockwise_fp32_fp4][fn:cquantize_blockwise_fp32_nf4]") {
    const uint32_t payloads[] = {0x7FC00001u, 0x7FC0001Fu, 0x7FC00011u, 0x7F800001u, 0x7F80001Eu,
                                 0xFFC00003u, 0xFFBFFFFFu, 0x7FFFFFFFu, 0xFF80000Du, 0x7FC0FFFFu};
    for (int64_t bs : {int64_t{32}, int64_t{64}, int64_t{128}, int64_t{4096}}) {
        std::vector<float> x = normal_floats(static_cast<size_t>(bs * 20), 19, 0.5f);
        std::vector<int64_t> at;
        for (int64_t i = 3, k = 0; i < static_cast<int64_t>(x.size()); i += 37, ++k) {
            x[i] = kbit::bits_float(payloads[k % 10]);
            at.push_back(i);
        }
        for (QuantType q : {QuantType::NF4, QuantType::FP4}) {
            DYNAMIC_SECTION(qt_name(q) << " blocksize " << bs) {
                check_against_ref(q, x, bs);
                std::vector<uint8_t> packed;
                std::vector<float> absmax;
                backend_quantize(q, x, bs, &packed, &absmax);
                for (int64_t i : at) {
                    INFO("element " << i);
                    REQUIRE(kbit::nibble_at(packed.data(), i) == 0);
                }
            }
        }
    }
}

// Every value of [-1, 1] a 16-bit type holds, and fp32 values 509 ulps apart across it, each block
// led by 1.0 so that y = x: every code boundary of a kernel's search (or bucket edge of a table
// look-up) is met or closely straddled.
TEMPLATE_TEST_CASE("4bit quantize: a sweep from -1 to 1", "[4bit][quantize]" FN_4BIT_QUANTIZE,
                   float, kbit_half, kbit_bf16) {
    using T = TestType;
    std::vector<float> v;
    if constexpr (std::is_same_v<T, float>) {
        for (uint32_t sign : {0u, 0x80000000u})
            for (uint32_t u = 0; u <= kbit::float_bits(1.0f); u += 509) v.push_back(kbit::bits_float(sign | u));
    } else {
        for (uint32_t bits = 0; bits <= 0xFFFF; ++bits) {
            T e;
            e.bits = static_cast<uint16_t>(bits);
            const float f = kbit::Elem<T>::load(e);
            if (std::fabs(f) <= 1.0f) v.push_back(f);  // NaN fails the test
        }
    }
    constexpr int64_t bs = 64;
    std::vector<float> x;
    for (size_t i = 0; i < v.size(); ++i) {
        if (x.size() % bs == 0) x.push_back(1.0f);
        x.push_back(v[i]);
    }
    while (x.size() % bs) x.push_back(0.0f);
    const auto xs = to_elems<T>(x);
    for (QuantType q : {QuantType::NF4, QuantType::FP4}) {
        DYNAMIC_SECTION(qt_name(q) << " " << kbit::Elem<T>::name << " " << v.size() << " values") {
            check_against_ref(q, xs, bs);
        }
    }
}

TEMPLATE_TEST_CASE("4bit quantize: large odd n across thread boundaries", "[4bit][quantize]" FN_4BIT_QUANTIZE,
                   float, kbit_half, kbit_bf16) {
    using T = TestType;
    const int64_t n = (int64_t{3} << 20) + 7;
    const auto x = weights<T>(static_cast<size_t>(n), 5);
    auto sizes = [n](int64_t) { return std::vector<int64_t>{n}; };
    for_each_format_and_size<T>({32, 64, 4096}, sizes, [&](QuantType q, int64_t bs, int64_t) {
        check_against_ref(q, x, bs);
    });
}

TEMPLATE_TEST_CASE("4bit quantize: round trip error within half the largest table gap", "[4bit][quantize]"
                   FN_4BIT_QUANTIZE FN_4BIT_DEQUANTIZE, float, kbit_half, kbit_bf16) {
    using T = TestType;
    for_each_format<T>(kBlocksizes, [](QuantType q, int64_t bs) {
        const int64_t n = bs * 7 + 3;
        const auto x = weights<T>(static_cast<size_t>(n), 77);
        std::vector<uint8_t> packed;
        std::vector<float> absmax;
        backend_quantize(q, x, bs, &packed, &absmax);
        const auto y = backend_dequantize<T>(q, packed, absmax, bs, n);
        const double half_gap = max_gap(q) / 2.0;
        for (int64_t i = 0; i < n; ++i) {
            const double xi = kbit::Elem<T>::load(x[i]), yi = kbit::Elem<T>::load(y[i]);
            const double a = absmax[i / bs];
            // half a gap of the normalised table, plus the roundings of y = x/absmax and of
            // the dequantized value to T
            const double bound = half_gap * a * (1 + 0x1.0p-20) + unit_roundoff<T>() * std::fabs(yi) + tiny_step<T>();
            INFO("i " << i << " x " << xi << " y " << yi << " absmax " << a);
            REQUIRE(std::fabs(yi - xi) <= bound);
        }
    });
}

TEMPLATE_TEST_CASE("4bit quantize: kbit_quantize_4bit equals the bitsandbytes-named functions", "[4bit][quantize]"
                   FN_4BIT_QUANTIZE "[fn:kbit_quantize_4bit]", float, kbit_half, kbit_bf16) {
    using T = TestType;
    for_each_format<T>({64, 2048}, [](QuantType q, int64_t bs) {
        const int64_t n = bs * 9 + 5;
        const auto x = weights<T>(static_cast<size_t>(n), 3);
        std::vector<uint8_t> packed;
        std::vector<float> absmax;
        backend_quantize(q, x, bs, &packed, &absmax);
        DeviceBuffer<T> dx(x);
        DeviceBuffer<float> da(absmax.size());
        DeviceBuffer<uint8_t> dq(packed.size());
        require_ok(backend().fns_4bit.kbit_quantize_4bit(static_cast<int32_t>(q), kbit::Elem<T>::dtype, dx.get(),
                                                         da.get(), dq.get(), bs, n, nullptr),
                   "kbit_quantize_4bit");
        CHECK(first_bit_difference(da.download(), absmax) == -1);
        CHECK(first_bit_difference(dq.download(), packed) == -1);
    });
}
