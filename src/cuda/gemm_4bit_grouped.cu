// The grouped (mixture-of-experts) 4-bit GEMM of the CUDA backend, stream-ordered (behaviour §3.5): a plan
// kernel checks the ids and groups the pairs by expert, a gather kernel copies each pair's activation row
// into expert order, gemm_4bit's skinny and tiled bodies (gemm_4bit_kernels.cuh) run over each chosen
// expert's rows — chosen between as gemm_4bit chooses for M_e rows, so the bytes are those of the per-expert
// loop — and a combine kernel sums the top_k rows. Nothing is read back or waited for on the host. An id out
// of range is found by the plan kernel: no later kernel writes, and the error waits for the stream's next
// kbit_stream_synchronize (kbit_stream_errors.h).
#include <climits>
#include <memory>
#include <mutex>
#include <vector>

#include "gemm_4bit_kernels.cuh"
#include "kbit_dtype.h"
#include "kbit_ops_4bit.h"
#include "kbit_stream_errors.h"
#include "kbit_validate_4bit.h"

namespace kbit::cuda {
namespace {

constexpr int kPlanThreads = 256;
constexpr int kCopyThreads = 256;
constexpr int32_t kNoBadPair = INT32_MAX;  // pairs <= 2^31 - 1, so no pair has this index
constexpr int kMaxRowTileSteps = 4;        // CTAs along the row tiles of one expert (each strides by this)
constexpr unsigned kMaxGridYZ = 65535;

// One call's device scratch: the plan of the pairs, then the gathered rows (and, with combine, the rows
// of y).
struct Plan {
    int32_t* error;          // [2]: first pair whose id is out of range (kNoBadPair: none), that id
    int32_t* count;          // [experts]: pairs per expert
    int32_t* offset;         // [experts]: where the expert's pairs start in `order`
    int32_t* order;          // [pairs]: pairs by expert, ascending within an expert (the loop's rows)
    int32_t* touched;        // [slots]: the chosen experts, ascending
    int32_t* touched_count;  // [1]
};

// One work-group: the ids checked, counted per expert, and ordered (a thread per chosen expert walks them).
__global__ void __launch_bounds__(kPlanThreads)
grouped_plan_kernel(const int32_t* __restrict__ ids, int32_t pairs, int64_t experts, Plan plan) {
    __shared__ int32_t bad;
    if (threadIdx.x == 0) bad = kNoBadPair;
    for (int64_t e = threadIdx.x; e < experts; e += blockDim.x) plan.count[e] = 0;
    __syncthreads();
    for (int32_t p = threadIdx.x; p < pairs; p += blockDim.x) {
        const int32_t id = ids[p];
        if (id < 0 || id >= experts)
            atomicMin(&bad, p);
        else
            atomicAdd(plan.count + id, 1);
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        plan.error[0] = bad;
        plan.error[1] = bad != kNoBadPair ? ids[bad] : 0;
        int32_t at = 0, chosen = 0;
        for (int64_t e = 0; bad == kNoBadPair && e < experts; ++e) {
            plan.offset[e] = at;
            if (plan.count[e] > 0) plan.touched[chosen++] = static_cast<int32_t>(e);
            at += plan.count[e];
        }
        *plan.touched_count = chosen;
    }
    __syncthreads();
    const int32_t chosen = *plan.touched_count;
    for (int32_t s = threadIdx.x; s < chosen; s += blockDim.x) {
        const int32_t e = plan.touched[s];
        int32_t at = plan.offset[e];
        for (int32_t p = 0; p < pairs; ++p)
            if (ids[p] == e) plan.order[at++] = p;
    }
}

// xs[r] = the activation row of pair order[r].
template <class T>
__global__ void grouped_gather_kernel(const T* __restrict__ A, int64_t a_rows_per_token, int64_t top_k, int64_t K,
                                      int64_t pairs, Plan plan, T* __restrict__ xs) {
    if (plan.error[0] != kNoBadPair) return;
    const int64_t total = pairs * K;
    for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total; i += int64_t{gridDim.x} * blockDim.x) {
        const int64_t r = i / K, k = i - r * K, p = plan.order[r];
        xs[i] = A[(a_rows_per_token == 1 ? p / top_k : p) * K + k];
    }
}

// The expert of CTA column blockIdx.x and its rows, or false when the column has nothing to do.
struct Expert {
    int32_t e, first, rows;
};
__device__ __forceinline__ bool expert_of_slot(const Plan& plan, Expert* x) {
    if (plan.error[0] != kNoBadPair || static_cast<int32_t>(blockIdx.x) >= *plan.touched_count) return false;
    x->e = plan.touched[blockIdx.x];
    x->first = plan.offset[x->e];
    x->rows = plan.count[x->e];
    return true;
}

// `w` describes expert 0 with flat0 = 0; expert e's weights start at nibble e * N * K.
__device__ __forceinline__ WeightArgs expert_weights(WeightArgs w, int32_t e, int N, int K) {
    const int64_t flat0 = int64_t{e} * N * K;  // even: K is
    w.W += flat0 / 2;
    w.scales.flat0 = flat0;
    return w;
}

// Experts with at most kSkinnyMaxM rows when the skinny body fits this call (the host checked K and the
// alignments): gemm_4bit's skinny kernel over the expert's rows.
template <class T>
__global__ void __launch_bounds__(kSkinnyMaxThreads)
grouped_skinny_kernel(const T* __restrict__ xs, int K, int N, WeightArgs w, Plan plan, T* __restrict__ dst) {
    Expert x;
    if (!expert_of_slot(plan, &x) || x.rows > kSkinnyMaxM) return;
    const WeightArgs we = expert_weights(w, x.e, N, K);
    const T* A = xs + int64_t{x.first} * K;
    const OutRows<T> out{dst, plan.order + x.first};
    const int tiles = (N + kSkinnyRows - 1) / kSkinnyRows;
    for (int tile = blockIdx.y; tile < tiles; tile += gridDim.y) {
        if (x.rows == 1)
            skinny_tile<T, 1>(A, x.rows, K, N, we, nullptr, out, tile * kSkinnyRows);
        else
            skinny_tile<T, 4>(A, x.rows, K, N, we, nullptr, out, tile * kSkinnyRows);
        __syncthreads();  // the next tile reuses the shared partial sums
    }
}

// The other experts: gemm_4bit's tiled kernel over the expert's rows.
template <class T>
__global__ void __launch_bounds__(kTiledThreads)
grouped_tiled_kernel(const T* __restrict__ xs, int K, int N, WeightArgs w, bool skinny_fits_call, Plan plan,
                     T* __restrict__ dst) {
    Expert x;
    if (!expert_of_slot(plan, &x) || (skinny_fits_call && x.rows <= kSkinnyMaxM)) return;
    const WeightArgs we = expert_weights(w, x.e, N, K);
    const T* A = xs + int64_t{x.first} * K;
    const OutRows<T> out{dst, plan.order + x.first};
    const int tiles = (N + kTile - 1) / kTile;
    for (int tile = blockIdx.y; tile < tiles; tile += gridDim.y) {
        tiled_tiles<T>(A, x.rows, K, N, we, nullptr, out, tile * kTile, blockIdx.z, gridDim.z);
        __syncthreads();
    }
}

// out[t][n] = RN_T(sum over j, in order, of combine[t][j] * y[t][j][n]), each product and sum rounded.
template <class T>
__global__ void grouped_combine_kernel(const T* __restrict__ ys, const float* __restrict__ combine, int64_t tokens,
                                       int64_t top_k, int64_t N, const int32_t* __restrict__ error, T* __restrict__ out) {
    if (error[0] != kNoBadPair) return;
    for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < tokens * N; i += int64_t{gridDim.x} * blockDim.x) {
        const int64_t t = i / N, n = i - t * N;
        float s = 0.0f;
        for (int64_t j = 0; j < top_k; ++j)
            s = __fadd_rn(s, __fmul_rn(__ldg(combine + t * top_k + j), Elem<T>::load(ys[(t * top_k + j) * N + n])));
        out[i] = Elem<T>::store(s);
    }
}

