// bitsandbytes' double quantization of 4-bit block scales (compress_statistics=True) and its
// inverse: kbit::ops::nested_absmax_quantize and nested_absmax_dequantize (kbit_ops_4bit.h), on the
// caller's stream. IEEE fp32 (this file is compiled with --fmad=false); NaN results carry x86 bits.
#include "blockwise_8bit.h"
#include "cuda_check.h"
#include "cuda_elem.cuh"
#include "kbit_ops_4bit.h"
#include "seq_sum.cuh"

namespace kbit::cuda {
namespace {

// offset = fp32(sum / blocks), the sum in double in index order.
struct WriteMean {
    float* out;
    __device__ void operator()(double sum, int64_t count) const {
        *out = __double2float_rn(__ddiv_rn(sum, static_cast<double>(count)));
    }
};

__global__ void __launch_bounds__(256)
nested_dequantize_kernel(const uint8_t* __restrict__ q, const float* __restrict__ code,
                         const float* __restrict__ nested, float offset, float* __restrict__ absmax, int64_t blocks,
                         int log2_nested) {
    for (int64_t b = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; b < blocks; b += int64_t{gridDim.x} * blockDim.x)
        absmax[b] = add_rn(mul_rn(__ldg(code + q[b]), __ldg(nested + (b >> log2_nested))), offset);
}

}  // namespace
}  // namespace kbit::cuda

namespace kbit::ops {

kbit_status nested_absmax_quantize(const char* fn, const float* absmax, const float* code, uint8_t* qabsmax,
                                   float* nested_absmax, float* offset, int64_t blocks, int64_t nested_blocksize,
                                   void* stream) {
    const cudaStream_t s = cuda::to_stream(stream);
    cuda::seq_sum_kernel<<<1, 1, 0, s>>>(absmax, blocks, cuda::WriteMean{offset});
    if (kbit_status st = cuda::check_launch(fn, "seq_sum_kernel"); st != KBIT_STATUS_SUCCESS) return st;
    // absmax[b] - offset, quantized with the blockwise 8-bit rule (offset read on the device).
    return cuda::quantize_blockwise_8bit_centred(fn, code, absmax, offset, nested_absmax, qabsmax, nested_blocksize,
                                                 blocks, stream);
}

kbit_status nested_absmax_dequantize(const char* fn, const uint8_t* qabsmax, const float* code,
                                     const float* nested_absmax, float offset, float* absmax, int64_t blocks,
                                     int64_t nested_blocksize, void* stream) {
    cuda::nested_dequantize_kernel<<<cuda::grid_for((blocks + 255) / 256), 256, 0, cuda::to_stream(stream)>>>(
        qabsmax, code, nested_absmax, offset, absmax, blocks, cuda::log2_of(nested_blocksize));
    return cuda::check_launch(fn, "nested_dequantize_kernel");
}

}  // namespace kbit::ops
