// CUDA self-test: 4-bit quantize/dequantize (bitsandbytes names and kbit_ forms), nested absmax,
// torchao NF4 - exact bytes against host references built from the shared format rules.
#include "kbit_code8.h"
#include "kbit_formats.h"
#include "selftest_util.h"
#include "torchao_math.h"

namespace {

using kbit::QuantType;

// Host reference of the 4-bit quantizer (kbit_4bit.h): IEEE fp32, NaN ignored in the absmax.
template <class T>
void ref_quantize(QuantType q, const std::vector<T>& A, int64_t B, std::vector<uint8_t>& out, std::vector<float>& absmax) {
    const int64_t n = static_cast<int64_t>(A.size()), blocks = (n + B - 1) / B;
    absmax.assign(blocks, 0.0f);
    out.assign((n + 1) / 2, 0);
    for (int64_t b = 0; b < blocks; ++b) {
        const int64_t end = std::min(n, (b + 1) * B);
        float a = 0.0f;
        for (int64_t i = b * B; i < end; ++i) a = std::fmax(a, std::fabs(kbit::Elem<T>::load(A[i])));
        absmax[b] = a;
        const float r = 1.0f / a;
        for (int64_t i = b * B; i < end + (end == n && n % 2 == 1 ? 1 : 0); ++i) {
            const float y = (i < n ? kbit::Elem<T>::load(A[i]) : 0.0f) * r;
            const uint8_t c = q == QuantType::NF4 ? kbit::nf4_index(y) : kbit::fp4_index(y);
            out[i / 2] |= (i % 2 == 0) ? static_cast<uint8_t>(c << 4) : c;
        }
    }
}

template <class T>
std::vector<T> ref_dequantize(QuantType q, const std::vector<uint8_t>& packed, const std::vector<float>& absmax,
                              int64_t B, int64_t n) {
    const float nf4[16] = {KBIT_NF4_VALUES}, fp4[16] = {KBIT_FP4_VALUES};
    std::vector<T> out(n);
    for (int64_t i = 0; i < n; ++i) {
        const uint8_t nib = kbit::nibble_at(packed.data(), i);
        out[i] = kbit::Elem<T>::store((q == QuantType::NF4 ? nf4 : fp4)[nib] * absmax[i / B]);
    }
    return out;
}

template <class T>
void check_codec(QuantType q, int64_t B, int64_t n, size_t offset) {
    const char* fmt = q == QuantType::NF4 ? "nf4" : "fp4";
    INFO(fmt << " " << kbit::Elem<T>::name << " blocksize " << B << " n " << n << " offset " << offset);
    std::vector<T> A = st::to_elems<T>(st::weights(n, static_cast<uint32_t>(n + B)));
    if (n > 10) A[7] = kbit::Elem<T>::store(std::numeric_limits<float>::quiet_NaN());
    std::vector<uint8_t> want;
    std::vector<float> want_absmax;
    ref_quantize(q, A, B, want, want_absmax);

    st::Buf<T> dA(A, offset);
    st::Buf<uint8_t> dout(want.size(), offset);
    st::Buf<float> dabs(want_absmax.size(), offset);
    st::kbit_ok(kbit_quantize_4bit(static_cast<int32_t>(q), kbit::Elem<T>::dtype, dA.get(), dabs.get(), dout.get(), B, n,
                                   nullptr),
                "kbit_quantize_4bit");
    CHECK(st::first_difference(dabs.download(), want_absmax) == -1);
    CHECK(st::first_difference(dout.download(), want) == -1);

    st::Buf<T> dback(n, offset);
    st::kbit_ok(kbit_dequantize_4bit(static_cast<int32_t>(q), kbit::Elem<T>::dtype, dout.get(), dabs.get(), dback.get(),
                                     B, n, nullptr),
                "kbit_dequantize_4bit");
    CHECK(st::first_difference(dback.download(), ref_dequantize<T>(q, want, want_absmax, B, n)) == -1);
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
    std::vector<uint8_t> want;
    std::vector<float> want_absmax;
    ref_quantize(QuantType::NF4, A, B, want, want_absmax);
    st::Buf<kbit_bf16> dA(A);
    st::Buf<uint8_t> dout(want.size());
    st::Buf<float> dabs(want_absmax.size());
    st::kbit_ok(cquantize_blockwise_bf16_nf4(nullptr, dA.get(), dabs.get(), dout.get(), B, n), "cquantize_blockwise_bf16_nf4");
    CHECK(st::first_difference(dout.download(), want) == -1);
    cudaStream_t s;
    st::cuda_ok(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "stream");
    st::Buf<kbit_bf16> dback(n);
    st::kbit_ok(cdequantize_blockwise_bf16_nf4(nullptr, dout.get(), dabs.get(), dback.get(), B, n, s),
                "cdequantize_blockwise_bf16_nf4");
    st::kbit_ok(kbit_stream_synchronize(s), "kbit_stream_synchronize");
    CHECK(st::first_difference(dback.download(), ref_dequantize<kbit_bf16>(QuantType::NF4, want, want_absmax, B, n)) == -1);
    cudaStreamDestroy(s);
}

TEST_CASE("cuda nested absmax: bitsandbytes double quantization and its inverse, exact", "[cuda][4bit][nested]") {
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
            double sum = 0.0;
            for (float x : absmax) sum += x;
            const float offset = static_cast<float>(sum / static_cast<double>(blocks));
            const int64_t nblocks = (blocks + nb - 1) / nb;
            std::vector<float> want_nested(nblocks);
            std::vector<uint8_t> want_q(blocks);
            for (int64_t g = 0; g < nblocks; ++g) {
                float a = 0.0f;
                for (int64_t b = g * nb; b < std::min(blocks, (g + 1) * nb); ++b) a = std::fmax(a, std::fabs(absmax[b] - offset));
                want_nested[g] = a;
                const float r = 1.0f / a;
                for (int64_t b = g * nb; b < std::min(blocks, (g + 1) * nb); ++b)
                    want_q[b] = kbit::code8_index(code.data(), (absmax[b] - offset) * r);
            }
            st::Buf<float> dabs(absmax), dcode(code), dnested(nblocks), doff(1);
            st::Buf<uint8_t> dq(blocks);
            st::kbit_ok(kbit_nested_absmax_quantize(dabs.get(), dcode.get(), dq.get(), dnested.get(), doff.get(), blocks, nb,
                                                    nullptr),
                        "kbit_nested_absmax_quantize");
            CHECK(st::bits_of(doff.download()[0]) == st::bits_of(offset));
            CHECK(st::first_difference(dnested.download(), want_nested) == -1);
            CHECK(st::first_difference(dq.download(), want_q) == -1);

            std::vector<float> want_back(blocks);
            for (int64_t b = 0; b < blocks; ++b) {
                const float prod = code[want_q[b]] * want_nested[b / nb];
                want_back[b] = prod + offset;
            }
            st::Buf<float> dback(blocks);
            st::kbit_ok(kbit_nested_absmax_dequantize(dq.get(), dcode.get(), dnested.get(), offset, dback.get(), blocks, nb,
                                                      nullptr),
                        "kbit_nested_absmax_dequantize");
            CHECK(st::first_difference(dback.download(), want_back) == -1);
        }
}

