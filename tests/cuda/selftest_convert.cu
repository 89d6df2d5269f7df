// CUDA self-test: the device conversions and searches the kernels rely on, checked exhaustively on
// the GPU against the shared host/device definitions (kbit_half.h, kbit_code8.h).
#include <cuda_runtime.h>

#include "code8_search.h"
#include "cuda_elem.cuh"
#include "kbit_code8.h"
#include "selftest_util.h"

namespace {

struct Mismatch {
    unsigned long long count;
    uint32_t first;
};

// Every fp32 bit pattern: hardware-assisted fp16 store == the shared round-to-nearest-even code.
__global__ void fp16_store_kernel(Mismatch* m) {
    for (uint64_t u = uint64_t{blockIdx.x} * blockDim.x + threadIdx.x; u < (uint64_t{1} << 32);
         u += uint64_t{gridDim.x} * blockDim.x) {
        const float x = kbit::bits_float(static_cast<uint32_t>(u));
        if (kbit::cuda::Dev<kbit_half>::store(x).bits != kbit::float_to_half(x)) {
            if (atomicAdd(&m->count, 1ull) == 0) m->first = static_cast<uint32_t>(u);
        }
    }
}

// Every fp16 value: hardware load == the shared conversion (NaN: both NaN).
__global__ void fp16_load_kernel(Mismatch* m) {
    const uint32_t h = blockIdx.x * blockDim.x + threadIdx.x;
    if (h >= 65536) return;
    const float a = kbit::cuda::Dev<kbit_half>::load(kbit_half{static_cast<uint16_t>(h)});
    const float b = kbit::half_to_float(static_cast<uint16_t>(h));
    const bool same = (a != a && b != b) || kbit::float_bits(a) == kbit::float_bits(b);
    if (!same && atomicAdd(&m->count, 1ull) == 0) m->first = h;
}

// The shared-memory search of the 8-bit quantizer == kbit::code8_index, on the device.
__global__ void code8_kernel(const float* table, uint32_t seed, Mismatch* m) {
    __shared__ float t[256], node[128];
    t[threadIdx.x] = table[threadIdx.x];
    const int e = kbit::code8_node_of(threadIdx.x);
    if (e != 0) node[e] = table[threadIdx.x];
    __syncthreads();
    for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < (1u << 26); i += gridDim.x * blockDim.x) {
        uint32_t h = (i ^ seed) * 2654435761u;  // scrambled bit patterns, then mostly values in [-1, 1]
        h ^= h >> 15;
        const float y = (i & 3) ? kbit::bits_float(h) : kbit::bits_float((h & 0x807FFFFFu) | (0x3F000000u - (h >> 29 << 23)));
        if (kbit::code8_index_bfs(node, t, y) != kbit::code8_index(t, y) && atomicAdd(&m->count, 1ull) == 0)
            m->first = kbit::float_bits(y);
    }
}

Mismatch run(void (*launch)(Mismatch*)) {
    Mismatch* d = nullptr;
    st::cuda_ok(cudaMalloc(&d, sizeof(Mismatch)), "cudaMalloc");
    st::cuda_ok(cudaMemset(d, 0, sizeof(Mismatch)), "cudaMemset");
    launch(d);
    st::cuda_ok(cudaGetLastError(), "launch");
    Mismatch h{};
    st::cuda_ok(cudaMemcpy(&h, d, sizeof h, cudaMemcpyDeviceToHost), "copy");
    cudaFree(d);
    return h;
}

}  // namespace

TEST_CASE("cuda fp16 store: hardware conversion with NaN fallback equals kbit::float_to_half for all 2^32 inputs",
          "[cuda][convert]") {
    const Mismatch m = run([](Mismatch* d) { fp16_store_kernel<<<4096, 256>>>(d); });
    INFO("first mismatching input bits 0x" << std::hex << m.first);
    CHECK(m.count == 0);
}

TEST_CASE("cuda fp16 load: hardware conversion equals kbit::half_to_float for all 2^16 inputs", "[cuda][convert]") {
    const Mismatch m = run([](Mismatch* d) { fp16_load_kernel<<<256, 256>>>(d); });
    INFO("first mismatching half 0x" << std::hex << m.first);
    CHECK(m.count == 0);
}

TEST_CASE("cuda code8 search: shared-memory layout equals kbit::code8_index on the device", "[cuda][convert]") {
    std::vector<float> table(256);
    for (int i = 0; i < 256; ++i) table[i] = std::tanh((i - 127.5f) / 40.0f);
    table[10] = table[11];  // a duplicate
    st::Buf<float> dt(table);
    static const float* s_table;
    s_table = dt.get();
    const Mismatch m = run([](Mismatch* d) { code8_kernel<<<1024, 256>>>(s_table, 12345u, d); });
    INFO("first mismatching y bits 0x" << std::hex << m.first);
    CHECK(m.count == 0);
}
