/*
 * kbit_4bit.h — the 4-bit sub-interface: NF4 / FP4 blockwise quantization, dequantization, the 4-bit
 * GEMV and GEMM of bitsandbytes, and kbit's additions (64-bit sizes with streams, bitsandbytes double
 * quantization, torchao's NF4Tensor format, the grouped mixture-of-experts GEMM, the GEMM with an explicit
 * precision class).
 *
 * Functions with bitsandbytes names keep bitsandbytes' parameter types and order and return
 * kbit_status where bitsandbytes returns void, so existing ctypes callers work unchanged.
 *
 * Formats
 *   - A tensor of n elements is cut into blocks of `blocksize` consecutive elements (row-major,
 *     flattened); block b has one fp32 scale absmax[b] = max |x| over its valid elements. The last
 *     block may be partial. Supported blocksizes: 32, 64, 128, 256, 512, 1024, 2048, 4096.
 *   - Packing: element 2j is the high nibble (bits 7..4) of byte j, element 2j+1 the low nibble.
 *   - NF4 (KBIT_QUANT_NF4): the 16 QLoRA normal-float levels in ascending order, -1.0 ... 0.0 (index 7)
 *     ... 1.0. An element y = x / absmax gets the number of decision thresholds it exceeds; the 15
 *     thresholds are bitsandbytes' decimal literals rounded to fp32 (src/common/kbit_formats.h lists their bits).
 *   - FP4 (KBIT_QUANT_FP4): bit 3 = sign, bits 2..0 = magnitude code for 0, 1/192, 2/3, 1, 1/3, 1/2,
 *     1/6, 1/4 (codes 000..111), chosen by bitsandbytes' threshold tree.
 *   - Quantizers evaluate y = x * (1.0f / absmax) in IEEE fp32 and compare against fixed fp32 literals,
 *     so every kbit backend produces the same bytes. Dequantizers compute one fp32 product and round
 *     it to the output type to nearest even.
 *
 * Versioning: KBIT_4BIT_VERSION_MAJOR/MINOR below; same major = compatible, minors only append to the
 * function list in abi/kbit_4bit.def (rules in abi/ABI.md).
 */
#ifndef KBIT_4BIT_H
#define KBIT_4BIT_H

#include "kbit_core.h"

/* ============================================================================================== */
/* Version                                                                                        */
/* ============================================================================================== */

/** Major version of the 4-bit interface declared by this header. */
#define KBIT_4BIT_VERSION_MAJOR 1
/** Minor version of the 4-bit interface declared by this header. */
#define KBIT_4BIT_VERSION_MINOR 3

/** Quantization type selector (passed as int32_t); values match bitsandbytes' DATA_TYPE. */
#define KBIT_QUANT_FP4 1
/** NF4 quantization type (see KBIT_QUANT_FP4). */
#define KBIT_QUANT_NF4 2

/** Precision class of kbit_gemm_4bit_precision() (passed as int32_t): exactly cgemm_4bit_<dtype>'s result.
 * @since 4bit 1.2 */
#define KBIT_PRECISION_EXACT 0
/** Precision class of kbit_gemm_4bit_precision(): weights and activations rounded to bf16, their products
 * exact, fp32 sums (behaviour.md §3.7); what a bf16 matmul of the dequantized weight computes.
 * A backend at 4bit 1.2 rejects it. @since 4bit 1.3 */
#define KBIT_PRECISION_BF16 1
/** Precision class of kbit_gemm_4bit_precision(): activations cut to int8 per 32 elements, exact integer dot
 * products with the int8 levels of the weights (behaviour.md §3.6). @since 4bit 1.2 */
#define KBIT_PRECISION_INT8 2

KBIT_EXTERN_C_BEGIN

/**
 * Version of the 4-bit interface this backend implements.
 * @return (KBIT_4BIT_VERSION_MAJOR << 16) | KBIT_4BIT_VERSION_MINOR of the backend's build.
 * @since 4bit 1.0
 */
KBIT_API uint32_t kbit_4bit_interface_version(void);

/* BEGIN GENERATED DECLARATIONS (scripts/abi_gen.py from abi/kbit_4bit.def; do not edit) */

/* ---- Blockwise 4-bit quantization (bitsandbytes names) [blockwise_quantize_4bit] ------------- */

