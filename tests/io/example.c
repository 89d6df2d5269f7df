/* The README's example (C99): describe one 4-bit layer of a checkpoint. Usage: example FILE PREFIX */
#include <stdio.h>

#include "kbit/kbit_io.h"

int main(int argc, char** argv) {
    kbit_io_checkpoint* ck;
    const kbit_io_quant* q;
    if (argc != 3) return 2;
    if (kbit_io_open(argv[1], &ck) != KBIT_STATUS_SUCCESS ||
        kbit_io_quant_find(ck, argv[2], &q) != KBIT_STATUS_SUCCESS) {
        fprintf(stderr, "%s\n", kbit_io_last_error_message());
        return 1;
    }
    /* q->weight, q->absmax, q->quant_map (and when nested q->nested_*) go straight to the kernels:
     * kbit_nested_absmax_dequantize(), then cdequantize_blockwise_fp32_nf4() or cgemm_4bit_*(). */
    printf("%s: %s, blocksize %d, %llu elements, %s, absmax %llu bytes\n", q->prefix, kbit_io_format_name(q->format),
           (int)q->blocksize, (unsigned long long)q->numel, q->nested ? "nested" : "not nested",
           (unsigned long long)q->absmax_bytes);
    kbit_io_close(ck);
    return 0;
}
