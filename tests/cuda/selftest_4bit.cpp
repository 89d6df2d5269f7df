// CUDA self-test: 4-bit quantize/dequantize (bitsandbytes names and kbit_ forms, aligned and
// unaligned buffers), nested absmax and torchao NF4 — exact bytes against the CPU reference kbit::ref.
#include "ref_4bit.h"
#include "selftest_util.h"

namespace {

using kbit::QuantType;

template <class T>
void check_codec(QuantType q, int64_t B, int64_t n, size_t offset) {
    const char* fmt = q == QuantType::NF4 ? "nf4" : "fp4";
    INFO(fmt << " " << kbit::Elem<T>::name << " blocksize " << B << " n " << n << " offset " << offset);
    std::vector<T> A = st::to_elems<T>(st::weights(n, static_cast<uint32_t>(n + B)));
    if (n > 10) A[7] = kbit::Elem<T>::store(std::numeric_limits<float>::quiet_NaN());
    if (n > 3 * B) std::fill(A.begin() + B, A.begin() + 2 * B, kbit::Elem<T>::store(std::nanf("")));  // all-NaN block
    const int64_t blocks = (n + B - 1) / B;
    std::vector<uint8_t> want((n + 1) / 2);
    std::vector<float> want_absmax(blocks);
    kbit::ref::quantize_4bit(q, A.data(), want_absmax.data(), want.data(), B, n);

    st::Buf<T> dA(A, offset);
    st::Buf<uint8_t> dout(want.size(), offset);
    st::Buf<float> dabs(want_absmax.size(), offset);
    st::kbit_ok(kbit_quantize_4bit(static_cast<int32_t>(q), kbit::Elem<T>::dtype, dA.get(), dabs.get(), dout.get(), B, n,
                                   nullptr),
                "kbit_quantize_4bit");
    CHECK(st::first_bit_difference(dabs.download(), want_absmax) == -1);
    CHECK(st::first_bit_difference(dout.download(), want) == -1);

    std::vector<T> want_back(n);
    kbit::ref::dequantize_4bit(q, want.data(), want_absmax.data(), want_back.data(), B, n);
    st::Buf<T> dback(n, offset);
    st::kbit_ok(kbit_dequantize_4bit(static_cast<int32_t>(q), kbit::Elem<T>::dtype, dout.get(), dabs.get(), dback.get(),
                                     B, n, nullptr),
                "kbit_dequantize_4bit");
    CHECK(st::first_bit_difference(dback.download(), want_back) == -1);
}

}  // namespace

TEST_CASE("cuda 4-bit quantize/dequantize: exact bytes for nf4 and fp4, every dtype, blocksize and tail",
          "[cuda][4bit]") {
    for (QuantType q : {QuantType::NF4, QuantType::FP4})
        for (int64_t B : {32, 64, 128, 256, 512, 1024, 2048, 4096})
            for (int64_t n : {int64_t{1}, int64_t{31}, int64_t{33}, int64_t{4097}, int64_t{65536 + 3}, int64_t{1} << 20})
                for (size_t offset : {size_t{0}, size_t{1}}) {
                    check_codec<float>(q, B, n, offset);
                    check_codec<kbit_half>(q, B, n, offset);
                    check_codec<kbit_bf16>(q, B, n, offset);
                }
}

