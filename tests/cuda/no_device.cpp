// On a machine without an NVIDIA driver or GPU (the CI machine): libkbit_cuda.so loads, probes 0,
// explains why, and every call fails with a status and a message instead of crashing or exiting.
// Exits 77 (skipped) when the machine does have a usable GPU.
#include <dlfcn.h>

#include <cstdio>
#include <string>

#include <catch2/catch.hpp>

#include "catch_run.h"
#include "kbit/kbit.h"

namespace {

void* g_lib = nullptr;

template <class F>
F fn(const char* name) {
    void* p = dlsym(g_lib, name);
    REQUIRE(p != nullptr);
    return reinterpret_cast<F>(p);
}

std::string last_error() { return fn<const char* (*)()>("kbit_last_error_message")(); }

bool starts_with(const std::string& s, const std::string& prefix) { return s.compare(0, prefix.size(), prefix) == 0; }

}  // namespace

TEST_CASE("cuda without device: identity and interfaces", "[cuda][no_device]") {
    CHECK(std::string(fn<const char* (*)()>("kbit_backend_name")()) == "cuda");
    CHECK(fn<uint32_t (*)()>("kbit_core_interface_version")() ==
          KBIT_MAKE_VERSION(KBIT_CORE_VERSION_MAJOR, KBIT_CORE_VERSION_MINOR));
    // 4bit 1.1: not yet 1.2's kbit_gemm_4bit_precision; 8bit 1.0: not 1.1's larger blockwise blocksizes.
    CHECK(fn<uint32_t (*)()>("kbit_4bit_interface_version")() ==
          KBIT_MAKE_VERSION(KBIT_4BIT_VERSION_MAJOR, KBIT_CUDA_4BIT_MINOR));
    CHECK(fn<uint32_t (*)()>("kbit_8bit_interface_version")() ==
          KBIT_MAKE_VERSION(KBIT_8BIT_VERSION_MAJOR, KBIT_CUDA_8BIT_MINOR));
    CHECK(fn<uint32_t (*)()>("kbit_optim8_interface_version")() ==
          KBIT_MAKE_VERSION(KBIT_OPTIM8_VERSION_MAJOR, KBIT_OPTIM8_VERSION_MINOR));
}

TEST_CASE("cuda without device: probe is 0 and info says why", "[cuda][no_device]") {
    auto probe = fn<int32_t (*)()>("kbit_backend_probe");
    CHECK(probe() == 0);
    CHECK(probe() == 0);  // stable, no side effect
    const std::string info = fn<const char* (*)()>("kbit_backend_info")();
    INFO(info);
    CHECK(starts_with(info, "CUDA backend unavailable: "));
    CHECK(info.find("kernels for sm_") != std::string::npos);
}

TEST_CASE("cuda without device: memory calls return KBIT_STATUS_DEVICE_ERROR", "[cuda][no_device]") {
    void* p = reinterpret_cast<void*>(0x1234);
    CHECK(fn<kbit_status (*)(void**, size_t)>("kbit_device_malloc")(&p, 64) == KBIT_STATUS_DEVICE_ERROR);
    CHECK(p == reinterpret_cast<void*>(0x1234));  // untouched
    CHECK(starts_with(last_error(), "kbit_device_malloc: cudaMalloc of 64 bytes: cuda"));

    char host[16] = {};
    auto memcpy_fn = fn<kbit_status (*)(void*, const void*, size_t, int32_t)>("kbit_memcpy");
    CHECK(memcpy_fn(reinterpret_cast<void*>(0x1000), host, 16, KBIT_MEMCPY_HOST_TO_DEVICE) == KBIT_STATUS_DEVICE_ERROR);
    CHECK(starts_with(last_error(), "kbit_memcpy: cudaMemcpy: cuda"));
    CHECK(memcpy_fn(host, host, 0, KBIT_MEMCPY_HOST_TO_DEVICE) == KBIT_STATUS_SUCCESS);  // nothing to do

    CHECK(fn<kbit_status (*)(void*)>("kbit_stream_synchronize")(nullptr) == KBIT_STATUS_DEVICE_ERROR);
    CHECK(starts_with(last_error(), "kbit_stream_synchronize: cudaStreamSynchronize: cuda"));
    CHECK(fn<kbit_status (*)(void*)>("kbit_device_free")(nullptr) == KBIT_STATUS_SUCCESS);
}

