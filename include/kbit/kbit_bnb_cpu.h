/*
 * kbit_bnb_cpu.h — bitsandbytes' CPU-library functions, exported by the CPU backend libkbit_cpu.so.
 *
 * bitsandbytes (0.49, 0.50) loads libbitsandbytes_cpu.so on machines without a GPU and calls the
 * functions below through ctypes. libkbit_cpu.so exports them with the same names and parameter
 * order, so it can stand in for that library (a link named libbitsandbytes_cpu.so pointing at
 * libkbit_cpu.so in bitsandbytes' package directory); the device-neutral names bitsandbytes' CUDA
 * path calls are in kbit_4bit.h and kbit_8bit.h.
 *
 * An optional interface of the CPU backend only: it works on host memory, is not in the loader's
 * tables (libkbit.so neither forwards nor stubs it), and a vendor backend need not implement it.
 * Open libkbit_cpu.so itself (dlopen, ctypes.CDLL) to call it.
 *
 * Conventions (kbit_core.h): bitsandbytes declares these functions `void` and ignores their result;
 * kbit returns kbit_status (int32_t), which a caller that ignores it does not notice. Bad arguments
 * return KBIT_STATUS_INVALID_ARGUMENT, set kbit_last_error_message() ("function: reason") and write
 * nothing (bitsandbytes returns silently or aborts). A call with no element succeeds without touching
 * a pointer. No function aborts, prints (unless KBIT_LOG=1) or throws. Where kbit's results differ from
 * bitsandbytes' CPU library the declaration says so (docs/behaviour.md, "bitsandbytes' CPU library").
 *
 * Version: kbit_bnb_cpu_interface_version() returns (KBIT_BNB_CPU_VERSION_MAJOR << 16) |
 * KBIT_BNB_CPU_VERSION_MINOR; the symbols carry the version node KBIT_BNB_CPU_<major>.<minor>.
 */
#ifndef KBIT_BNB_CPU_H
#define KBIT_BNB_CPU_H

#include "kbit_core.h"

/** Major version of the bnb_cpu interface declared by this header. */
#define KBIT_BNB_CPU_VERSION_MAJOR 1
/** Minor version of the bnb_cpu interface declared by this header. */
#define KBIT_BNB_CPU_VERSION_MINOR 0

KBIT_EXTERN_C_BEGIN

/**
 * Version of the bnb_cpu interface this backend implements.
 * @return (KBIT_BNB_CPU_VERSION_MAJOR << 16) | KBIT_BNB_CPU_VERSION_MINOR of the backend's build.
 * @since bnb_cpu 1.0
 */
KBIT_API uint32_t kbit_bnb_cpu_interface_version(void);

/* BEGIN GENERATED DECLARATIONS (scripts/abi_gen.py from abi/kbit_bnb_cpu.def; do not edit) */

/* ---- Blockwise dynamic 8-bit quantization (bitsandbytes' CPU names) [bnb_cpu_quantize_8bit] ---- */

/**
 * Quantizes `n` elements of type T to 8-bit codes of the caller's 256-entry table in blocks of
 * `blocksize` elements, with kbit's exact rule (the one of cquantize_blockwise_fp32() in kbit_8bit.h):
 * absmax[b] = max |A[i]| over block b (NaN ignored; a full all-NaN block stores -FLT_MAX);
 * y = A[i] * (1.0f / absmax[b]) in IEEE fp32; out[i] = the nearest entry of `code` by fp32 midpoints
 * (code[j] + code[j+1]) * 0.5f, a value exactly on a midpoint to the even index; y below code[0] gives 0,
 * above code[255] gives 255, NaN gives 0; a zero block gives absmax 0 and every code 0.
 * bitsandbytes' CPU library instead looks y up in a table of 65536 bins over [-1, 1], which misses the
 * nearest code by less than one bin (2 / 65535) of y wherever a midpoint falls inside a bin, and near
 * zero, where codes lie closer than a bin (docs/behaviour.md, "bitsandbytes' CPU library").
 *
 * Variants:
 *
 * | function                       | element type     |
 * |--------------------------------|------------------|
 * | cquantize_blockwise_cpu_fp32() | fp32 (float)     |
 * | cquantize_blockwise_cpu_bf16() | bf16 (kbit_bf16) |
 * | cquantize_blockwise_cpu_fp16() | fp16 (kbit_half) |
 *
 * @param code       host memory, in: 256 floats (non-decreasing: bitsandbytes' dynamic maps); read only.
 * @param A          host memory, in: n elements of T.
 * @param absmax     host memory, out: ceil(n / blocksize) floats.
 * @param out        host memory, out: n bytes.
 * @param blocksize  any value >= 1 (as bitsandbytes' CPU library).
 * @param n          number of elements, >= 0.
 * @return KBIT_STATUS_SUCCESS; KBIT_STATUS_INVALID_ARGUMENT for a NULL pointer (n > 0), n < 0,
 *         blocksize < 1, or an output overlapping A; nothing is written then.
 * @since bnb_cpu 1.0
 */