TEST_CASE("cuda 4-bit bitsandbytes names run on the default stream and match kbit_ forms", "[cuda][4bit]") {
    const int n = 10000, B = 64;
    std::vector<kbit_bf16> A = st::to_elems<kbit_bf16>(st::weights(n, 3));
    std::vector<uint8_t> want(n / 2);
    std::vector<float> want_absmax((n + B - 1) / B);
    kbit::ref::quantize_4bit(QuantType::NF4, A.data(), want_absmax.data(), want.data(), B, n);
    st::Buf<kbit_bf16> dA(A);
    st::Buf<uint8_t> dout(want.size());
    st::Buf<float> dabs(want_absmax.size());
    st::kbit_ok(cquantize_blockwise_bf16_nf4(nullptr, dA.get(), dabs.get(), dout.get(), B, n), "cquantize_blockwise_bf16_nf4");
    CHECK(st::first_bit_difference(dout.download(), want) == -1);
    cudaStream_t s;
    st::cuda_ok(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "stream");
    st::Buf<kbit_bf16> dback(n);
    st::kbit_ok(cdequantize_blockwise_bf16_nf4(nullptr, dout.get(), dabs.get(), dback.get(), B, n, s),
                "cdequantize_blockwise_bf16_nf4");
    st::kbit_ok(kbit_stream_synchronize(s), "kbit_stream_synchronize");
    std::vector<kbit_bf16> want_back(n);
    kbit::ref::dequantize_4bit(QuantType::NF4, want.data(), want_absmax.data(), want_back.data(), B, n);
    CHECK(st::first_bit_difference(dback.download(), want_back) == -1);
    cudaStreamDestroy(s);
}

TEST_CASE("cuda nested absmax: bitsandbytes double quantization and its inverse equal kbit::ref", "[cuda][4bit][nested]") {
    const std::vector<float> code = [] {  // any ascending table; here a linear one
        std::vector<float> c(256);
        for (int i = 0; i < 256; ++i) c[i] = -1.0f + 2.0f * i / 255.0f;
        return c;
    }();
    for (int64_t blocks : {int64_t{1}, int64_t{255}, int64_t{1000}, int64_t{70001}})
        for (int64_t nb : {int64_t{256}, int64_t{32}}) {
            INFO("blocks " << blocks << " nested_blocksize " << nb);
            std::vector<float> absmax(blocks);
            std::mt19937 rng(static_cast<uint32_t>(blocks));
            std::uniform_real_distribution<float> ud(0.01f, 4.0f);
            for (auto& x : absmax) x = ud(rng);
            const int64_t nblocks = (blocks + nb - 1) / nb;
            std::vector<float> want_nested(nblocks), want_back(blocks);
            std::vector<uint8_t> want_q(blocks);
            float offset = 0.0f;
            kbit::ref::nested_absmax_quantize(absmax.data(), code.data(), want_q.data(), want_nested.data(), &offset,
                                              blocks, nb);
            st::Buf<float> dabs(absmax), dcode(code), dnested(nblocks), doff(1);
            st::Buf<uint8_t> dq(blocks);
            st::kbit_ok(kbit_nested_absmax_quantize(dabs.get(), dcode.get(), dq.get(), dnested.get(), doff.get(), blocks, nb,
                                                    nullptr),
                        "kbit_nested_absmax_quantize");
            CHECK(st::bits_of(doff.download()[0]) == st::bits_of(offset));
            CHECK(st::first_bit_difference(dnested.download(), want_nested) == -1);
            CHECK(st::first_bit_difference(dq.download(), want_q) == -1);

            kbit::ref::nested_absmax_dequantize(want_q.data(), code.data(), want_nested.data(), offset, want_back.data(),
                                                blocks, nb);
            st::Buf<float> dback(blocks);
            st::kbit_ok(kbit_nested_absmax_dequantize(dq.get(), dcode.get(), dnested.get(), offset, dback.get(), blocks, nb,
                                                      nullptr),
                        "kbit_nested_absmax_dequantize");
            CHECK(st::first_bit_difference(dback.download(), want_back) == -1);
        }
}

