/*
 * checkpoint_gemv.c — one layer of a transformers bnb-4bit checkpoint, run as an engine would (C99):
 * open the checkpoint with libkbit_io (memory-mapped), take the layer's packed weight and scales
 * straight from the mapping, restore nested scales, and compute y = W x with the 4-bit GEMV of
 * libkbit.so (cgemm_4bit_inference_naive_fp32, bitsandbytes' arguments). The result is checked against
 * a double-precision GEMV over the dequantized weight.
 *
 *   kbit_checkpoint_gemv CHECKPOINT PREFIX      (a .safetensors file or a model directory)
 *
 * Exit status 0 when the GEMV agrees with the reference within fp32 accumulation error, 1 otherwise or
 * when a call fails, 2 for a usage error. Host memory throughout: run it on the CPU backend
 * (KBIT_BACKEND=cpu), or copy the arrays to the device first for another one.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kbit/kbit.h"
#include "kbit/kbit_io.h"

/* `what` is NULL for the libraries' messages, which already start with the function's name. */
static int fail(const char* what, const char* message) {
    if (what != NULL)
        fprintf(stderr, "kbit_checkpoint_gemv: %s: %s\n", what, message);
    else
        fprintf(stderr, "kbit_checkpoint_gemv: %s\n", message);
    return 1;
}

int main(int argc, char** argv) {
    kbit_io_checkpoint* ck;
    const kbit_io_quant* q;
    float code[16], *absmax, *w, *x, *y;
    int rows, cols, r, c, rc = 0;
    double max_err = 0.0, max_ref = 0.0;
    if (argc != 3) {
        fprintf(stderr, "usage: kbit_checkpoint_gemv CHECKPOINT PREFIX\n");
        return 2;
    }
    if (kbit_io_open(argv[1], &ck) != KBIT_STATUS_SUCCESS) return fail(NULL, kbit_io_last_error_message());
    if (kbit_io_quant_find(ck, argv[2], &q) != KBIT_STATUS_SUCCESS) {
        rc = fail(NULL, kbit_io_last_error_message());
        kbit_io_close(ck);
        return rc;
    }
    if (q->format == KBIT_IO_FORMAT_INT8 || q->ndim != 2 || !q->aligned) {
        kbit_io_close(ck);
        return fail(argv[2], "not an aligned 2-D 4-bit layer (this example runs NF4/FP4 linear layers)");
    }
    rows = (int)q->shape[0]; /* out_features */
    cols = (int)q->shape[1]; /* in_features */
    absmax = malloc(q->blocks * sizeof(float));
    w = malloc(q->numel * sizeof(float));
    x = malloc((size_t)cols * sizeof(float));
    y = malloc((size_t)rows * sizeof(float));
    if (!absmax || !w || !x || !y) return fail("malloc", "out of memory");
    memcpy(code, q->quant_map, sizeof code); /* the GEMV's `datatype` table (non-const in its signature) */
    /* Nested (compress_statistics): the scales are uint8 codes of absmax - offset. */
    if (q->nested) {
        if (kbit_nested_absmax_dequantize(q->absmax, q->nested_quant_map, q->nested_absmax, q->nested_offset, absmax,
                                          (int64_t)q->blocks, q->nested_blocksize, NULL) != KBIT_STATUS_SUCCESS)
            return fail(NULL, kbit_last_error_message());
    } else {
        memcpy(absmax, q->absmax, q->absmax_bytes);
    }
    for (c = 0; c < cols; ++c) x[c] = (float)sin(0.37 * c + 0.1);
    /* y = W x: m = rows, n = 1, k = cols, ldb = cols / 2 (the packed weight is row-major [rows, cols]). */
    if (cgemm_4bit_inference_naive_fp32(rows, 1, cols, x, (unsigned char*)q->weight, absmax, code, y, rows,
                                        cols / 2, rows, q->blocksize, NULL) != KBIT_STATUS_SUCCESS)
        return fail(NULL, kbit_last_error_message());
    /* The reference: the same weight dequantized, multiplied in double. */
    if (kbit_dequantize_4bit(q->format == KBIT_IO_FORMAT_NF4 ? KBIT_QUANT_NF4 : KBIT_QUANT_FP4, KBIT_DTYPE_FP32,
                             q->weight, absmax, w, q->blocksize, (int64_t)q->numel, NULL) != KBIT_STATUS_SUCCESS)
        return fail(NULL, kbit_last_error_message());
    for (r = 0; r < rows; ++r) {
        double ref = 0.0, mag = 0.0;
        for (c = 0; c < cols; ++c) {
            ref += (double)w[(size_t)r * cols + c] * x[c];
            mag += fabs((double)w[(size_t)r * cols + c] * x[c]);
        }
        /* fp32 accumulation of `cols` products: |error| <= cols * 2^-23 * sum |w x| (generous). */
        if (fabs(y[r] - ref) > cols * 0x1p-23 * mag + 1e-30) rc = 1;
        if (fabs(y[r] - ref) > max_err) max_err = fabs(y[r] - ref);
        if (fabs(ref) > max_ref) max_ref = fabs(ref);
    }
    printf("%s: %s %dx%d, blocksize %d, %s: y = W x for %d outputs, max |y| %.4g, max |y - ref| %.3g%s\n", q->prefix,
           kbit_io_format_name(q->format), rows, cols, (int)q->blocksize, q->nested ? "nested" : "not nested", rows,
           max_ref, max_err, rc ? " (OUT OF BOUND)" : "");
    free(absmax);
    free(w);
    free(x);
    free(y);
    kbit_io_close(ck);
    return rc;
}