/** bnb_cpu_quantize_8bit: fp32 (float). */
KBIT_API kbit_status cquantize_blockwise_cpu_fp32(float* code, float* A, float* absmax, unsigned char* out,
    int64_t blocksize, int64_t n);
/** bnb_cpu_quantize_8bit: bf16 (kbit_bf16). */
KBIT_API kbit_status cquantize_blockwise_cpu_bf16(float* code, kbit_bf16* A, float* absmax,
    unsigned char* out, int64_t blocksize, int64_t n);
/** bnb_cpu_quantize_8bit: fp16 (kbit_half). */
KBIT_API kbit_status cquantize_blockwise_cpu_fp16(float* code, kbit_half* A, float* absmax,
    unsigned char* out, int64_t blocksize, int64_t n);

/**
 * Dequantizes `n` 8-bit codes to elements of type T: out[i] = RN_T(code[A[i]] * absmax[i / blocksize]),
 * one fp32 multiply rounded once to nearest even (bitsandbytes' CPU library gives the same bytes).
 *
 * Variants:
 *
 * | function                         | element type     |
 * |----------------------------------|------------------|
 * | cdequantize_blockwise_cpu_fp32() | fp32 (float)     |
 * | cdequantize_blockwise_cpu_bf16() | bf16 (kbit_bf16) |
 * | cdequantize_blockwise_cpu_fp16() | fp16 (kbit_half) |
 *
 * @param code       host memory, in: the 256-entry table used to quantize.
 * @param A          host memory, in: n codes.
 * @param absmax     host memory, in: ceil(n / blocksize) floats.
 * @param out        host memory, out: n elements of T.
 * @param blocksize  any value >= 1.
 * @param n          number of elements, >= 0.
 * @return KBIT_STATUS_SUCCESS; KBIT_STATUS_INVALID_ARGUMENT for a NULL pointer (n > 0), n < 0,
 *         blocksize < 1, or `out` overlapping an input.
 * @since bnb_cpu 1.0
 */
/** bnb_cpu_dequantize_8bit: fp32 (float). */
KBIT_API kbit_status cdequantize_blockwise_cpu_fp32(float* code, unsigned char* A, const float* absmax,
    float* out, int64_t blocksize, int64_t n);
/** bnb_cpu_dequantize_8bit: bf16 (kbit_bf16). */
KBIT_API kbit_status cdequantize_blockwise_cpu_bf16(float* code, unsigned char* A, const float* absmax,
    kbit_bf16* out, int64_t blocksize, int64_t n);
/** bnb_cpu_dequantize_8bit: fp16 (kbit_half). */
KBIT_API kbit_status cdequantize_blockwise_cpu_fp16(float* code, unsigned char* A, const float* absmax,
    kbit_half* out, int64_t blocksize, int64_t n);

