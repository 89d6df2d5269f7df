// torchao's NF4Tensor format (to_nf4 / get_original_weight), evaluated with the scalar rules of
// torchao_math.h so that the bytes match the CPU backend's. Quantization runs once per weight, so
// the kernels favour plain sequential loops (deterministic reductions) over speed.
#include "cuda_check.h"
#include "cuda_elem.cuh"
#include "cuda_ops.h"
#include "seq_sum.cuh"
#include "torchao_math.h"

namespace kbit::cuda {
namespace {

constexpr float kTorchaoNf4[16] = {KBIT_TORCHAO_NF4_VALUES};

template <class T>
struct Nf4Table {
    float v[16];
};

template <class T>
Nf4Table<T> nf4_table() {
    Nf4Table<T> t{};
    for (int j = 0; j < 16; ++j) t.v[j] = round_to<T>(kTorchaoNf4[j]);
    return t;
}

// s[b] = max |w| over block b (NaN propagates), in index order.
template <class T>
__global__ void block_absmax_kernel(const T* __restrict__ w, float* __restrict__ s, int64_t blocks, int64_t block_size) {
    for (int64_t b = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; b < blocks; b += int64_t{gridDim.x} * blockDim.x) {
        float acc = 0.0f;
        for (int64_t i = b * block_size; i < (b + 1) * block_size; ++i) acc = torch_absmax_step(acc, Elem<T>::load(w[i]));
        s[b] = acc;
    }
}

template <class T>
struct WriteTorchaoMean {
    T* scaler_mean;
    float* mean_f;
    __device__ void operator()(double sum, int64_t count) const {
        const float m = torchao_mean<T>(sum, count);
        *scaler_mean = Elem<T>::store(m);
        *mean_f = m;
    }
};

// One thread per scaler block: centred scalers, their absmax, the factor and the int8 codes.
template <class T>
__global__ void scaler_kernel(const float* __restrict__ s, const float* __restrict__ mean_f, int8_t* __restrict__ q,
                              T* __restrict__ factor, int64_t scaler_blocks, int64_t scaler_block_size) {
    const float mean = *mean_f;
    for (int64_t sb = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; sb < scaler_blocks;
         sb += int64_t{gridDim.x} * blockDim.x) {
        const int64_t b0 = sb * scaler_block_size, b1 = b0 + scaler_block_size;
        float amax = 0.0f;
        for (int64_t b = b0; b < b1; ++b) amax = torch_absmax_step(amax, t_sub<T>(s[b], mean));
        const float f = torchao_factor<T>(amax);
        factor[sb] = Elem<T>::store(f);
        for (int64_t b = b0; b < b1; ++b) q[b] = torchao_scaler_code<T>(t_sub<T>(s[b], mean), f);
    }
}

// One thread per output byte (elements 2j and 2j + 1, always in the same block: block_size is even).
template <class T>
__global__ void nf4_index_kernel(const T* __restrict__ w, const float* __restrict__ s, uint8_t* __restrict__ out,
                                 int64_t bytes, int64_t block_size, Nf4Table<T> table) {
    __shared__ float nf4[16];
    if (threadIdx.x < 16) nf4[threadIdx.x] = table.v[threadIdx.x];
    __syncthreads();
    for (int64_t j = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; j < bytes; j += int64_t{gridDim.x} * blockDim.x) {
        const float sb = s[2 * j / block_size];
        const uint8_t hi = torchao_nf4_index<T>(Elem<T>::load(w[2 * j]), sb, nf4);
        const uint8_t lo = torchao_nf4_index<T>(Elem<T>::load(w[2 * j + 1]), sb, nf4);
        out[j] = pack_nibbles(hi, lo);
    }
}

template <class T>
__global__ void torchao_dequantize_kernel(const uint8_t* __restrict__ qdata, const int8_t* __restrict__ qscalers,
                                          const T* __restrict__ factor, const T* __restrict__ scaler_mean,
                                          T* __restrict__ out, int64_t bytes, int64_t block_size,
                                          int64_t scaler_block_size, Nf4Table<T> table) {
    __shared__ float nf4[16];
    if (threadIdx.x < 16) nf4[threadIdx.x] = table.v[threadIdx.x];
    __syncthreads();
    const float mean = Elem<T>::load(*scaler_mean);
    for (int64_t j = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; j < bytes; j += int64_t{gridDim.x} * blockDim.x) {
        const int64_t b = 2 * j / block_size;
        const float scale = torchao_scaler<T>(qscalers[b], Elem<T>::load(factor[b / scaler_block_size]), mean);
        const uint8_t byte = qdata[j];
        out[2 * j] = Elem<T>::store(t_mul<T>(nf4[byte >> 4], scale));
        out[2 * j + 1] = Elem<T>::store(t_mul<T>(nf4[byte & 0xFu], scale));
    }
}

template <class T>
kbit_status quantize_t(const char* fn, const T* w, uint8_t* qdata, int8_t* qscalers, T* factor, T* scaler_mean,
                       int64_t n, int64_t block_size, int64_t scaler_block_size, cudaStream_t stream) {
    const int64_t blocks = n / block_size, scaler_blocks = blocks / scaler_block_size;
    float* scratch = nullptr;  // block scales, then the mean as fp32
    KBIT_CUDA_TRY(fn, "cudaMallocAsync (scratch)",
                  cudaMallocAsync(reinterpret_cast<void**>(&scratch), (blocks + 1) * sizeof(float), stream));
    float* mean_f = scratch + blocks;
    kbit_status st = KBIT_STATUS_SUCCESS;
    block_absmax_kernel<T><<<grid_for((blocks + 255) / 256), 256, 0, stream>>>(w, scratch, blocks, block_size);
    st = check_launch(fn, "block_absmax_kernel");
    if (st == KBIT_STATUS_SUCCESS) {
        seq_sum_kernel<<<1, 1, 0, stream>>>(scratch, blocks, WriteTorchaoMean<T>{scaler_mean, mean_f});
        st = check_launch(fn, "seq_sum_kernel");
    }
    if (st == KBIT_STATUS_SUCCESS) {
        scaler_kernel<T><<<grid_for((scaler_blocks + 127) / 128), 128, 0, stream>>>(scratch, mean_f, qscalers, factor,
                                                                                   scaler_blocks, scaler_block_size);
        st = check_launch(fn, "scaler_kernel");
    }
    if (st == KBIT_STATUS_SUCCESS) {
        nf4_index_kernel<T><<<grid_for((n / 2 + 255) / 256), 256, 0, stream>>>(w, scratch, qdata, n / 2, block_size,
                                                                              nf4_table<T>());
        st = check_launch(fn, "nf4_index_kernel");
    }
    const cudaError_t freed = cudaFreeAsync(scratch, stream);
    if (st == KBIT_STATUS_SUCCESS && freed != cudaSuccess) return device_error(fn, "cudaFreeAsync (scratch)", freed);
    return st;
}

template <class T>
kbit_status dequantize_t(const char* fn, const uint8_t* qdata, const int8_t* qscalers, const T* factor,
                         const T* scaler_mean, T* out, int64_t n, int64_t block_size, int64_t scaler_block_size,
                         cudaStream_t stream) {
    torchao_dequantize_kernel<T><<<grid_for((n / 2 + 255) / 256), 256, 0, stream>>>(
        qdata, qscalers, factor, scaler_mean, out, n / 2, block_size, scaler_block_size, nf4_table<T>());
    return check_launch(fn, "torchao_dequantize_kernel");
}

}  // namespace

kbit_status torchao_quantize(const char* fn, int32_t dtype, const void* w, uint8_t* quantized_data,
                             int8_t* quantized_scalers, void* quantization_factor, void* scaler_mean, int64_t n,
                             int64_t block_size, int64_t scaler_block_size, void* stream) {
    const cudaStream_t s = to_stream(stream);
    switch (dtype) {
        case KBIT_DTYPE_FP16:
            return quantize_t(fn, static_cast<const kbit_half*>(w), quantized_data, quantized_scalers,
                              static_cast<kbit_half*>(quantization_factor), static_cast<kbit_half*>(scaler_mean), n,
                              block_size, scaler_block_size, s);
        case KBIT_DTYPE_BF16:
            return quantize_t(fn, static_cast<const kbit_bf16*>(w), quantized_data, quantized_scalers,
                              static_cast<kbit_bf16*>(quantization_factor), static_cast<kbit_bf16*>(scaler_mean), n,
                              block_size, scaler_block_size, s);
        default:
            return quantize_t(fn, static_cast<const float*>(w), quantized_data, quantized_scalers,
                              static_cast<float*>(quantization_factor), static_cast<float*>(scaler_mean), n,
                              block_size, scaler_block_size, s);
    }
}

kbit_status torchao_dequantize(const char* fn, int32_t dtype, const uint8_t* quantized_data,
                               const int8_t* quantized_scalers, const void* quantization_factor,
                               const void* scaler_mean, void* out, int64_t n, int64_t block_size,
                               int64_t scaler_block_size, void* stream) {
    const cudaStream_t s = to_stream(stream);
    switch (dtype) {
        case KBIT_DTYPE_FP16:
            return dequantize_t(fn, quantized_data, quantized_scalers, static_cast<const kbit_half*>(quantization_factor),
                                static_cast<const kbit_half*>(scaler_mean), static_cast<kbit_half*>(out), n, block_size,
                                scaler_block_size, s);
        case KBIT_DTYPE_BF16:
            return dequantize_t(fn, quantized_data, quantized_scalers, static_cast<const kbit_bf16*>(quantization_factor),
                                static_cast<const kbit_bf16*>(scaler_mean), static_cast<kbit_bf16*>(out), n, block_size,
                                scaler_block_size, s);
        default:
            return dequantize_t(fn, quantized_data, quantized_scalers, static_cast<const float*>(quantization_factor),
                                static_cast<const float*>(scaler_mean), static_cast<float*>(out), n, block_size,
                                scaler_block_size, s);
    }
}

}  // namespace kbit::cuda
