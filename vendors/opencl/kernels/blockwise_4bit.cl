// blockwise_4bit.cl — NF4/FP4 blockwise quantize and dequantize (kbit_ops_4bit.h), byte-equal to the
// reference: absmax per block, y = x * (1 / absmax) in fp32, the code whose interval holds y, two codes
// per byte (the even element in the high nibble); dequantize multiplies the code's value by absmax.

#define QUANTIZE_GROUP 64

// One work-group per block: the group folds the block's absmax, then each work-item packs pairs.
kernel void quantize_4bit(ARRAY(uchar, A), ARRAY(float, absmax), ARRAY(uchar, out), int dt, int qt,
                          long blocksize, long n) {
    local float partial[QUANTIZE_GROUP];
    const long block = get_group_id(0);
    const int lid = get_local_id(0);
    const long begin = block * blocksize;
    const long end = min(begin + blocksize, n);
    const global uchar* a = AT(uchar, A);
    float amax = absmax_start(end - begin, blocksize);
    for (long i = begin + lid; i < end; i += QUANTIZE_GROUP) amax = absmax_fold(amax, load_elem(a, i, dt));
    amax = group_absmax(amax, partial);
    if (lid == 0) AT(float, absmax)[block] = amax;
    const float r = 1.0f / amax;
    global uchar* packed = AT(uchar, out);
    for (long i = begin + 2 * lid; i < end; i += 2 * QUANTIZE_GROUP) {
        const float y0 = load_elem(a, i, dt) * r;
        const float y1 = (i + 1 < n ? load_elem(a, i + 1, dt) : 0.0f) * r;  // odd n: a zero pads the byte
        packed[i / 2] = (uchar)((index_4bit(qt, y0) << 4) | index_4bit(qt, y1));
    }
}

// One work-item per element.
kernel void dequantize_4bit(ARRAY(uchar, A), ARRAY(float, absmax), ARRAY(uchar, out), int dt, int qt,
                            long blocksize, long n) {
    const long i = get_global_id(0);
    if (i >= n) return;
    const float v = value_4bit(qt, nibble_at(AT(uchar, A), i));
    store_elem(AT(uchar, out), i, dt, mul_rn(v, AT(float, absmax)[i / blocksize]));
}