/**
 * Dequantizes an `m` x `n` matrix of packed 4-bit codes (bitsandbytes' quantize_4bit layout: element i
 * of the flat m * n tensor in byte i / 2, the high nibble for even i) to elements of type T:
 * out[i] = RN_T(LUT[nibble(i)] * absmax[i / blocksize]) over flat blocks of m * n elements, LUT the
 * NF4 or FP4 table of kbit_4bit.h (FP4 nibble 1000 is -0.0). bitsandbytes' AVX-512 path indexes absmax
 * per row (row * (n / blocksize) + col / blocksize) even when n % blocksize != 0, where it differs from
 * its own flat definition; kbit always uses the flat one.
 *
 * Variants:
 *
 * | function                             | element type     | format |
 * |--------------------------------------|------------------|--------|
 * | cdequantize_blockwise_cpu_fp4_fp32() | fp32 (float)     | fp4    |
 * | cdequantize_blockwise_cpu_fp4_bf16() | bf16 (kbit_bf16) | fp4    |
 * | cdequantize_blockwise_cpu_fp4_fp16() | fp16 (kbit_half) | fp4    |
 * | cdequantize_blockwise_cpu_nf4_fp32() | fp32 (float)     | nf4    |
 * | cdequantize_blockwise_cpu_nf4_bf16() | bf16 (kbit_bf16) | nf4    |
 * | cdequantize_blockwise_cpu_nf4_fp16() | fp16 (kbit_half) | nf4    |
 *
 * @param A          host memory, in: ceil(m * n / 2) bytes.
 * @param absmax     host memory, in: ceil(m * n / blocksize) floats.
 * @param out        host memory, out: m * n elements of T, row-major.
 * @param blocksize  any value >= 1.
 * @param m          rows, >= 0.
 * @param n          columns, >= 0.
 * @return KBIT_STATUS_SUCCESS; KBIT_STATUS_INVALID_ARGUMENT for a NULL pointer (m * n > 0), negative
 *         m or n, m * n above 2^62, blocksize < 1, or `out` overlapping an input.
 * @since bnb_cpu 1.0
 */
/** bnb_cpu_dequantize_4bit: fp32 (float), fp4. */
KBIT_API kbit_status cdequantize_blockwise_cpu_fp4_fp32(unsigned char* A, const float* absmax, float* out,
    int64_t blocksize, int64_t m, int64_t n);
/** bnb_cpu_dequantize_4bit: bf16 (kbit_bf16), fp4. */
KBIT_API kbit_status cdequantize_blockwise_cpu_fp4_bf16(unsigned char* A, const float* absmax, kbit_bf16* out,
    int64_t blocksize, int64_t m, int64_t n);
/** bnb_cpu_dequantize_4bit: fp16 (kbit_half), fp4. */
KBIT_API kbit_status cdequantize_blockwise_cpu_fp4_fp16(unsigned char* A, const float* absmax, kbit_half* out,
    int64_t blocksize, int64_t m, int64_t n);
/** bnb_cpu_dequantize_4bit: fp32 (float), nf4. */
KBIT_API kbit_status cdequantize_blockwise_cpu_nf4_fp32(unsigned char* A, const float* absmax, float* out,
    int64_t blocksize, int64_t m, int64_t n);
/** bnb_cpu_dequantize_4bit: bf16 (kbit_bf16), nf4. */
KBIT_API kbit_status cdequantize_blockwise_cpu_nf4_bf16(unsigned char* A, const float* absmax, kbit_bf16* out,
    int64_t blocksize, int64_t m, int64_t n);
/** bnb_cpu_dequantize_4bit: fp16 (kbit_half), nf4. */
KBIT_API kbit_status cdequantize_blockwise_cpu_nf4_fp16(unsigned char* A, const float* absmax, kbit_half* out,
    int64_t blocksize, int64_t m, int64_t n);

/* ---- 4-bit GEMV on bitsandbytes' CPU weight layout [bnb_cpu_gemv_4bit] ----------------------- */

