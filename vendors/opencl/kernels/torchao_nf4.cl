// torchao_nf4.cl — torchao's NF4Tensor format, every step rounded to the element type as torch
// evaluates it (kbit_torchao_math.h): block scalers, nearest-entry indices, and dequantization. The
// scaler mean and int8 second level run on the host (kbit_torchao_scalers.h, src/ops_4bit.cpp).
// kTorchaoNf4[dt] (the prelude) is torchao's table rounded to each element type.

// One work-item per block: max |w| (a NaN anywhere gives NaN), stored as T.
kernel void torchao_block_scalers(ARRAY(uchar, w), ARRAY(uchar, scalers), int dt, long blocks, long block_size) {
    const long b = get_global_id(0);
    if (b >= blocks) return;
    float amax = 0.0f;
    bool nan = false;
    for (long i = b * block_size; i < (b + 1) * block_size; ++i) {
        const float a = fabs(load_elem(AT(uchar, w), i, dt));
        nan |= a != a;
        amax = amax < a ? a : amax;
    }
    store_elem(AT(uchar, scalers), b, dt, nan ? as_float(0x7FC00000u) : amax);
}

// The entry nearest v: the first smallest |v - table[j]| (rounded to T); a NaN distance picks j.
uchar torchao_nearest(int dt, float v, constant const float* table) {
    int best = 0;
    float best_diff = fabs(round_to(dt, sub_rn(v, table[0])));
    if (best_diff != best_diff) return 0;
    for (int j = 1; j < 16; ++j) {
        const float d = fabs(round_to(dt, sub_rn(v, table[j])));
        if (d != d) return (uchar)j;
        if (d < best_diff) {
            best_diff = d;
            best = j;
        }
    }
    return (uchar)best;
}

// One work-item per output byte (elements 2j and 2j + 1 share a block: block_size is even).
kernel void torchao_indices(ARRAY(uchar, w), ARRAY(uchar, scalers), ARRAY(uchar, out), int dt, long bytes,
                            long block_size) {
    const long j = get_global_id(0);
    if (j >= bytes) return;
    constant const float* table = kTorchaoNf4[dt == KBIT_DTYPE_FP32 ? 0 : dt == KBIT_DTYPE_FP16 ? 1 : 2];
    const float s = load_elem(AT(uchar, scalers), 2 * j / block_size, dt);
    const global uchar* a = AT(uchar, w);
    const uchar hi = torchao_nearest(dt, round_to(dt, div_rn(load_elem(a, 2 * j, dt), s)), table);
    const uchar lo = torchao_nearest(dt, round_to(dt, div_rn(load_elem(a, 2 * j + 1, dt), s)), table);
    AT(uchar, out)[j] = (uchar)((hi << 4) | lo);
}

// One work-item per output byte.
kernel void torchao_dequantize(ARRAY(uchar, qdata), ARRAY(char, qscalers), ARRAY(uchar, factor),
                               ARRAY(uchar, scaler_mean), ARRAY(uchar, out), int dt, long bytes, long block_size,
                               long scaler_block_size) {
    const long j = get_global_id(0);
    if (j >= bytes) return;
    constant const float* table = kTorchaoNf4[dt == KBIT_DTYPE_FP32 ? 0 : dt == KBIT_DTYPE_FP16 ? 1 : 2];
    const long b = 2 * j / block_size;
    const float mean = load_elem(AT(uchar, scaler_mean), 0, dt);
    const float f = load_elem(AT(uchar, factor), b / scaler_block_size, dt);
    const float scaler = round_to(dt, add_rn(round_to(dt, div_rn((float)AT(char, qscalers)[b], f)), mean));
    const uchar byte = AT(uchar, qdata)[j];
    store_elem(AT(uchar, out), 2 * j, dt, mul_rn(table[byte >> 4], scaler));
    store_elem(AT(uchar, out), 2 * j + 1, dt, mul_rn(table[byte & 0xF], scaler));
}