namespace {

template <class T>
kbit_status torchao_quantize(const T* w, uint8_t* d, int8_t* q, T* f, T* m, int64_t n, int64_t bs, int64_t sbs) {
    if constexpr (std::is_same<T, float>::value) return kbit_quantize_nf4_torchao_fp32(w, d, q, f, m, n, bs, sbs, nullptr);
    else if constexpr (std::is_same<T, kbit_half>::value)
        return kbit_quantize_nf4_torchao_fp16(w, d, q, f, m, n, bs, sbs, nullptr);
    else return kbit_quantize_nf4_torchao_bf16(w, d, q, f, m, n, bs, sbs, nullptr);
}

template <class T>
kbit_status torchao_dequantize(const uint8_t* d, const int8_t* q, const T* f, const T* m, T* out, int64_t n, int64_t bs,
                               int64_t sbs) {
    if constexpr (std::is_same<T, float>::value) return kbit_dequantize_nf4_torchao_fp32(d, q, f, m, out, n, bs, sbs, nullptr);
    else if constexpr (std::is_same<T, kbit_half>::value)
        return kbit_dequantize_nf4_torchao_fp16(d, q, f, m, out, n, bs, sbs, nullptr);
    else return kbit_dequantize_nf4_torchao_bf16(d, q, f, m, out, n, bs, sbs, nullptr);
}

template <class T>
void check_torchao(int64_t n, int64_t bs, int64_t sbs, bool specials) {
    INFO("torchao " << kbit::Elem<T>::name << " n " << n << " block_size " << bs << " scaler_block_size " << sbs
                    << (specials ? " with NaN/Inf/zero blocks" : ""));
    std::vector<T> w = st::to_elems<T>(st::weights(n, static_cast<uint32_t>(n + bs), false));
    if (specials) {
        w[3] = kbit::Elem<T>::store(std::nanf(""));
        w[bs + 1] = kbit::Elem<T>::store(INFINITY);
        for (int64_t i = 2 * bs; i < 3 * bs; ++i) w[i] = kbit::Elem<T>::store(0.0f);
    }
    const int64_t blocks = n / bs, groups = blocks / sbs;
    std::vector<uint8_t> want_d(n / 2);
    std::vector<int8_t> want_q(blocks);
    std::vector<T> want_f(groups), want_m(1), want_w(n);
    kbit::ref::torchao_quantize(w.data(), want_d.data(), want_q.data(), want_f.data(), want_m.data(), n, bs, sbs);
    st::Buf<T> dw(w), dfactor(groups), dmean(1), dout(n);
    st::Buf<uint8_t> ddata(n / 2);
    st::Buf<int8_t> dq(blocks);
    st::kbit_ok(torchao_quantize<T>(dw.get(), ddata.get(), dq.get(), dfactor.get(), dmean.get(), n, bs, sbs),
                "kbit_quantize_nf4_torchao");
    CHECK(st::first_bit_difference(dmean.download(), want_m) == -1);
    CHECK(st::first_bit_difference(dfactor.download(), want_f) == -1);
    CHECK(st::first_bit_difference(dq.download(), want_q) == -1);
    CHECK(st::first_bit_difference(ddata.download(), want_d) == -1);

    kbit::ref::torchao_dequantize(want_d.data(), want_q.data(), want_f.data(), want_m.data(), want_w.data(), n, bs, sbs);
    st::kbit_ok(torchao_dequantize<T>(ddata.get(), dq.get(), dfactor.get(), dmean.get(), dout.get(), n, bs, sbs),
                "kbit_dequantize_nf4_torchao");
    CHECK(st::first_bit_difference(dout.download(), want_w) == -1);
}

}  // namespace

TEST_CASE("cuda torchao NF4: quantize and dequantize equal kbit::ref byte for byte", "[cuda][torchao]") {
    for (auto [n, bs, sbs] : {std::tuple<int64_t, int64_t, int64_t>{16384, 64, 256}, {64 * 256 * 3, 64, 256},
                              {96 * 10, 96, 5}, {int64_t{4096} * 1024, 64, 256}})
        for (bool specials : {false, true}) {
            check_torchao<float>(n, bs, sbs, specials);
            check_torchao<kbit_half>(n, bs, sbs, specials);
            check_torchao<kbit_bf16>(n, bs, sbs, specials);
        }
}