/**
 * out[mi * out_stride + o] = RN_bf16(sum over k of x[mi * x_stride + k] * W[o][k]) for mi < M, o < N,
 * with the weight W[o][k] = LUT[q(o, k)] * absmax[(k / blocksize) * N + o] of an N x K 4-bit matrix in
 * the layout bitsandbytes' CPU backend repacks it to (_convert_weight_packed_for_cpu): rows in groups of
 * 32; group g is K / 2 runs of 32 bytes at w + (g * K / 2 + kk) * 32, and byte t of run kk holds
 * (row 32 g + t / 2, column 2 kk + t % 2) in its low nibble and (row 32 g + 16 + t / 2, the same
 * column) in its high nibble. `absmax` is bf16, transposed: [K / blocksize][N].
 * Class F (the accuracy of kbit's own 4-bit GEMV): fp32 products of the bf16 activation and the exact
 * fp32 table value, summed in fp32 per block and scaled once by the block's absmax, the block sums
 * added in fp32, then rounded once to bf16. bitsandbytes' AVX512-BF16 kernel rounds the table to bf16
 * first (up to 2^-9 per weight, outside class F); kbit does not. K == 0 stores +0.
 *
 * Variants:
 *
 * | function                           | format |
 * |------------------------------------|--------|
 * | gemv_4bit_inference_cpu_fp4_bf16() | fp4    |
 * | gemv_4bit_inference_cpu_nf4_bf16() | nf4    |
 *
 * @param M           activation rows, >= 0.
 * @param N           output features, >= 0, a multiple of 32.
 * @param K           input features, >= 0, a multiple of blocksize.
 * @param x           host memory, in: M rows of K bf16, row mi at x + mi * x_stride.
 * @param w           host memory, in: N * K / 2 bytes in the layout above.
 * @param absmax      host memory, in: (K / blocksize) * N bf16.
 * @param out         host memory, out: M rows of N bf16, row mi at out + mi * out_stride.
 * @param blocksize   an even value >= 2 (bitsandbytes quantizes with 32 ... 4096).
 * @param x_stride    elements between activation rows, >= K (ignored when M <= 1).
 * @param out_stride  elements between output rows, >= N (ignored when M <= 1).
 * @return KBIT_STATUS_SUCCESS; KBIT_STATUS_INVALID_ARGUMENT for a NULL pointer (out when M * N > 0; x, w
 *         and absmax when also K > 0), negative sizes, N % 32 != 0, an odd or non-positive blocksize, K % blocksize != 0, short strides, or
 *         `out` overlapping an input (bitsandbytes aborts the process for N % 32 != 0).
 * @since bnb_cpu 1.0
 */
/** bnb_cpu_gemv_4bit: fp4. */
KBIT_API kbit_status gemv_4bit_inference_cpu_fp4_bf16(int64_t M, int64_t N, int64_t K, const kbit_bf16* x,
    const unsigned char* w, const kbit_bf16* absmax, kbit_bf16* out, int64_t blocksize, int64_t x_stride,
    int64_t out_stride);
/** bnb_cpu_gemv_4bit: nf4. */
KBIT_API kbit_status gemv_4bit_inference_cpu_nf4_bf16(int64_t M, int64_t N, int64_t K, const kbit_bf16* x,
    const unsigned char* w, const kbit_bf16* absmax, kbit_bf16* out, int64_t blocksize, int64_t x_stride,
    int64_t out_stride);

/* ---- CPU feature queries [bnb_cpu_has_avx512] ------------------------------------------------ */

/**
 * Whether the CPU backend's kernels use AVX-512 (has_avx512f_cpu) and whether, in addition, the CPU has
 * AVX512-BF16 (has_avx512bf16_cpu): bitsandbytes reads them to choose its CPU code paths. Both answer
 * for the instruction set kbit actually uses, so they are false when KBIT_CPU_ISA caps kbit below
 * avx512 (KBIT_CPU_ISA=avx2 or ref) even on an AVX-512 CPU. kbit's GEMV above does not need
 * AVX512-BF16; it runs on every CPU.
 *
 * Variants:
 *
 * | function             | feature    | note                         |
 * |----------------------|------------|------------------------------|
 * | has_avx512f_cpu()    | avx512f    | AVX-512 F, VL, DQ, BW in use |
 * | has_avx512bf16_cpu() | avx512bf16 | also AVX512-BF16             |
 *
 * @return true or false; never fails.
 * @since bnb_cpu 1.0
 */
/** bnb_cpu_has_avx512: feature = avx512f; AVX-512 F, VL, DQ, BW in use. */
KBIT_API bool has_avx512f_cpu(void);
/** bnb_cpu_has_avx512: feature = avx512bf16; also AVX512-BF16. */
KBIT_API bool has_avx512bf16_cpu(void);

/* END GENERATED DECLARATIONS */

KBIT_EXTERN_C_END

#endif /* KBIT_BNB_CPU_H */
