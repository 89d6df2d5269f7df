// torchao's NF4Tensor format (to_nf4 / get_original_weight): kbit::ops::torchao_quantize and
// torchao_dequantize (kbit_ops_4bit.h), on the caller's stream, byte-identical to the CPU backend:
//   1. block scalers (max |w| per block, in T) on the GPU, one thread per block;
//   2. the scaler stage on the host: the scalers are copied to the host and kbit::ref::torchao_scalers
//      (the reference itself) computes the mean in torch's single-thread AVX2 cascade order, the
//      factors and the int8 codes, which are copied back. A GPU reduction would have to replay that
//      cascade on one thread; the copy moves 2-4 bytes per block (1/32 of an fp16 weight at block
//      size 64) once per weight, and the call waits for it (stream synchronization);
//   3. the packed NF4 indices on the GPU, one thread per byte.
// Dequantization is one GPU pass. Arithmetic: kbit_torchao_math.h, the functions the reference
// calls (compiled with --fmad=false).
#include <vector>

#include "cuda_check.h"
#include "cuda_elem.cuh"
#include "kbit_dtype.h"
#include "kbit_ops_4bit.h"
#include "kbit_torchao_math.h"
#include "ref_4bit.h"

namespace kbit::cuda {
namespace {

template <class T>
struct Nf4Table {
    float v[16];
};

// torchao's table in T, as fp32 (passed to the kernels by value).
template <class T>
Nf4Table<T> nf4_table() {
    Nf4Table<T> t{};
    for (int j = 0; j < 16; ++j) t.v[j] = torchao_nf4_value<T>(j);
    return t;
}

template <class T>
__global__ void block_scaler_kernel(const T* __restrict__ w, T* __restrict__ scalers, int64_t blocks,
                                    int64_t block_size) {
    for (int64_t b = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; b < blocks; b += int64_t{gridDim.x} * blockDim.x)
        scalers[b] = torchao_block_scaler(w + b * block_size, block_size);
}

// One thread per output byte (elements 2j and 2j + 1, always in the same block: block_size is even).
template <class T>
__global__ void nf4_index_kernel(const T* __restrict__ w, const T* __restrict__ scalers, uint8_t* __restrict__ out,
                                 int64_t bytes, int64_t block_size, Nf4Table<T> table) {
    __shared__ float nf4[16];
    if (threadIdx.x < 16) nf4[threadIdx.x] = table.v[threadIdx.x];
    __syncthreads();
    for (int64_t j = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; j < bytes; j += int64_t{gridDim.x} * blockDim.x) {
        const float s = Elem<T>::load(scalers[2 * j / block_size]);
        const uint8_t hi = torchao_element_index<T>(Elem<T>::load(w[2 * j]), s, nf4);
        const uint8_t lo = torchao_element_index<T>(Elem<T>::load(w[2 * j + 1]), s, nf4);
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
        const float scaler =
            torchao_restored_scaler<T>(qscalers[b], Elem<T>::load(factor[b / scaler_block_size]), mean);
        const uint8_t byte = qdata[j];
        out[2 * j] = torchao_dequantize_element<T>(nf4[byte >> 4], scaler);
        out[2 * j + 1] = torchao_dequantize_element<T>(nf4[byte & 0xFu], scaler);
    }
}

// Step 2 (see the top of the file) for the scalers in device memory.
template <class T>
kbit_status host_scaler_stage(const char* fn, const T* d_scalers, int8_t* qscalers, T* factor, T* scaler_mean,
                              int64_t blocks, int64_t scaler_block_size, cudaStream_t stream) {
    const int64_t groups = blocks / scaler_block_size;
    std::vector<T> scalers(static_cast<size_t>(blocks)), f(static_cast<size_t>(groups)), mean(1);
    std::vector<int8_t> q(static_cast<size_t>(blocks));
    KBIT_CUDA_TRY(fn, "cudaMemcpyAsync (scalers to host)",
                  cudaMemcpyAsync(scalers.data(), d_scalers, blocks * sizeof(T), cudaMemcpyDeviceToHost, stream));
    KBIT_CUDA_TRY(fn, "cudaStreamSynchronize", cudaStreamSynchronize(stream));
    ref::torchao_scalers(scalers.data(), q.data(), f.data(), mean.data(), blocks, scaler_block_size);
    // Pageable sources: each copy returns once the data is staged, so the vectors may go out of scope.
    KBIT_CUDA_TRY(fn, "cudaMemcpyAsync (quantized_scalers)",
                  cudaMemcpyAsync(qscalers, q.data(), blocks, cudaMemcpyHostToDevice, stream));
    KBIT_CUDA_TRY(fn, "cudaMemcpyAsync (quantization_factor)",
                  cudaMemcpyAsync(factor, f.data(), groups * sizeof(T), cudaMemcpyHostToDevice, stream));
    KBIT_CUDA_TRY(fn, "cudaMemcpyAsync (scaler_mean)",
                  cudaMemcpyAsync(scaler_mean, mean.data(), sizeof(T), cudaMemcpyHostToDevice, stream));
    return KBIT_STATUS_SUCCESS;
}

template <class T>
kbit_status quantize(const char* fn, const T* w, uint8_t* qdata, int8_t* qscalers, T* factor, T* scaler_mean,
                     int64_t n, int64_t block_size, int64_t scaler_block_size, cudaStream_t stream) {
    const int64_t blocks = n / block_size;
    T* scalers = nullptr;
    KBIT_CUDA_TRY(fn, "cudaMallocAsync (block scalers)",
                  cudaMallocAsync(reinterpret_cast<void**>(&scalers), blocks * sizeof(T), stream));
    block_scaler_kernel<T><<<grid_for((blocks + 255) / 256), 256, 0, stream>>>(w, scalers, blocks, block_size);
    kbit_status st = check_launch(fn, "block_scaler_kernel");
    if (st == KBIT_STATUS_SUCCESS)
        st = host_scaler_stage(fn, scalers, qscalers, factor, scaler_mean, blocks, scaler_block_size, stream);
    if (st == KBIT_STATUS_SUCCESS) {
        nf4_index_kernel<T><<<grid_for((n / 2 + 255) / 256), 256, 0, stream>>>(w, scalers, qdata, n / 2, block_size,
                                                                              nf4_table<T>());
        st = check_launch(fn, "nf4_index_kernel");
    }
    const cudaError_t freed = cudaFreeAsync(scalers, stream);
    if (st == KBIT_STATUS_SUCCESS && freed != cudaSuccess)
        return device_error(fn, "cudaFreeAsync (block scalers)", freed);
    return st;
}

template <class T>
kbit_status dequantize(const char* fn, const uint8_t* qdata, const int8_t* qscalers, const T* factor,
                       const T* scaler_mean, T* out, int64_t n, int64_t block_size, int64_t scaler_block_size,
                       cudaStream_t stream) {
    torchao_dequantize_kernel<T><<<grid_for((n / 2 + 255) / 256), 256, 0, stream>>>(
        qdata, qscalers, factor, scaler_mean, out, n / 2, block_size, scaler_block_size, nf4_table<T>());
    return check_launch(fn, "torchao_dequantize_kernel");
}

}  // namespace
}  // namespace kbit::cuda

namespace kbit::ops {

template <class T>
kbit_status torchao_quantize(const char* fn, const T* w, uint8_t* quantized_data, int8_t* quantized_scalers,
                             T* quantization_factor, T* scaler_mean, int64_t n, int64_t block_size,
                             int64_t scaler_block_size, void* stream) {
    return cuda::quantize(fn, w, quantized_data, quantized_scalers, quantization_factor, scaler_mean, n, block_size,
                          scaler_block_size, cuda::to_stream(stream));
}

template <class T>
kbit_status torchao_dequantize(const char* fn, const uint8_t* quantized_data, const int8_t* quantized_scalers,
                               const T* quantization_factor, const T* scaler_mean, T* out, int64_t n,
                               int64_t block_size, int64_t scaler_block_size, void* stream) {
    return cuda::dequantize(fn, quantized_data, quantized_scalers, quantization_factor, scaler_mean, out, n,
                            block_size, scaler_block_size, cuda::to_stream(stream));
}

KBIT_INSTANTIATE_FOR_ELEMENT_TYPES(torchao_quantize);
KBIT_INSTANTIATE_FOR_ELEMENT_TYPES(torchao_dequantize);

}  // namespace kbit::ops