TEST_CASE("cuda without device: kernel launches fail cleanly and name the function", "[cuda][no_device]") {
    // Device pointers are never dereferenced on the host; the launch itself fails.
    auto* A = reinterpret_cast<unsigned char*>(0x10000);
    auto* absmax = reinterpret_cast<float*>(0x20000);
    auto* out = reinterpret_cast<float*>(0x30000);
    auto deq = fn<kbit_status (*)(float*, unsigned char*, float*, float*, int, int, void*)>(
        "cdequantize_blockwise_fp32_nf4");
    CHECK(deq(nullptr, A, absmax, out, 64, 1000, nullptr) == KBIT_STATUS_DEVICE_ERROR);
    CHECK(starts_with(last_error(), "cdequantize_blockwise_fp32_nf4: dequantize_4bit_kernel: cuda"));

    auto q8 = fn<kbit_status (*)(float*, float*, float*, unsigned char*, int, int)>("cquantize_blockwise_fp32");
    auto* code = reinterpret_cast<float*>(0x40000);  // apart from absmax: an output over the table is refused
    CHECK(q8(code, out, absmax, A, 256, 1000) == KBIT_STATUS_DEVICE_ERROR);
    CHECK(starts_with(last_error(), "cquantize_blockwise_fp32: quantize_blockwise_kernel (8-bit): cuda"));

    // Repeated failures keep failing the same way (no sticky state, no exit).
    for (int i = 0; i < 3; ++i) CHECK(deq(nullptr, A, absmax, out, 64, 1000, nullptr) == KBIT_STATUS_DEVICE_ERROR);
}

TEST_CASE("cuda without device: argument checks need no device", "[cuda][no_device]") {
    auto q4 = fn<kbit_status (*)(float*, float*, float*, unsigned char*, int, int)>("cquantize_blockwise_fp32_nf4");
    CHECK(q4(nullptr, nullptr, nullptr, nullptr, 48, 10) == KBIT_STATUS_INVALID_ARGUMENT);
    CHECK(last_error() == "cquantize_blockwise_fp32_nf4: blocksize 48 is not one of 32, 64, 128, 256, 512, 1024, 2048, 4096");
    CHECK(q4(nullptr, nullptr, nullptr, nullptr, 64, 0) == KBIT_STATUS_SUCCESS);  // empty: nothing touched
    auto igemm = fn<kbit_status (*)(kbit_context*, int, int, int, const int8_t*, const int8_t*, void*, float*, int, int,
                                    int, void*)>("cigemmlt_32");
    CHECK(igemm(nullptr, 4, 4, 4, nullptr, nullptr, nullptr, nullptr, 4, 4, 4, nullptr) == KBIT_STATUS_INVALID_ARGUMENT);
    CHECK(last_error() == "cigemmlt_32: context is NULL");
}

