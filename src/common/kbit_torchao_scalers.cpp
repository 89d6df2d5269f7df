#include "kbit_torchao_scalers.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <vector>

#include "kbit_half.h"

namespace kbit {

namespace {

// torch's contiguous fp32 sum (aten/src/ATen/native/cpu/SumKernel.cpp, cascade_sum on one thread
// with 8-lane AVX2 vectors): the data is read as vectors of 8, summed as 4 interleaved rows of
// vectors by a 4-level cascade, the rows are added, then the scalar tail, then the 8 lanes in order.
// torchao's scalers.mean() is this sum divided by n (bf16/fp16 are converted to fp32 first).
constexpr int kLanes = 8;
using Lanes = std::array<float, kLanes>;

void add_lanes(Lanes& acc, const Lanes& x) {
    for (int l = 0; l < kLanes; ++l) acc[l] += x[l];
}

// multi_row_sum over `size` steps of 4 rows, each row one 8-lane vector loaded from `vec(i, row)`.
template <class Load>
std::array<Lanes, 4> cascade_rows(int64_t size, Load vec) {
    constexpr int kLevels = 4;
    int64_t ceil_log2 = 0;
    while ((int64_t{1} << ceil_log2) < size) ++ceil_log2;
    const int64_t level_power = std::max<int64_t>(4, ceil_log2 / kLevels);
    const int64_t level_step = int64_t{1} << level_power;
    const int64_t level_mask = level_step - 1;
    std::array<std::array<Lanes, 4>, kLevels> acc{};
    int64_t i = 0;
    while (i + level_step <= size) {
        for (int64_t j = 0; j < level_step; ++j, ++i)
            for (int row = 0; row < 4; ++row) add_lanes(acc[0][row], vec(i, row));
        for (int j = 1; j < kLevels; ++j) {
            for (int row = 0; row < 4; ++row) {
                add_lanes(acc[j][row], acc[j - 1][row]);
                acc[j - 1][row] = Lanes{};
            }
            if ((i & (level_mask << (j * level_power))) != 0) break;
        }
    }
    for (; i < size; ++i)
        for (int row = 0; row < 4; ++row) add_lanes(acc[0][row], vec(i, row));
    for (int j = 1; j < kLevels; ++j)
        for (int row = 0; row < 4; ++row) add_lanes(acc[0][row], acc[j][row]);
    return acc[0];
}

float torch_sum(const float* x, int64_t n) {
    if (n < kLanes) {  // torch's scalar row_sum: 4 interleaved partial sums, then the tail, then rows
        float rows[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        const int64_t steps = n / 4;
        for (int64_t i = 0; i < steps; ++i)
            for (int row = 0; row < 4; ++row) rows[row] += x[i * 4 + row];
        for (int64_t i = steps * 4; i < n; ++i) rows[0] += x[i];
        for (int row = 1; row < 4; ++row) rows[0] += rows[row];
        return 0.0f + rows[0];
    }
    const int64_t vectors = n / kLanes;
    auto load = [x](int64_t v) {
        Lanes l;
        for (int k = 0; k < kLanes; ++k) l[k] = x[v * kLanes + k];
        return l;
    };
    const int64_t steps = vectors / 4;
    auto rows = cascade_rows(steps, [&](int64_t i, int row) { return load(i * 4 + row); });
    for (int64_t v = steps * 4; v < vectors; ++v) add_lanes(rows[0], load(v));
    for (int row = 1; row < 4; ++row) add_lanes(rows[0], rows[row]);
    float total = 0.0f;
    for (int64_t i = vectors * kLanes; i < n; ++i) total += x[i];
    for (int k = 0; k < kLanes; ++k) total += rows[0][k];
    return total;
}


// Linear int8 code of a centred scaler: round half to even, clamp to [-128, 127]; NaN (0 * inf
// when every scaler of a group equals the mean) converts to 0, as torch's x86 float -> int8 cast.
int8_t torchao_scaler_code(float v) {
    if (std::isnan(v)) return 0;
    const float r = std::nearbyint(v);  // default rounding mode: half to even
    return static_cast<int8_t>(std::min(127.0f, std::max(-128.0f, r)));
}

}  // namespace

template <class T>
T torchao_mean(const T* scalers, int64_t n) {
    std::vector<float> x(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) x[i] = Elem<T>::load(scalers[i]);
    return Elem<T>::store(torch_sum(x.data(), n) / static_cast<float>(n));
}

template <class T>
void torchao_scalers(const T* scalers, int8_t* quantized_scalers, T* quantization_factor, T* scaler_mean,
                     int64_t blocks, int64_t scaler_block_size) {
    const T mean_t = torchao_mean(scalers, blocks);
    const float mean = Elem<T>::load(mean_t);
    std::vector<float> centred(static_cast<size_t>(blocks));
    for (int64_t b = 0; b < blocks; ++b) centred[b] = round_to<T>(Elem<T>::load(scalers[b]) - mean);
    for (int64_t g = 0; g * scaler_block_size < blocks; ++g) {
        const int64_t begin = g * scaler_block_size, end = begin + scaler_block_size;
        float amax = 0.0f;
        bool nan = false;
        for (int64_t b = begin; b < end; ++b) {
            nan |= std::isnan(centred[b]);
            amax = std::max(amax, std::fabs(centred[b]));
        }
        if (nan) amax = NAN;
        // 256 / (2 * amax) is evaluated by torch as reciprocal(2 * amax) * 256, each rounded to T.
        const float factor = round_to<T>(round_to<T>(1.0f / round_to<T>(2.0f * amax)) * 256.0f);
        quantization_factor[g] = Elem<T>::store(factor);
        for (int64_t b = begin; b < end; ++b)
            quantized_scalers[b] = torchao_scaler_code(round_to<T>(centred[b] * factor));
    }
    *scaler_mean = mean_t;
}

#define KBIT_TORCHAO_SCALERS(T)                                        \
    template T torchao_mean<T>(const T*, int64_t);                      \
    template void torchao_scalers<T>(const T*, int8_t*, T*, T*, int64_t, int64_t);
KBIT_TORCHAO_SCALERS(float)
KBIT_TORCHAO_SCALERS(kbit_half)
KBIT_TORCHAO_SCALERS(kbit_bf16)

}  // namespace kbit
