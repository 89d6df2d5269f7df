#include <cfloat>
// Blockwise dynamic 8-bit quantize / dequantize: the backend against the scalar reference
// (kbit::ref, which applies kbit::code8_index element by element), byte for byte, on bitsandbytes'
// tables and on adversarial ones.
#include <memory>

#include <catch2/catch.hpp>

#include "kbit_code8.h"
#include "ref_8bit.h"
#include "test_8bit_util.h"

using namespace kbit_test;

namespace {

// A large call with `code`: backends may keep per-table structures (the CPU builds one only for calls
// of 16K elements or more and caches it by content), so cases are checked before and after this.
// Whatever their element type, the cases that call it call cquantize_blockwise_fp32 (their tag
// [fn:cquantize_blockwise_fp32:all-types], functions.h).
void warm_table(const std::vector<float>& code) {
    const size_t n = size_t{1} << 15;
    DeviceBuffer<float> dcode(code), din(normal_floats(n, 99)), dabsmax(n / 64);
    DeviceBuffer<uint8_t> dout(n);
    require_ok(backend().fns_8bit.cquantize_blockwise_fp32(dcode.get(), din.get(), dabsmax.get(), dout.get(), 64,
                                                     static_cast<int>(n)),
               "warm-up quantize");
}

template <class T>
void check_quantize_once(const std::vector<float>& code, const std::vector<float>& values, int64_t blocksize,
                         const std::string& what);

template <class T>
void check_quantize(const std::vector<float>& code, const std::vector<float>& values, int64_t blocksize,
                    const std::string& what) {
    check_quantize_once<T>(code, values, blocksize, what + " (cold)");
    warm_table(code);
    check_quantize_once<T>(code, values, blocksize, what + " (warm)");
}

template <class T>
void check_quantize_once(const std::vector<float>& code, const std::vector<float>& values, int64_t blocksize,
                         const std::string& what) {
    const auto n = static_cast<int64_t>(values.size());
    const std::vector<T> in = to_elems<T>(values);
    const int64_t blocks = (n + blocksize - 1) / blocksize;
    std::vector<uint8_t> want(values.size());
    std::vector<float> want_absmax(static_cast<size_t>(blocks));
    kbit::ref::quantize_blockwise_8bit(code.data(), in.data(), want_absmax.data(), want.data(), blocksize, n);

    DeviceBuffer<float> dcode(code);
    DeviceBuffer<T> din(in);
    DeviceBuffer<float> dabsmax(static_cast<size_t>(blocks));
    DeviceBuffer<uint8_t> dout(values.size());
    require_ok(Blockwise8<T>::quantize(dcode.get(), din.get(), dabsmax.get(), dout.get(), static_cast<int>(blocksize),
                                       static_cast<int>(n)),
               "quantize");
    INFO(what << " " << kbit::Elem<T>::name << " blocksize " << blocksize << " n " << n);
    const auto got = dout.download();
    const long diff = first_bit_difference(got, want);
    if (diff >= 0) {
        const float y = kbit::Elem<T>::load(in[diff]) * (1.0f / want_absmax[diff / blocksize]);
        INFO("first difference at " << diff << ": got " << int(got[diff]) << " want " << int(want[diff]) << " (x "
                                    << kbit::Elem<T>::load(in[diff]) << ", y " << y << ")");
        CHECK(diff < 0);
    }
    CHECK(first_bit_difference(dabsmax.download(), want_absmax) < 0);
    CHECK(dcode.download() == code);  // the table is used verbatim and never written
    CHECK(first_bit_difference(din.download(), in) < 0);
}

template <class T>
void check_dequantize(const std::vector<float>& code, const std::vector<uint8_t>& codes,
                      const std::vector<float>& absmax, int64_t blocksize, int64_t offset, const std::string& what) {
    const auto n = static_cast<int64_t>(codes.size());
    std::vector<T> want(codes.size());
    kbit::ref::dequantize_blockwise_8bit(code.data(), codes.data(), absmax.data(), want.data(), blocksize, n);
    DeviceBuffer<float> dcode(code);
    DeviceBuffer<uint8_t> dcodes(codes);
    DeviceBuffer<float> dabsmax(absmax);
    DeviceBuffer<T> dout(codes.size() + static_cast<size_t>(offset));  // offset: a misaligned output
    require_ok(Blockwise8<T>::dequantize(dcode.get(), dcodes.get(), dabsmax.get(), dout.get() + offset,
                                         static_cast<int>(blocksize), static_cast<int>(n)),
               "dequantize");
    INFO(what << " " << kbit::Elem<T>::name << " blocksize " << blocksize << " n " << n << " offset " << offset);
    auto got = dout.download();
    got.erase(got.begin(), got.begin() + offset);
    CHECK(first_bit_difference(got, want) < 0);
}

std::vector<float> random_absmax(int64_t blocks, uint32_t seed) {
    std::vector<float> m = normal_floats(static_cast<size_t>(blocks), seed, 10.0f);
    for (int64_t b = 0; b < blocks; ++b) {
        m[b] = std::fabs(m[b]);
        switch (b % 7) {
            case 1: m[b] = 0.0f; break;
            case 2: m[b] = INFINITY; break;
            case 3: m[b] = 1e-40f; break;   // subnormal products
            case 4: m[b] = 6.0e4f; break;   // fp16 overflow for large codes
            case 5: m[b] = NAN; break;
            default: break;
        }
    }
    return m;
}

std::vector<uint8_t> random_codes(int64_t n, uint32_t seed) {
    std::mt19937 rng(seed);
    std::vector<uint8_t> c(static_cast<size_t>(n));
    for (auto& x : c) x = static_cast<uint8_t>(rng() >> 24);
    return c;
}

}  // namespace