/**
 * Quantizes `n` elements of type T to 4-bit codes of format fmt (FP4 or NF4, see the file comment) in
 * blocks of `blocksize` consecutive elements (bitsandbytes' blockwise 4-bit quantizer, evaluated in
 * IEEE fp32: bit-identical on every backend). absmax[b] = max |A[i]| over block b (NaN elements
 * ignored); each element is coded from A[i] * (1.0f / absmax[b]). Element 2j goes to the high nibble
 * of out[j], 2j+1 to the low nibble; for odd n the last low nibble codes a zero. A zero block codes
 * every nibble 0 with absmax 0. Device backends run it on the legacy default stream, as bitsandbytes
 * does; kbit_quantize_4bit() takes a stream and 64-bit sizes.
 *
 * Variants:
 *
 * | function                       | element type     | format |
 * |--------------------------------|------------------|--------|
 * | cquantize_blockwise_fp32_fp4() | fp32 (float)     | fp4    |
 * | cquantize_blockwise_fp16_fp4() | fp16 (kbit_half) | fp4    |
 * | cquantize_blockwise_bf16_fp4() | bf16 (kbit_bf16) | fp4    |
 * | cquantize_blockwise_fp32_nf4() | fp32 (float)     | nf4    |
 * | cquantize_blockwise_fp16_nf4() | fp16 (kbit_half) | nf4    |
 * | cquantize_blockwise_bf16_nf4() | bf16 (kbit_bf16) | nf4    |
 *
 * @param code       ignored (bitsandbytes passes NULL); may be NULL.
 * @param A          device memory, in: n elements of T (not modified).
 * @param absmax     device memory, out: ceil(n / blocksize) floats.
 * @param out        device memory, out: (n + 1) / 2 packed bytes.
 * @param blocksize  32, 64, 128, 256, 512, 1024, 2048 or 4096.
 * @param n          number of elements, >= 0.
 * @return KBIT_STATUS_SUCCESS; KBIT_STATUS_INVALID_ARGUMENT for a NULL A, absmax or out (n > 0),
 *         n < 0 or another blocksize; KBIT_STATUS_DEVICE_ERROR.
 * @since 4bit 1.0
 */
/** blockwise_quantize_4bit: fp32 (float), fp4. */
KBIT_API kbit_status cquantize_blockwise_fp32_fp4(float* code, float* A, float* absmax, unsigned char* out,
    int blocksize, const int n);
/** blockwise_quantize_4bit: fp16 (kbit_half), fp4. */
KBIT_API kbit_status cquantize_blockwise_fp16_fp4(float* code, kbit_half* A, float* absmax,
    unsigned char* out, int blocksize, const int n);
/** blockwise_quantize_4bit: bf16 (kbit_bf16), fp4. */
KBIT_API kbit_status cquantize_blockwise_bf16_fp4(float* code, kbit_bf16* A, float* absmax,
    unsigned char* out, int blocksize, const int n);
/** blockwise_quantize_4bit: fp32 (float), nf4. */
KBIT_API kbit_status cquantize_blockwise_fp32_nf4(float* code, float* A, float* absmax, unsigned char* out,
    int blocksize, const int n);
/** blockwise_quantize_4bit: fp16 (kbit_half), nf4. */
KBIT_API kbit_status cquantize_blockwise_fp16_nf4(float* code, kbit_half* A, float* absmax,
    unsigned char* out, int blocksize, const int n);
/** blockwise_quantize_4bit: bf16 (kbit_bf16), nf4. */
KBIT_API kbit_status cquantize_blockwise_bf16_nf4(float* code, kbit_bf16* A, float* absmax,
    unsigned char* out, int blocksize, const int n);

/* ---- Blockwise 4-bit dequantization (bitsandbytes names) [blockwise_dequantize_4bit] --------- */

/**
 * Dequantizes `n` 4-bit codes of format fmt to elements of type T: out[i] = RN(LUT[nibble(i)] *
 * absmax[i / blocksize]), one fp32 multiply and one round to nearest even (exact, identical on every
 * backend). LUT = the fixed table of fmt (FP4: nibble 1000 gives -0.0; NF4: the 16 NF4 levels);
 * `code` is ignored.
 *
 * Variants:
 *
 * | function                         | element type     | format |
 * |----------------------------------|------------------|--------|
 * | cdequantize_blockwise_fp32_fp4() | fp32 (float)     | fp4    |
 * | cdequantize_blockwise_fp16_fp4() | fp16 (kbit_half) | fp4    |
 * | cdequantize_blockwise_bf16_fp4() | bf16 (kbit_bf16) | fp4    |
 * | cdequantize_blockwise_fp32_nf4() | fp32 (float)     | nf4    |
 * | cdequantize_blockwise_fp16_nf4() | fp16 (kbit_half) | nf4    |
 * | cdequantize_blockwise_bf16_nf4() | bf16 (kbit_bf16) | nf4    |
 *
 * @param code       ignored (bitsandbytes passes NULL); may be NULL.
 * @param A          device memory, in: (n + 1) / 2 packed bytes (element 2j in the high nibble).
 * @param absmax     device memory, in: ceil(n / blocksize) floats.
 * @param out        device memory, out: n elements of T.
 * @param blocksize  32, 64, 128, 256, 512, 1024, 2048 or 4096.
 * @param n          number of elements, >= 0.
 * @param stream     stream to run on (NULL = default); ignored on the CPU.
 * @return KBIT_STATUS_SUCCESS; KBIT_STATUS_INVALID_ARGUMENT for a NULL A, absmax or out (n > 0),
 *         n < 0 or another blocksize; KBIT_STATUS_DEVICE_ERROR.
 * @since 4bit 1.0
 */
/** blockwise_dequantize_4bit: fp32 (float), fp4. */
KBIT_API kbit_status cdequantize_blockwise_fp32_fp4(float* code, unsigned char* A, float* absmax, float* out,
    int blocksize, const int n, void* stream);
