/*
 * kbit_8bit.h — the 8-bit sub-interface: blockwise dynamic 8-bit quantization and LLM.int8 (row-wise
 * int8 quantization with outliers, int8 GEMM, dequantization of the int32 product), plus kbit's
 * additions (64-bit sizes with streams, and the parts of an LLM.int8 layer that bitsandbytes does in
 * Python, so that a C engine can run the whole layer through this ABI).
 *
 * Functions with bitsandbytes names keep bitsandbytes' parameter types and order and return
 * kbit_status where bitsandbytes returns void (cigemmlt_* already returned int: 0 = success, 100 =
 * not supported here, anything else = error), so existing ctypes callers work unchanged.
 *
 * Formats
 *   - Blockwise 8-bit: blocks of `blocksize` consecutive elements (32 ... 4096, powers of two; since
 *     8bit 1.1 up to 16384 on a backend reporting minor >= 1, the CPU backend), one fp32 absmax per block; each element is the index of the nearest entry of a caller-supplied table of
 *     256 non-decreasing floats (`code`). bitsandbytes' usual table is the signed dynamic map
 *     (create_dynamic_map(signed=True)): 0.0 at index 127, 1.0 at 255, -0.99296874 at 0, values spread
 *     over decades 1e-6 ... 1. The table is used verbatim and never written.
 *   - LLM.int8: an fp16 matrix is quantized per row to int8 with scale 127 / row absmax (rowStats);
 *     columns holding an element with |x| >= threshold are outliers, computed in fp16 instead.
 *
 * Versioning: KBIT_8BIT_VERSION_MAJOR/MINOR below; same major = compatible, minors only append to the
 * function list in abi/kbit_8bit.def (rules in abi/ABI.md).
 */
#ifndef KBIT_8BIT_H
#define KBIT_8BIT_H

#include "kbit_core.h"

/* ============================================================================================== */
/* Version and types                                                                              */
/* ============================================================================================== */

/** Major version of the 8-bit interface declared by this header. */
#define KBIT_8BIT_VERSION_MAJOR 1
/** Minor version of the 8-bit interface declared by this header. 1.1 adds no function: a backend
 *  reporting minor 1 or later also takes the 8-bit blockwise blocksizes 8192 and 16384 (up to
 *  KBIT_8BIT_BLOCKSIZE_MAX); one reporting 1.0 rejects them (KBIT_STATUS_INVALID_ARGUMENT). */
#define KBIT_8BIT_VERSION_MINOR 1
/** Largest blocksize of the 8-bit blockwise functions on a backend implementing 8bit 1.1 or later
 *  (powers of two from KBIT_BLOCKSIZE_MIN; 8bit 1.0 stops at KBIT_BLOCKSIZE_MAX). */
#define KBIT_8BIT_BLOCKSIZE_MAX 16384

/** Opaque per-device context for the int8 GEMM (bitsandbytes' Context*: holds a BLAS handle). */
typedef struct kbit_context kbit_context;

KBIT_EXTERN_C_BEGIN

/**
 * Version of the 8-bit interface this backend implements.
 * @return (KBIT_8BIT_VERSION_MAJOR << 16) | KBIT_8BIT_VERSION_MINOR of the backend's build.
 * @since 8bit 1.0
 */
KBIT_API uint32_t kbit_8bit_interface_version(void);

/* BEGIN GENERATED DECLARATIONS (scripts/abi_gen.py from abi/kbit_8bit.def; do not edit) */

/* ---- Blockwise dynamic 8-bit quantization (bitsandbytes names) [blockwise_quantize_8bit] ----- */