TEMPLATE_TEST_CASE("8bit blockwise: quantize equals the reference on every table and blocksize", "[8bit][quantize]"
                   FN_8BIT_QUANTIZE "[fn:cquantize_blockwise_fp32:all-types]", float, kbit_half, kbit_bf16) {
    for (const auto& table : code_tables())
        for (int64_t B : kBlocksizes8) {
            const int64_t n = 5 * B + B / 2 + 3;  // partial last block, odd tail
            check_quantize<TestType>(table.code, special_input(n, B, 17), B, table.name + " special");
            check_quantize<TestType>(table.code, probe_blocks(adversarial_values(table.code), B), B,
                                     table.name + " adversarial");
        }
}

TEMPLATE_TEST_CASE("8bit blockwise: quantize of large inputs (threads, streaming stores) equals the reference",
                   "[8bit][quantize]" FN_8BIT_QUANTIZE "[fn:cquantize_blockwise_fp32:all-types]",
                   float, kbit_half, kbit_bf16) {
    const auto& code = code_tables()[0].code;
    // 4M codes and more leave through non-temporal stores on the CPU backend.
    check_quantize<TestType>(code, normal_floats((size_t{1} << 22) + 77, 3), 4096, "dynamic-signed large");
    check_quantize<TestType>(code, special_input((int64_t{1} << 20) + 5, 64, 4), 64, "dynamic-signed large special");
}

TEMPLATE_TEST_CASE("8bit blockwise: blocksizes 8192 and 16384 (8bit 1.1) equal the reference, or are rejected by 1.0",
                   "[8bit][quantize][dequantize]" FN_8BIT_QUANTIZE FN_8BIT_DEQUANTIZE
                   "[fn:cquantize_blockwise_fp32:all-types]", float, kbit_half, kbit_bf16) {
    const auto& code = code_tables()[0].code;
    for (int64_t B : {int64_t{8192}, int64_t{16384}}) {
        const int64_t n = 3 * B + B / 2 + 3;
        if (backend8bit_minor() >= 1) {
            check_quantize<TestType>(code, special_input(n, B, 23), B, "dynamic-signed special");
            check_dequantize<TestType>(code, random_codes(n, 5), random_absmax((n + B - 1) / B, 6), B, 0, "random");
        } else {
            DeviceBuffer<float> dcode(code);
            DeviceBuffer<TestType> din(static_cast<size_t>(n));
            DeviceBuffer<float> dabsmax(4);
            DeviceBuffer<uint8_t> dout(static_cast<size_t>(n));
            check_invalid(Blockwise8<TestType>::quantize(dcode.get(), din.get(), dabsmax.get(), dout.get(),
                                                         static_cast<int>(B), static_cast<int>(n)),
                          std::string("cquantize_blockwise_") + kbit::Elem<TestType>::name + ": blocksize " +
                              std::to_string(B) + " is not one of 32, 64, 128, 256, 512, 1024, 2048, 4096");
        }
    }
}

