// int8 GEMM through cuBLASLt (bitsandbytes' cigemmlt_* and get_context): kbit::ops::context_create,
// context_destroy, context_is_live and igemmlt (kbit_ops_8bit.h), on the caller's stream.
//
// Every result equals the CPU backend's: cuBLASLt computes only the exact int32 product (and only for
// the layouts its int8 kernels document: inner dimension and leading dimensions multiples of 4,
// 16-byte aligned pointers); other shapes, and any case cuBLASLt reports as not supported, use the
// exact fallback kernel of igemm_kernels.cu. The int8 outputs (_8, _8_rowscale) are produced from the
// int32 product by igemm_kernels.cu with the reference's rounding and saturation, not by cuBLASLt's
// int8 output stage, whose rounding is unspecified.
//
// cuBLASLt is loaded with dlopen on the first get_context(), not linked: libkbit_cuda.so then
// loads (and reports "no device" cleanly) on machines without the CUDA toolkit's libraries, and
// only the int8 GEMM needs libcublasLt.so.<major> of the toolkit kbit was built with: the system's (the
// library search path), else the one in the directory KBIT_CUBLASLT_DIR names (the Python package sets
// it to the nvidia-cublas wheel's lib/ where that wheel is installed, as torch's CUDA wheels bring it).
// When it cannot be loaded, get_context() returns NULL and kbit_last_error_message() names the library
// and dlerror.
#include <cublasLt.h>
#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>

#include "cuda_check.h"
#include "igemm_kernels.h"
#include "kbit_error.h"
#include "kbit_live_set.h"
#include "kbit_ops_8bit.h"

struct kbit_context {
    cublasLtHandle_t handle;
    int device;
};

