// elem_vectors.h — fp32 <-> element-type vectors and bit-for-bit comparison, shared by the
// conformance suite and the CUDA tests.
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

#include "kbit_half.h"

namespace kbit_test {

// Converts fp32 values to an element type with one round-to-nearest-even step.
template <class T>
std::vector<T> to_elems(const std::vector<float>& v) {
    std::vector<T> out(v.size());
    for (size_t i = 0; i < v.size(); ++i) out[i] = kbit::Elem<T>::store(v[i]);
    return out;
}

template <class T>
std::vector<float> to_floats(const std::vector<T>& v) {
    std::vector<float> out(v.size());
    for (size_t i = 0; i < v.size(); ++i) out[i] = kbit::Elem<T>::load(v[i]);
    return out;
}

// Bit pattern of any 1/2/4-byte element (for exact comparisons that treat NaN payloads and signed
// zeros as data).
template <class T>
uint32_t bits_of(const T& x) {
    uint32_t u = 0;
    std::memcpy(&u, &x, sizeof(T));
    return u;
}

// Index of the first element whose bits differ, or -1.
template <class T>
long first_bit_difference(const std::vector<T>& a, const std::vector<T>& b) {
    if (a.size() != b.size()) return 0;
    for (size_t i = 0; i < a.size(); ++i)
        if (bits_of(a[i]) != bits_of(b[i])) return static_cast<long>(i);
    return -1;
}

}  // namespace kbit_test
