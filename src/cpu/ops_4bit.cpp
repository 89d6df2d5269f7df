// The 4-bit interface of libkbit_cpu.so: the operations behind the exported functions of
// kbit_export_4bit.h (which checks every argument first), as thread drivers over the kernels of the
// active ISA (kernels_4bit.h).
#include <algorithm>
#include <numeric>
#include <vector>

#include "kbit_dtype.h"
#include "kbit_ops_4bit.h"
#include "kbit_validate_4bit.h"
#include "kernels_4bit.h"
#include "kernels_4bit_bf16.h"
#include "kernels_4bit_int8.h"
#include "parallel_range.h"
#include "ref_4bit.h"
#include "ref_4bit_bf16.h"
#include "ref_4bit_int8.h"
#include "tuning.h"

namespace kbit::cpu {
namespace {

// Sums (floats) per worker of the grouped GEMM: each kernel call takes as many output rows as fit, at
// least kGemmStepRows. Few calls, as the prefill panels pack their activations again in each (128-row
// steps cost ~10% at M = 32); sums that stay in L2.
constexpr int64_t kGemmStepFloats = int64_t{1} << 18;
constexpr int64_t kGemmStepRows = 128;

// Rows per thread so that each thread gets kGrainWeights weights.
int64_t min_rows(int64_t k) { return std::max<int64_t>(1, kGrainWeights / std::max<int64_t>(1, k)); }

// gemm_4bit in pieces (plan, restored scales, prepared rows, output rows r0..r1), shared with
// gemm_4bit_grouped so that it runs every expert's rows in one parallel region with exactly the
// kernels, layout and sums of the gemm_4bit call on the expert's slice.
struct GemmPlan {
    const Dot4bitKernels* dot;
    const Prefill4bitKernels* prefill;
    bool panels;           // the prefill panels (enough activation rows), else the dot kernels
    int64_t panel_floats;  // scratch per concurrent gemm_rows call (panels only)
};

GemmPlan plan_gemm(int M, int K, int blocksize) {
    const auto& prefill = prefill_4bit_kernels();
    const bool panels = prefill.supports(M, K, blocksize);
    return {&dot_4bit_kernels(K, K, blocksize), &prefill, panels, panels ? prefill.panel_floats(M) : 0};
}

// restored[b] for blocks b in [b0, b1) of a nested weight: the kernels read fp32 scales.
void restore_scales(const float* absmax, const uint8_t* absmax_8bit, const float* absmax_code,
                    const float* absmax_offset, int64_t b0, int64_t b1, float* restored) {
    for (int64_t b = b0; b < b1; ++b)
        restored[b] = ref::gemm_block_scale(b, absmax, absmax_8bit, absmax_code, absmax_offset);
}

// The fp32 scales of a weight of `blocks` blocks: absmax itself when plain, else the nested ones
// restored into `restored` (in parallel).
const float* block_scales(const float* absmax, const uint8_t* absmax_8bit, const float* absmax_code,
                          const float* absmax_offset, int64_t blocks, std::vector<float>* restored) {
    if (absmax_8bit == nullptr) return absmax;
    restored->resize(static_cast<size_t>(blocks));
    parallel_range(blocks, kGrainElements, [&](int64_t b0, int64_t b1) {
        restore_scales(absmax, absmax_8bit, absmax_code, absmax_offset, b0, b1, restored->data());
    });
    return restored->data();
}

// One activation row x of K elements as the plan's kernel reads it: fp32 in order for the panels,
// dot.prepare's layout for the dot kernels (a: K floats of scratch).
template <class T>
void prepare_row(const GemmPlan& plan, const T* x, int K, float* a, float* row) {
    for (int kk = 0; kk < K; ++kk) (plan.panels ? row : a)[kk] = Elem<T>::load(x[kk]);
    if (!plan.panels) plan.dot->prepare(a, K, row);
}

// sums[i * ldo + r] for the M prepared rows i and weight rows r in [r0, r1). Each row's sum depends
// on that row alone, not on r0 or r1 (the dot tiles reduce as SumOfLanes does, the panels sum per
// output): callers may cut [0, N) anywhere.
void gemm_rows(const GemmPlan& plan, const float* prepared, int M, int K, const uint8_t* B, const float* scales,
               int blocksize, QuantType qt, int64_t r0, int64_t r1, float* sums, int64_t ldo, float* panel) {
    if (plan.panels)
        plan.prefill->rows(prepared, M, K, B, scales, blocksize, qt, r0, r1, sums, ldo, panel);
    else
        plan.dot->dot_rows(prepared, M, K, B, K, scales, blocksize, qt == QuantType::FP4 ? kFp4Values : kNf4Values,
                           r0, r1, sums, ldo);
}

// out[i][j] = RN_T(sums[i][j] + bias[j]) for the M rows and output features j in [r0, r1) (the add only
// when bias != NULL): the last step of every class.
template <class T>
void store_outputs(const float* sums, const T* bias, T* out, int64_t M, int64_t N, int64_t r0, int64_t r1) {
    for (int64_t i = 0; i < M; ++i)
        for (int64_t j = r0; j < r1; ++j) {
            float s = sums[i * N + j];
            if (bias != nullptr) s += Elem<T>::load(bias[j]);
            out[i * N + j] = Elem<T>::store(s);
        }
}

}  // namespace
}  // namespace kbit::cpu

