// CUDA self-test: blockwise dynamic 8-bit quantize/dequantize against the caller's table - exact
// bytes against kbit::code8_index on the host, for several tables, dtypes, blocksizes and tails.
#include <algorithm>

#include "kbit_code8.h"
#include "selftest_util.h"

namespace {

std::vector<float> dynamic_map(bool is_signed) {  // bitsandbytes' create_dynamic_map, fp32
    std::vector<float> v;
    for (int d = 0; d <= 6; ++d) {
        const int f = is_signed ? (1 << d) + 1 : (1 << (d + 1)) + 1;
        const float h = (1.0f - 0.1f) / static_cast<float>(f - 1);
        std::vector<float> b(f);
        for (int i = 0; i < f; ++i) b[i] = i < f / 2 ? 0.1f + h * static_cast<float>(i) : 1.0f - h * static_cast<float>(f - 1 - i);
        const float s = static_cast<float>(std::pow(10.0, d - 6));
        for (int i = 0; i + 1 < f; ++i) {
            const float m = (b[i] + b[i + 1]) / 2.0f;
            v.push_back(s * m);
            if (is_signed) v.push_back(-(s * m));
        }
    }
    v.push_back(0.0f);
    v.push_back(1.0f);
    std::sort(v.begin(), v.end());
    return v;
}

template <class T>
void check_8bit(const std::vector<float>& code, int64_t B, int64_t n, size_t offset, const char* table_name) {
    INFO("8-bit " << table_name << " " << kbit::Elem<T>::name << " blocksize " << B << " n " << n << " offset " << offset);
    std::vector<T> A = st::to_elems<T>(st::weights(n, static_cast<uint32_t>(n * 3 + B)));
    if (n > 10) A[9] = kbit::Elem<T>::store(std::numeric_limits<float>::quiet_NaN());
    const int64_t blocks = (n + B - 1) / B;
    std::vector<float> want_absmax(blocks);
    std::vector<uint8_t> want(n);
    for (int64_t b = 0; b < blocks; ++b) {
        const int64_t end = std::min(n, (b + 1) * B);
        float a = 0.0f;
        for (int64_t i = b * B; i < end; ++i) a = std::fmax(a, std::fabs(kbit::Elem<T>::load(A[i])));
        want_absmax[b] = a;
        const float r = 1.0f / a;
        for (int64_t i = b * B; i < end; ++i) want[i] = kbit::code8_index(code.data(), kbit::Elem<T>::load(A[i]) * r);
    }
    std::vector<T> want_back(n);
    for (int64_t i = 0; i < n; ++i) want_back[i] = kbit::Elem<T>::store(code[want[i]] * want_absmax[i / B]);

    st::Buf<float> dcode(code), dabs(blocks, offset);
    st::Buf<T> dA(A, offset), dback(n, offset);
    st::Buf<uint8_t> dout(n, offset);
    st::kbit_ok(kbit_quantize_blockwise_8bit(kbit::Elem<T>::dtype, dcode.get(), dA.get(), dabs.get(), dout.get(), B, n, nullptr),
                "kbit_quantize_blockwise_8bit");
    CHECK(st::first_difference(dabs.download(), want_absmax) == -1);
    const std::vector<uint8_t> got = dout.download();
    const long first = st::first_difference(got, want);
    const std::string where = first < 0 ? std::string("none")
                                        : std::to_string(first) + ": got " + std::to_string(got[first]) + " want " +
                                              std::to_string(want[first]);
    INFO("first code difference: " << where);
    CHECK(first == -1);
    st::kbit_ok(kbit_dequantize_blockwise_8bit(kbit::Elem<T>::dtype, dcode.get(), dout.get(), dabs.get(), dback.get(), B, n,
                                               nullptr),
                "kbit_dequantize_blockwise_8bit");
    CHECK(st::first_difference(dback.download(), want_back) == -1);
}

}  // namespace

TEST_CASE("cuda 8-bit blockwise quantize/dequantize: exact bytes, every table, dtype, blocksize, tail", "[cuda][8bit]") {
    std::vector<std::pair<const char*, std::vector<float>>> tables = {{"signed dynamic", dynamic_map(true)},
                                                                      {"unsigned dynamic", dynamic_map(false)}};
    std::vector<float> runs(256);
    for (int i = 0; i < 256; ++i) runs[i] = static_cast<float>(i / 8 - 16) / 16.0f;  // runs of equal entries
    tables.emplace_back("runs", runs);
    for (const auto& [name, code] : tables)
        for (int64_t B : {32, 64, 256, 2048, 4096})
            for (int64_t n : {int64_t{1}, int64_t{100}, int64_t{4099}, int64_t{1} << 20})
                for (size_t offset : {size_t{0}, size_t{1}}) {
                    check_8bit<float>(code, B, n, offset, name);
                    check_8bit<kbit_half>(code, B, n, offset, name);
                    check_8bit<kbit_bf16>(code, B, n, offset, name);
                }
}

TEST_CASE("cuda 8-bit bitsandbytes names: default stream quantize, streamed dequantize", "[cuda][8bit]") {
    const std::vector<float> code = dynamic_map(true);
    const int n = 5000, B = 256;
    const std::vector<float> A = st::weights(n, 1);
    st::Buf<float> dcode(code), dA(A), dabs((n + B - 1) / B), dback(n);
    st::Buf<uint8_t> dq(n);
    st::kbit_ok(cquantize_blockwise_fp32(dcode.get(), dA.get(), dabs.get(), dq.get(), B, n), "cquantize_blockwise_fp32");
    cudaStream_t s;
    st::cuda_ok(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "stream");
    st::cuda_ok(cudaDeviceSynchronize(), "sync");
    st::kbit_ok(cdequantize_blockwise_fp32(dcode.get(), dq.get(), dabs.get(), dback.get(), B, n, s), "cdequantize_blockwise_fp32");
    st::kbit_ok(kbit_stream_synchronize(s), "kbit_stream_synchronize");
    const std::vector<float> back = dback.download();
    const std::vector<float> absmax = dabs.download();
    for (int i = 0; i < n; ++i) CHECK(std::fabs(back[i] - A[i]) <= 0.02f * absmax[i / B]);  // dynamic map: < 1.6% of absmax
    cudaStreamDestroy(s);
}
