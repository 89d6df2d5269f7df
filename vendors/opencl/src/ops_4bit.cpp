// The 4-bit operations (kbit_ops_4bit.h) on OpenCL: kernels/blockwise_4bit.cl (quantize, dequantize),
// gemm_4bit.cl (GEMV, GEMM), gemm_4bit_grouped.cl, nested_absmax.cl, torchao_nf4.cl (with the scaler stage on
// the host).
#include <algorithm>
#include <climits>
#include <memory>
#include <optional>
#include <vector>

#include "device_memory.h"
#include "kbit_half.h"
#include "kbit_ops_4bit.h"
#include "kbit_stream_errors.h"
#include "kbit_torchao_scalers.h"
#include "kbit_validate_4bit.h"
#include "programs.h"

namespace kbit::ops {

using namespace kbit::opencl;

namespace {
constexpr size_t kQuantizeGroup = 64;  // QUANTIZE_GROUP of blockwise_4bit.cl
constexpr size_t kDotGroup = 64;       // DOT_GROUP of gemm_4bit.cl
constexpr size_t kNestedGroup = 64;    // NESTED_GROUP of nested_absmax.cl
constexpr size_t kPlanGroup = 256;     // PLAN_GROUP of gemm_4bit_grouped.cl, the most its plan takes
constexpr int64_t kPlanHead = 4;       // PLAN_HEAD: the ints before the plan's arrays

// The plan's work-group: PLAN_GROUP items where the device runs that many (the kernel takes any size).
size_t plan_group(const char* fn) {
    size_t most = 0;
    check(fn, "clGetKernelWorkGroupInfo",
          clGetKernelWorkGroupInfo(kernel(fn, Program::Gemm4bitGrouped, "grouped_plan").handle, runtime(fn).device,
                                   CL_KERNEL_WORK_GROUP_SIZE, sizeof most, &most, nullptr));
    return std::min(kPlanGroup, most);
}

// The id check of one grouped call: the plan's record {first bad pair or INT_MAX, its id}, read into this
// object's memory by a non-blocking read that follows the call's kernels on its queue.
class GroupedIdCheck final : public PendingCheck {
public:
    GroupedIdCheck(const char* fn, int64_t top_k, int64_t experts) : fn_(fn), top_k_(top_k), experts_(experts) {}
    GroupedIdCheck(const GroupedIdCheck&) = delete;
    GroupedIdCheck& operator=(const GroupedIdCheck&) = delete;
    ~GroupedIdCheck() override {
        if (event_ == nullptr) return;
        if (!done()) clWaitForEvents(1, &event_);  // the read must not land in freed memory
        clReleaseEvent(event_);
    }
    int32_t* record() { return record_; }
    cl_event* event() { return &event_; }