/** blockwise_dequantize_4bit: fp16 (kbit_half), fp4. */
KBIT_API kbit_status cdequantize_blockwise_fp16_fp4(float* code, unsigned char* A, float* absmax,
    kbit_half* out, int blocksize, const int n, void* stream);
/** blockwise_dequantize_4bit: bf16 (kbit_bf16), fp4. */
KBIT_API kbit_status cdequantize_blockwise_bf16_fp4(float* code, unsigned char* A, float* absmax,
    kbit_bf16* out, int blocksize, const int n, void* stream);
/** blockwise_dequantize_4bit: fp32 (float), nf4. */
KBIT_API kbit_status cdequantize_blockwise_fp32_nf4(float* code, unsigned char* A, float* absmax, float* out,
    int blocksize, const int n, void* stream);
/** blockwise_dequantize_4bit: fp16 (kbit_half), nf4. */
KBIT_API kbit_status cdequantize_blockwise_fp16_nf4(float* code, unsigned char* A, float* absmax,
    kbit_half* out, int blocksize, const int n, void* stream);
/** blockwise_dequantize_4bit: bf16 (kbit_bf16), nf4. */
KBIT_API kbit_status cdequantize_blockwise_bf16_nf4(float* code, unsigned char* A, float* absmax,
    kbit_bf16* out, int blocksize, const int n, void* stream);

/* ---- 4-bit GEMV and GEMM (bitsandbytes names) [gemv_4bit] ------------------------------------ */

/**
 * 4-bit GEMV for one activation row of type T (bitsandbytes' naive inference kernel): out[r] =
 * sum_k A[k] * W[r][k] for r < m, where W[r][k] = datatype[nibble] * absmax[(2*ldb*r + k) /
 * blocksize] and the weight element (r, k) is nibble 2*ldb*r + k of B (bitsandbytes' quantize_4bit
 * output of the row-major [m, k] weight, so ldb = k / 2). Accumulates in fp32 in an order of the
 * backend's choosing, rounds the result once to the output type T.
 *
 * Variants:
 *
 * | function                          | element type     |
 * |-----------------------------------|------------------|
 * | cgemm_4bit_inference_naive_fp32() | fp32 (float)     |
 * | cgemm_4bit_inference_naive_fp16() | fp16 (kbit_half) |
 * | cgemm_4bit_inference_naive_bf16() | bf16 (kbit_bf16) |
 *
 * @param m          number of output features (weight rows), >= 0.
 * @param n          unused (bitsandbytes passes 1).
 * @param k          inner dimension, even, >= 0.
 * @param A          device memory, in: k elements of T (only the first row is used).
 * @param B          device memory, in: packed 4-bit weight, m * ldb bytes.
 * @param absmax     device memory, in: ceil(2 * ldb * m / blocksize) fp32 block scales (not nested).
 * @param datatype   device memory, in: the 16-entry fp32 LUT indexed by nibble (NF4 or FP4 table,
 *                   bitsandbytes' quant_state.code); used verbatim.
 * @param out        device memory, out: m elements of T.
 * @param lda        unused.
 * @param ldb        bytes per weight row, >= k / 2 (bitsandbytes passes (k + 1) / 2).
 * @param ldc        unused.
 * @param blocksize  32, 64, 128, 256, 512, 1024, 2048 or 4096.
 * @param stream     stream to run on (NULL = default); ignored on the CPU.
 * @return KBIT_STATUS_SUCCESS; KBIT_STATUS_INVALID_ARGUMENT for a NULL pointer (m, k > 0), negative
 *         m or k, odd k, ldb < k / 2, another blocksize; KBIT_STATUS_DEVICE_ERROR.
 * @since 4bit 1.0
 */
/** gemv_4bit: fp32 (float). */
KBIT_API kbit_status cgemm_4bit_inference_naive_fp32(int m, int n, int k, float* A, unsigned char* B,
    float* absmax, float* datatype, float* out, int lda, int ldb, int ldc, int blocksize, void* stream);
/** gemv_4bit: fp16 (kbit_half). */
KBIT_API kbit_status cgemm_4bit_inference_naive_fp16(int m, int n, int k, kbit_half* A, unsigned char* B,
    float* absmax, float* datatype, kbit_half* out, int lda, int ldb, int ldc, int blocksize, void* stream);
/** gemv_4bit: bf16 (kbit_bf16). */
KBIT_API kbit_status cgemm_4bit_inference_naive_bf16(int m, int n, int k, kbit_bf16* A, unsigned char* B,
    float* absmax, float* datatype, kbit_bf16* out, int lda, int ldb, int ldc, int blocksize, void* stream);

