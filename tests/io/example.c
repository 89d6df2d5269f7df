/* The example of docs/checkpoints.md (C99): open a checkpoint with libkbit_io, dequantize one 4-bit layer with the
 * kernels of libkbit.so (host memory: the CPU backend) straight from the described pointers.
 * Usage: example PATH PREFIX */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kbit/kbit.h"
#include "kbit/kbit_io.h"

int main(int argc, char** argv) {
    kbit_io_checkpoint* ck;
    const kbit_io_quant* q;
    float *absmax, *w, max = 0.0f;
    uint64_t i;
    if (argc != 3) return 2;
    if (kbit_io_open(argv[1], &ck) != KBIT_STATUS_SUCCESS ||
        kbit_io_quant_find(ck, argv[2], &q) != KBIT_STATUS_SUCCESS) {
        fprintf(stderr, "%s\n", kbit_io_last_error_message());
        return 1;
    }
    if (q->format == KBIT_IO_FORMAT_INT8) return 1;
    absmax = malloc(q->blocks * sizeof(float));
    w = malloc(q->numel * sizeof(float));
    if (q->nested) /* uint8 codes of absmax - offset, in blocks of nested_blocksize */
        kbit_nested_absmax_dequantize(q->absmax, q->nested_quant_map, q->nested_absmax, q->nested_offset,
                                      absmax, (int64_t)q->blocks, q->nested_blocksize, NULL);
    else
        memcpy(absmax, q->absmax, q->absmax_bytes);
    if (kbit_dequantize_4bit(q->format == KBIT_IO_FORMAT_NF4 ? KBIT_QUANT_NF4 : KBIT_QUANT_FP4, KBIT_DTYPE_FP32,
                             q->weight, absmax, w, q->blocksize, (int64_t)q->numel, NULL) != KBIT_STATUS_SUCCESS) {
        fprintf(stderr, "%s\n", kbit_last_error_message());
        return 1;
    }
    for (i = 0; i < q->numel; ++i) max = fabsf(w[i]) > max ? fabsf(w[i]) : max;
    printf("%s: %s, blocksize %d, %s, %llu weights dequantized, max |w| %g\n", q->prefix,
           kbit_io_format_name(q->format), (int)q->blocksize, q->nested ? "nested" : "not nested",
           (unsigned long long)q->numel, (double)max);
    free(absmax);
    free(w);
    kbit_io_close(ck);
    return 0;
}