/**
 * Quantizes `n` elements of type T to 8-bit codes of the caller's 256-entry table, in blocks of
 * `blocksize` elements (bitsandbytes' blockwise dynamic quantization, device semantics, in IEEE
 * fp32): absmax[b] = max |A[i]| over block b (NaN ignored); y = A[i] * (1.0f / absmax[b]); out[i] =
 * index of the nearest entry of `code`, where the midpoint between neighbours is (code[j] +
 * code[j+1]) * 0.5f in fp32 and a value exactly on a midpoint goes to the even index; y below
 * code[0] gives 0, above code[255] gives 255, NaN gives 0. A zero block gives absmax 0 and every
 * code 0. Device backends run on the legacy default stream; kbit_quantize_blockwise_8bit() takes a
 * stream and 64-bit sizes.
 *
 * Variants:
 *
 * | function                   | element type     |
 * |----------------------------|------------------|
 * | cquantize_blockwise_fp32() | fp32 (float)     |
 * | cquantize_blockwise_fp16() | fp16 (kbit_half) |
 * | cquantize_blockwise_bf16() | bf16 (kbit_bf16) |
 *
 * @param code       device memory, in: 256 non-decreasing floats (for example the signed dynamic map
 *                   of bitsandbytes' create_dynamic_map()); used verbatim, never written.
 * @param A          device memory, in: n elements of T (not modified).
 * @param absmax     device memory, out: ceil(n / blocksize) floats.
 * @param out        device memory, out: n bytes.
 * @param blocksize  32, 64, 128, 256, 512, 1024, 2048 or 4096; on a backend at 8bit 1.1 or later (the
 *                   CPU backend; kbit_8bit_interface_version()) also 8192 or 16384.
 * @param n          number of elements, >= 0.
 * @return KBIT_STATUS_SUCCESS; KBIT_STATUS_INVALID_ARGUMENT for a NULL code, A, absmax or out (n > 0),
 *         n < 0 or another blocksize; KBIT_STATUS_DEVICE_ERROR.
 * @since 8bit 1.0
 */
/** blockwise_quantize_8bit: fp32 (float). */
KBIT_API kbit_status cquantize_blockwise_fp32(float* code, float* A, float* absmax, unsigned char* out,
    int blocksize, const int n);
/** blockwise_quantize_8bit: fp16 (kbit_half). */
KBIT_API kbit_status cquantize_blockwise_fp16(float* code, kbit_half* A, float* absmax, unsigned char* out,
    int blocksize, const int n);
/** blockwise_quantize_8bit: bf16 (kbit_bf16). */
KBIT_API kbit_status cquantize_blockwise_bf16(float* code, kbit_bf16* A, float* absmax, unsigned char* out,
    int blocksize, const int n);

/**
 * Dequantizes `n` 8-bit codes to elements of type T: out[i] = RN(code[A[i]] * absmax[i / blocksize]),
 * one fp32 multiply rounded once to nearest even (exact, identical on every backend).
 *
 * Variants:
 *
 * | function                     | element type     |
 * |------------------------------|------------------|
 * | cdequantize_blockwise_fp32() | fp32 (float)     |
 * | cdequantize_blockwise_fp16() | fp16 (kbit_half) |
 * | cdequantize_blockwise_bf16() | bf16 (kbit_bf16) |
 *
 * @param code       device memory, in: the 256-entry table used to quantize.
 * @param A          device memory, in: n codes.
 * @param absmax     device memory, in: ceil(n / blocksize) floats.
 * @param out        device memory, out: n elements of T.
 * @param blocksize  32, 64, 128, 256, 512, 1024, 2048 or 4096; on a backend at 8bit 1.1 or later (the
 *                   CPU backend; kbit_8bit_interface_version()) also 8192 or 16384.
 * @param n          number of elements, >= 0.
 * @param stream     stream to run on (NULL = default); ignored on the CPU.
 * @return KBIT_STATUS_SUCCESS; KBIT_STATUS_INVALID_ARGUMENT for a NULL pointer (n > 0), n < 0 or
 *         another blocksize; KBIT_STATUS_DEVICE_ERROR.
 * @since 8bit 1.0
 */
/** blockwise_dequantize_8bit: fp32 (float). */
KBIT_API kbit_status cdequantize_blockwise_fp32(float* code, unsigned char* A, float* absmax, float* out,
    int blocksize, const int n, void* stream);
/** blockwise_dequantize_8bit: fp16 (kbit_half). */
KBIT_API kbit_status cdequantize_blockwise_fp16(float* code, unsigned char* A, float* absmax, kbit_half* out,
    int blocksize, const int n, void* stream);
/** blockwise_dequantize_8bit: bf16 (kbit_bf16). */
KBIT_API kbit_status cdequantize_blockwise_bf16(float* code, unsigned char* A, float* absmax, kbit_bf16* out,
    int blocksize, const int n, void* stream);

/* ---- LLM.int8 (bitsandbytes names) [int8_vector_quant] --------------------------------------- */

