#include "programs.h"

#include <cstdio>
#include <map>
#include <string>

#include "kbit_formats.h"

namespace kbit::opencl {

extern const char source_common[];
extern const char source_blockwise_4bit[];

namespace {

const char* const kProgramSources[] = {source_blockwise_4bit};
static_assert(sizeof kProgramSources / sizeof kProgramSources[0] == static_cast<size_t>(Program::Count));

void print_table(std::string& out, const char* name, const float* values, int count) {
    out += "constant float ";
    out += name;
    out += "[" + std::to_string(count) + "] = {";
    char number[32];
    for (int i = 0; i < count; ++i) {
        std::snprintf(number, sizeof number, "%s%a", i == 0 ? "" : ", ", static_cast<double>(values[i]));
        out += number;
    }
    out += "};\n";
}

// The constants of the formats, as the backend kit defines them.
std::string prelude() {
    std::string s = "#pragma OPENCL FP_CONTRACT OFF\n";
    print_table(s, "kNf4Values", kNf4Values, 16);
    print_table(s, "kNf4Thresholds", kNf4Thresholds, 15);
    print_table(s, "kFp4Values", kFp4Values, 16);
    print_table(s, "kFp4MagnitudeThresholds", kFp4MagnitudeThresholds, 7);
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

void build(const char* fn, Program p, Built& b) {
    const Runtime& rt = runtime(fn);
    const std::string head = prelude();
    const char* parts[] = {head.c_str(), source_common, kProgramSources[static_cast<size_t>(p)]};
    cl_int err = CL_SUCCESS;
    b.program = clCreateProgramWithSource(rt.context, 3, parts, nullptr, &err);
    check(fn, "clCreateProgramWithSource", err);
    err = clBuildProgram(b.program, 1, &rt.device, build_options(), nullptr, nullptr);
    if (err != CL_SUCCESS) {
        size_t size = 0;
        clGetProgramBuildInfo(b.program, rt.device, CL_PROGRAM_BUILD_LOG, 0, nullptr, &size);
        std::string log(size, '\0');
        clGetProgramBuildInfo(b.program, rt.device, CL_PROGRAM_BUILD_LOG, size, log.data(), nullptr);
        if (log.size() > 300) log.resize(300);
        fail(KBIT_STATUS_DEVICE_ERROR, fn, "the OpenCL driver could not build kernel program %d (%s): %s",
             static_cast<int>(p), error_name(err), log.c_str());
    }
}

}  // namespace

const char* build_options() {
    static const std::string options = make_build_options();
    return options.c_str();
}

Kernel kernel(const char* fn, Program program, const char* name) {
    Built& b = built(program);
    std::call_once(b.once, [&] {
        try {
            build(fn, program, b);
        } catch (const Failure& f) {
            b.status = f.status;
            b.problem = last_error_message();
        }
    });
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
