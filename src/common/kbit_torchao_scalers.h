// kbit_torchao_scalers.h — the serial stage of torchao's NF4 quantization (to_nf4): the mean of the
// block scalers in torch's own summation order, and their int8 second level. Every backend runs it
// on the host (a device would have to replay torch's cascade on one thread); it moves 2-4 bytes per
// block. Part of the backend kit, so a vendor's backend gives the same bytes (docs/behaviour.md §6).
#pragma once

#include <cstdint>

namespace kbit {

// torch's mean of the n block scalers (fp32 accumulation in the order of torch's CPU sum), as T.
template <class T>
T torchao_mean(const T* scalers, int64_t n);

// The mean (scaler_mean), the per-group factors (quantization_factor, blocks / scaler_block_size) and
// the int8 codes of the centred scalers (quantized_scalers, blocks), from the block scalers.
template <class T>
void torchao_scalers(const T* scalers, int8_t* quantized_scalers, T* quantization_factor, T* scaler_mean,
                     int64_t blocks, int64_t scaler_block_size);

}  // namespace kbit