/**
 * LLM.int8 row-wise quantization of an fp16 matrix (bitsandbytes' int8_vectorwise_quant kernel):
 * per row r, amax = max |A[r][c]| evaluated in fp16 over the elements with |a| < fp16(threshold)
 * (all elements when threshold == 0); rowStats[r] = amax; out[r][c] = rint(a * (127.0f / amax))
 * (round half to even, IEEE division), or 0 when threshold > 0 and |a| >= threshold (fp32 compare).
 * A row whose amax is 0 gives zeros. Outlier columns are not zeroed here; see
 * kbit_int8_vectorwise_quant().
 * @param A          device memory, in: rows * cols fp16, row-major.
 * @param out        device memory, out: rows * cols int8.
 * @param rowStats   device memory, out: rows floats.
 * @param threshold  outlier threshold, >= 0 (0 = no outliers; LLM.int8 uses 6.0).
 * @param rows       number of rows, >= 0.
 * @param cols       number of columns, >= 0.
 * @param stream     stream to run on (NULL = default); ignored on the CPU.
 * @return KBIT_STATUS_SUCCESS; KBIT_STATUS_INVALID_ARGUMENT (NULL pointer with rows * cols > 0,
 *         negative sizes, rows * cols > INT32_MAX, negative or NaN threshold); KBIT_STATUS_DEVICE_ERROR.
 * @since 8bit 1.0
 */
KBIT_API kbit_status cint8_vector_quant(kbit_half* A, int8_t* out, float* rowStats, float threshold, int rows,
    int cols, void* stream);

/**
 * Creates a context holding the backend's BLAS handle for cigemmlt_* (bitsandbytes calls it once
 * per device, with that device current). Release it with kbit_context_destroy().
 * @return a new context, or NULL on failure (kbit_last_error_message() says why).
 * @since 8bit 1.0
 */
KBIT_API kbit_context* get_context(void);

/**
 * Destroys a context from get_context() (bitsandbytes never frees its contexts). NULL is accepted.
 * @param context    context to destroy; must not be used afterwards.
 * @return KBIT_STATUS_SUCCESS or KBIT_STATUS_DEVICE_ERROR.
 * @since 8bit 1.0
 */
KBIT_API kbit_status kbit_context_destroy(kbit_context* context);

/**
 * int8 GEMM in bitsandbytes' calling convention: with the exact int32 sum acc = sum_{i < m}
 * A[o*lda + i] * B[t*ldb + i], stores C[t*ldc + o] for t < n, o < k as the variant's note says
 * (rint rounds half to even, saturate_int8 clamps to [-128, 127]). bitsandbytes computes
 * out = X * W^T with A = W [out_features, K], B = X [tokens, K], m = K, n = tokens, k = out_features.
 *
 * Variants:
 *
 * | function              | C       | out           | note                                                   |
 * |-----------------------|---------|---------------|--------------------------------------------------------|
 * | cigemmlt_32()         | int32_t | int32         | C[t*ldc + o] = acc (exact)                             |
 * | cigemmlt_8()          | int8_t  | int8          | C[t*ldc + o] = saturate_int8(rint(acc))                |
 * | cigemmlt_8_rowscale() | int8_t  | int8_rowscale | C[t*ldc + o] = saturate_int8(rint(acc * row_scale[o])) |
 *
 * @param context    from get_context(); must not be NULL.
 * @param m          shared (inner) dimension K; bitsandbytes passes the input features.
 * @param n          rows of B and of C (bitsandbytes: tokens).
 * @param k          rows of A, columns of C (bitsandbytes: output features).
 * @param A          device memory, in: int8 [k][lda] row-major (the weight), first m of each row used.
 * @param B          device memory, in: int8 [n][ldb] row-major (the activations).
 * @param C          device memory, out: [n][ldc] row-major, first k of each row written; element type
 *                   as in the table (column C).
 * @param row_scale  device memory, in: cigemmlt_8_rowscale: k floats, one per output feature (column
 *                   of C); ignored by the others (bitsandbytes passes NULL).
 * @param lda        elements per row of A, >= m.
 * @param ldb        elements per row of B, >= m.
 * @param ldc        elements per row of C, >= k.
 * @param stream     stream to run on (NULL = default); ignored on the CPU.
 * @return 0 (KBIT_STATUS_SUCCESS); KBIT_STATUS_INVALID_ARGUMENT (NULL pointer with sizes > 0, negative
 *         sizes, leading dimensions too small); KBIT_STATUS_NOT_SUPPORTED (100) when the backend's
 *         BLAS cannot run this shape (bitsandbytes then falls back); KBIT_STATUS_DEVICE_ERROR.
 * @since 8bit 1.0
 */
