// int8.cl — LLM.int8 (kbit_ops_8bit.h, docs/behaviour.md §7), byte-equal to the reference: row-wise
// int8 quantization, outlier columns, the int8 GEMM with its three output stages, the dequantization
// of the int32 product, and the fp16 product of the outlier columns.
//
// The backend kit does not install kbit's int8 rules (src/common/kbit_int8_rules.h), so the two
// constants and the conversions are written here from docs/behaviour.md §7.

#define kInv127 0x1.020408p-7f          // fp32(1 / 127)
#define kMmDequantScale 0x1.040c20p-14f  // fp32(1 / (127 * 127)) = 6.200012e-05f

#define ROW_GROUP 256  // work-items per row of int8_vector_quant (a power of two)
#define TILE 16        // igemm: TILE x TILE outputs per work-group of TILE * TILE work-items
#define SCAN_GROUP 256 // outlier_column_list: work-items of its single group (a power of two)

// ---- conversions ---------------------------------------------------------------------------------

// CUDA's __float2int_rn stored into int8, as the reference does: NaN -> 0, saturate to int32, round
// half to even, keep the low byte (values beyond 127 wrap; they occur for a threshold that is not an
// fp16 value). rint rounds to nearest even in OpenCL's only rounding mode.
char int8_low_byte_rn(float v) {
    int q;
    if (isnan(v)) q = 0;
    else if (v >= 2147483648.0f) q = INT_MAX;
    else if (v <= -2147483648.0f) q = INT_MIN;
    else q = (int)rint(v);  // exact: |rint(v)| < 2^31 here
    return as_char((uchar)((uint)q & 0xFFu));
}

// float -> int8: round half to even, saturate to [-128, 127], NaN -> 0.
char int8_saturate_rn(float v) {
    if (isnan(v)) return 0;
    const float r = rint(v);
    return (char)(r >= 127.0f ? 127.0f : (r <= -128.0f ? -128.0f : r));
}

// x86's NaN for fma(a, b, c): c when it is the only NaN operand, else as x86_nan2 (common.cl).
float fma_rn(float a, float b, float c) {
    const float r = fma(a, b, c);  // correctly rounded in OpenCL C
    if (!is_nan_bits(as_uint(r))) return r;
    if (!is_nan_bits(as_uint(a)) && !is_nan_bits(as_uint(b)) && is_nan_bits(as_uint(c)))
        return as_float(as_uint(c) | 0x00400000u);
    return x86_nan2(r, a, b);
}

// The threshold as bitsandbytes compares fp16 magnitudes with it: rounded to fp16.
float threshold_fp16(float threshold) { return half_to_float(float_to_half(threshold)); }

// ---- row-wise quantization -------------------------------------------------------------------------