/**
 * Fused 4-bit GEMM with activations of type T: out[i][j] = RN(sum_k A[i][k] * W[j][k] + bias[j]),
 * A row-major [M, K], W the row-major [N, K] packed 4-bit weight (K / 2 bytes per row), out
 * row-major [M, N]. The scale of block beta = (j*K + k) / blocksize is absmax[beta], or with nested
 * absmax absmax_code[absmax_8bit[beta]] * absmax[beta / 256] + *absmax_offset. Accumulates in fp32 in
 * an order of the backend's choosing.
 *
 * Variants:
 *
 * | function          | element type     |
 * |-------------------|------------------|
 * | cgemm_4bit_fp32() | fp32 (float)     |
 * | cgemm_4bit_fp16() | fp16 (kbit_half) |
 * | cgemm_4bit_bf16() | bf16 (kbit_bf16) |
 *
 * @param A             device memory, in: M * K elements of T.
 * @param B             device memory, in: N * K / 2 packed bytes.
 * @param absmax        device memory, in: ceil(N*K / blocksize) fp32 scales, or when nested the
 *                      ceil(ceil(N*K / blocksize) / 256) second-level scales
 *                      (bitsandbytes' state2.absmax).
 * @param absmax_8bit   device memory, in: NULL (not nested) or ceil(N*K / blocksize) uint8 codes.
 * @param absmax_code   device memory, in: 256-entry code table when nested, else ignored.
 * @param absmax_offset device memory, in: one float (the nested offset) when nested, else ignored.
 * @param out           device memory, out: M * N elements of T.
 * @param bias          device memory, in: N elements of T, or NULL for no bias.
 * @param M             rows of A, >= 0.
 * @param N             output features, >= 0.
 * @param K             inner dimension, even, >= 0.
 * @param blocksize     32, 64, 128, 256, 512, 1024, 2048 or 4096.
 * @param quant_type    1 = FP4, any other value = NF4 (bitsandbytes passes 2).
 * @param stream        stream to run on (NULL = default); ignored on the CPU.
 * @return KBIT_STATUS_SUCCESS; KBIT_STATUS_INVALID_ARGUMENT for a NULL required pointer, negative
 *         sizes, odd K, another blocksize; KBIT_STATUS_DEVICE_ERROR.
 * @since 4bit 1.0
 */
/** gemm_4bit: fp32 (float). */
KBIT_API kbit_status cgemm_4bit_fp32(const float* A, const uint8_t* B, const float* absmax,
    const uint8_t* absmax_8bit, const float* absmax_code, const float* absmax_offset, float* out,
    const float* bias, int M, int N, int K, int blocksize, int quant_type, void* stream);
/** gemm_4bit: fp16 (kbit_half). */
KBIT_API kbit_status cgemm_4bit_fp16(const kbit_half* A, const uint8_t* B, const float* absmax,
    const uint8_t* absmax_8bit, const float* absmax_code, const float* absmax_offset, kbit_half* out,
    const kbit_half* bias, int M, int N, int K, int blocksize, int quant_type, void* stream);
/** gemm_4bit: bf16 (kbit_bf16). */
KBIT_API kbit_status cgemm_4bit_bf16(const kbit_bf16* A, const uint8_t* B, const float* absmax,
    const uint8_t* absmax_8bit, const float* absmax_code, const float* absmax_offset, kbit_bf16* out,
    const kbit_bf16* bias, int M, int N, int K, int blocksize, int quant_type, void* stream);

/* ---- kbit additions: 64-bit sizes and streams for every quantizer [quantize_4bit_dtype] ------ */

/**
 * Same as cquantize_blockwise_<dtype>_<quant_type> with 64-bit sizes and an explicit stream.
 * @param quant_type KBIT_QUANT_FP4 or KBIT_QUANT_NF4.
 * @param dtype      KBIT_DTYPE_FP32, KBIT_DTYPE_FP16 or KBIT_DTYPE_BF16: the element type of A.
 * @param A          device memory, in: n elements of dtype.
 * @param absmax     device memory, out: ceil(n / blocksize) floats.
 * @param out        device memory, out: (n + 1) / 2 packed bytes.
 * @param blocksize  32, 64, 128, 256, 512, 1024, 2048 or 4096.
 * @param n          number of elements, 0 <= n <= 2^62.
 * @param stream     stream to run on (NULL = default); ignored on the CPU.
 * @return KBIT_STATUS_SUCCESS; KBIT_STATUS_INVALID_ARGUMENT (NULL pointer with n > 0, n out of
 *         range, unknown quant_type or dtype, another blocksize); KBIT_STATUS_DEVICE_ERROR.
 * @since 4bit 1.0
 */
KBIT_API kbit_status kbit_quantize_4bit(int32_t quant_type, int32_t dtype, const void* A, float* absmax,
    uint8_t* out, int64_t blocksize, int64_t n, void* stream);

/**
 * Same as cdequantize_blockwise_<dtype>_<quant_type> with 64-bit sizes.
 * @param quant_type KBIT_QUANT_FP4 or KBIT_QUANT_NF4.
 * @param dtype      KBIT_DTYPE_FP32, KBIT_DTYPE_FP16 or KBIT_DTYPE_BF16: the element type of out.
 * @param A          device memory, in: (n + 1) / 2 packed bytes.
 * @param absmax     device memory, in: ceil(n / blocksize) floats.
 * @param out        device memory, out: n elements of dtype.
 * @param blocksize  32, 64, 128, 256, 512, 1024, 2048 or 4096.
 * @param n          number of elements, 0 <= n <= 2^62.
 * @param stream     stream to run on (NULL = default); ignored on the CPU.
 * @return KBIT_STATUS_SUCCESS; KBIT_STATUS_INVALID_ARGUMENT (NULL pointer with n > 0, n out of
 *         range, unknown quant_type or dtype, another blocksize); KBIT_STATUS_DEVICE_ERROR.
 * @since 4bit 1.0
 */
