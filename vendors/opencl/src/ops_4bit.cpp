// The 4-bit operations (kbit_ops_4bit.h) on OpenCL: kernels/blockwise_4bit.cl.
#include "device_memory.h"
#include "kbit_half.h"
#include "kbit_ops_4bit.h"
#include "programs.h"

namespace kbit::ops {

using namespace kbit::opencl;

namespace {
constexpr size_t kQuantizeGroup = 64;  // QUANTIZE_GROUP of blockwise_4bit.cl
int64_t blocks_of(int64_t n, int64_t blocksize) { return (n + blocksize - 1) / blocksize; }
}  // namespace

template <class T>
kbit_status quantize_4bit(const char* fn, QuantType qt, const T* A, float* absmax, uint8_t* out, int64_t blocksize,
                          int64_t n, void* stream) {
    return run([&] {
        const int64_t blocks = blocks_of(n, blocksize);
        launch(fn, queue_of(fn, stream), Program::Blockwise4bit, "quantize_4bit",
               static_cast<size_t>(blocks) * kQuantizeGroup, kQuantizeGroup, resolve_array(fn, A, n, "A"),
               resolve_array(fn, absmax, blocks, "absmax"), resolve_array(fn, out, (n + 1) / 2, "out"),
               Elem<T>::dtype, static_cast<int32_t>(qt), blocksize, n);
    });
}

template <class T>
kbit_status dequantize_4bit(const char* fn, QuantType qt, const uint8_t* A, const float* absmax, T* out,
                            int64_t blocksize, int64_t n, void* stream) {
    return run([&] {
        launch(fn, queue_of(fn, stream), Program::Blockwise4bit, "dequantize_4bit", static_cast<size_t>(n), 0,
               resolve_array(fn, A, (n + 1) / 2, "A"), resolve_array(fn, absmax, blocks_of(n, blocksize), "absmax"),
               resolve_array(fn, out, n, "out"), Elem<T>::dtype, static_cast<int32_t>(qt), blocksize, n);
    });
}

#define KBIT_OPENCL_4BIT(T)                                    \
    template decltype(quantize_4bit<T>) quantize_4bit<T>;      \
    template decltype(dequantize_4bit<T>) dequantize_4bit<T>;
KBIT_OPENCL_4BIT(float)
KBIT_OPENCL_4BIT(kbit_half)
KBIT_OPENCL_4BIT(kbit_bf16)

}  // namespace kbit::ops