TEST_CASE("cuda without device: optimizers, fills and managed memory fail cleanly", "[cuda][no_device]") {
    auto* p = reinterpret_cast<float*>(0x10000);
    auto* s = reinterpret_cast<unsigned char*>(0x20000);
    auto* q = reinterpret_cast<float*>(0x30000);
    auto adam8 = fn<kbit_status (*)(float*, float*, unsigned char*, unsigned char*, float, float, float, float, float, int,
                                    float, float*, float*, float*, float*, float, float, bool, int)>(
        "cadam_8bit_blockwise_grad_fp32");
    CHECK(adam8(p, p, s, s, 0.9f, 0.999f, 0.0f, 0.0f, 1e-8f, 1, 1e-3f, q, q, q, q, 0.0f, 1.0f, false, 1000) ==
          KBIT_STATUS_DEVICE_ERROR);
    CHECK(starts_with(last_error(), "cadam_8bit_blockwise_grad_fp32: blockwise8_kernel: cuda"));
    auto adam32 = fn<kbit_status (*)(float*, float*, float*, float*, float*, float, float, float, float, float, float,
                                     float, float, int, float, float, bool, int)>("cadam32bit_grad_fp32");
    CHECK(adam32(p, p, q, q, nullptr, 0.0f, 0.0f, 0.9f, 0.999f, 0.0f, 0.0f, 1e-8f, 0.0f, 1, 1e-3f, 1.0f, false, 1000) ==
          KBIT_STATUS_DEVICE_ERROR);
    CHECK(starts_with(last_error(), "cadam32bit_grad_fp32: update32_kernel: cuda"));
    // With clipping the scratch allocation is the first device call to fail.
    CHECK(adam32(p, p, q, q, q, 1.0f, 1.0f, 0.9f, 0.999f, 0.0f, 0.0f, 1e-8f, 0.0f, 1, 1e-3f, 1.0f, false, 1000) ==
          KBIT_STATUS_DEVICE_ERROR);
    CHECK(starts_with(last_error(), "cadam32bit_grad_fp32: cudaMallocAsync (update-norm scratch): cuda"));
    // Argument checks come first and need no device.
    CHECK(adam32(p, p, q, q, nullptr, 1.0f, 1.0f, 0.9f, 0.999f, 0.0f, 0.0f, 1e-8f, 0.0f, 1, 1e-3f, 1.0f, false, 1000) ==
          KBIT_STATUS_INVALID_ARGUMENT);
    CHECK(last_error() == "cadam32bit_grad_fp32: unorm is NULL but max_unorm is 1 > 0");

    CHECK(fn<void* (*)(size_t)>("cget_managed_ptr")(4096) == nullptr);
    CHECK(starts_with(last_error(), "cget_managed_ptr: cudaMallocManaged of 4096 bytes: cuda"));
    CHECK(fn<void* (*)(size_t)>("cget_managed_ptr")(SIZE_MAX) == nullptr);  // refused before CUDA sees it
    CHECK(last_error() == "cget_managed_ptr: " + std::to_string(SIZE_MAX) + " bytes cannot be allocated (more than 2^48)");
    CHECK(fn<void* (*)(size_t)>("cget_managed_ptr")(0) == nullptr);
    CHECK(last_error() == "cget_managed_ptr: bytes is 0, must be > 0");
    auto fill = fn<kbit_status (*)(float*, float*, float, int64_t)>("cfill_fp32");
    CHECK(fill(p, nullptr, 1.0f, 100) == KBIT_STATUS_DEVICE_ERROR);
    CHECK(starts_with(last_error(), "cfill_fp32: fill_fp32_kernel: cuda"));
    CHECK(fill(nullptr, nullptr, 1.0f, 0) == KBIT_STATUS_SUCCESS);
    auto prefetch = fn<kbit_status (*)(void*, size_t, int)>("cprefetch");
    CHECK(prefetch(p, 64, 0) == KBIT_STATUS_DEVICE_ERROR);
    CHECK(starts_with(last_error(), "cprefetch: "));
    CHECK(prefetch(nullptr, 0, 0) == KBIT_STATUS_SUCCESS);
    CHECK(fn<kbit_status (*)(void*)>("kbit_free_managed_ptr")(nullptr) == KBIT_STATUS_SUCCESS);
}

TEST_CASE("cuda without device: torchao and int8 host-side steps fail cleanly", "[cuda][no_device]") {
    auto* w = reinterpret_cast<float*>(0x10000);
    auto* d = reinterpret_cast<uint8_t*>(0x20000);
    auto* q = reinterpret_cast<int8_t*>(0x30000);
    auto tq = fn<kbit_status (*)(const float*, uint8_t*, int8_t*, float*, float*, int64_t, int64_t, int64_t, void*)>(
        "kbit_quantize_nf4_torchao_fp32");
    CHECK(tq(w, d, q, w, w, 64 * 256, 64, 256, nullptr) == KBIT_STATUS_DEVICE_ERROR);
    CHECK(starts_with(last_error(), "kbit_quantize_nf4_torchao_fp32: cudaMallocAsync (block scalers): cuda"));
    auto vq = fn<kbit_status (*)(const kbit_half*, int8_t*, float*, uint8_t*, float, int64_t, int64_t, void*)>(
        "kbit_int8_vectorwise_quant");
    CHECK(vq(nullptr, nullptr, nullptr, d, 6.0f, 0, 16, nullptr) == KBIT_STATUS_DEVICE_ERROR);  // zeroes the flags
    CHECK(starts_with(last_error(), "kbit_int8_vectorwise_quant: cudaMemsetAsync: cuda"));
}

TEST_CASE("cuda without device: get_context returns NULL with a reason", "[cuda][no_device]") {
    CHECK(fn<kbit_context* (*)()>("get_context")() == nullptr);
    CHECK(starts_with(last_error(), "get_context: "));
    CHECK(fn<kbit_status (*)(kbit_context*)>("kbit_context_destroy")(nullptr) == KBIT_STATUS_SUCCESS);
}

int main(int argc, char** argv) {
    if (argc < 2) {
        std::fprintf(stderr, "usage: %s path/to/libkbit_cuda.so [catch options]\n", argv[0]);
        return 2;
    }
    g_lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (g_lib == nullptr) {
        std::fprintf(stderr, "cannot load %s: %s\n", argv[1], dlerror());
        return 1;
    }
    auto probe = reinterpret_cast<int32_t (*)()>(dlsym(g_lib, "kbit_backend_probe"));
    if (probe != nullptr && probe() > 0) {
        std::printf("a usable CUDA device is present; this test is for machines without one (skipped)\n");
        return 77;
    }
    return run_catch(argc - 1, argv + 1);  // the library path stands in for the program name
}
