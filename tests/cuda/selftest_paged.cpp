// CUDA self-test: the optimizer interface's paged-memory functions (managed allocation, fills,
// prefetch both ways, free) and their errors.
#include "selftest_util.h"

TEST_CASE("cuda paged memory: managed allocation, fills, prefetch both ways, free", "[cuda][paged]") {
    const size_t n = (size_t{1} << 20) + 3;
    void* p = cget_managed_ptr(n * sizeof(float));
    INFO(kbit_last_error_message());
    REQUIRE(p != nullptr);
    auto* f = static_cast<float*>(p);
    st::kbit_ok(cfill_fp32(f, nullptr, -2.5f, static_cast<int64_t>(n)), "cfill_fp32");
    st::cuda_ok(cudaDeviceSynchronize(), "sync");
    long wrong = 0;
    for (size_t i = 0; i < n; ++i) wrong += f[i] != -2.5f;  // managed memory is host-addressable
    CHECK(wrong == 0);
    st::kbit_ok(cprefetch(p, n * sizeof(float), 0), "prefetch to device 0");
    st::kbit_ok(cprefetch(p, n * sizeof(float), -1), "prefetch to the host");
    st::kbit_ok(cfill_uint8(static_cast<uint8_t*>(p), nullptr, 0x7F, 1001), "cfill_uint8");
    st::cuda_ok(cudaDeviceSynchronize(), "sync");
    const auto* b = static_cast<const uint8_t*>(p);
    for (int i = 0; i < 1001; ++i) wrong += b[i] != 0x7F;
    CHECK(wrong == 0);
    CHECK(b[1001] == ((kbit::float_bits(-2.5f) >> (8 * (1001 % 4))) & 0xFFu));  // untouched past n
    CHECK(cprefetch(p, 16, 1000) == KBIT_STATUS_DEVICE_ERROR);                   // no such device
    CHECK(std::string(kbit_last_error_message()).rfind("cprefetch: ", 0) == 0);
    st::kbit_ok(kbit_free_managed_ptr(p), "kbit_free_managed_ptr");
    CHECK(kbit_free_managed_ptr(nullptr) == KBIT_STATUS_SUCCESS);
}
