// convert_quantize.cpp — the body of `kbit quantize`: which tensors are quantized (the skip patterns),
// each weight quantized in pieces by the CPU backend (4-bit blocks, nested absmax, LLM.int8 rows) and
// handed to the writer as a bitsandbytes layer, the rest copied; config.json's quantization_config as
// transformers writes it.
#include <fnmatch.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "convert_job.h"
#include "failure.h"
#include "kbit_dynamic_map.h"
#include "kbit_half.h"
#include "kbit_half_array.h"
#include "progress.h"

namespace kbit::cli {

namespace {

using json = nlohmann::json;
using kbit::fs::format;

const char* const kDefaultSkip[] = {"lm_head", "*embed*", "*norm*", "wte", "wpe"};

// A module name matches a skip pattern: a glob, the name itself, or a dotted part of it.
bool matches(const std::string& module, const std::string& pat) {
    if (pat.find_first_of("*?[") != std::string::npos) return fnmatch(pat.c_str(), module.c_str(), 0) == 0;
    const std::string m = "." + module + ".";
    return module == pat || m.find("." + pat + ".") != std::string::npos;
}

// Data of a tensor as a pointer aligned to `align` (a copy when the file does not align it).
const void* aligned_data(const kbit_io_tensor* t, size_t align, std::vector<uint8_t>& copy) {
    if (reinterpret_cast<uintptr_t>(t->data) % align == 0) return t->data;
    copy.assign(static_cast<const uint8_t*>(t->data), static_cast<const uint8_t*>(t->data) + t->nbytes);
    return copy.data();
}

std::vector<float> quant_map(const Job& j, int32_t format) {
    // As the Python package reads it: the 16 codes dequantized with scale 1 (FP4 index 8 is +0.0).
    const uint8_t packed[8] = {0x01, 0x23, 0x45, 0x67, 0x89, 0xAB, 0xCD, 0xEF};
    const float one = 1.0f;
    std::vector<float> map(16);
    check(j.t4->kbit_dequantize_4bit(format == KBIT_IO_FORMAT_NF4 ? KBIT_QUANT_NF4 : KBIT_QUANT_FP4, KBIT_DTYPE_FP32,
                                     packed, &one, map.data(), 32, 16, nullptr),
          "the 4-bit table");
    if (format == KBIT_IO_FORMAT_FP4) map[8] = 0.0f;
    return map;
}

// A fused-experts parameter (transformers v5): a 3-D tensor named *.experts.NAME (NAME not "weight").
bool is_experts(const kbit_io_tensor* t) {
    const std::string name = t->name;
    const size_t last = name.rfind('.');
    if (t->ndim != 3 || last == std::string::npos || name.compare(last + 1, std::string::npos, "weight") == 0) return false;
    const std::string parent = name.substr(0, last);
    return parent == "experts" || (parent.size() > 8 && parent.compare(parent.size() - 8, 8, ".experts") == 0);
}

// The layer `kbit quantize` makes of weight t of module `module` (an experts parameter: its key),
// without its data.
kbit_io_quant layer_of(const kbit_io_tensor* t, const std::string& module, const QuantOptions& o) {
    kbit_io_quant layer{};
    layer.size = sizeof layer;
    layer.prefix = module.c_str();
    layer.format = o.format;
    layer.ndim = t->ndim;
    layer.parameter = t->ndim == 3;
    layer.shape = t->shape;
    if (o.format == KBIT_IO_FORMAT_INT8) {
        layer.storage_dtype = KBIT_IO_DTYPE_I8;
        layer.dtype = -1;
    } else {
        layer.dtype = kbit_dtype_of(t->dtype);
        layer.blocksize = o.blocksize;
        layer.storage_dtype = KBIT_IO_DTYPE_U8;
        layer.nested = o.nested;
        layer.nested_blocksize = o.nested ? 256 : 0;
    }
    return layer;
}

}  // namespace

int run_quantize_job(Job& j, const QuantOptions& o) {
    open_job(j);
    if (kbit_io_quant_count(j.ck) > 0)
        throw Failure(format("%s: already holds %zu bitsandbytes layer(s) ('%s'); quantize a dense checkpoint",
                          j.in.c_str(), kbit_io_quant_count(j.ck), kbit_io_quant_prefix(j.ck, 0)));
    const std::vector<float> qmap = o.format == KBIT_IO_FORMAT_INT8 ? std::vector<float>() : quant_map(j, o.format);
    const std::vector<float> code8 = kbit::dynamic_map(true);
    std::vector<std::string> skip = o.skip;
    if (o.default_skip) skip.insert(skip.begin(), std::begin(kDefaultSkip), std::end(kDefaultSkip));
    const size_t count = kbit_io_tensor_count(j.ck);
    const uint64_t total_in = tensor_bytes(j.ck);
    Progress progress("kbit quantize", o.quiet, count, total_in);
    std::map<std::string, size_t> weight_map;
    // The outputs of one weight; two sets, one being written while the other is computed.
    struct Outputs {
        std::vector<uint8_t> packed, codes;
        std::vector<float> absmax, nested_absmax, scb;
        std::vector<int8_t> cb;
    };
    Outputs outputs[2];
    std::vector<uint8_t> copy;
    std::vector<uint16_t> half;
    // Quantized: a 2-D float P.weight whose module P no skip pattern matches; with --nf4 / --fp4 also
    // a 3-D float experts parameter whose key no skip pattern matches (stored under its own key).
    auto module_of = [](const kbit_io_tensor* t) {
        const std::string name = t->name;
        if (t->ndim == 3) return name;
        return name.size() > 7 ? name.substr(0, name.size() - 7) : "";
    };
    // The router of a block with fused experts, P.gate.weight beside P.experts.NAME, is kept dense by
    // default: transformers v5 holds it as a bare parameter, not an nn.Linear, so bitsandbytes never
    // quantizes it and a model loads it dense.
    std::set<std::string> routers;
    if (o.default_skip)
        for (size_t i = 0; i < count; ++i) {
            const kbit_io_tensor* t;
            check_io(kbit_io_tensor_at(j.ck, i, &t));
            if (!is_experts(t)) continue;
            const std::string name = t->name;
            const size_t experts = name.rfind(".experts.");
            routers.insert((experts == std::string::npos ? std::string() : name.substr(0, experts + 1)) + "gate");
        }
    auto quantizes = [&](const kbit_io_tensor* t) {
        const std::string name = t->name;
        bool q = t->ndim == 2 && kbit_dtype_of(t->dtype) >= 0 && name.size() > 7 &&
                 name.compare(name.size() - 7, 7, ".weight") == 0 && t->numel > 0;
        if (o.format != KBIT_IO_FORMAT_INT8 && is_experts(t) && kbit_dtype_of(t->dtype) >= 0 && t->numel > 0) q = true;
        const std::string module = module_of(t);
        for (const std::string& p : skip) q = q && !matches(module, p);
        return q && !(t->ndim == 2 && routers.count(module) > 0);
    };
    // Every output tensor declared first, so each shard's bytes are written once (docs/cli.md). Not
    // with --double-quant: a nested layer's quant_state size depends on the offset it gets.
    if (!o.nested)
        for (size_t i = 0; i < count; ++i) {
            const kbit_io_tensor* t;
            check_io(kbit_io_tensor_at(j.ck, i, &t));
            kbit_io_writer* w = j.writers[t->shard];
            if (!quantizes(t)) {
                check_io(kbit_io_writer_declare(w, t->name, t->dtype, t->ndim, t->shape));
                continue;
            }
            const std::string module = module_of(t);
            const kbit_io_quant layer = layer_of(t, module, o);
            check_io(kbit_io_writer_declare_quant(w, &layer));
        }
    size_t quantized = 0;
    WriteBehind write_behind(j.compute.count() > 1);
    for (size_t i = 0; i < count; ++i) {
        const kbit_io_tensor* t;
        check_io(kbit_io_tensor_at(j.ck, i, &t));
        kbit_io_writer* w = j.writers[t->shard];
        const std::string name = t->name;
        const int32_t dt = kbit_dtype_of(t->dtype);
        const std::string module = module_of(t);
        if (!quantizes(t)) {
            write_behind.submit([=] { check_io(kbit_io_writer_add(w, t->name, t->dtype, t->ndim, t->shape, t->data)); });
            weight_map[name] = t->shard;
            progress.step(name, t->nbytes, "copied");
            continue;
        }
        const int64_t n = static_cast<int64_t>(t->numel);
        const void* data = aligned_data(t, dtype_size(dt), copy);
        Outputs& out = outputs[quantized % 2];
        auto& [packed, codes, absmax, nested_absmax, scb, cb] = out;
        kbit_io_quant layer = layer_of(t, module, o);
        std::vector<std::string> added;
        if (o.format == KBIT_IO_FORMAT_INT8) {
            const int64_t rows = t->shape[0], cols = t->shape[1];
            if (cols > INT32_MAX) throw Failure(format("%s: %" PRId64 " columns, more than int8 quantization takes", t->name, cols));
            // bitsandbytes quantizes the float16 copy of the weight.
            half.resize(static_cast<size_t>(n));
            cb.resize(static_cast<size_t>(n));
            scb.resize(static_cast<size_t>(rows));
            j.compute.run(rows, rows_per_piece(cols), [&](int64_t r0, int64_t r1) {
                const int64_t k0 = r0 * cols, k1 = r1 * cols;
                if (dt == KBIT_DTYPE_FP16) std::memcpy(half.data() + k0, static_cast<const uint16_t*>(data) + k0, static_cast<size_t>(k1 - k0) * 2);
                else if (dt == KBIT_DTYPE_BF16) kbit::bf16_to_half_array(static_cast<const uint16_t*>(data) + k0, half.data() + k0, k1 - k0);
                else kbit::float_to_half_array(static_cast<const float*>(data) + k0, half.data() + k0, k1 - k0);
                // a piece is one row or at most kPieceElements: rows x cols fits the int arguments
                check(j.t8->cint8_vector_quant(reinterpret_cast<kbit_half*>(half.data() + k0), cb.data() + k0, scb.data() + r0,
                                               0.0f, static_cast<int>(r1 - r0), static_cast<int>(cols), nullptr),
                      t->name);
            });
            layer.weight = cb.data();
            layer.scb = scb.data();
            added = {module + ".weight", module + ".SCB", module + ".weight_format"};
        } else {
            const int64_t blocks = (n + o.blocksize - 1) / o.blocksize;
            packed.resize(static_cast<size_t>((n + 1) / 2));
            absmax.resize(static_cast<size_t>(blocks));
            const size_t elem = dtype_size(dt);
            const int64_t bs = o.blocksize;
            j.compute.run(n, piece_of(bs), [&](int64_t begin, int64_t end) {
                check(j.t4->kbit_quantize_4bit(o.format == KBIT_IO_FORMAT_NF4 ? KBIT_QUANT_NF4 : KBIT_QUANT_FP4, dt,
                                               static_cast<const char*>(data) + begin * elem, absmax.data() + begin / bs,
                                               packed.data() + begin / 2, bs, end - begin, nullptr),
                      t->name);
            });
            layer.weight = packed.data();
            layer.quant_map = qmap.data();
            layer.absmax = absmax.data();
            const std::string W = layer.parameter ? module : module + ".weight";
            added = {W, W + ".absmax", W + ".quant_map",
                     W + ".quant_state.bitsandbytes__" + (o.format == KBIT_IO_FORMAT_NF4 ? "nf4" : "fp4")};
            if (o.nested) {
                const int64_t nb = (blocks + 255) / 256;
                codes.resize(static_cast<size_t>(blocks));
                nested_absmax.resize(static_cast<size_t>(nb));
                float offset = 0;
                check(j.t4->kbit_nested_absmax_quantize(absmax.data(), code8.data(), codes.data(), nested_absmax.data(),
                                                        &offset, blocks, 256, nullptr),
                      t->name);
                layer.absmax = codes.data();
                layer.nested_absmax = nested_absmax.data();
                layer.nested_quant_map = code8.data();
                layer.nested_offset = offset;
                added.push_back(W + ".nested_absmax");
                added.push_back(W + ".nested_quant_map");
            }
        }
        write_behind.submit([=, prefix = module]() mutable {
            layer.prefix = prefix.c_str();
            check_io(kbit_io_writer_add_quant(w, &layer));
        });
        for (const std::string& a : added) weight_map[a] = t->shard;
        ++quantized;
        progress.step(name, t->nbytes, kbit_io_format_name(o.format));
    }
    write_behind.wait();
    finish_job(j, weight_map, [&](json& cfg) {
        json qc = json::object();
        const bool four = o.format != KBIT_IO_FORMAT_INT8;
        qc["quant_method"] = "bitsandbytes";
        qc["_load_in_4bit"] = four;
        qc["_load_in_8bit"] = !four;
        qc["load_in_4bit"] = four;
        qc["load_in_8bit"] = !four;
        qc["llm_int8_threshold"] = 6.0;
        qc["llm_int8_has_fp16_weight"] = false;
        qc["llm_int8_enable_fp32_cpu_offload"] = false;
        if (o.skip.empty()) {
            qc["llm_int8_skip_modules"] = nullptr;
        } else {
            json mods = json::array();
            if (std::find(o.skip.begin(), o.skip.end(), "lm_head") == o.skip.end()) mods.push_back("lm_head");
            for (const std::string& s : o.skip) mods.push_back(s);
            qc["llm_int8_skip_modules"] = mods;
        }
        // An int8 model keeps BitsAndBytesConfig's 4-bit defaults (fp4, float32), as transformers writes them.
        qc["bnb_4bit_quant_type"] = !four ? "fp4" : o.format == KBIT_IO_FORMAT_FP4 ? "fp4" : "nf4";
        qc["bnb_4bit_use_double_quant"] = o.nested;
        qc["bnb_4bit_compute_dtype"] = four ? torch_name(o.compute_dtype) : "float32";
        qc["bnb_4bit_quant_storage"] = "uint8";
        cfg["quantization_config"] = qc;
    });
    progress.finish(j.out);
    if (!o.quiet && quantized == 0) std::fprintf(stderr, "kbit quantize: note: no tensor was quantized\n");
    return 0;
}

}  // namespace kbit::cli