// Pinned host slots for the checks' two-int records, handed out and taken back: cudaMallocHost and
// cudaFreeHost per call would cost a device-wide synchronization each.
class RecordSlots {
public:
    kbit_status take(const char* fn, int32_t** slot) {
        std::lock_guard<std::mutex> lock(mutex_);
        if (free_.empty()) {
            void* slab = nullptr;
            KBIT_CUDA_TRY(fn, "cudaMallocHost (id check records)", cudaMallocHost(&slab, kSlab * 2 * sizeof(int32_t)));
            for (int i = 0; i < kSlab; ++i) free_.push_back(static_cast<int32_t*>(slab) + 2 * i);  // kept for life
        }
        *slot = free_.back();
        free_.pop_back();
        return KBIT_STATUS_SUCCESS;
    }
    void give(int32_t* slot) {
        std::lock_guard<std::mutex> lock(mutex_);
        free_.push_back(slot);
    }

private:
    static constexpr int kSlab = 64;
    std::mutex mutex_;
    std::vector<int32_t*> free_;
};

RecordSlots& record_slots() {
    static RecordSlots* slots = new RecordSlots;  // never destroyed: checks may outlive static destruction
    return *slots;
}

// The deferred id check of one call: the plan's record copied to a pinned slot, and the event after it.
class IdCheck final : public PendingCheck {
public:
    IdCheck(int64_t top_k, int64_t experts) : top_k_(top_k), experts_(experts) {}
    ~IdCheck() override {
        if (event_ != nullptr) cudaEventDestroy(event_);
        if (record_ != nullptr) record_slots().give(record_);
    }
    kbit_status start(const char* fn, const int32_t* device_record, cudaStream_t s) {
        KBIT_CUDA_TRY(fn, "cudaEventCreateWithFlags", cudaEventCreateWithFlags(&event_, cudaEventDisableTiming));
        const kbit_status st = record_slots().take(fn, &record_);
        if (st != KBIT_STATUS_SUCCESS) return st;
        record_[0] = kNoBadPair;  // a copy that never runs (a failed stream) reports nothing here
        KBIT_CUDA_TRY(fn, "cudaMemcpyAsync (id check)",
                      cudaMemcpyAsync(record_, device_record, 2 * sizeof(int32_t), cudaMemcpyDeviceToHost, s));
        KBIT_CUDA_TRY(fn, "cudaEventRecord (id check)", cudaEventRecord(event_, s));
        return KBIT_STATUS_SUCCESS;
    }
    bool done() override {
        const cudaError_t e = cudaEventQuery(event_);
        if (e != cudaErrorNotReady && e != cudaSuccess) cudaGetLastError();  // a device fault: the stream reports it
        return e != cudaErrorNotReady;
    }
    bool failed() override { return record_[0] != kNoBadPair; }
    kbit_status report() override {
        return grouped_id_error("kbit_gemm_4bit_grouped", record_[0], top_k_, record_[1], experts_);
    }

private:
    int64_t top_k_, experts_;
    cudaEvent_t event_ = nullptr;
    int32_t* record_ = nullptr;
};