namespace kbit::cuda {
namespace {

LiveSet<kbit_context>& live_contexts() {
    static LiveSet<kbit_context> live;  // trivially destructible: usable during exit too
    return live;
}

struct LtApi {
    decltype(&cublasLtCreate) create = nullptr;
    decltype(&cublasLtDestroy) destroy = nullptr;
    decltype(&cublasLtMatmulDescCreate) desc_create = nullptr;
    decltype(&cublasLtMatmulDescDestroy) desc_destroy = nullptr;
    decltype(&cublasLtMatmulDescSetAttribute) desc_set = nullptr;
    decltype(&cublasLtMatrixLayoutCreate) layout_create = nullptr;
    decltype(&cublasLtMatrixLayoutDestroy) layout_destroy = nullptr;
    decltype(&cublasLtMatmul) matmul = nullptr;
    decltype(&cublasLtGetStatusString) status_string = nullptr;
    std::string error;  // empty when loaded
};

template <class F>
bool resolve(void* lib, const char* name, F& fn, std::string& error) {
    fn = reinterpret_cast<F>(dlsym(lib, name));
    if (fn == nullptr && error.empty()) error = std::string("symbol ") + name + " not found";
    return fn != nullptr;
}

const LtApi& lt_api() {
    static const LtApi api = [] {
        LtApi a;
        const std::string soname = "libcublasLt.so." + std::to_string(CUBLAS_VER_MAJOR);
        void* lib = dlopen(soname.c_str(), RTLD_NOW | RTLD_LOCAL);
        const char* error = lib == nullptr ? dlerror() : nullptr;
        std::string why = error != nullptr ? error : "unknown";
        const char* dir = secure_getenv("KBIT_CUBLASLT_DIR");  // ignored by set-user-ID programs
        if (lib == nullptr && dir != nullptr && dir[0] != '\0') {
            const std::string path = std::string(dir) + "/" + soname;
            lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
            error = lib == nullptr ? dlerror() : nullptr;
            why += std::string("; from KBIT_CUBLASLT_DIR: ") + (error != nullptr ? error : "unknown");
        }
        if (lib == nullptr) {
            a.error = "cannot load " + soname + " (cuBLASLt, needed for the int8 GEMM): " + why;
            return a;
        }
        resolve(lib, "cublasLtCreate", a.create, a.error);
        resolve(lib, "cublasLtDestroy", a.destroy, a.error);
        resolve(lib, "cublasLtMatmulDescCreate", a.desc_create, a.error);
        resolve(lib, "cublasLtMatmulDescDestroy", a.desc_destroy, a.error);
        resolve(lib, "cublasLtMatmulDescSetAttribute", a.desc_set, a.error);
        resolve(lib, "cublasLtMatrixLayoutCreate", a.layout_create, a.error);
        resolve(lib, "cublasLtMatrixLayoutDestroy", a.layout_destroy, a.error);
        resolve(lib, "cublasLtMatmul", a.matmul, a.error);
        resolve(lib, "cublasLtGetStatusString", a.status_string, a.error);
        if (!a.error.empty()) a.error = soname + ": " + a.error;
        return a;  // the library stays loaded for the life of the process
    }();
    return api;
}

kbit_status lt_error(const char* fn, const char* what, cublasStatus_t status) {
    const LtApi& api = lt_api();
    const char* text = api.status_string ? api.status_string(status) : "unknown";
    if (status == CUBLAS_STATUS_NOT_SUPPORTED)
        return set_error(KBIT_STATUS_NOT_SUPPORTED, fn, "%s: cuBLASLt does not support this case (%s)", what, text);
    return set_error(KBIT_STATUS_DEVICE_ERROR, fn, "%s failed: %s (cuBLASLt status %d)", what, text,
                     static_cast<int>(status));
}

// Descriptors released on every path.
struct Descs {
    const LtApi& api;
    cublasLtMatmulDesc_t op = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
    ~Descs() {
        if (c) api.layout_destroy(c);
        if (b) api.layout_destroy(b);
        if (a) api.layout_destroy(a);
        if (op) api.desc_destroy(op);
    }
};

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// The exact int32 product through cuBLASLt. bitsandbytes' convention: C (row-major [n][ldc]) = B
// (row-major [n][ldb]) * A^T (A row-major [k][lda]), inner dimension m. In cuBLASLt's column-major
// terms A is an m x k matrix (ld lda) used transposed, B an m x n matrix (ld ldb), C a k x n matrix
// (ld ldc): the "TN" layout that its integer kernels require. Returns KBIT_STATUS_NOT_SUPPORTED
// (without recording an error) when cuBLASLt declines the case (not supported, or a layout it calls
// invalid): the caller then computes the same product with the fallback kernel.
kbit_status lt_s32(const char* fn, kbit_context* context, int m, int n, int k, const int8_t* A, const int8_t* B,
                   int32_t* C, int lda, int ldb, int ldc, cudaStream_t stream) {
    const LtApi& api = lt_api();
    Descs d{api};
    cublasStatus_t st = api.desc_create(&d.op, CUBLAS_COMPUTE_32I, CUDA_R_32I);
    if (st != CUBLAS_STATUS_SUCCESS) return lt_error(fn, "cublasLtMatmulDescCreate", st);
    const cublasOperation_t transa = CUBLAS_OP_T;
    st = api.desc_set(d.op, CUBLASLT_MATMUL_DESC_TRANSA, &transa, sizeof transa);
    if (st != CUBLAS_STATUS_SUCCESS) return lt_error(fn, "cublasLtMatmulDescSetAttribute", st);
    st = api.layout_create(&d.a, CUDA_R_8I, m, k, lda);
    if (st == CUBLAS_STATUS_SUCCESS) st = api.layout_create(&d.b, CUDA_R_8I, m, n, ldb);
    if (st == CUBLAS_STATUS_SUCCESS) st = api.layout_create(&d.c, CUDA_R_32I, k, n, ldc);
    if (st != CUBLAS_STATUS_SUCCESS) return lt_error(fn, "cublasLtMatrixLayoutCreate", st);
    const int32_t one = 1, zero = 0;
    st = api.matmul(context->handle, d.op, &one, A, d.a, B, d.b, &zero, C, d.c, C, d.c, nullptr, nullptr, 0, stream);
    if (st == CUBLAS_STATUS_NOT_SUPPORTED || st == CUBLAS_STATUS_INVALID_VALUE) return KBIT_STATUS_NOT_SUPPORTED;
    if (st != CUBLAS_STATUS_SUCCESS) return lt_error(fn, "cublasLtMatmul", st);
    return KBIT_STATUS_SUCCESS;
}

// The exact int32 product C [n][ldc], by cuBLASLt where its int8 kernels apply, else by the fallback.
kbit_status igemm_s32(const char* fn, kbit_context* context, int m, int n, int k, const int8_t* A, const int8_t* B,
                      int32_t* C, int lda, int ldb, int ldc, cudaStream_t stream) {
    const bool lt_layout = m % 4 == 0 && lda % 4 == 0 && ldb % 4 == 0 && ldc % 4 == 0 && aligned16(A) &&
                           aligned16(B) && aligned16(C);
    if (lt_layout) {
        const kbit_status st = lt_s32(fn, context, m, n, k, A, B, C, lda, ldb, ldc, stream);
        if (st != KBIT_STATUS_NOT_SUPPORTED) return st;
    }
    return igemm_s32_exact(fn, m, n, k, A, lda, B, ldb, C, ldc, stream);
}

}  // namespace
}  // namespace kbit::cuda