// ------------------------------------------------------------------------------------------------
// Operations (kbit_export_4bit.h): arguments are valid and the problem is not empty. Each one is
// the thread driver over the kernels of the active ISA.
// ------------------------------------------------------------------------------------------------

namespace kbit::ops {

using namespace kbit::cpu;

template <class T>
kbit_status quantize_4bit(const char*, QuantType qt, const T* A, float* absmax, uint8_t* out, int64_t blocksize,
                          int64_t n, void*) {
    const auto& k = cpu::quant_4bit_kernels<T>();
    const int64_t blocks = (n + blocksize - 1) / blocksize;
    parallel_range(blocks, std::max<int64_t>(1, kGrainElements / blocksize),
                   [&](int64_t b0, int64_t b1) { k.quantize_blocks(qt, A, absmax, out, blocksize, n, b0, b1); });
    return KBIT_STATUS_SUCCESS;
}

template <class T>
kbit_status dequantize_4bit(const char*, QuantType qt, const uint8_t* A, const float* absmax, T* out,
                            int64_t blocksize, int64_t n, void*) {
    const auto& k = cpu::quant_4bit_kernels<T>();
    const bool stream = n * static_cast<int64_t>(sizeof(T)) >= kStreamBytes;
    // Chunks start on multiples of 64 elements: whole bytes and whole 32-element kernel groups.
    parallel_range_aligned(n, 64, kGrainElements, [&](int64_t i0, int64_t i1) {
        k.dequantize_range(qt, A, absmax, out, blocksize, i0, i1, stream);
    });
    return KBIT_STATUS_SUCCESS;
}

template <class T>
kbit_status gemv_4bit(const char*, int m, int k, const T* A, const uint8_t* B, const float* absmax,
                      const float* datatype, T* out, int ldb, int blocksize, void*) {
    const int64_t row_elems = 2 * static_cast<int64_t>(ldb);
    const auto& dot = cpu::dot_4bit_kernels(k, row_elems, blocksize);
    std::vector<float> a(static_cast<size_t>(k)), prepared(static_cast<size_t>(k)), sums(static_cast<size_t>(m));
    for (int i = 0; i < k; ++i) a[i] = Elem<T>::load(A[i]);
    dot.prepare(a.data(), k, prepared.data());
    parallel_range(m, min_rows(k), [&](int64_t r0, int64_t r1) {
        dot.dot_rows(prepared.data(), 1, k, B, row_elems, absmax, blocksize, datatype, r0, r1, sums.data(), m);
        for (int64_t r = r0; r < r1; ++r) out[r] = Elem<T>::store(sums[r]);
    });
    return KBIT_STATUS_SUCCESS;
}

template <class T>
kbit_status gemm_4bit(const char*, const T* A, const uint8_t* B, const float* absmax, const uint8_t* absmax_8bit,
                      const float* absmax_code, const float* absmax_offset, T* out, const T* bias, int M, int N, int K,
                      int blocksize, QuantType qt, void*) {
    const GemmPlan plan = plan_gemm(M, K, blocksize);
    const int64_t blocks = (static_cast<int64_t>(N) * K + blocksize - 1) / blocksize;
    std::vector<float> restored;
    const float* scales = block_scales(absmax, absmax_8bit, absmax_code, absmax_offset, blocks, &restored);
    std::vector<float> a(static_cast<size_t>(K)), prepared(static_cast<size_t>(M) * K), sums(static_cast<size_t>(M) * N);
    std::vector<float> panel(static_cast<size_t>(plan.panel_floats * cpu::max_workers()));
    for (int i = 0; i < M; ++i)
        prepare_row(plan, A + static_cast<size_t>(i) * K, K, a.data(), prepared.data() + static_cast<size_t>(i) * K);
    parallel_workers(N, std::max<int64_t>(1, min_rows(K) / std::max(1, M)), [&](int64_t r0, int64_t r1, int64_t w) {
        gemm_rows(plan, prepared.data(), M, K, B, scales, blocksize, qt, r0, r1, sums.data(), N,
                  panel.data() + w * plan.panel_floats);
        store_outputs(sums.data(), bias, out, M, N, r0, r1);
    });
    return KBIT_STATUS_SUCCESS;
}

// The int8 class (docs/behaviour.md §3.6): every activation row quantized once by the shared rule and laid
// out for the kernel; threads split the output features (on the kernel's tile), so the bytes do not depend on
// the thread count. Within a thread, weight rows go in panels of about kInt8PanelBytes, each multiplied by
// every tile of kInt8MaxRows activation rows while it is in the cache: for M <= 16 every weight is read once.
// M up to the table's few.max_rows takes its kernel along K instead (one tile of activation rows).
template <class T>
kbit_status gemm_4bit_int8(const char*, const T* A, const uint8_t* B, const float* absmax, const uint8_t* absmax_8bit,
                           const float* absmax_code, const float* absmax_offset, T* out, const T* bias, int64_t M,
                           int64_t N, int64_t K, int64_t blocksize, QuantType qt, void*) {
    constexpr int64_t kInt8PanelBytes = 256 * 1024;
    const int64_t nc = K / kInt8Chunk;
    std::vector<float> restored;
    const float* scales = K > 0 ? block_scales(absmax, absmax_8bit, absmax_code, absmax_offset,
                                               (N * K + blocksize - 1) / blocksize, &restored)
                                : absmax;
    const auto& table = cpu::int8_dot_4bit_kernels();
    // Few activation rows (M = 1 above all) take the table's kernel along K where it has one.
    const bool few = table.few.max_rows > 0 && M <= table.few.max_rows;
    const int64_t stride = few ? table.few.stride(K) : K, tile = few ? table.few.tile : table.tile;
    const auto prepare = few ? table.few.prepare : table.prepare;
    const auto dot_rows = few ? table.few.dot_rows : table.dot_rows;
    std::vector<int8_t> q(static_cast<size_t>(M * K)), prepared(static_cast<size_t>(M * stride));
    std::vector<Int8Chunk> chunks(static_cast<size_t>(M * nc));
    std::vector<float> sums(static_cast<size_t>(M * N), 0.0f);
    parallel_range(M, std::max<int64_t>(1, kGrainElements / std::max<int64_t>(1, K)), [&](int64_t m0, int64_t m1) {
        ref::quantize_int8_rows(A + m0 * K, m1 - m0, K, q.data() + m0 * K, chunks.data() + m0 * nc);
        for (int64_t m = m0; m < m1; ++m) prepare(q.data() + m * K, K, prepared.data() + m * stride);
    });
    // One activation tile (few) has no use for panels: the kernel streams its whole range.
    const int64_t panel_rows =
        few ? N : std::max<int64_t>(tile, kInt8PanelBytes / std::max<int64_t>(1, K / 2)) / tile * tile;
    parallel_range_aligned(N, tile, std::max<int64_t>(1, min_rows(K) / std::max<int64_t>(1, M)),
                           [&](int64_t r0, int64_t r1) {
        if (K > 0)
            for (int64_t p0 = r0; p0 < r1; p0 += panel_rows) {
                const int64_t p1 = std::min(r1, p0 + panel_rows);
                for (int64_t m0 = 0; m0 < M; m0 += kInt8MaxRows) {
                    const int mt = static_cast<int>(std::min<int64_t>(kInt8MaxRows, M - m0));
                    dot_rows(prepared.data() + m0 * stride, chunks.data() + m0 * nc, mt, K, B, scales, blocksize, qt,
                             p0, p1, sums.data() + m0 * N, N);
                }
            }
        store_outputs(sums.data(), bias, out, M, N, r0, r1);
    });
    return KBIT_STATUS_SUCCESS;
}

// Exactly the loop of cgemm_4bit calls over the experts (kbit_4bit.def): the pairs (t, j) are grouped by
// expert in (t, j) order, the chosen experts planned and their nested scales restored as gemm_4bit of
// this backend would for each slice. Then one parallel region runs the output rows of all chosen experts
// end to end (so each expert's weights are read once, and a call pays one fork/join, not one per
// expert: on a loaded machine each waits out a descheduled thread), each worker preparing the rows of
// the experts it meets as gemm_4bit does and storing each output row straight to its pair. An expert
// whose weights do not start a block has no slice: the reference rows cover it, in the same region.
template <class T>
kbit_status gemm_4bit_grouped(const char* fn, const T* A, int64_t a_rows_per_token, const uint8_t* B,
                              const float* absmax, const uint8_t* absmax_8bit, const float* absmax_code,
                              const float* absmax_offset, int64_t experts, int64_t N, int64_t K, int64_t blocksize,
                              QuantType qt, const int32_t* ids, int64_t tokens, int64_t top_k, const float* combine,
                              T* out, void*) {
    const int64_t pairs = tokens * top_k;  // <= 2^31 - 1 (validated)
    std::vector<int32_t> order;
    const kbit_status checked = grouped_pairs_by_expert(fn, ids, pairs, top_k, experts, &order);
    if (checked != KBIT_STATUS_SUCCESS) return checked;

    const bool nested = absmax_8bit != nullptr;
    const int k = static_cast<int>(K), bs = static_cast<int>(blocksize);  // a slice's, as cgemm_4bit takes them
    // Expert x of the chosen ones: its rows i < m are the pairs order[p0 + i].
    struct Chosen {
        int64_t e, p0, m;
        bool slice;
        GemmPlan plan;
        const uint8_t* B;
        const float* scales;  // plain: the slice's absmax; nested: filled in once restored
    };
    std::vector<Chosen> chosen;
    int64_t restored_blocks = 0, panel_floats = 0, max_m = 0;
    const int64_t slice_blocks = (N * K + blocksize - 1) / blocksize;  // gemm_4bit's `blocks`
    for (int64_t p0 = 0; p0 < pairs;) {
        const int64_t e = ids[order[p0]];
        int64_t p1 = p0 + 1;
        while (p1 < pairs && ids[order[p1]] == e) ++p1;
        const int64_t first = e * N * K, beta = first / blocksize;  // nibble and block of W_e[0][0]
        const bool slice = grouped_expert_has_slice(e, N, K, blocksize, nested);
        Chosen c{e, p0, p1 - p0, slice, plan_gemm(static_cast<int>(p1 - p0), k, bs), B + first / 2, nullptr};
        if (slice && !nested) c.scales = absmax + beta;
        if (slice && nested) restored_blocks += slice_blocks;
        if (slice) panel_floats = std::max(panel_floats, c.plan.panel_floats);
        max_m = std::max(max_m, c.m);
        chosen.push_back(c);
        p0 = p1;
    }
    const auto count = static_cast<int64_t>(chosen.size());

    // Nested scales: every slice's blocks restored in one region, each as gemm_4bit restores its own.
    std::vector<float> restored(static_cast<size_t>(restored_blocks));
    if (nested) {
        std::vector<int64_t> sliced;  // chosen experts with a slice, in the order of `restored`
        for (int64_t x = 0; x < count; ++x)
            if (chosen[x].slice) {
                chosen[x].scales = restored.data() + static_cast<int64_t>(sliced.size()) * slice_blocks;
                sliced.push_back(x);
            }
        parallel_range(restored_blocks, kGrainElements, [&](int64_t i0, int64_t i1) {
            for (int64_t i = i0; i < i1;) {
                const int64_t s = i / slice_blocks, b0 = i - s * slice_blocks;
                const int64_t b1 = std::min(slice_blocks, b0 + (i1 - i));
                const int64_t beta = chosen[sliced[s]].e * N * K / blocksize;
                restore_scales(absmax + beta / 256, absmax_8bit + beta, absmax_code, absmax_offset, b0, b1,
                               restored.data() + s * slice_blocks);
                i += b1 - b0;
            }
        });
    }

    // With combine every row is kept (rounded to T) until the weighted sums; without, rows go to out directly.
    std::vector<T> kept(combine != nullptr ? static_cast<size_t>(pairs * N) : 0);
    T* rows_out = combine != nullptr ? kept.data() : out;
    // Each worker runs its rows `step` at a time through its own sums (in cache, where [pairs, N] fp32
    // sums went to memory and back), calling the kernels on the weight
    // rebased to the step's first row. That is the same row, the same bytes, when the row starts a block:
    // so steps and ranges start on multiples of `align` rows (1 where K is a whole number of blocks).
    const int64_t align = K > 0 ? blocksize / std::gcd(K, blocksize) : 1;
    const int64_t step_rows = std::min(N, std::max(kGemmStepRows, kGemmStepFloats / std::max<int64_t>(1, max_m)));
    const int64_t step = std::max<int64_t>(1, step_rows / align) * align;
    const int64_t units = (N + align - 1) / align;  // per expert
    // Per worker: its sums, the prepared rows of the expert at hand and prepare_row's scratch.
    const int64_t own_floats = max_m * step + max_m * K + K;
    std::vector<float> own_all(static_cast<size_t>(own_floats * max_workers()));
    std::vector<float> panel(static_cast<size_t>(panel_floats * max_workers()));
    auto row_of = [&](int64_t q) {  // the activation row of pair order[q]
        const int64_t p = order[q];
        return A + (a_rows_per_token == 1 ? p / top_k : p) * K;
    };
    // Units of align rows of every chosen expert end to end, one contiguous range per worker (ranges may
    // span experts). The grain is gemm_4bit's at the mean rows per expert.
    const int64_t grain = std::max<int64_t>(1, min_rows(K) * count / std::max<int64_t>(1, pairs) / align);
    parallel_workers(count * units, grain, [&](int64_t u0, int64_t u1, int64_t w) {
        float* own = own_all.data() + w * own_floats;
        float* prepared = own + max_m * step;
        for (int64_t u = u0; u < u1;) {
            const int64_t x = u / units, end = std::min(u1, (x + 1) * units);
            const Chosen& c = chosen[x];
            const int64_t n0 = (u - x * units) * align, n1 = std::min(N, (end - x * units) * align);
            if (c.slice) {
                // Each worker prepares the rows of the experts it meets: in its cache, and no [pairs, K]
                // buffer in memory (gate/up: 32 MB at T = 512); an expert split between workers is
                // prepared by each, at most workers - 1 times in a call.
                for (int64_t i = 0; i < c.m; ++i)
                    prepare_row(c.plan, row_of(c.p0 + i), k, prepared + max_m * K, prepared + i * K);
                for (int64_t r0 = n0; r0 < n1; r0 += step) {
                    const int64_t rows = std::min(step, n1 - r0), first = r0 * K;  // first starts a block
                    gemm_rows(c.plan, prepared, static_cast<int>(c.m), k, c.B + first / 2, c.scales + first / blocksize,
                              bs, qt, 0, rows, own, step, panel.data() + w * panel_floats);
                    for (int64_t i = 0; i < c.m; ++i) {
                        T* to = rows_out + static_cast<int64_t>(order[c.p0 + i]) * N + r0;
                        for (int64_t j = 0; j < rows; ++j) to[j] = Elem<T>::store(own[i * step + j]);
                    }
                }
            } else {
                for (int64_t i = 0; i < c.m; ++i)  // the reference's rows are independent: one at a time
                    ref::gemm_4bit_expert_rows(row_of(c.p0 + i), 1, B, absmax, absmax_8bit,
                                               absmax_code, absmax_offset, c.e * N * K, N, K, blocksize,
                                               static_cast<int>(qt), rows_out + static_cast<int64_t>(order[c.p0 + i]) * N,
                                               n0, n1);
            }
            u = end;
        }
    });
    if (combine != nullptr)
        parallel_range(tokens, std::max<int64_t>(1, kGrainElements / std::max<int64_t>(1, N * top_k)),
                       [&](int64_t t0, int64_t t1) {
                           for (int64_t t = t0; t < t1; ++t)
                               for (int64_t n = 0; n < N; ++n) {
                                   float s = 0.0f;
                                   for (int64_t j = 0; j < top_k; ++j)
                                       s = ref::grouped_combine_step(s, combine[t * top_k + j],
                                                                     Elem<T>::load(kept[(t * top_k + j) * N + n]));
                                   out[t * N + n] = Elem<T>::store(s);
                               }
                       });
    return KBIT_STATUS_SUCCESS;
}

// The bf16 class (docs/behaviour.md §3.7): the activation rows rounded to bf16 once; threads split the output
// features (on the kernel's tile), each output's sum is the kernel's alone, so the bytes do not depend on the
// thread count. Within a thread, weight rows go in panels of about kBf16PanelBytes, each multiplied by every
// tile of kBf16MaxRows activation rows while it is in the cache: for M <= 16 every weight is read once.
template <class T>
kbit_status gemm_4bit_bf16(const char*, const T* A, const uint8_t* B, const float* absmax, const uint8_t* absmax_8bit,
                           const float* absmax_code, const float* absmax_offset, T* out, const T* bias, int64_t M,
                           int64_t N, int64_t K, int64_t blocksize, QuantType qt, void*) {
    constexpr int64_t kBf16PanelBytes = 256 * 1024;
    const int64_t kp = (K + kBf16Group - 1) / kBf16Group * kBf16Group;
    std::vector<float> restored;
    const float* scales = K > 0 ? block_scales(absmax, absmax_8bit, absmax_code, absmax_offset,
                                               (N * K + blocksize - 1) / blocksize, &restored)
                                : absmax;
    const auto& kern = cpu::bf16_dot_4bit_kernels();
    std::vector<uint16_t> a(static_cast<size_t>(M * kp));
    std::vector<float> sums(static_cast<size_t>(M * N), 0.0f);
    parallel_range(M, std::max<int64_t>(1, kGrainElements / std::max<int64_t>(1, K)), [&](int64_t m0, int64_t m1) {
        ref::bf16_activation_rows(A + m0 * K, m1 - m0, K, a.data() + m0 * kp);
    });
    const int64_t panel_rows = std::max<int64_t>(kern.tile, kBf16PanelBytes / std::max<int64_t>(1, K / 2)) /
                               kern.tile * kern.tile;
    parallel_range_aligned(N, kern.tile, std::max<int64_t>(1, min_rows(K) / std::max<int64_t>(1, M)),
                           [&](int64_t r0, int64_t r1) {
        if (K > 0)
            for (int64_t p0 = r0; p0 < r1; p0 += panel_rows) {
                const int64_t p1 = std::min(r1, p0 + panel_rows);
                for (int64_t m0 = 0; m0 < M; m0 += kBf16MaxRows)
                    kern.dot_rows(a.data() + m0 * kp, static_cast<int>(std::min<int64_t>(kBf16MaxRows, M - m0)), K, B,
                                  scales, blocksize, qt, p0, p1, sums.data() + m0 * N, N);
            }
        store_outputs(sums.data(), bias, out, M, N, r0, r1);
    });
    return KBIT_STATUS_SUCCESS;
}

kbit_status nested_absmax_quantize(const char*, const float* absmax, const float* code, uint8_t* qabsmax,
                                   float* nested_absmax, float* offset, int64_t blocks, int64_t nested_blocksize,
                                   void*) {
    ref::nested_absmax_quantize(absmax, code, qabsmax, nested_absmax, offset, blocks, nested_blocksize);
    return KBIT_STATUS_SUCCESS;
}

kbit_status nested_absmax_dequantize(const char*, const uint8_t* qabsmax, const float* code,
                                     const float* nested_absmax, float offset, float* absmax, int64_t blocks,
                                     int64_t nested_blocksize, void*) {
    ref::nested_absmax_dequantize(qabsmax, code, nested_absmax, offset, absmax, blocks, nested_blocksize);
    return KBIT_STATUS_SUCCESS;
}

template <class T>
kbit_status torchao_quantize(const char*, const T* w, uint8_t* qd, int8_t* qs, T* qf, T* mean, int64_t n,
                             int64_t block_size, int64_t scaler_block_size, void*) {
    // Block absmax and element indices are independent per block; the mean keeps torch's order.
    const int64_t blocks = n / block_size;
    const int64_t min_blocks = std::max<int64_t>(1, kHeavyGrainElements / block_size);
    std::vector<T> scalers(static_cast<size_t>(blocks));
    parallel_range(blocks, min_blocks,
                   [&](int64_t b0, int64_t b1) { ref::torchao_block_absmax(w, scalers.data(), b0, b1, block_size); });
    ref::torchao_scalers(scalers.data(), qs, qf, mean, blocks, scaler_block_size);
    parallel_range(blocks, min_blocks, [&](int64_t b0, int64_t b1) {
        ref::torchao_quantize_elements(w, scalers.data(), qd, b0, b1, block_size);
    });
    return KBIT_STATUS_SUCCESS;
}

template <class T>
kbit_status torchao_dequantize(const char*, const uint8_t* qd, const int8_t* qs, const T* qf, const T* mean, T* out,
                               int64_t n, int64_t block_size, int64_t scaler_block_size, void*) {
    // Blocks are independent: split them across threads.
    const int64_t blocks = n / block_size;
    parallel_range_aligned(blocks, scaler_block_size, std::max<int64_t>(1, kGrainElements / block_size),
                           [&](int64_t b0, int64_t b1) {
                               const int64_t g0 = b0 / scaler_block_size;
                               ref::torchao_dequantize(qd + b0 * block_size / 2, qs + b0, qf + g0, mean,
                                                       out + b0 * block_size, (b1 - b0) * block_size, block_size,
                                                       scaler_block_size);
                           });
    return KBIT_STATUS_SUCCESS;
}

// For every element type: the exported functions that call these are compiled in another file
// (src/common/generated/kbit_4bit_exports.cpp; kbit_bnb_cpu_exports.cpp for dequantize_4bit too).
KBIT_INSTANTIATE_FOR_ELEMENT_TYPES(quantize_4bit);
KBIT_INSTANTIATE_FOR_ELEMENT_TYPES(dequantize_4bit);
KBIT_INSTANTIATE_FOR_ELEMENT_TYPES(gemv_4bit);
KBIT_INSTANTIATE_FOR_ELEMENT_TYPES(gemm_4bit);
KBIT_INSTANTIATE_FOR_ELEMENT_TYPES(gemm_4bit_grouped);
KBIT_INSTANTIATE_FOR_ELEMENT_TYPES(gemm_4bit_int8);
KBIT_INSTANTIATE_FOR_ELEMENT_TYPES(gemm_4bit_bf16);
KBIT_INSTANTIATE_FOR_ELEMENT_TYPES(torchao_quantize);
KBIT_INSTANTIATE_FOR_ELEMENT_TYPES(torchao_dequantize);

}  // namespace kbit::ops
