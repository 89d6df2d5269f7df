// blockwise_8bit.cl — blockwise dynamic 8-bit quantize and dequantize against the caller's 256-entry
// table (kbit_ops_8bit.h), byte-equal to the reference: absmax per block (common.cl's fold), y = x *
// (1 / absmax) in fp32, and the index of the backend kit's code8_index (kbit_code8.h); dequantize
// multiplies the table entry by the block's absmax with x86's NaN bits.
//
// Both kernels copy the table to local memory first: the quantizer looks at up to nine entries of it
// per element, the dequantizer at one, and local memory answers those scattered reads faster than
// global memory on a GPU.

#define CODE_ENTRIES 256
#define GROUP 256      // work-items per work-group of both kernels (a power of two)
#define ITEM_ELEMS 8   // elements per work-item of dequantize_8bit

// The table into local memory, by however many work-items the group has.
void load_table(local float* table, const global float* code) {
    for (int j = get_local_id(0); j < CODE_ENTRIES; j += get_local_size(0)) table[j] = code[j];
}

// Work-groups of GROUP work-items; each block gets a segment of min(blocksize, GROUP) of them
// (several blocks per group for blocksizes below GROUP, so the table is loaded once per GROUP
// elements at least). Each work-item folds a strided part of its block, a tree in local memory folds
// the parts of each segment (max is exact and NaN never enters a part, so the order does not
// matter), then each work-item codes its strided part.
kernel void quantize_8bit(ARRAY(float, code), ARRAY(uchar, A), ARRAY(float, absmax), ARRAY(uchar, out), int dt,
                          long blocksize, long n) {
    local float table[CODE_ENTRIES];
    local float partial[GROUP];
    const int lid = get_local_id(0);
    const int seg = (int)min(blocksize, (long)GROUP);  // a power of two dividing GROUP
    const int first = lid - lid % seg;                 // the segment's first work-item
    const long block = get_group_id(0) * (GROUP / seg) + lid / seg;
    const long begin = block * blocksize;
    const long end = min(begin + blocksize, n);  // end <= begin past the last block: nothing to do
    const global uchar* a = AT(uchar, A);
    load_table(table, AT(float, code));

    float amax = absmax_start(end - begin, blocksize);
    for (long i = begin + lid - first; i < end; i += seg) amax = absmax_fold(amax, load_elem(a, i, dt));
    partial[lid] = amax;
    for (int width = seg / 2; width > 0; width /= 2) {
        barrier(CLK_LOCAL_MEM_FENCE);
        if (lid - first < width && partial[lid + width] > partial[lid]) partial[lid] = partial[lid + width];
    }
    barrier(CLK_LOCAL_MEM_FENCE);  // also publishes the table
    amax = partial[first];
    if (begin >= n) return;
    if (lid == first) AT(float, absmax)[block] = amax;

    const float r = 1.0f / amax;  // a zero block: +inf, and 0 * inf = NaN codes to 0
    global uchar* codes = AT(uchar, out);
    for (long i = begin + lid - first; i < end; i += seg) codes[i] = code8_index_local(table, load_elem(a, i, dt) * r);
}

// Work-groups of GROUP work-items that share the table, each work-item ITEM_ELEMS elements GROUP
// apart (neighbouring work-items touch neighbouring elements).
kernel void dequantize_8bit(ARRAY(float, code), ARRAY(uchar, A), ARRAY(float, absmax), ARRAY(uchar, out), int dt,
                            long blocksize, long n) {
    local float table[CODE_ENTRIES];
    load_table(table, AT(float, code));
    barrier(CLK_LOCAL_MEM_FENCE);
    const global uchar* q = AT(uchar, A);
    const global float* m = AT(float, absmax);
    global uchar* y = AT(uchar, out);
    const long base = get_group_id(0) * (GROUP * ITEM_ELEMS) + get_local_id(0);
    for (int e = 0; e < ITEM_ELEMS; ++e) {
        const long i = base + e * GROUP;
        if (i < n) store_elem(y, i, dt, mul_rn(table[q[i]], m[i / blocksize]));
    }
}