KBIT_API kbit_status kbit_dequantize_4bit(int32_t quant_type, int32_t dtype, const uint8_t* A,
    const float* absmax, void* out, int64_t blocksize, int64_t n, void* stream);

/* ---- kbit additions: bitsandbytes double quantization (nested absmax) [nested_absmax_quantize] ---- */

/**
 * bitsandbytes double quantization of 4-bit block scales (compress_statistics=True): offset =
 * mean(absmax) (fp32 result of a double-precision sum), then the centred scales absmax[b] - offset
 * are quantized with the blockwise 8-bit quantizer (nearest code of `code`, midpoint ties to the
 * even index, as kbit_8bit.h) in blocks of nested_blocksize. Produces exactly the tensors a
 * transformers bnb-4bit checkpoint stores: weight.absmax (uint8 codes), nested_absmax,
 * nested_quant_map (= code) and nested_offset.
 * @param absmax           device memory, in: `blocks` fp32 block scales from a 4-bit quantizer.
 * @param code             device memory, in: 256 ascending floats (bitsandbytes passes the signed
 *                         dynamic map, see kbit_8bit.h); used verbatim, never written.
 * @param qabsmax          device memory, out: `blocks` uint8 codes.
 * @param nested_absmax    device memory, out: ceil(blocks / nested_blocksize) floats.
 * @param offset           device memory, out: one float, the mean that was subtracted.
 * @param blocks           number of scales, >= 0.
 * @param nested_blocksize 32, 64, ..., 4096 (bitsandbytes uses 256).
 * @param stream           stream to run on (NULL = default); ignored on the CPU.
 * @return KBIT_STATUS_SUCCESS; KBIT_STATUS_INVALID_ARGUMENT (NULL pointer with blocks > 0, blocks < 0,
 *         another nested_blocksize); KBIT_STATUS_DEVICE_ERROR.
 * @since 4bit 1.0
 */
KBIT_API kbit_status kbit_nested_absmax_quantize(const float* absmax, const float* code, uint8_t* qabsmax,
    float* nested_absmax, float* offset, int64_t blocks, int64_t nested_blocksize, void* stream);

/**
 * Restores 4-bit block scales from bitsandbytes' nested form: absmax[b] = (code[qabsmax[b]] *
 * nested_absmax[b / nested_blocksize]) + offset, as two separately rounded fp32 operations
 * (bit-exact with bitsandbytes' dequantize_blockwise followed by += offset).
 * @param qabsmax          device memory, in: `blocks` uint8 codes (checkpoint key weight.absmax).
 * @param code             device memory, in: 256 floats (checkpoint key weight.nested_quant_map).
 * @param nested_absmax    device memory, in: ceil(blocks / nested_blocksize) floats
 *                         (checkpoint key weight.nested_absmax).
 * @param offset           host value: the quant_state JSON field nested_offset.
 * @param absmax           device memory, out: `blocks` floats.
 * @param blocks           number of scales, >= 0.
 * @param nested_blocksize 32, 64, ..., 4096 (the JSON field nested_blocksize, 256 in bitsandbytes).
 * @param stream           stream to run on (NULL = default); ignored on the CPU.
 * @return KBIT_STATUS_SUCCESS; KBIT_STATUS_INVALID_ARGUMENT (NULL pointer with blocks > 0, blocks < 0,
 *         another nested_blocksize); KBIT_STATUS_DEVICE_ERROR.
 * @since 4bit 1.0
 */
KBIT_API kbit_status kbit_nested_absmax_dequantize(const uint8_t* qabsmax, const float* code,
    const float* nested_absmax, float offset, float* absmax, int64_t blocks, int64_t nested_blocksize,
    void* stream);

/* ---- kbit additions: torchao NF4Tensor format [torchao_quantize] ----------------------------- */

