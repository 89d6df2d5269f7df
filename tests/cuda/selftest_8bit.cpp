// CUDA self-test: blockwise dynamic 8-bit quantize/dequantize against the caller's table — exact bytes
// against kbit::ref for several tables, dtypes, blocksizes, tails and unaligned buffers (the scalar
// load/store paths the conformance suite's aligned buffers do not reach).
#include <algorithm>

#include "ref_8bit.h"
#include "selftest_util.h"

namespace {

template <class T>
void check_8bit(const std::vector<float>& code, int64_t B, int64_t n, size_t offset, const char* table_name) {
    INFO("8-bit " << table_name << " " << kbit::Elem<T>::name << " blocksize " << B << " n " << n << " offset " << offset);
    std::vector<T> A = st::to_elems<T>(st::weights(n, static_cast<uint32_t>(n * 3 + B)));
    if (n > 10) A[9] = kbit::Elem<T>::store(std::numeric_limits<float>::quiet_NaN());
    if (n > 3 * B) std::fill(A.begin() + 2 * B, A.begin() + 3 * B, kbit::Elem<T>::store(std::nanf("")));  // all-NaN block
    const int64_t blocks = (n + B - 1) / B;
    std::vector<float> want_absmax(blocks);
    std::vector<uint8_t> want(n);
    kbit::ref::quantize_blockwise_8bit(code.data(), A.data(), want_absmax.data(), want.data(), B, n);
    std::vector<T> want_back(n);
    kbit::ref::dequantize_blockwise_8bit(code.data(), want.data(), want_absmax.data(), want_back.data(), B, n);

    st::Buf<float> dcode(code), dabs(blocks, offset);
    st::Buf<T> dA(A, offset), dback(n, offset);
    st::Buf<uint8_t> dout(n, offset);
    st::kbit_ok(kbit_quantize_blockwise_8bit(kbit::Elem<T>::dtype, dcode.get(), dA.get(), dabs.get(), dout.get(), B, n, nullptr),
                "kbit_quantize_blockwise_8bit");
    CHECK(st::first_bit_difference(dabs.download(), want_absmax) == -1);
    const std::vector<uint8_t> got = dout.download();
    const long first = st::first_bit_difference(got, want);
    const std::string where = first < 0 ? std::string("none")
                                        : std::to_string(first) + ": got " + std::to_string(got[first]) + " want " +
                                              std::to_string(want[first]);
    INFO("first code difference: " << where);
    CHECK(first == -1);
    st::kbit_ok(kbit_dequantize_blockwise_8bit(kbit::Elem<T>::dtype, dcode.get(), dout.get(), dabs.get(), dback.get(), B, n,
                                               nullptr),
                "kbit_dequantize_blockwise_8bit");
    CHECK(st::first_bit_difference(dback.download(), want_back) == -1);
}

}  // namespace

TEST_CASE("cuda 8-bit blockwise quantize/dequantize: exact bytes, every table, dtype, blocksize, tail", "[cuda][8bit]") {
    std::vector<std::pair<const char*, std::vector<float>>> tables = {{"signed dynamic", st::dynamic_map(true)},
                                                                      {"unsigned dynamic", st::dynamic_map(false)}};
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
    const std::vector<float> code = st::dynamic_map(true);
    const int n = 5000, B = 256;
    const std::vector<float> A = st::weights(n, 1);
    std::vector<float> want_absmax((n + B - 1) / B), want_back(n);
    std::vector<uint8_t> want(n);
    kbit::ref::quantize_blockwise_8bit(code.data(), A.data(), want_absmax.data(), want.data(), B, n);
    kbit::ref::dequantize_blockwise_8bit(code.data(), want.data(), want_absmax.data(), want_back.data(), B, n);
    st::Buf<float> dcode(code), dA(A), dabs((n + B - 1) / B), dback(n);
    st::Buf<uint8_t> dq(n);
    st::kbit_ok(cquantize_blockwise_fp32(dcode.get(), dA.get(), dabs.get(), dq.get(), B, n), "cquantize_blockwise_fp32");
    cudaStream_t s;
    st::cuda_ok(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "stream");
    st::cuda_ok(cudaDeviceSynchronize(), "sync");
    st::kbit_ok(cdequantize_blockwise_fp32(dcode.get(), dq.get(), dabs.get(), dback.get(), B, n, s), "cdequantize_blockwise_fp32");
    st::kbit_ok(kbit_stream_synchronize(s), "kbit_stream_synchronize");
    CHECK(st::first_bit_difference(dq.download(), want) == -1);
    CHECK(st::first_bit_difference(dback.download(), want_back) == -1);
    cudaStreamDestroy(s);
}