TEST_CASE("8bit blockwise: quantize fp32 probes every float near every midpoint, blocksize 256", "[8bit][quantize]"
          "[fn:cquantize_blockwise_fp32]") {
    // Dense sweep: 64 consecutive floats on both sides of every midpoint of every table.
    for (const auto& table : code_tables())
        check_quantize<float>(table.code, probe_blocks(midpoint_neighbours(table.code, 32), 256), 256,
                              table.name + " midpoint sweep");
}

TEST_CASE("8bit blockwise: a table rewritten in place is not mistaken for the old one", "[8bit][quantize]"
          "[fn:cquantize_blockwise_fp32]") {
    // A cache keyed by the table pointer would reuse the first table's structure here.
    const auto x = normal_floats(64 * 1024, 21);
    DeviceBuffer<float> dcode(dynamic_map(true));
    DeviceBuffer<float> din(x);
    DeviceBuffer<float> dabsmax(64 * 1024 / 256);
    DeviceBuffer<uint8_t> dout(x.size());
    for (const auto& table : {dynamic_map(true), linear_map_with_zero(), dynamic_map(true), dynamic_map(false)}) {
        dcode.upload(table);
        require_ok(backend().fns_8bit.cquantize_blockwise_fp32(dcode.get(), din.get(), dabsmax.get(), dout.get(), 256,
                                                         static_cast<int>(x.size())),
                   "cquantize_blockwise_fp32");
        std::vector<uint8_t> want(x.size());
        std::vector<float> want_absmax(x.size() / 256);
        kbit::ref::quantize_blockwise_8bit(table.data(), x.data(), want_absmax.data(), want.data(), 256,
                                           static_cast<int64_t>(x.size()));
        CHECK(dout.download() == want);
    }
}

TEST_CASE("8bit blockwise: documented special cases of quantize, dynamic map, blocksize 64", "[8bit][quantize]"
          "[fn:cquantize_blockwise_fp32]") {
    const auto code = dynamic_map(true);
    std::vector<float> x(4 * 64, 0.0f);                    // block 0: zeros
    for (int i = 64; i < 128; ++i) x[i] = NAN;             // block 1: all NaN
    for (int i = 128; i < 192; ++i) x[i] = (i - 160) * 0.01f;
    x[130] = NAN;                                          // block 2: a NaN is ignored by absmax, code 0
    for (int i = 192; i < 256; ++i) x[i] = -0.5f;
    x[200] = 2.0f;                                         // block 3: absmax 2, exact halves
    DeviceBuffer<float> dcode(code), din(x), dabsmax(4);
    DeviceBuffer<uint8_t> dout(x.size());
    require_ok(backend().fns_8bit.cquantize_blockwise_fp32(dcode.get(), din.get(), dabsmax.get(), dout.get(), 64, 256),
               "cquantize_blockwise_fp32");
    const auto q = dout.download();
    const auto m = dabsmax.download();
    CHECK(m[0] == 0.0f);
    CHECK(m[1] == -FLT_MAX);  // full all-NaN block: the reduction's start value, as in bitsandbytes
    CHECK(m[2] == std::fabs(static_cast<float>(128 - 160) * 0.01f));
    CHECK(m[3] == 2.0f);
    for (int i = 0; i < 128; ++i) CHECK(q[i] == 0);  // zero and NaN blocks: every code 0
    CHECK(q[130] == 0);
    CHECK(q[200] == 255);                            // y = 1.0 -> code[255] = 1.0
    // y = -0.25: nearest code of the signed dynamic map
    int best = 0;
    for (int j = 0; j < 256; ++j)
        if (std::fabs(code[j] + 0.25f) < std::fabs(code[best] + 0.25f)) best = j;
    CHECK(q[192] == best);
    CHECK(q[160] == 127);                            // y = 0 -> the 0.0 entry

    // An all-NaN partial last block: its zero padding takes part in the reduction, so absmax 0.
    std::vector<float> tail(64 + 10, 1.0f);
    for (int i = 64; i < 74; ++i) tail[i] = NAN;
    DeviceBuffer<float> dtail(tail), dtail_absmax(2);
    DeviceBuffer<uint8_t> dtail_out(tail.size());
    require_ok(backend().fns_8bit.cquantize_blockwise_fp32(dcode.get(), dtail.get(), dtail_absmax.get(), dtail_out.get(),
                                                     64, static_cast<int>(tail.size())),
               "cquantize_blockwise_fp32");
    const auto tail_absmax = dtail_absmax.download();
    CHECK(tail_absmax[0] == 1.0f);
    CHECK(bits_of(tail_absmax[1]) == 0u);
    const auto tail_q = dtail_out.download();
    for (int i = 64; i < 74; ++i) CHECK(tail_q[i] == 0);
}