/**
 * Quantizes a tensor of type T to torchao's NF4Tensor format, computing in T's precision (fp32, fp16
 * or bf16) exactly as torchao's to_nf4(w, block_size, scaler_block_size) does: per block_size
 * elements the absmax s_b; the scaler mean; the centred scalers as linear int8 codes with one
 * quantization factor per scaler_block_size scalers; each element the nearest of torchao's 16-entry
 * NF4 table in T to w / s_b (ties to the lowest index). The outputs are torchao's inner tensors,
 * byte for byte.
 *
 * Variants:
 *
 * | function                         | element type     |
 * |----------------------------------|------------------|
 * | kbit_quantize_nf4_torchao_fp32() | fp32 (float)     |
 * | kbit_quantize_nf4_torchao_fp16() | fp16 (kbit_half) |
 * | kbit_quantize_nf4_torchao_bf16() | bf16 (kbit_bf16) |
 *
 * @param w                   device memory, in: n elements of T.
 * @param quantized_data      device memory, out: n / 2 packed bytes (torchao `quantized_data`).
 * @param quantized_scalers   device memory, out: n / block_size int8 (torchao `quantized_scalers`).
 * @param quantization_factor device memory, out: n / block_size / scaler_block_size values of T
 *                            (torchao `quantization_factor`).
 * @param scaler_mean         device memory, out: one value of T (torchao `scaler_mean`).
 * @param n                   number of elements: n % block_size == 0,
 *                            (n / block_size) % scaler_block_size == 0.
 * @param block_size          elements per first-level block, even, > 0 (torchao default 64).
 * @param scaler_block_size   scalers per quantization factor, > 0 (torchao default 256).
 * @param stream              stream to run on (NULL = default); ignored on the CPU.
 * @return KBIT_STATUS_SUCCESS; KBIT_STATUS_INVALID_ARGUMENT (NULL pointer with n > 0, sizes that
 *         torchao rejects); KBIT_STATUS_DEVICE_ERROR.
 * @since 4bit 1.0
 */
/** torchao_quantize: fp32 (float). */
KBIT_API kbit_status kbit_quantize_nf4_torchao_fp32(const float* w, uint8_t* quantized_data,
    int8_t* quantized_scalers, float* quantization_factor, float* scaler_mean, int64_t n, int64_t block_size,
    int64_t scaler_block_size, void* stream);
/** torchao_quantize: fp16 (kbit_half). */
KBIT_API kbit_status kbit_quantize_nf4_torchao_fp16(const kbit_half* w, uint8_t* quantized_data,
    int8_t* quantized_scalers, kbit_half* quantization_factor, kbit_half* scaler_mean, int64_t n,
    int64_t block_size, int64_t scaler_block_size, void* stream);
/** torchao_quantize: bf16 (kbit_bf16). */
KBIT_API kbit_status kbit_quantize_nf4_torchao_bf16(const kbit_bf16* w, uint8_t* quantized_data,
    int8_t* quantized_scalers, kbit_bf16* quantization_factor, kbit_bf16* scaler_mean, int64_t n,
    int64_t block_size, int64_t scaler_block_size, void* stream);

/**
 * Dequantizes torchao's NF4Tensor inner tensors to elements of type T, in T's arithmetic (fp32, fp16
 * or bf16) as torchao does: scaler s_b = RN(q_b / factor) + mean, element = nf4[idx] * s_b.
 *
 * Variants:
 *
 * | function                           | element type     |
 * |------------------------------------|------------------|
 * | kbit_dequantize_nf4_torchao_fp32() | fp32 (float)     |
 * | kbit_dequantize_nf4_torchao_fp16() | fp16 (kbit_half) |
 * | kbit_dequantize_nf4_torchao_bf16() | bf16 (kbit_bf16) |
 *
 * @param quantized_data      device memory, in: n / 2 packed bytes.
 * @param quantized_scalers   device memory, in: n / block_size int8.
 * @param quantization_factor device memory, in: n / block_size / scaler_block_size values of T.
 * @param scaler_mean         device memory, in: one value of T.
 * @param out                 device memory, out: n elements of T.
 * @param n                   number of elements (same constraints as the quantizer).
 * @param block_size          elements per first-level block, even, > 0.
 * @param scaler_block_size   scalers per quantization factor, > 0.
 * @param stream              stream to run on (NULL = default); ignored on the CPU.
 * @return KBIT_STATUS_SUCCESS; KBIT_STATUS_INVALID_ARGUMENT (NULL pointer with n > 0, sizes that
 *         torchao rejects); KBIT_STATUS_DEVICE_ERROR.
 * @since 4bit 1.0
 */
/** torchao_dequantize: fp32 (float). */
KBIT_API kbit_status kbit_dequantize_nf4_torchao_fp32(const uint8_t* quantized_data,
    const int8_t* quantized_scalers, const float* quantization_factor, const float* scaler_mean, float* out,
    int64_t n, int64_t block_size, int64_t scaler_block_size, void* stream);
/** torchao_dequantize: fp16 (kbit_half). */
KBIT_API kbit_status kbit_dequantize_nf4_torchao_fp16(const uint8_t* quantized_data,
    const int8_t* quantized_scalers, const kbit_half* quantization_factor, const kbit_half* scaler_mean,
    kbit_half* out, int64_t n, int64_t block_size, int64_t scaler_block_size, void* stream);
/** torchao_dequantize: bf16 (kbit_bf16). */
KBIT_API kbit_status kbit_dequantize_nf4_torchao_bf16(const uint8_t* quantized_data,
    const int8_t* quantized_scalers, const kbit_bf16* quantization_factor, const kbit_bf16* scaler_mean,
    kbit_bf16* out, int64_t n, int64_t block_size, int64_t scaler_block_size, void* stream);

/* ---- kbit additions: grouped 4-bit GEMM over expert weights (mixture of experts) [gemm_4bit_grouped] ---- */

