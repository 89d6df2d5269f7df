// The 4-bit kernel tables of the active ISA, chosen once (see kernels_4bit.h).
#include "kernels_4bit.h"

#include "ref_4bit.h"

namespace kbit::cpu {
namespace {

template <class T>
void ref_dequantize_range(QuantType qt, const uint8_t* A, const float* absmax, T* out, int64_t blocksize,
                          int64_t i0, int64_t i1, bool /*stream*/) {
    ref::dequantize_4bit_range(qt, A, absmax, out, blocksize, i0, i1);
}

}  // namespace

template <class T>
const Quant4bitKernels<T>& quant_4bit_kernels() {
    static const Quant4bitKernels<T> table = [] {
        if (const auto* simd = simd_quant_4bit_kernels<T>()) return *simd;
        return Quant4bitKernels<T>{&ref::quantize_4bit_blocks<T>, &ref_dequantize_range<T>};
    }();
    return table;
}

const Dot4bitKernels& dot_4bit_kernels() {
    static const Dot4bitKernels table = [] {
        if (const auto* simd = simd_dot_4bit_kernels()) return *simd;
        return Dot4bitKernels{0, nullptr, nullptr};
    }();
    return table;
}

template const Quant4bitKernels<float>& quant_4bit_kernels<float>();
template const Quant4bitKernels<kbit_half>& quant_4bit_kernels<kbit_half>();
template const Quant4bitKernels<kbit_bf16>& quant_4bit_kernels<kbit_bf16>();

}  // namespace kbit::cpu
