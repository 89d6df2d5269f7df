#include "programs.h"

#include <cstdio>
#include <map>
#include <string>

#include "kbit_formats.h"
#include "kbit_torchao_math.h"

namespace kbit::opencl {

extern const char source_common[];
extern const char source_blockwise_4bit[];
extern const char source_gemm_4bit[];
extern const char source_gemm_4bit_grouped[];
extern const char source_nested_absmax[];
extern const char source_torchao_nf4[];
extern const char source_blockwise_8bit[];
extern const char source_int8[];
extern const char source_optim32[];
extern const char source_optim8_blockwise[];

namespace {

// By Program, in its order: the files after the prelude and common.cl (the second may be absent).
const char* const kProgramSources[][2] = {{source_blockwise_4bit, nullptr},
                                          {source_gemm_4bit, nullptr},
                                          {source_gemm_4bit, source_gemm_4bit_grouped},
                                          {source_nested_absmax, nullptr},
                                          {source_torchao_nf4, nullptr},
                                          {source_blockwise_8bit, nullptr},
                                          {source_int8, nullptr},
                                          {source_optim32, nullptr},
                                          {source_optim8_blockwise, nullptr}};
static_assert(sizeof kProgramSources / sizeof kProgramSources[0] == static_cast<size_t>(Program::Count));

// "{v0, v1, ...}" with every float printed exactly (hexadecimal).
std::string list(const float* values, int count) {
    std::string out = "{";
    char number[32];
    for (int i = 0; i < count; ++i) {
        std::snprintf(number, sizeof number, "%s%a", i == 0 ? "" : ", ", static_cast<double>(values[i]));
        out += number;
    }
    return out + "}";
}

void print_table(std::string& out, const char* name, const float* values, int count) {
    out += std::string("constant float ") + name + "[" + std::to_string(count) + "] = " + list(values, count) + ";\n";
}

// torchao's NF4 table rounded to T, for T = fp32, fp16, bf16 (the kernels' dtype index 0, 1, 2).
template <class T>
std::string torchao_table() {
    float v[16];
    for (int j = 0; j < 16; ++j) v[j] = torchao_nf4_value<T>(j);
    return list(v, 16);
}

// The constants of the formats, as the backend kit defines them.
std::string prelude() {
    std::string s = "#pragma OPENCL FP_CONTRACT OFF\n";
    print_table(s, "kNf4Values", kNf4Values, 16);
    print_table(s, "kNf4Thresholds", kNf4Thresholds, 15);
    print_table(s, "kFp4Values", kFp4Values, 16);
    print_table(s, "kFp4MagnitudeThresholds", kFp4MagnitudeThresholds, 7);
    s += "constant float kTorchaoNf4[3][16] = {" + torchao_table<float>() + ", " + torchao_table<kbit_half>() + ", " +
         torchao_table<kbit_bf16>() + "};\n";
    s += "#define KBIT_QUANT_FP4 " + std::to_string(static_cast<int>(QuantType::FP4)) + "\n";
    s += "#define KBIT_QUANT_NF4 " + std::to_string(static_cast<int>(QuantType::NF4)) + "\n";
    s += "#define KBIT_DTYPE_FP32 " + std::to_string(KBIT_DTYPE_FP32) + "\n";
    s += "#define KBIT_DTYPE_FP16 " + std::to_string(KBIT_DTYPE_FP16) + "\n";
    s += "#define KBIT_DTYPE_BF16 " + std::to_string(KBIT_DTYPE_BF16) + "\n";
    return s;
}

std::string make_build_options() {
    std::string options = "-cl-std=CL1.2";
    cl_device_fp_config fp = 0;
    try {
        clGetDeviceInfo(runtime("kbit_opencl").device, CL_DEVICE_SINGLE_FP_CONFIG, sizeof fp, &fp, nullptr);
    } catch (const Failure&) {
        return options;
    }
    if (fp & CL_FP_CORRECTLY_ROUNDED_DIVIDE_SQRT) options += " -cl-fp32-correctly-rounded-divide-sqrt";
    return options;
}

struct Built {
    std::once_flag once;
    kbit_status status = KBIT_STATUS_SUCCESS;
    std::string problem;
    cl_program program = nullptr;
    std::mutex kernels_lock;
    std::map<std::string, std::pair<cl_kernel, std::mutex*>> kernels;
};

Built& built(Program p) {
    static auto* programs = new Built[static_cast<size_t>(Program::Count)];  // kept until exit
    return programs[static_cast<size_t>(p)];
}

// Builds program p into b; on failure records the status and the reason (without a function name:
// every later call reports it under its own name).
void build(Program p, Built& b) {
    const Runtime* rt = nullptr;
    try {
        rt = &runtime("kbit_opencl");
    } catch (const Failure& f) {
        b.status = f.status;
        b.problem = "no OpenCL device";
        return;
    }
    const std::string head = prelude();
    const char* const* own = kProgramSources[static_cast<size_t>(p)];
    const char* parts[] = {head.c_str(), source_common, own[0], own[1]};
    cl_int err = CL_SUCCESS;
    b.program = clCreateProgramWithSource(rt->context, own[1] != nullptr ? 4 : 3, parts, nullptr, &err);
    if (err == CL_SUCCESS) err = clBuildProgram(b.program, 1, &rt->device, build_options(), nullptr, nullptr);
    if (err == CL_SUCCESS) return;
    std::string log;
    size_t size = 0;
    if (b.program != nullptr &&
        clGetProgramBuildInfo(b.program, rt->device, CL_PROGRAM_BUILD_LOG, 0, nullptr, &size) == CL_SUCCESS) {
        log.resize(size);
        clGetProgramBuildInfo(b.program, rt->device, CL_PROGRAM_BUILD_LOG, size, log.data(), nullptr);
        if (log.size() > 300) log.resize(300);
    }
    b.status = KBIT_STATUS_DEVICE_ERROR;
    b.problem = std::string("the OpenCL driver could not build kernel program ") + std::to_string(static_cast<int>(p)) +
                " (" + error_name(err) + "): " + log;
}

}  // namespace

const char* build_options() {
    static const std::string options = make_build_options();
    return options.c_str();
}

Kernel kernel(const char* fn, Program program, const char* name) {
    Built& b = built(program);
    std::call_once(b.once, [&] { build(program, b); });
    if (b.status != KBIT_STATUS_SUCCESS) fail(b.status, fn, "%s", b.problem.c_str());
    std::lock_guard guard(b.kernels_lock);
    auto it = b.kernels.find(name);
    if (it == b.kernels.end()) {
        cl_int err = CL_SUCCESS;
        cl_kernel k = clCreateKernel(b.program, name, &err);
        check(fn, "clCreateKernel", err);
        it = b.kernels.emplace(name, std::make_pair(k, new std::mutex)).first;
    }
    return Kernel{it->second.first, it->second.second};
}

}  // namespace kbit::opencl
