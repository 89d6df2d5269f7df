// gemm_4bit.cl — 4-bit GEMV (bitsandbytes' inference GEMV, the caller's 16-entry table) and GEMM
// (out = A W^T + bias, plain or nested absmax), fp32 accumulation. One work-group per output
// element: each work-item sums whole runs of one block (partial sums scaled once per block, as the
// reference does), then the group adds the work-items' totals in a fixed tree: results are
// deterministic and within the class-F bounds of the conformance suite.

#define DOT_GROUP 64

// The sum over this work-item's runs of elements kk in [0, k) of the weight row starting at nibble
// `base`: run u covers the elements of block base / blocksize + u.
float dot_runs(const global uchar* a, int dt, const global uchar* w, long base, long k, long blocksize,
               const float* lut, const global float* absmax, const global uchar* absmax_8bit,
               const global float* absmax_code, const global float* absmax_offset) {
    const long first_block = base / blocksize;
    const long runs = k == 0 ? 0 : (base + k - 1) / blocksize - first_block + 1;  // k = 0: no input is read
    float total = 0.0f;
    for (long u = get_local_id(0); u < runs; u += DOT_GROUP) {
        const long beta = first_block + u;
        const long begin = max(0L, beta * blocksize - base), end = min(k, (beta + 1) * blocksize - base);
        float partial = 0.0f;
        for (long kk = begin; kk < end; ++kk) partial += load_elem(a, kk, dt) * lut[nibble_at(w, base + kk)];
        const float scale = absmax_8bit == 0 ? absmax[beta]
                                             : absmax_code[absmax_8bit[beta]] * absmax[beta >> 8] + *absmax_offset;
        total += partial * scale;
    }
    return total;
}

// The group's sum of each work-item's `mine`, in the same order for every call.
float group_sum(float mine, local float* scratch) {
    const int lid = get_local_id(0);
    scratch[lid] = mine;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int stride = DOT_GROUP / 2; stride > 0; stride >>= 1) {
        if (lid < stride) scratch[lid] += scratch[lid + stride];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    return scratch[0];
}

// out[r] = A . row r of B (rows of 2 * ldb nibbles), one group per r < m.
kernel void gemv_4bit(ARRAY(uchar, A), ARRAY(uchar, B), ARRAY(float, absmax), ARRAY(float, datatype),
                      ARRAY(uchar, out), int dt, int k, int ldb, int blocksize) {
    local float scratch[DOT_GROUP];
    float lut[16];
    for (int j = 0; j < 16 && k > 0; ++j) lut[j] = AT(float, datatype)[j];
    const long r = get_group_id(0);
    const float sum = group_sum(dot_runs(AT(uchar, A), dt, AT(uchar, B), r * 2 * (long)ldb, k, blocksize, lut,
                                         AT(float, absmax), 0, 0, 0),
                                scratch);
    if (get_local_id(0) == 0) store_elem(AT(uchar, out), r, dt, sum);
}

// out[i][j] = A[i] . W[j] (+ bias[j]), one group per (i, j) < (M, N); absmax_8bit NULL: plain absmax.
kernel void gemm_4bit(ARRAY(uchar, A), ARRAY(uchar, B), ARRAY(float, absmax), ARRAY(uchar, absmax_8bit),
                      ARRAY(float, absmax_code), ARRAY(float, absmax_offset), ARRAY(uchar, out), ARRAY(uchar, bias),
                      int dt, int N, int K, int blocksize, int qt) {
    local float scratch[DOT_GROUP];
    float lut[16];
    for (int j = 0; j < 16; ++j) lut[j] = value_4bit(qt, j);
    const long cell = get_group_id(0);
    const long i = cell / N, j = cell % N;
    const bool nested = absmax_8bit_buf != 0;
    float sum = group_sum(dot_runs(AT(uchar, A) + i * K * (dt == KBIT_DTYPE_FP32 ? 4 : 2), dt, AT(uchar, B), j * K,
                                   K, blocksize, lut, AT(float, absmax), nested ? AT(uchar, absmax_8bit) : 0,
                                   nested ? AT(float, absmax_code) : 0, nested ? AT(float, absmax_offset) : 0),
                          scratch);
    if (get_local_id(0) == 0) {
        if (bias_buf != 0) sum += load_elem(AT(uchar, bias), j, dt);
        store_elem(AT(uchar, out), cell, dt, sum);
    }
}