/**
 * For each token t < tokens and choice j < top_k, the expert e = ids[t*top_k + j] multiplies one
 * activation row x of type dtype: y[t][j][n] = sum_k x[k] * W_e[n][k] for n < N. The weight is one
 * [experts, N, K] tensor quantized flat as any 4-bit tensor (behaviour.md §11.3): element (e, n, k) is
 * nibble (e*N + n)*K + k of B, in block beta = ((e*N + n)*K + k) / blocksize, whose scale is
 * absmax[beta], or nested absmax_code[absmax_8bit[beta]] * absmax[beta / 256] + *absmax_offset (the
 * rule of cgemm_4bit applied to the whole tensor). x is row t of A when a_rows_per_token is 1 (every
 * choice of a token sees the same row: gate/up projections), row t*top_k + j when it is top_k (one
 * row per choice: the down projection). y is rounded to dtype as cgemm_4bit rounds its output.
 * Without combine, out[t][j][n] = y[t][j][n]. With combine, out[t][n] = RN_dtype(s), s = 0.0f, then
 * for j = 0 .. top_k-1 in order s = s + combine[t*top_k + j] * float(y[t][j][n]), each product and
 * each sum rounded to fp32 (no fused multiply-add).
 * Exactness: on one backend the call equals, byte for byte, the loop that for each expert e in
 * ascending order gathers the rows x of the pairs (t, j) with ids == e, in (t, j) order, into an
 * [M_e, K] matrix and calls cgemm_4bit_<dtype> (no bias) on expert e's slice of B, absmax and
 * absmax_8bit — a slice exists when e*N*K is a multiple of blocksize (nested: of 256*blocksize) —
 * followed, with combine, by the weighted sum above. The weights of each chosen expert are read once
 * per call whatever the number of tokens that chose it. For an expert without a slice the backend
 * sums in an order of its choosing (class F, cgemm_4bit's bound).
 * @param dtype            KBIT_DTYPE_FP32, KBIT_DTYPE_FP16 or KBIT_DTYPE_BF16: element type of A and out.
 * @param A                device memory, in: tokens * a_rows_per_token rows of K elements of dtype.
 * @param a_rows_per_token 1 or top_k (see above).
 * @param B                device memory, in: experts * N * K / 2 packed bytes (element 2i in the high
 *                         nibble of byte i).
 * @param absmax           device memory, in: ceil(experts*N*K / blocksize) fp32 scales, or when nested
 *                         the ceil(ceil(experts*N*K / blocksize) / 256) second-level scales.
 * @param absmax_8bit      device memory, in: NULL (not nested) or ceil(experts*N*K / blocksize) codes.
 * @param absmax_code      device memory, in: 256-entry code table when nested, else ignored.
 * @param absmax_offset    device memory, in: one float (the nested offset) when nested, else ignored.
 * @param experts          number of experts E, >= 0.
 * @param N                output features per expert, 0 <= N <= 2^31 - 1.
 * @param K                inner dimension, even, 0 <= K <= 2^31 - 1; experts * N * K <= 2^62.
 * @param blocksize        32, 64, 128, 256, 512, 1024, 2048 or 4096.
 * @param quant_type       KBIT_QUANT_FP4 or KBIT_QUANT_NF4.
 * @param ids              device memory, in: tokens * top_k int32 expert indices, each in [0, experts).
 * @param tokens           number of tokens, >= 0.
 * @param top_k            choices per token, >= 0; tokens * top_k <= 2^31 - 1.
 * @param combine          device memory, in: NULL, or tokens * top_k fp32 combine weights.
 * @param out              device memory, out: tokens * top_k * N elements of dtype without combine,
 *                         tokens * N with combine.
 * @param stream           stream to run on (NULL = default); ignored on the CPU. Device backends only
 *                         enqueue the work: the ids are checked on the device (see @return).
 * @return KBIT_STATUS_SUCCESS (nothing is read or written when tokens, top_k or N is 0);
 *         KBIT_STATUS_INVALID_ARGUMENT for an unknown dtype or quant_type, negative or too large sizes,
 *         odd K, another blocksize, a_rows_per_token neither 1 nor top_k, a NULL required pointer, or
 *         an expert id outside [0, experts) (the message names the token, the slot and the value;
 *         nothing is written). A device backend finds a bad id on the device: the call returns
 *         KBIT_STATUS_SUCCESS, writes nothing, and the next kbit_stream_synchronize(stream) returns the
 *         error (behaviour.md §3.5); KBIT_STATUS_OUT_OF_MEMORY (device scratch); KBIT_STATUS_DEVICE_ERROR.
 * @since 4bit 1.1
 */
KBIT_API kbit_status kbit_gemm_4bit_grouped(int32_t dtype, const void* A, int64_t a_rows_per_token,
    const uint8_t* B, const float* absmax, const uint8_t* absmax_8bit, const float* absmax_code,
    const float* absmax_offset, int64_t experts, int64_t N, int64_t K, int64_t blocksize, int32_t quant_type,
    const int32_t* ids, int64_t tokens, int64_t top_k, const float* combine, void* out, void* stream);