namespace {

template <class T>
void check_torchao(int64_t n, int64_t bs, int64_t sbs) {
    INFO("torchao " << kbit::Elem<T>::name << " n " << n << " block_size " << bs << " scaler_block_size " << sbs);
    const std::vector<T> w = st::to_elems<T>(st::weights(n, static_cast<uint32_t>(n + bs), false));
    const int64_t blocks = n / bs, sblocks = blocks / sbs;
    const float lit[16] = {KBIT_TORCHAO_NF4_VALUES};
    float nf4[16];
    for (int j = 0; j < 16; ++j) nf4[j] = kbit::round_to<T>(lit[j]);
    // host evaluation of torchao_math.h, in index order
    std::vector<float> s(blocks);
    double sum = 0.0;
    for (int64_t b = 0; b < blocks; ++b) {
        float acc = 0.0f;
        for (int64_t i = b * bs; i < (b + 1) * bs; ++i) acc = kbit::torch_absmax_step(acc, kbit::Elem<T>::load(w[i]));
        s[b] = acc;
        sum += acc;
    }
    const float mean = kbit::torchao_mean<T>(sum, blocks);
    std::vector<int8_t> want_q(blocks);
    std::vector<T> want_f(sblocks);
    for (int64_t g = 0; g < sblocks; ++g) {
        float amax = 0.0f;
        for (int64_t b = g * sbs; b < (g + 1) * sbs; ++b) amax = kbit::torch_absmax_step(amax, kbit::t_sub<T>(s[b], mean));
        const float f = kbit::torchao_factor<T>(amax);
        want_f[g] = kbit::Elem<T>::store(f);
        for (int64_t b = g * sbs; b < (g + 1) * sbs; ++b) want_q[b] = kbit::torchao_scaler_code<T>(kbit::t_sub<T>(s[b], mean), f);
    }
    std::vector<uint8_t> want_data(n / 2);
    for (int64_t j = 0; j < n / 2; ++j) {
        const float sb = s[2 * j / bs];
        want_data[j] = kbit::pack_nibbles(kbit::torchao_nf4_index<T>(kbit::Elem<T>::load(w[2 * j]), sb, nf4),
                                          kbit::torchao_nf4_index<T>(kbit::Elem<T>::load(w[2 * j + 1]), sb, nf4));
    }
    st::Buf<T> dw(w), dfactor(sblocks), dmean(1), dout(n);
    st::Buf<uint8_t> ddata(n / 2);
    st::Buf<int8_t> dq(blocks);
    kbit_status status;
    if constexpr (std::is_same<T, float>::value)
        status = kbit_quantize_nf4_torchao_fp32(dw.get(), ddata.get(), dq.get(), dfactor.get(), dmean.get(), n, bs, sbs, nullptr);
    else if constexpr (std::is_same<T, kbit_half>::value)
        status = kbit_quantize_nf4_torchao_fp16(dw.get(), ddata.get(), dq.get(), dfactor.get(), dmean.get(), n, bs, sbs, nullptr);
    else
        status = kbit_quantize_nf4_torchao_bf16(dw.get(), ddata.get(), dq.get(), dfactor.get(), dmean.get(), n, bs, sbs, nullptr);
    st::kbit_ok(status, "kbit_quantize_nf4_torchao");
    CHECK(st::bits_of(dmean.download()[0]) == st::bits_of(kbit::Elem<T>::store(mean)));
    CHECK(st::first_difference(dfactor.download(), want_f) == -1);
    CHECK(st::first_difference(dq.download(), want_q) == -1);
    CHECK(st::first_difference(ddata.download(), want_data) == -1);

    std::vector<T> want_w(n);
    for (int64_t j = 0; j < n / 2; ++j) {
        const int64_t b = 2 * j / bs;
        const float scale = kbit::torchao_scaler<T>(want_q[b], kbit::Elem<T>::load(want_f[b / sbs]), mean);
        want_w[2 * j] = kbit::Elem<T>::store(kbit::t_mul<T>(nf4[want_data[j] >> 4], scale));
        want_w[2 * j + 1] = kbit::Elem<T>::store(kbit::t_mul<T>(nf4[want_data[j] & 15], scale));
    }
    if constexpr (std::is_same<T, float>::value)
        status = kbit_dequantize_nf4_torchao_fp32(ddata.get(), dq.get(), dfactor.get(), dmean.get(), dout.get(), n, bs, sbs, nullptr);
    else if constexpr (std::is_same<T, kbit_half>::value)
        status = kbit_dequantize_nf4_torchao_fp16(ddata.get(), dq.get(), dfactor.get(), dmean.get(), dout.get(), n, bs, sbs, nullptr);
    else
        status = kbit_dequantize_nf4_torchao_bf16(ddata.get(), dq.get(), dfactor.get(), dmean.get(), dout.get(), n, bs, sbs, nullptr);
    st::kbit_ok(status, "kbit_dequantize_nf4_torchao");
    CHECK(st::first_difference(dout.download(), want_w) == -1);
}

}  // namespace

TEST_CASE("cuda torchao NF4: quantize and dequantize equal the host evaluation of torchao_math.h", "[cuda][torchao]") {
    for (auto [n, bs, sbs] : {std::tuple<int64_t, int64_t, int64_t>{16384, 64, 256}, {64 * 256 * 3, 64, 256}, {96 * 10, 96, 5}}) {
        check_torchao<float>(n, bs, sbs);
        check_torchao<kbit_half>(n, bs, sbs);
        check_torchao<kbit_bf16>(n, bs, sbs);
    }
}