TEMPLATE_TEST_CASE("8bit blockwise: dequantize equals the reference", "[8bit][dequantize]" FN_8BIT_DEQUANTIZE,
                   float, kbit_half, kbit_bf16) {
    for (const auto& table : code_tables())
        for (int64_t B : kBlocksizes8)
            // Last blocks of 7 and of B/2 + 3 elements: short and long partial blocks, neither a
            // multiple of a SIMD width.
            for (const int64_t n : {3 * B + 7, 3 * B + B / 2 + 3})
                check_dequantize<TestType>(table.code, random_codes(n, 9), random_absmax((n + B - 1) / B, 10), B,
                                           0, table.name);
}

TEMPLATE_TEST_CASE("8bit blockwise: dequantize of large outputs (streaming stores, threads, misaligned)",
                   "[8bit][dequantize]" FN_8BIT_DEQUANTIZE, float, kbit_half, kbit_bf16) {
    const int64_t n = (int64_t{1} << 22) + 100;
    const auto codes = random_codes(n, 12);
    for (int64_t B : {int64_t{64}, int64_t{4096}}) {
        const auto absmax = random_absmax((n + B - 1) / B, 13);
        check_dequantize<TestType>(dynamic_map(true), codes, absmax, B, 0, "aligned");
        check_dequantize<TestType>(dynamic_map(true), codes, absmax, B, 1, "misaligned");
    }
}

TEST_CASE("8bit blockwise: quantize then dequantize stays within half a code step", "[8bit][roundtrip]"
          "[fn:cquantize_blockwise_fp32][fn:cdequantize_blockwise_fp32]") {
    // Independent of the reference: |x - deq(q(x))| <= absmax * (gap to the neighbouring code) / 2.
    const auto code = dynamic_map(true);
    const auto x = normal_floats(1 << 16, 31);
    DeviceBuffer<float> dcode(code), din(x), dabsmax(x.size() / 256), dback(x.size());
    DeviceBuffer<uint8_t> dq(x.size());
    require_ok(backend().fns_8bit.cquantize_blockwise_fp32(dcode.get(), din.get(), dabsmax.get(), dq.get(), 256,
                                                     static_cast<int>(x.size())),
               "quantize");
    require_ok(backend().fns_8bit.cdequantize_blockwise_fp32(dcode.get(), dq.get(), dabsmax.get(), dback.get(), 256,
                                                       static_cast<int>(x.size()), nullptr),
               "dequantize");
    const auto back = dback.download();
    const auto q = dq.download();
    const auto m = dabsmax.download();
    for (size_t i = 0; i < x.size(); ++i) {
        const int j = q[i];
        const float gap = std::max(j > 0 ? code[j] - code[j - 1] : 0.0f, j < 255 ? code[j + 1] - code[j] : 0.0f);
        INFO("i " << i << " x " << x[i] << " back " << back[i]);
        REQUIRE(std::fabs(x[i] - back[i]) <= m[i / 256] * gap * 0.5f * 1.0001f + 1e-30f);
    }
}