/* ---- kbit additions: the 4-bit GEMM with an explicit precision class [gemm_4bit_precision] ---- */

/**
 * out[i][j] = RN(sum_k A[i][k] * W[j][k] + bias[j]) as cgemm_4bit_<dtype> defines it (same A, B, scales,
 * nested absmax, bias, quant_type rule and rounding of the output), computed in the class `precision` names:
 * - KBIT_PRECISION_EXACT (0): exactly cgemm_4bit_<dtype>'s result, the same bytes as that call on the
 *   same backend (fp32 products of activation and table entry, the bound of behaviour.md §3.3).
 * - KBIT_PRECISION_INT8 (2): each activation row is cut into chunks of 32 elements; a chunk with
 *   amax = max |x| is quantized to q = RNE(clamp(x * fp32(127 / amax), -127, 127)) with d = amax / 127, the
 *   weights are used as the int8 levels L = round(127 * level) of their format, and output j gets from chunk
 *   c the term (s * fp32(d / 127)) * float(sum q * L), s the absmax of the chunk's weight block (each product
 *   rounded to fp32, the integer sum exact); the terms are added in fp32 in chunk order, then the bias.
 *   A chunk holding an Inf or NaN makes its outputs NaN. Requires K % 32 == 0. On a backend the result
 *   does not depend on the thread count; the CPU backend gives the reference's bytes at every instruction
 *   set (behaviour.md §3.6, which also gives the error bound against the fp64 product).
 * - KBIT_PRECISION_BF16 (1, 4bit 1.3): each weight is rounded to bf16 as kbit_dequantize_4bit to bf16 rounds it
 *   (w = RN_bf16(level * s)) and each activation to bf16 (a = RN_bf16(A[i][k])); the products a * w are exact
 *   in fp32 and are summed in fp32 in an order the backend fixes, as vdpbf16ps does (subnormal bf16 inputs
 *   and subnormal fp32 partial sums count as zero), then the bias is added. On a backend the result does
 *   not depend on the thread count; the CPU backend gives the reference's bytes at every instruction set
 *   (behaviour.md §3.7, which gives the order and the error bound against the fp64 product).
 * Any other value is rejected, and so is KBIT_PRECISION_BF16 by a backend whose 4bit interface is 1.2
 * (kbit_4bit_interface_version()): the message names the value and the classes that backend takes.
 * @param precision     KBIT_PRECISION_EXACT, KBIT_PRECISION_INT8 or (from 4bit 1.3) KBIT_PRECISION_BF16.
 * @param dtype         KBIT_DTYPE_FP32, KBIT_DTYPE_FP16 or KBIT_DTYPE_BF16: element type of A, bias and out.
 * @param A             device memory, in: M * K elements of dtype.
 * @param B             device memory, in: N * K / 2 packed bytes (the row-major [N, K] weight).
 * @param absmax        device memory, in: ceil(N*K / blocksize) fp32 scales, or when nested the
 *                      ceil(ceil(N*K / blocksize) / 256) second-level scales.
 * @param absmax_8bit   device memory, in: NULL (not nested) or ceil(N*K / blocksize) uint8 codes.
 * @param absmax_code   device memory, in: 256-entry code table when nested, else ignored.
 * @param absmax_offset device memory, in: one float (the nested offset) when nested, else ignored.
 * @param out           device memory, out: M * N elements of dtype.
 * @param bias          device memory, in: N elements of dtype, or NULL for no bias.
 * @param M             rows of A, 0 <= M <= 2^31 - 1.
 * @param N             output features, 0 <= N <= 2^31 - 1.
 * @param K             inner dimension, even, 0 <= K <= 2^31 - 1; a multiple of 32 for KBIT_PRECISION_INT8.
 * @param blocksize     32, 64, 128, 256, 512, 1024, 2048 or 4096.
 * @param quant_type    1 = FP4, any other value = NF4 (as cgemm_4bit).
 * @param stream        stream to run on (NULL = default); ignored on the CPU.
 * @return KBIT_STATUS_SUCCESS (nothing is read or written when M or N is 0); KBIT_STATUS_INVALID_ARGUMENT
 *         for a precision the backend does not take (the message names the value) or an unknown dtype, negative or too large sizes,
 *         odd K, K not a multiple of 32 for KBIT_PRECISION_INT8 (the message names K), another blocksize,
 *         a NULL required pointer; KBIT_STATUS_DEVICE_ERROR. Nothing is written on failure.
 * @since 4bit 1.2
 */
KBIT_API kbit_status kbit_gemm_4bit_precision(int32_t precision, int32_t dtype, const void* A,
    const uint8_t* B, const float* absmax, const uint8_t* absmax_8bit, const float* absmax_code,
    const float* absmax_offset, void* out, const void* bias, int64_t M, int64_t N, int64_t K,
    int64_t blocksize, int32_t quant_type, void* stream);

/* END GENERATED DECLARATIONS */

KBIT_EXTERN_C_END

#endif /* KBIT_4BIT_H */
