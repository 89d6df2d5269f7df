// nested_absmax.cl — bitsandbytes' double quantization of the 4-bit block scales: offset = the mean
// of the scales (summed in double in index order, as the reference), then absmax[b] - offset
// quantized blockwise with the 8-bit code; and its inverse, code[q] * nested + offset.
#define NESTED_GROUP 64

// One work-item: the reference's sequential double sum (an order-dependent rounding; a tree would
// differ in the last bit of the offset now and then). Only where the device has doubles: elsewhere
// the program still builds, and nested_absmax_quantize says why it cannot run (src/ops_4bit.cpp).
#ifdef cl_khr_fp64
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
kernel void nested_mean(ARRAY(float, absmax), ARRAY(float, offset), long blocks) {
    const global float* a = AT(float, absmax);
    double sum = 0.0;
    for (long b = 0; b < blocks; ++b) sum += a[b];
    *AT(float, offset) = (float)(sum / (double)blocks);
}
#endif

// One group per nested block.
kernel void nested_quantize(ARRAY(float, absmax), ARRAY(float, code), ARRAY(uchar, qabsmax),
                            ARRAY(float, nested_absmax), ARRAY(float, offset), long blocks, long nested_blocksize) {
    local float partial[NESTED_GROUP];
    const long nb = get_group_id(0);
    const int lid = get_local_id(0);
    const long begin = nb * nested_blocksize, end = min(begin + nested_blocksize, blocks);
    const global float* a = AT(float, absmax);
    const float mean = *AT(float, offset);
    float amax = absmax_start(end - begin, nested_blocksize);
    for (long b = begin + lid; b < end; b += NESTED_GROUP) amax = absmax_fold(amax, a[b] - mean);
    amax = group_absmax(amax, partial);
    if (lid == 0) AT(float, nested_absmax)[nb] = amax;
    const float r = 1.0f / amax;
    for (long b = begin + lid; b < end; b += NESTED_GROUP)
        AT(uchar, qabsmax)[b] = code8_index(AT(float, code), (a[b] - mean) * r);
}

kernel void nested_dequantize(ARRAY(uchar, qabsmax), ARRAY(float, code), ARRAY(float, nested_absmax), float offset,
                              ARRAY(float, absmax), long blocks, long nested_blocksize) {
    const long b = get_global_id(0);
    if (b >= blocks) return;
    const float scaled = mul_rn(AT(float, code)[AT(uchar, qabsmax)[b]], AT(float, nested_absmax)[b / nested_blocksize]);
    AT(float, absmax)[b] = add_rn(scaled, offset);
}