TEMPLATE_TEST_CASE("8bit blockwise: 64-bit entry points equal the bitsandbytes names", "[8bit][kbit]" FN_8BIT_QUANTIZE
                   FN_8BIT_DEQUANTIZE "[fn:kbit_quantize_blockwise_8bit][fn:kbit_dequantize_blockwise_8bit]",
                   float, kbit_half, kbit_bf16) {
    const auto code = dynamic_map(false);
    const int64_t n = 10000, B = 128;
    const auto in = to_elems<TestType>(special_input(n, B, 41));
    DeviceBuffer<float> dcode(code), m1((n + B - 1) / B), m2((n + B - 1) / B);
    DeviceBuffer<TestType> din(in), back1(n), back2(n);
    DeviceBuffer<uint8_t> q1(n), q2(n);
    require_ok(Blockwise8<TestType>::quantize(dcode.get(), din.get(), m1.get(), q1.get(), B, n), "bnb quantize");
    require_ok(backend().fns_8bit.kbit_quantize_blockwise_8bit(kbit::Elem<TestType>::dtype, dcode.get(), din.get(), m2.get(),
                                                         q2.get(), B, n, nullptr),
               "kbit_quantize_blockwise_8bit");
    CHECK(q1.download() == q2.download());
    CHECK(first_bit_difference(m1.download(), m2.download()) < 0);
    require_ok(Blockwise8<TestType>::dequantize(dcode.get(), q1.get(), m1.get(), back1.get(), B, n), "bnb dequantize");
    require_ok(backend().fns_8bit.kbit_dequantize_blockwise_8bit(kbit::Elem<TestType>::dtype, dcode.get(), q1.get(), m1.get(),
                                                           back2.get(), B, n, nullptr),
               "kbit_dequantize_blockwise_8bit");
    CHECK(first_bit_difference(back1.download(), back2.download()) < 0);
}

TEST_CASE("8bit blockwise: n == 0 succeeds without touching any pointer", "[8bit][kbit]"
          "[fn:cquantize_blockwise_fp32][fn:cdequantize_blockwise_bf16][fn:kbit_quantize_blockwise_8bit]"
          "[fn:kbit_dequantize_blockwise_8bit]") {
    const auto& b = backend().fns_8bit;
    CHECK(b.cquantize_blockwise_fp32(nullptr, nullptr, nullptr, nullptr, 64, 0) == KBIT_STATUS_SUCCESS);
    CHECK(b.cdequantize_blockwise_bf16(nullptr, nullptr, nullptr, nullptr, 4096, 0, nullptr) == KBIT_STATUS_SUCCESS);
    CHECK(b.kbit_quantize_blockwise_8bit(KBIT_DTYPE_FP16, nullptr, nullptr, nullptr, nullptr, 32, 0, nullptr) ==
          KBIT_STATUS_SUCCESS);
    CHECK(b.kbit_dequantize_blockwise_8bit(KBIT_DTYPE_FP32, nullptr, nullptr, nullptr, nullptr, 2048, 0, nullptr) ==
          KBIT_STATUS_SUCCESS);
}

TEST_CASE("8bit blockwise: concurrent quantize calls with different tables are exact", "[8bit][quantize]"
          "[fn:cquantize_blockwise_fp32]") {
    // Per-table structures built and cached concurrently must not mix tables. Only backend calls run
    // in the region (Catch assertions are not thread-safe).
    const int64_t n = 1 << 16, B = 256;
    const auto x = normal_floats(static_cast<size_t>(n), 51);
    const auto& tables = code_tables();
    const int count = static_cast<int>(tables.size());
    DeviceBuffer<float> din(x);
    std::vector<std::unique_ptr<DeviceBuffer<float>>> codes, absmax;
    std::vector<std::unique_ptr<DeviceBuffer<uint8_t>>> outs;
    for (int i = 0; i < 2 * count; ++i) {
        codes.push_back(std::make_unique<DeviceBuffer<float>>(tables[i % count].code));
        absmax.push_back(std::make_unique<DeviceBuffer<float>>(n / B));
        outs.push_back(std::make_unique<DeviceBuffer<uint8_t>>(n));
    }
    std::vector<kbit_status> status(2 * count, -1);
#pragma omp parallel for num_threads(4)
    for (int i = 0; i < 2 * count; ++i)
        status[i] = backend().fns_8bit.cquantize_blockwise_fp32(codes[i]->get(), din.get(), absmax[i]->get(), outs[i]->get(),
                                                          static_cast<int>(B), static_cast<int>(n));
    for (int i = 0; i < 2 * count; ++i) {
        INFO(tables[i % count].name);
        CHECK(status[i] == KBIT_STATUS_SUCCESS);
        std::vector<uint8_t> want(static_cast<size_t>(n));
        std::vector<float> want_absmax(static_cast<size_t>(n / B));
        kbit::ref::quantize_blockwise_8bit(tables[i % count].code.data(), x.data(), want_absmax.data(), want.data(), B, n);
        CHECK(outs[i]->download() == want);
    }
}