// One work-group of ROW_GROUP per row. The row statistic is the max of the magnitudes below the fp16
// threshold (all of them when threshold == 0), from +0.0; NaN never wins, so the parts fold in any
// order. Elements are zeroed (outliers) by the fp32 threshold, as bitsandbytes does.
kernel void int8_vector_quant(ARRAY(ushort, A), ARRAY(char, out), ARRAY(float, rowStats), float threshold, long cols) {
    local float partial[ROW_GROUP];
    const long row = get_group_id(0);
    const int lid = get_local_id(0);
    const global ushort* a = AT(ushort, A) + row * cols;
    const bool sparse = threshold > 0.0f;
    const float th_h = threshold_fp16(threshold);

    float amax = 0.0f;
    for (long c = lid; c < cols; c += ROW_GROUP) {
        const float v = fabs(half_to_float(a[c]));
        if ((!sparse || v < th_h) && v > amax) amax = v;
    }
    partial[lid] = amax;
    for (int width = ROW_GROUP / 2; width > 0; width /= 2) {
        barrier(CLK_LOCAL_MEM_FENCE);
        if (lid < width && partial[lid + width] > partial[lid]) partial[lid] = partial[lid + width];
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    amax = partial[0];
    if (lid == 0) AT(float, rowStats)[row] = amax;

    const float scale = 127.0f / amax;  // IEEE division; +inf for a row with nothing counted (codes 0)
    global char* q = AT(char, out) + row * cols;
    for (long c = lid; c < cols; c += ROW_GROUP) {
        const float x = half_to_float(a[c]);
        q[c] = (sparse && !(fabs(x) < threshold)) ? 0 : int8_low_byte_rn(x * scale);
    }
}

// One work-item per column, after int8_vector_quant: whether some |A[r][c]| >= fp16(threshold) (only
// asked with threshold > 0), written as 0/1 when has_flags, and the column of `out` zeroed when
// rows > 1. Neighbouring work-items read neighbouring columns, so each row is read in one sweep.
kernel void outlier_columns(ARRAY(ushort, A), ARRAY(char, out), ARRAY(uchar, flags), int has_flags, float threshold,
                            long rows, long cols) {
    const long c = get_global_id(0);
    if (c >= cols) return;
    const global ushort* a = AT(ushort, A);
    const float th_h = threshold_fp16(threshold);
    bool outlier = false;
    if (threshold > 0.0f)
        for (long r = 0; r < rows && !outlier; ++r) outlier = fabs(half_to_float(a[r * cols + c])) >= th_h;
    if (has_flags) AT(uchar, flags)[c] = outlier ? 1 : 0;
    if (outlier && rows > 1)
        for (long r = 0; r < rows; ++r) AT(char, out)[r * cols + c] = 0;
}

// ---- int8 GEMM -------------------------------------------------------------------------------------

#define IGEMM_INT32 0
#define IGEMM_INT8 1
#define IGEMM_INT8_ROWSCALE 2

// C[t*ldc + o] from acc = sum_i A[o*lda + i] * B[t*ldb + i] (bitsandbytes' m = K, n = rows of B and
// C, k = rows of A). One work-group of TILE * TILE work-items per TILE x TILE tile of C, in 1-D:
// groups run along o first, then t. Both operands are staged through local memory TILE columns of
// the inner dimension at a time. The sum is kept as uint, whose wrap-around is defined: it is the
// reference's int32 sum reduced modulo 2^32.
kernel void igemm(ARRAY(char, A), ARRAY(char, B), ARRAY(uchar, C), ARRAY(float, row_scale), int stage, int m, int n,
                  int k, int lda, int ldb, int ldc, int tiles_o) {
    local int a_tile[TILE][TILE + 1];  // [o][i]; +1 keeps the column reads apart in the banks
    local int b_tile[TILE][TILE + 1];  // [t][i]
    const int lid = get_local_id(0);
    const int ly = lid / TILE, lx = lid % TILE;
    const long o0 = (long)(get_group_id(0) % tiles_o) * TILE;  // long: k + TILE may pass INT_MAX
    const long t0 = (long)(get_group_id(0) / tiles_o) * TILE;
    const global char* a = AT(char, A);
    const global char* b = AT(char, B);
    uint acc = 0;
    for (int i0 = 0; i0 < m; i0 += TILE) {
        // Work-item (ly, lx) loads element i0 + lx of row o0 + ly of A and of row t0 + ly of B; zero
        // outside the matrices, so the inner loop needs no bounds.
        const int i = i0 + lx;
        a_tile[ly][lx] = (o0 + ly < k && i < m) ? a[(o0 + ly) * lda + i] : 0;
        b_tile[ly][lx] = (t0 + ly < n && i < m) ? b[(t0 + ly) * ldb + i] : 0;
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int j = 0; j < TILE; ++j) acc += (uint)(a_tile[lx][j] * b_tile[ly][j]);  // |product| <= 2^14
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    const long o = o0 + lx, t = t0 + ly;  // lx along o: neighbouring work-items store neighbouring outputs
    if (o >= k || t >= n) return;
    const long at = t * ldc + o;
    const int sum = as_int(acc);
    if (stage == IGEMM_INT32) ((global int*)AT(uchar, C))[at] = sum;
    else if (stage == IGEMM_INT8) ((global char*)AT(uchar, C))[at] = (char)clamp(sum, -128, 127);
    else ((global char*)AT(uchar, C))[at] = int8_saturate_rn((float)sum * AT(float, row_scale)[o]);
}

// ---- dequantization of the int32 product -----------------------------------------------------------

// One work-item per element: RN_fp16(fma((float(A) * rowStats[r]) * colStats[c], 1/127^2, bias)),
// the products rounded separately, the fma once (the only fused operation kbit intends).
kernel void dequant_mm_int32_fp16(ARRAY(int, A), ARRAY(float, rowStats), ARRAY(float, colStats), ARRAY(ushort, out),
                                  ARRAY(ushort, bias), int has_bias, int cols, long count) {
    const long i = get_global_id(0);
    if (i >= count) return;
    const long r = i / cols, c = i % cols;
    const float scaled = mul_rn(mul_rn((float)AT(int, A)[i], AT(float, rowStats)[r]), AT(float, colStats)[c]);
    const float b = has_bias ? half_to_float(AT(ushort, bias)[c]) : 0.0f;
    AT(ushort, out)[i] = float_to_half(fma_rn(scaled, kMmDequantScale, b));
}

// ---- the fp16 product of the outlier columns -------------------------------------------------------

// The indices of the flagged columns in increasing order, and their number in list[in_features]:
// one work-group scans the flags SCAN_GROUP at a time (a prefix sum in local memory per chunk).
kernel void outlier_column_list(ARRAY(uchar, flags), ARRAY(long, list), long in_features) {
    local int prefix[SCAN_GROUP];
    const int lid = get_local_id(0);
    const global uchar* f = AT(uchar, flags);
    global long* cols = AT(long, list);
    long total = 0;  // columns listed before this chunk
    for (long base = 0; base < in_features; base += SCAN_GROUP) {
        const long c = base + lid;
        const int mine = (c < in_features && f[c] != 0) ? 1 : 0;
        prefix[lid] = mine;
        // Hillis-Steele inclusive scan: after step s, prefix[x] sums the 2s flags ending at x.
        for (int s = 1; s < SCAN_GROUP; s *= 2) {
            barrier(CLK_LOCAL_MEM_FENCE);
            const int add = lid >= s ? prefix[lid - s] : 0;
            barrier(CLK_LOCAL_MEM_FENCE);
            prefix[lid] += add;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        if (mine) cols[total + prefix[lid] - 1] = c;
        total += prefix[SCAN_GROUP - 1];
        barrier(CLK_LOCAL_MEM_FENCE);  // the next chunk overwrites prefix
    }
    if (lid == 0) cols[in_features] = total;
}

// One work-item per output: out[t][o] = RN_fp16(out[t][o] + acc), acc the fp32 sum from -0.0 (so no
// outlier column leaves out unchanged, signed zeros included) over the listed columns in increasing
// order of A[t][c] * w(o, c), w(o, c) = RN_fp16((float(W[o][c]) * W_stats[o]) * (1/127)).
kernel void outlier_matmul_fp16(ARRAY(ushort, A), ARRAY(char, W), ARRAY(float, W_stats), ARRAY(long, list),
                                ARRAY(ushort, out), long rows, long out_features, long in_features) {
    const long i = get_global_id(0);
    if (i >= rows * out_features) return;
    const long t = i / out_features, o = i % out_features;
    const global long* cols = AT(long, list);
    const long count = cols[in_features];
    const global ushort* a = AT(ushort, A) + t * in_features;
    const global char* w = AT(char, W) + o * in_features;
    const float stat = AT(float, W_stats)[o];
    float acc = -0.0f;
    for (long j = 0; j < count; ++j) {
        const long c = cols[j];
        const float wv = half_to_float(float_to_half(mul_rn(mul_rn((float)w[c], stat), kInv127)));
        acc = add_rn(acc, mul_rn(half_to_float(a[c]), wv));
    }
    global ushort* y = AT(ushort, out) + i;
    *y = float_to_half(add_rn(half_to_float(*y), acc));
}