/** igemmlt: C = int32_t, out = int32; C[t*ldc + o] = acc (exact). */
KBIT_API kbit_status cigemmlt_32(kbit_context* context, int m, int n, int k, const int8_t* A, const int8_t* B,
    void* C, float* row_scale, int lda, int ldb, int ldc, void* stream);
/** igemmlt: C = int8_t, out = int8; C[t*ldc + o] = saturate_int8(rint(acc)). */
KBIT_API kbit_status cigemmlt_8(kbit_context* context, int m, int n, int k, const int8_t* A, const int8_t* B,
    void* C, float* row_scale, int lda, int ldb, int ldc, void* stream);
/** igemmlt: C = int8_t, out = int8_rowscale; C[t*ldc + o] = saturate_int8(rint(acc * row_scale[o])). */
KBIT_API kbit_status cigemmlt_8_rowscale(kbit_context* context, int m, int n, int k, const int8_t* A,
    const int8_t* B, void* C, float* row_scale, int lda, int ldb, int ldc, void* stream);

/**
 * Dequantizes an int32 LLM.int8 product to fp16 (exact): out[r][c] = RN_fp16(fmaf(float(A[r][c]) *
 * rowStats[r] * colStats[c], 6.200012e-05f, bias ? float(bias[c]) : 0)) where 6.200012e-05f =
 * fp32(1 / (127 * 127)) and the products are evaluated left to right.
 * @param A          device memory, in: numRows * numCols int32, row-major.
 * @param rowStats   device memory, in: numRows floats (activation row absmax).
 * @param colStats   device memory, in: numCols floats (weight row absmax, bitsandbytes' SCB).
 * @param out        device memory, out: numRows * numCols fp16.
 * @param bias       device memory, in: numCols fp16, or NULL for no bias.
 * @param numRows    rows, >= 0.
 * @param numCols    columns, >= 0.
 * @param stream     stream to run on (NULL = default); ignored on the CPU.
 * @return KBIT_STATUS_SUCCESS; KBIT_STATUS_INVALID_ARGUMENT (NULL required pointer with a non-empty
 *         matrix, negative sizes, numRows * numCols > INT32_MAX); KBIT_STATUS_DEVICE_ERROR.
 * @since 8bit 1.0
 */
KBIT_API kbit_status cdequant_mm_int32_fp16(int* A, float* rowStats, float* colStats, kbit_half* out,
    kbit_half* bias, int numRows, int numCols, void* stream);

/* ---- kbit additions: 64-bit sizes and streams for the blockwise quantizer [quantize_8bit_dtype] ---- */

/**
 * Same as cquantize_blockwise_<dtype> with 64-bit sizes and an explicit stream.
 * @param dtype      KBIT_DTYPE_FP32, KBIT_DTYPE_FP16 or KBIT_DTYPE_BF16: the element type of A.
 * @param code       device memory, in: 256 non-decreasing floats; never written.
 * @param A          device memory, in: n elements of dtype.
 * @param absmax     device memory, out: ceil(n / blocksize) floats.
 * @param out        device memory, out: n bytes.
 * @param blocksize  32, 64, 128, 256, 512, 1024, 2048 or 4096; on a backend at 8bit 1.1 or later (the
 *                   CPU backend; kbit_8bit_interface_version()) also 8192 or 16384.
 * @param n          number of elements, 0 <= n <= 2^62.
 * @param stream     stream to run on (NULL = default); ignored on the CPU.
 * @return KBIT_STATUS_SUCCESS; KBIT_STATUS_INVALID_ARGUMENT (NULL pointer with n > 0, n out of
 *         range, unknown dtype, another blocksize); KBIT_STATUS_DEVICE_ERROR.
 * @since 8bit 1.0
 */
KBIT_API kbit_status kbit_quantize_blockwise_8bit(int32_t dtype, const float* code, const void* A,
    float* absmax, uint8_t* out, int64_t blocksize, int64_t n, void* stream);