namespace kbit::ops {

kbit_context* context_create(const char* fn) {
    const cuda::LtApi& api = cuda::lt_api();
    if (!api.error.empty()) {
        set_error(KBIT_STATUS_NOT_SUPPORTED, fn, "%s", api.error.c_str());
        return nullptr;
    }
    int device = 0;
    if (cudaError_t e = cudaGetDevice(&device); e != cudaSuccess) {
        cuda::device_error(fn, "cudaGetDevice", e);
        return nullptr;
    }
    cublasLtHandle_t handle = nullptr;
    if (cublasStatus_t s = api.create(&handle); s != CUBLAS_STATUS_SUCCESS) {
        cuda::lt_error(fn, "cublasLtCreate", s);
        return nullptr;
    }
    auto* context = new kbit_context{handle, device};
    if (!cuda::live_contexts().add(context)) {
        api.destroy(handle);
        delete context;
        set_error(KBIT_STATUS_OUT_OF_MEMORY, fn, "%zu contexts are live already",
                  cuda::live_contexts().capacity());
        return nullptr;
    }
    return context;
}

bool context_is_live(const kbit_context* context) { return cuda::live_contexts().contains(context); }

kbit_status context_destroy(const char* fn, kbit_context* context) {
    if (kbit_status st = forget_live_context(fn, cuda::live_contexts(), context); st != KBIT_STATUS_SUCCESS) return st;
    const cublasStatus_t s = cuda::lt_api().destroy(context->handle);
    delete context;
    return s == CUBLAS_STATUS_SUCCESS ? KBIT_STATUS_SUCCESS : cuda::lt_error(fn, "cublasLtDestroy", s);
}

kbit_status igemmlt(const char* fn, IgemmOutput output, kbit_context* context, int m, int n, int k, const int8_t* A,
                    const int8_t* B, void* C, const float* row_scale, int lda, int ldb, int ldc, void* stream) {
    const cudaStream_t s = cuda::to_stream(stream);
    if (output == IgemmOutput::Int32) {
        if (m == 0) {  // empty inner dimension: every sum is 0
            KBIT_CUDA_TRY(fn, "cudaMemset2DAsync",
                          cudaMemset2DAsync(C, size_t(ldc) * 4, 0, size_t(k) * 4, size_t(n), s));
            return KBIT_STATUS_SUCCESS;
        }
        return cuda::igemm_s32(fn, context, m, n, k, A, B, static_cast<int32_t*>(C), lda, ldb, ldc, s);
    }
    // int8 outputs: the int32 product into scratch [n][ld] (ld = k rounded up to a multiple of 4, a
    // layout cuBLASLt takes), then the reference's output rules.
    const int ld = (k + 3) / 4 * 4;
    const size_t bytes = size_t(n) * size_t(ld) * 4;
    int32_t* acc = nullptr;
    KBIT_CUDA_TRY(fn, "cudaMallocAsync (int32 product)", cudaMallocAsync(reinterpret_cast<void**>(&acc), bytes, s));
    kbit_status st = KBIT_STATUS_SUCCESS;
    if (m == 0) {
        const cudaError_t e = cudaMemsetAsync(acc, 0, bytes, s);
        if (e != cudaSuccess) st = cuda::device_error(fn, "cudaMemsetAsync", e);
    } else {
        st = cuda::igemm_s32(fn, context, m, n, k, A, B, acc, lda, ldb, ld, s);
    }
    if (st == KBIT_STATUS_SUCCESS)
        st = cuda::igemm_int8_epilogue(fn, acc, ld, n, k, output == IgemmOutput::Int8RowScale ? row_scale : nullptr,
                                       static_cast<int8_t*>(C), ldc, s);
    const cudaError_t freed = cudaFreeAsync(acc, s);
    if (st == KBIT_STATUS_SUCCESS && freed != cudaSuccess)
        return cuda::device_error(fn, "cudaFreeAsync (int32 product)", freed);
    return st;
}

}  // namespace kbit::ops
