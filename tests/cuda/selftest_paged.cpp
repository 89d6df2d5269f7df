// CUDA self-test: the paged-memory helpers (internal until the optim8 interface is exported).
#include "cuda_ops.h"
#include "selftest_util.h"

TEST_CASE("cuda paged memory: managed allocation, fills, prefetch both ways, free", "[cuda][paged]") {
    const char* fn = "selftest";
    const size_t n = (size_t{1} << 20) + 3;
    void* p = nullptr;
    st::kbit_ok(kbit::cuda::get_managed_ptr(fn, n * sizeof(float), &p), "get_managed_ptr");
    REQUIRE(p != nullptr);
    auto* f = static_cast<float*>(p);
    st::kbit_ok(kbit::cuda::fill_fp32(fn, f, -2.5f, static_cast<int64_t>(n)), "fill_fp32");
    st::cuda_ok(cudaDeviceSynchronize(), "sync");
    long wrong = 0;
    for (size_t i = 0; i < n; ++i) wrong += f[i] != -2.5f;  // managed memory is host-addressable
    CHECK(wrong == 0);
    st::kbit_ok(kbit::cuda::prefetch(fn, p, n * sizeof(float), 0), "prefetch to device 0");
    st::kbit_ok(kbit::cuda::prefetch(fn, p, n * sizeof(float), -1), "prefetch to the host");
    st::kbit_ok(kbit::cuda::fill_uint8(fn, static_cast<uint8_t*>(p), 0x7F, 1001), "fill_uint8");
    st::cuda_ok(cudaDeviceSynchronize(), "sync");
    const auto* b = static_cast<const uint8_t*>(p);
    for (int i = 0; i < 1001; ++i) wrong += b[i] != 0x7F;
    CHECK(wrong == 0);
    CHECK(b[1001] == ((kbit::float_bits(-2.5f) >> (8 * (1001 % 4))) & 0xFFu));  // untouched past n
    st::kbit_ok(kbit::cuda::free_managed_ptr(fn, p), "free_managed_ptr");
    CHECK(kbit::cuda::prefetch(fn, p, 16, 1000) == KBIT_STATUS_DEVICE_ERROR);  // no such device
}