constexpr size_t align256(size_t bytes) { return (bytes + 255) / 256 * 256; }

}  // namespace
}  // namespace kbit::cuda

namespace kbit::ops {

template <class T>
kbit_status gemm_4bit_grouped(const char* fn, const T* A, int64_t a_rows_per_token, const uint8_t* B,
                              const float* absmax, const uint8_t* absmax_8bit, const float* absmax_code,
                              const float* absmax_offset, int64_t experts, int64_t N, int64_t K, int64_t blocksize,
                              QuantType qt, const int32_t* ids, int64_t tokens, int64_t top_k, const float* combine,
                              T* out, void* stream) {
    using namespace kbit::cuda;
    const cudaStream_t s = to_stream(stream);
    const int64_t pairs = tokens * top_k;
    const int64_t slots = experts < 1 ? 1 : (experts < pairs ? experts : pairs);  // CTA columns, one per chosen expert
    // One allocation, each part 256-byte aligned (the gathered rows must be, for the skinny body).
    const size_t plan_ints = 2 + 2 * static_cast<size_t>(experts) + 2 * static_cast<size_t>(pairs) + 1;
    const size_t xs_at = align256(plan_ints * sizeof(int32_t));
    const size_t ys_at = xs_at + align256(static_cast<size_t>(pairs * K) * sizeof(T));
    const size_t bytes = ys_at + (combine != nullptr ? static_cast<size_t>(pairs * N) * sizeof(T) : 0);
    char* scratch = nullptr;
    KBIT_CUDA_TRY(fn, "cudaMallocAsync (grouped plan and rows)", cudaMallocAsync(reinterpret_cast<void**>(&scratch), bytes, s));
    int32_t* ints = reinterpret_cast<int32_t*>(scratch);
    const Plan plan{ints, ints + 2, ints + 2 + experts, ints + 2 + 2 * experts, ints + 2 + 2 * experts + pairs,
                    ints + 2 + 2 * experts + pairs + slots};
    T* xs = reinterpret_cast<T*>(scratch + xs_at);
    T* dst = combine != nullptr ? reinterpret_cast<T*>(scratch + ys_at) : out;

    auto enqueue = [&]() -> kbit_status {
        grouped_plan_kernel<<<1, kPlanThreads, 0, s>>>(ids, static_cast<int32_t>(pairs), experts, plan);
        kbit_status st = check_launch(fn, "grouped_plan_kernel");
        if (st != KBIT_STATUS_SUCCESS) return st;
        if (K > 0) {
            grouped_gather_kernel<T><<<grid_for((pairs * K + kCopyThreads - 1) / kCopyThreads), kCopyThreads, 0, s>>>(
                A, a_rows_per_token, top_k, K, pairs, plan, xs);
            if ((st = check_launch(fn, "grouped_gather_kernel")) != KBIT_STATUS_SUCCESS) return st;
        }
        // Expert 0's weights; the kernels move them to each expert (flat0 = e * N * K).
        const WeightArgs w = weights(B, K, absmax, absmax_8bit, absmax_code, absmax_offset, nullptr, qt, blocksize);
        // gemm_4bit's choice for M_e <= 4 rows of expert e: K % 32 == 0 makes every expert's slice and row
        // block 16-byte aligned exactly when B and xs are, so the check for expert 0 holds for all.
        const bool skinny = skinny_fits(1, K, K, xs, B);
        auto grid_yz = [](int64_t n) { return static_cast<unsigned>(n < kMaxGridYZ ? n : kMaxGridYZ); };
        if (skinny) {
            const dim3 grid(static_cast<unsigned>(slots), grid_yz((N + kSkinnyRows - 1) / kSkinnyRows));
            grouped_skinny_kernel<T><<<grid, skinny_threads(K), 0, s>>>(xs, static_cast<int>(K), static_cast<int>(N),
                                                                         w, plan, dst);
            if ((st = check_launch(fn, "grouped_skinny_kernel")) != KBIT_STATUS_SUCCESS) return st;
        }
        const int64_t row_tiles = (pairs + kTile - 1) / kTile;
        const dim3 grid(static_cast<unsigned>(slots), grid_yz((N + kTile - 1) / kTile),
                        static_cast<unsigned>(row_tiles < kMaxRowTileSteps ? row_tiles : kMaxRowTileSteps));
        grouped_tiled_kernel<T><<<grid, kTiledThreads, 0, s>>>(xs, static_cast<int>(K), static_cast<int>(N), w,
                                                               skinny, plan, dst);
        if ((st = check_launch(fn, "grouped_tiled_kernel")) != KBIT_STATUS_SUCCESS) return st;
        if (combine != nullptr) {
            grouped_combine_kernel<T><<<grid_for((tokens * N + kCopyThreads - 1) / kCopyThreads), kCopyThreads, 0, s>>>(
                dst, combine, tokens, top_k, N, plan.error, out);
            if ((st = check_launch(fn, "grouped_combine_kernel")) != KBIT_STATUS_SUCCESS) return st;
        }
        auto check = std::make_unique<IdCheck>(top_k, experts);
        if ((st = check->start(fn, plan.error, s)) != KBIT_STATUS_SUCCESS) return st;
        stream_errors().add(stream, std::move(check));
        return KBIT_STATUS_SUCCESS;
    };
    const kbit_status st = enqueue();
    const cudaError_t freed = cudaFreeAsync(scratch, s);  // after the kernels, in stream order
    if (st != KBIT_STATUS_SUCCESS) return st;
    KBIT_CUDA_TRY(fn, "cudaFreeAsync (grouped plan and rows)", freed);
    return KBIT_STATUS_SUCCESS;
}

KBIT_INSTANTIATE_FOR_ELEMENT_TYPES(gemm_4bit_grouped);

}  // namespace kbit::ops