    bool done() override {
        cl_int status = CL_QUEUED;
        const cl_int err = clGetEventInfo(event_, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof status, &status, nullptr);
        status_ = err != CL_SUCCESS ? err : status;
        return status_ <= CL_COMPLETE;  // CL_COMPLETE is 0; a negative status is an error
    }
    bool failed() override { return status_ < 0 || record_[0] != INT_MAX; }
    kbit_status report() override {
        if (status_ < 0)
            return set_error(KBIT_STATUS_DEVICE_ERROR, fn_, "the device did not return its check of the expert ids: "
                             "%s (%d)", error_name(status_), static_cast<int>(status_));
        return grouped_id_error(fn_, record_[0], top_k_, record_[1], experts_);
    }

private:
    const char* fn_;  // the exported function's name, a string literal
    int64_t top_k_, experts_;
    int32_t record_[2] = {INT_MAX, 0};
    cl_event event_ = nullptr;
    cl_int status_ = CL_QUEUED;
};
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

template <class T>
kbit_status gemv_4bit(const char* fn, int m, int k, const T* A, const uint8_t* B, const float* absmax,
                      const float* datatype, T* out, int ldb, int blocksize, void* stream) {
    return run([&] {
        // k = 0 (every output the empty sum) is allowed with NULL inputs, which are then not read.
        const int64_t nibbles = 2 * static_cast<int64_t>(ldb) * (m - 1) + k;  // up to the last row's end
        launch(fn, queue_of(fn, stream), Program::Gemm4bit, "gemv_4bit", static_cast<size_t>(m) * kDotGroup, kDotGroup,
               k == 0 ? kNoArray : resolve_array(fn, A, k, "A"),
               k == 0 ? kNoArray : resolve_array(fn, B, (nibbles + 1) / 2, "B"),
               k == 0 ? kNoArray : resolve_array(fn, absmax, blocks_of(nibbles, blocksize), "absmax"),
               k == 0 ? kNoArray : resolve_array(fn, datatype, 16, "datatype"), resolve_array(fn, out, m, "out"),
               Elem<T>::dtype, k, ldb, blocksize);
    });
}

template <class T>
kbit_status gemm_4bit(const char* fn, const T* A, const uint8_t* B, const float* absmax, const uint8_t* absmax_8bit,
                      const float* absmax_code, const float* absmax_offset, T* out, const T* bias, int M, int N, int K,
                      int blocksize, QuantType qt, void* stream) {
    return run([&] {
        const int64_t weights = static_cast<int64_t>(N) * K, blocks = blocks_of(weights, blocksize);
        const bool nested = absmax_8bit != nullptr;
        launch(fn, queue_of(fn, stream), Program::Gemm4bit, "gemm_4bit", static_cast<size_t>(M) * N * kDotGroup,
               kDotGroup, resolve_array(fn, A, static_cast<int64_t>(M) * K, "A"),
               resolve_array(fn, B, weights / 2, "B"),
               resolve_array(fn, absmax, nested ? blocks_of(blocks, 256) : blocks, "absmax"),
               nested ? resolve_array(fn, absmax_8bit, blocks, "absmax_8bit") : kNoArray,
               nested ? resolve_array(fn, absmax_code, 256, "absmax_code") : kNoArray,
               nested ? resolve_array(fn, absmax_offset, 1, "absmax_offset") : kNoArray,
               resolve_array(fn, out, static_cast<int64_t>(M) * N, "out"),
               bias != nullptr ? resolve_array(fn, bias, N, "bias") : kNoArray, Elem<T>::dtype, N, K, blocksize,
               static_cast<int32_t>(qt));
    });
}

kbit_status nested_absmax_quantize(const char* fn, const float* absmax, const float* code, uint8_t* qabsmax,
                                   float* nested_absmax, float* offset, int64_t blocks, int64_t nested_blocksize,
                                   void* stream) {
    return run([&] {
        const cl_command_queue q = queue_of(fn, stream);
        static const bool has_doubles = [fn] {
            cl_device_fp_config fp64 = 0;
            clGetDeviceInfo(runtime(fn).device, CL_DEVICE_DOUBLE_FP_CONFIG, sizeof fp64, &fp64, nullptr);
            return fp64 != 0;
        }();
        if (!has_doubles)
            fail(KBIT_STATUS_NOT_SUPPORTED, fn,
                 "the mean of the scales is summed in double, as the reference does, and this OpenCL device has no "
                 "cl_khr_fp64");
        const DeviceArray a = resolve_array(fn, absmax, blocks, "absmax");
        const DeviceArray off = resolve_array(fn, offset, 1, "offset");
        launch(fn, q, Program::NestedAbsmax, "nested_mean", 1, 1, a, off, blocks);
        const int64_t groups = blocks_of(blocks, nested_blocksize);
        launch(fn, q, Program::NestedAbsmax, "nested_quantize", static_cast<size_t>(groups) * kNestedGroup,
               kNestedGroup, a, resolve_array(fn, code, 256, "code"), resolve_array(fn, qabsmax, blocks, "qabsmax"),
               resolve_array(fn, nested_absmax, groups, "nested_absmax"), off, blocks, nested_blocksize);
    });
}

kbit_status nested_absmax_dequantize(const char* fn, const uint8_t* qabsmax, const float* code,
                                     const float* nested_absmax, float offset, float* absmax, int64_t blocks,
                                     int64_t nested_blocksize, void* stream) {
    return run([&] {
        launch(fn, queue_of(fn, stream), Program::NestedAbsmax, "nested_dequantize", static_cast<size_t>(blocks), 0,
               resolve_array(fn, qabsmax, blocks, "qabsmax"), resolve_array(fn, code, 256, "code"),
               resolve_array(fn, nested_absmax, blocks_of(blocks, nested_blocksize), "nested_absmax"), offset,
               resolve_array(fn, absmax, blocks, "absmax"), blocks, nested_blocksize);
    });
}

// The block scalers on the device; their mean and int8 second level on the host, in torch's order
// (kbit_torchao_scalers.h: 2-4 bytes per block cross, and the call waits for them); the indices on
// the device.
template <class T>
kbit_status torchao_quantize(const char* fn, const T* w, uint8_t* quantized_data, int8_t* quantized_scalers,
                             T* quantization_factor, T* scaler_mean, int64_t n, int64_t block_size,
                             int64_t scaler_block_size, void* stream) {
    return run([&] {
        const cl_command_queue q = queue_of(fn, stream);
        const int64_t blocks = n / block_size, groups = blocks / scaler_block_size;
        const DeviceArray dw = resolve_array(fn, w, n, "w");
        const DeviceArray dq = resolve_array(fn, quantized_scalers, blocks, "quantized_scalers");
        const DeviceArray df = resolve_array(fn, quantization_factor, groups, "quantization_factor");
        const DeviceArray dm = resolve_array(fn, scaler_mean, 1, "scaler_mean");
        const DeviceArray dd = resolve_array(fn, quantized_data, n / 2, "quantized_data");
        const Scratch scalers(fn, static_cast<size_t>(blocks) * sizeof(T));
        launch(fn, q, Program::TorchaoNf4, "torchao_block_scalers", static_cast<size_t>(blocks), 0, dw,
               scalers.at(0), Elem<T>::dtype, blocks, block_size);
        std::vector<T> host(static_cast<size_t>(blocks)), factor(static_cast<size_t>(groups)), mean(1);
        std::vector<int8_t> codes(static_cast<size_t>(blocks));
        check(fn, "clEnqueueReadBuffer (block scalers)",
              clEnqueueReadBuffer(q, scalers.buffer(), CL_TRUE, 0, host.size() * sizeof(T), host.data(), 0, nullptr, nullptr));
        torchao_scalers(host.data(), codes.data(), factor.data(), mean.data(), blocks, scaler_block_size);
        check(fn, "clEnqueueWriteBuffer (quantized_scalers)",
              clEnqueueWriteBuffer(q, dq.buffer, CL_TRUE, dq.offset, codes.size(), codes.data(), 0, nullptr, nullptr));
        check(fn, "clEnqueueWriteBuffer (quantization_factor)",
              clEnqueueWriteBuffer(q, df.buffer, CL_TRUE, df.offset, factor.size() * sizeof(T), factor.data(), 0,
                                   nullptr, nullptr));
        check(fn, "clEnqueueWriteBuffer (scaler_mean)",
              clEnqueueWriteBuffer(q, dm.buffer, CL_TRUE, dm.offset, sizeof(T), mean.data(), 0, nullptr, nullptr));
        launch(fn, q, Program::TorchaoNf4, "torchao_indices", static_cast<size_t>(n / 2), 0, dw, scalers.at(0), dd,
               Elem<T>::dtype, n / 2, block_size);
    });
}

template <class T>
kbit_status torchao_dequantize(const char* fn, const uint8_t* quantized_data, const int8_t* quantized_scalers,
                               const T* quantization_factor, const T* scaler_mean, T* out, int64_t n,
                               int64_t block_size, int64_t scaler_block_size, void* stream) {
    return run([&] {
        const int64_t blocks = n / block_size;
        launch(fn, queue_of(fn, stream), Program::TorchaoNf4, "torchao_dequantize", static_cast<size_t>(n / 2), 0,
               resolve_array(fn, quantized_data, n / 2, "quantized_data"),
               resolve_array(fn, quantized_scalers, blocks, "quantized_scalers"),
               resolve_array(fn, quantization_factor, blocks / scaler_block_size, "quantization_factor"),
               resolve_array(fn, scaler_mean, 1, "scaler_mean"), resolve_array(fn, out, n, "out"), Elem<T>::dtype,
               n / 2, block_size, scaler_block_size);
    });
}

// The grouped (mixture-of-experts) GEMM: gemm_4bit_grouped.cl's plan, GEMM and combine kernels on the call's
// queue. The ids are checked on the device; the call returns once the kernels are enqueued, and an id out of
// range is reported by the stream's next synchronize (GroupedIdCheck). The scratch buffers are released on
// return: OpenCL keeps a buffer until the commands queued on it have finished.
template <class T>
kbit_status gemm_4bit_grouped(const char* fn, const T* A, int64_t a_rows_per_token, const uint8_t* B,
                              const float* absmax, const uint8_t* absmax_8bit, const float* absmax_code,
                              const float* absmax_offset, int64_t experts, int64_t N, int64_t K, int64_t blocksize,
                              QuantType qt, const int32_t* ids, int64_t tokens, int64_t top_k, const float* combine,
                              T* out, void* stream) {
    return run([&] {
        const cl_command_queue q = queue_of(fn, stream);
        const int64_t pairs = tokens * top_k, rows = a_rows_per_token * tokens;
        // Work-group columns, one per chosen expert; at least one (OpenCL before 2.1 refuses an empty launch).
        const int64_t slots = std::max<int64_t>(1, std::min(experts, pairs));
        const int64_t weights = experts * N * K, blocks = blocks_of(weights, blocksize);
        const bool nested = absmax_8bit != nullptr, dot = K > 0;  // K = 0: zeros, no weight or activation read
        if (static_cast<uint64_t>(slots) * static_cast<uint64_t>(N) > (uint64_t{1} << 52) / kDotGroup)
            fail(KBIT_STATUS_DEVICE_ERROR, fn, "min(experts, tokens * top_k) * N = %lld * %lld work-groups are more "
                 "than one launch can hold", static_cast<long long>(slots), static_cast<long long>(N));
        const DeviceArray a = dot ? resolve_array(fn, A, rows * K, "A") : kNoArray;
        const DeviceArray b = dot ? resolve_array(fn, B, weights / 2, "B") : kNoArray;
        const DeviceArray scales =
            dot ? resolve_array(fn, absmax, nested ? blocks_of(blocks, 256) : blocks, "absmax") : kNoArray;
        const DeviceArray codes = dot && nested ? resolve_array(fn, absmax_8bit, blocks, "absmax_8bit") : kNoArray;
        const DeviceArray table = dot && nested ? resolve_array(fn, absmax_code, 256, "absmax_code") : kNoArray;
        const DeviceArray offset = dot && nested ? resolve_array(fn, absmax_offset, 1, "absmax_offset") : kNoArray;
        const DeviceArray id = resolve_array(fn, ids, pairs, "ids");
        const DeviceArray weight = combine != nullptr ? resolve_array(fn, combine, pairs, "combine") : kNoArray;
        const DeviceArray o = resolve_array(fn, out, (combine != nullptr ? tokens : pairs) * N, "out");

        const Scratch plan(fn, static_cast<size_t>(kPlanHead + 2 * slots + 1 + pairs + experts) * sizeof(int32_t));
        const size_t group = plan_group(fn);
        launch(fn, q, Program::Gemm4bitGrouped, "grouped_plan", group, group, id, plan.at(0), pairs, experts, slots);
        std::optional<Scratch> y;  // the rows before the combine
        if (combine != nullptr) y.emplace(fn, static_cast<size_t>(pairs * N) * sizeof(T));
        launch(fn, q, Program::Gemm4bitGrouped, "grouped_gemm", static_cast<size_t>(slots * N) * kDotGroup, kDotGroup,
               a, b, scales, codes, table, offset, plan.at(0), y ? y->at(0) : o, Elem<T>::dtype, N, K,
               static_cast<int32_t>(blocksize), static_cast<int32_t>(qt), static_cast<int32_t>(a_rows_per_token),
               static_cast<int32_t>(top_k), pairs, slots);
        if (y)
            launch(fn, q, Program::Gemm4bitGrouped, "grouped_combine", static_cast<size_t>(tokens * N), 0, y->at(0),
                   weight, plan.at(0), o, Elem<T>::dtype, N, static_cast<int32_t>(top_k), tokens * N);
        auto pending = std::make_unique<GroupedIdCheck>(fn, top_k, experts);
        check(fn, "clEnqueueReadBuffer (the id check)",
              clEnqueueReadBuffer(q, plan.buffer(), CL_FALSE, 0, sizeof(int32_t) * 2, pending->record(), 0, nullptr,
                                  pending->event()));
        clFlush(q);  // so that the check completes without a synchronize, and add() can drop it
        stream_errors().add(stream, std::move(pending));
    });
}

#define KBIT_OPENCL_4BIT(T)                                          \
    template decltype(quantize_4bit<T>) quantize_4bit<T>;            \
    template decltype(dequantize_4bit<T>) dequantize_4bit<T>;        \
    template decltype(gemv_4bit<T>) gemv_4bit<T>;                    \
    template decltype(gemm_4bit<T>) gemm_4bit<T>;                    \
    template decltype(gemm_4bit_grouped<T>) gemm_4bit_grouped<T>;    \
    template decltype(torchao_quantize<T>) torchao_quantize<T>;      \
    template decltype(torchao_dequantize<T>) torchao_dequantize<T>;
KBIT_OPENCL_4BIT(float)
KBIT_OPENCL_4BIT(kbit_half)
KBIT_OPENCL_4BIT(kbit_bf16)

}  // namespace kbit::ops
