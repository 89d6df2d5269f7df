// int8 GEMM through cuBLASLt (bitsandbytes' cigemmlt_* and get_context).
//
// cuBLASLt is loaded with dlopen on the first get_context(), not linked: libkbit_cuda.so then
// loads (and reports "no device" cleanly) on machines without the CUDA toolkit's libraries, and
// only the int8 GEMM needs libcublasLt.so.<major> of the toolkit kbit was built with. When it cannot
// be loaded, get_context() returns NULL and kbit_last_error_message() names the library and dlerror.
#include <cublasLt.h>
#include <dlfcn.h>

#include <cstdio>
#include <mutex>
#include <string>

#include "cuda_check.h"
#include "cuda_ops.h"

struct kbit_context {
    cublasLtHandle_t handle = nullptr;
    int device = 0;
};

namespace kbit::cuda {
namespace {

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
        if (lib == nullptr) {
            const char* e = dlerror();
            a.error = "cannot load " + soname + " (cuBLASLt, needed for the int8 GEMM): " + (e ? e : "unknown");
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

}  // namespace

kbit_context* create_context(const char* fn) {
    const LtApi& api = lt_api();
    if (!api.error.empty()) {
        set_error(KBIT_STATUS_NOT_SUPPORTED, fn, "%s", api.error.c_str());
        return nullptr;
    }
    int device = 0;
    if (cudaError_t e = cudaGetDevice(&device); e != cudaSuccess) {
        device_error(fn, "cudaGetDevice", e);
        return nullptr;
    }
    cublasLtHandle_t handle = nullptr;
    if (cublasStatus_t s = api.create(&handle); s != CUBLAS_STATUS_SUCCESS) {
        lt_error(fn, "cublasLtCreate", s);
        return nullptr;
    }
    auto* ctx = new kbit_context;
    ctx->handle = handle;
    ctx->device = device;
    return ctx;
}

kbit_status destroy_context(const char* fn, kbit_context* context) {
    const cublasStatus_t s = lt_api().destroy(context->handle);
    delete context;
    return s == CUBLAS_STATUS_SUCCESS ? KBIT_STATUS_SUCCESS : lt_error(fn, "cublasLtDestroy", s);
}

// bitsandbytes' convention: C (row-major [n][ldc], int32 or int8) = B (row-major [n][ldb]) *
// A^T (A row-major [k][lda]), inner dimension m. In cuBLASLt's column-major terms A is an m x k
// matrix (ld lda) used transposed, B an m x n matrix (ld ldb), C a k x n matrix (ld ldc): the "TN"
// int8 layout that cuBLASLt's integer kernels require.
kbit_status igemmlt(const char* fn, kbit_context* context, IgemmltOutput output, int m, int n, int k,
                    const int8_t* A, const int8_t* B, void* C, const float* row_scale, int lda, int ldb, int ldc,
                    void* stream) {
    const cudaStream_t s = to_stream(stream);
    const bool int8_out = output != IgemmltOutput::Int32;
    const size_t elem = int8_out ? 1 : 4;
    if (m == 0) {  // empty inner dimension: every sum is 0
        KBIT_CUDA_TRY(fn, "cudaMemset2DAsync", cudaMemset2DAsync(C, size_t(ldc) * elem, 0, size_t(k) * elem, size_t(n), s));
        return KBIT_STATUS_SUCCESS;
    }
    const LtApi& api = lt_api();
    Descs d{api};
    const cudaDataType_t scale_type = int8_out ? CUDA_R_32F : CUDA_R_32I;
    cublasStatus_t st = api.desc_create(&d.op, CUBLAS_COMPUTE_32I, scale_type);
    if (st != CUBLAS_STATUS_SUCCESS) return lt_error(fn, "cublasLtMatmulDescCreate", st);
    const cublasOperation_t transa = CUBLAS_OP_T;
    st = api.desc_set(d.op, CUBLASLT_MATMUL_DESC_TRANSA, &transa, sizeof transa);
    if (st == CUBLAS_STATUS_SUCCESS && output == IgemmltOutput::Int8RowScale) {
        const cublasLtPointerMode_t mode = CUBLASLT_POINTER_MODE_ALPHA_DEVICE_VECTOR_BETA_ZERO;
        st = api.desc_set(d.op, CUBLASLT_MATMUL_DESC_POINTER_MODE, &mode, sizeof mode);
    }
    if (st != CUBLAS_STATUS_SUCCESS) return lt_error(fn, "cublasLtMatmulDescSetAttribute", st);
    st = api.layout_create(&d.a, CUDA_R_8I, m, k, lda);
    if (st == CUBLAS_STATUS_SUCCESS) st = api.layout_create(&d.b, CUDA_R_8I, m, n, ldb);
    if (st == CUBLAS_STATUS_SUCCESS) st = api.layout_create(&d.c, int8_out ? CUDA_R_8I : CUDA_R_32I, k, n, ldc);
    if (st != CUBLAS_STATUS_SUCCESS) return lt_error(fn, "cublasLtMatrixLayoutCreate", st);

    const int32_t one_i = 1, zero_i = 0;
    const float one_f = 1.0f, zero_f = 0.0f;
    const void* alpha = output == IgemmltOutput::Int32 ? static_cast<const void*>(&one_i)
                        : output == IgemmltOutput::Int8 ? static_cast<const void*>(&one_f)
                                                        : static_cast<const void*>(row_scale);
    const void* beta = output == IgemmltOutput::Int32 ? static_cast<const void*>(&zero_i) : static_cast<const void*>(&zero_f);
    st = api.matmul(context->handle, d.op, alpha, A, d.a, B, d.b, beta, C, d.c, C, d.c, nullptr, nullptr, 0, s);
    if (st != CUBLAS_STATUS_SUCCESS) return lt_error(fn, "cublasLtMatmul", st);
    return KBIT_STATUS_SUCCESS;
}

}  // namespace kbit::cuda