/**
 * Same as cdequantize_blockwise_<dtype> with 64-bit sizes.
 * @param dtype      KBIT_DTYPE_FP32, KBIT_DTYPE_FP16 or KBIT_DTYPE_BF16: the element type of out.
 * @param code       device memory, in: the 256-entry table used to quantize.
 * @param A          device memory, in: n codes.
 * @param absmax     device memory, in: ceil(n / blocksize) floats.
 * @param out        device memory, out: n elements of dtype.
 * @param blocksize  32, 64, 128, 256, 512, 1024, 2048 or 4096; on a backend at 8bit 1.1 or later (the
 *                   CPU backend; kbit_8bit_interface_version()) also 8192 or 16384.
 * @param n          number of elements, 0 <= n <= 2^62.
 * @param stream     stream to run on (NULL = default); ignored on the CPU.
 * @return KBIT_STATUS_SUCCESS; KBIT_STATUS_INVALID_ARGUMENT (NULL pointer with n > 0, n out of
 *         range, unknown dtype, another blocksize); KBIT_STATUS_DEVICE_ERROR.
 * @since 8bit 1.0
 */
KBIT_API kbit_status kbit_dequantize_blockwise_8bit(int32_t dtype, const float* code, const uint8_t* A,
    const float* absmax, void* out, int64_t blocksize, int64_t n, void* stream);

/* ---- kbit additions: the host-side parts of LLM.int8 [int8_vectorwise_quant] ----------------- */

/**
 * The whole LLM.int8 activation quantization that bitsandbytes does partly in Python:
 * cint8_vector_quant of A, plus outlier-column detection (outlier_cols[c] = 1 when some |A[r][c]|
 * >= fp16(threshold), compared in fp16, else 0), and, when rows > 1, every outlier column of `out`
 * set to 0 (those columns are computed in fp16 by kbit_int8_outlier_matmul_fp16()). With threshold
 * == 0 there are no outliers.
 * @param A            device memory, in: rows * cols fp16, row-major.
 * @param out          device memory, out: rows * cols int8.
 * @param rowStats     device memory, out: rows floats.
 * @param outlier_cols device memory, out: cols bytes (0 or 1); may be NULL when threshold == 0.
 * @param threshold    outlier threshold, >= 0 (LLM.int8 uses 6.0).
 * @param rows         number of rows, >= 0.
 * @param cols         number of columns, >= 0.
 * @param stream       stream to run on (NULL = default); ignored on the CPU.
 * @return KBIT_STATUS_SUCCESS; KBIT_STATUS_INVALID_ARGUMENT (NULL required pointer with a non-empty
 *         matrix, negative sizes, negative or NaN threshold); KBIT_STATUS_DEVICE_ERROR.
 * @since 8bit 1.0
 */
KBIT_API kbit_status kbit_int8_vectorwise_quant(const kbit_half* A, int8_t* out, float* rowStats,
    uint8_t* outlier_cols, float threshold, int64_t rows, int64_t cols, void* stream);

/**
 * The fp16 outlier part of an LLM.int8 linear layer, accumulated into its output: out[t][o] =
 * RN_fp16(out[t][o] + sum over columns c with outlier_cols[c] != 0 of A[t][c] * fp16(W[o][c] *
 * W_stats[o] * (1/127))), the sum in fp32. Together with kbit_int8_vectorwise_quant, cigemmlt_32
 * and cdequant_mm_int32_fp16 this computes bitsandbytes' Linear8bitLt forward Y = X * W^T + b with
 * outliers.
 * @param A            device memory, in: rows * in_features fp16 activations, row-major.
 * @param W            device memory, in: out_features * in_features int8 weight (row-wise quantized).
 * @param W_stats      device memory, in: out_features floats (weight row absmax, bitsandbytes' SCB).
 * @param outlier_cols device memory, in: in_features bytes from kbit_int8_vectorwise_quant().
 * @param out          device memory, in/out: rows * out_features fp16, row-major.
 * @param rows         rows of A and out, >= 0.
 * @param out_features rows of W, >= 0.
 * @param in_features  columns of A and W, >= 0.
 * @param stream       stream to run on (NULL = default); ignored on the CPU.
 * @return KBIT_STATUS_SUCCESS; KBIT_STATUS_INVALID_ARGUMENT (NULL pointer with a non-empty problem,
 *         negative sizes); KBIT_STATUS_DEVICE_ERROR.
 * @since 8bit 1.0
 */
KBIT_API kbit_status kbit_int8_outlier_matmul_fp16(const kbit_half* A, const int8_t* W, const float* W_stats,
    const uint8_t* outlier_cols, kbit_half* out, int64_t rows, int64_t out_features, int64_t in_features,
    void* stream);

/* END GENERATED DECLARATIONS */

KBIT_EXTERN_C_END

#endif /* KBIT_8BIT_H */
