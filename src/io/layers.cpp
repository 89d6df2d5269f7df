// layers.cpp — the bitsandbytes layout on top of the tensors (docs/behaviour.md §11), in both
// directions. Read: the tensors of a checkpoint grouped into layers and checked by the rules of the
// Python package (python/kbit/checkpoint.py load_4bit / load_int8 and functional.py
// QuantState.from_dict), so that both accept and reject the same files. Written: a layer expanded
// into the tensors kbit.checkpoint writes for it (the writer's kbit_io_writer_add_quant), the
// quant_state JSON as json.dumps spells it.
#include <algorithm>
#include <charconv>
#include <cinttypes>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>

#include <nlohmann/json.hpp>

#include "io_internal.h"

namespace kbit::io {

namespace {

using nlohmann::json;

constexpr const char* kQsMarker = ".weight.quant_state.bitsandbytes__";
constexpr const char* kParamMarker = ".quant_state.bitsandbytes__";  // T.quant_state.bitsandbytes__<type>
const char* const kNestedKeys[] = {"nested_absmax", "nested_blocksize", "nested_quant_map", "nested_dtype",
                                   "nested_offset"};
const char* const kTensorFields[] = {"absmax", "quant_map", "nested_absmax", "nested_quant_map"};

bool starts_with(const std::string& s, const std::string& p) { return s.compare(0, p.size(), p) == 0; }
bool ends_with(const std::string& s, const std::string& p) {
    return s.size() >= p.size() && s.compare(s.size() - p.size(), p.size(), p) == 0;
}

std::string last_component(const std::string& key) {
    const size_t dot = key.rfind('.');
    return dot == std::string::npos ? key : key.substr(dot + 1);
}

// The key's last two dotted components, joined ("quant_state.bitsandbytes__nf4").
std::string last_two(const std::string& key) {
    const size_t dot = key.rfind('.');
    if (dot == std::string::npos) return key;
    const size_t dot2 = dot == 0 ? std::string::npos : key.rfind('.', dot - 1);
    return dot2 == std::string::npos ? key : key.substr(dot2 + 1);
}

std::string shown(const json& v) {
    std::string s = v.dump(-1, ' ', false, json::error_handler_t::replace);
    if (s.size() > 60) s = s.substr(0, 57) + "...";
    return s;
}

std::string blocksizes_text() {
    std::string s;
    for (int b = KBIT_BLOCKSIZE_MIN; b <= KBIT_BLOCKSIZE_MAX; b *= 2) s += (s.empty() ? "" : ", ") + std::to_string(b);
    return s;
}

uint64_t ceil_div(uint64_t n, uint64_t d) { return n / d + (n % d != 0); }

bool aligned_to(const void* p, size_t a) { return reinterpret_cast<uintptr_t>(p) % a == 0; }

class Checker {
public:
    Checker(const std::map<std::string, const Tensor*>& by_name, const std::vector<std::string>& labels)
        : by_name_(by_name), labels_(labels) {}

    const Tensor* find(const std::string& name) const {
        const auto it = by_name_.find(name);
        return it == by_name_.end() ? nullptr : it->second;
    }
    const char* file(const Tensor* t) const { return labels_[t->shard].c_str(); }

    // _check_saved: dtype (nullptr = any) and element count (UINT64_MAX = any).
    void check_saved(const char* fn, const Tensor* t, const DtypeInfo* dtype, uint64_t numel = UINT64_MAX,
                     const std::string& need = "expected") const {
        if (dtype && t->dtype != dtype)
            throw Invalid(format("%s: %s: %s has dtype %s, expected %s", file(t), fn, t->name.c_str(), t->dtype->name,
                                 dtype->name));
        if (numel != UINT64_MAX && t->numel != numel)
            throw Invalid(format("%s: %s: %s has %" PRIu64 " elements, %s %" PRIu64, file(t), fn, t->name.c_str(),
                                 t->numel, need.c_str(), numel));
    }

    void layer_4bit(const std::string& prefix, bool parameter, const std::vector<const Tensor*>& sorted,
                    Layer& L) const;
    void layer_int8(const std::string& prefix, Layer& L) const;

private:
    const std::map<std::string, const Tensor*>& by_name_;
    const std::vector<std::string>& labels_;
};

const DtypeInfo* U8() { return dtype_by_id(KBIT_IO_DTYPE_U8); }
const DtypeInfo* F32() { return dtype_by_id(KBIT_IO_DTYPE_F32); }

void Checker::layer_4bit(const std::string& prefix, bool parameter, const std::vector<const Tensor*>& sorted,
                         Layer& L) const {
    // A linear layer's weight is P.weight; a parameter's (fused experts) is the key P itself.
    const std::string name = parameter ? prefix : prefix + ".weight";
    L.weight_name = name;
    const Tensor* packed = find(name);
    // Every message names a file: the quant_state's when the weight is missing.
    const Tensor* anchor = nullptr;
    for (const Tensor* t : sorted)
        if (starts_with(t->name, name + ".") && t->name.find(".quant_state.bitsandbytes__") != std::string::npos) {
            anchor = t;
            break;
        }
    if (!packed)
        throw Invalid(format("%s: load_4bit: %s not in the checkpoint", anchor ? file(anchor) : "?", name.c_str()));

    // QuantState.from_dict over the keys under P.weight., stripped to their last component (a later key,
    // in name order, wins as it does in Python's dict); the quant_state item sought in the last two.
    const char* fn = "QuantState.from_dict";
    std::map<std::string, const Tensor*> d;
    std::vector<const Tensor*> qs;
    for (const Tensor* t : sorted) {
        if (!starts_with(t->name, name + ".")) continue;
        if (last_two(t->name).find("quant_state") != std::string::npos) qs.push_back(t);
        d[last_component(t->name)] = t;
    }
    const std::string suffix_nf4 = "bitsandbytes__nf4", suffix_fp4 = "bitsandbytes__fp4";
    if (qs.size() != 1 || (last_component(qs[0]->name) != suffix_nf4 && last_component(qs[0]->name) != suffix_fp4)) {
        std::string found;
        for (const Tensor* t : qs) found += (found.empty() ? "" : ", ") + ("'" + t->name + "'");
        throw Invalid(format("%s: %s: expected one quant_state item ending in one of ['%s', '%s'], found [%s]",
                             file(packed), fn, suffix_fp4.c_str(), suffix_nf4.c_str(), found.c_str()));
    }
    const Tensor* qst = qs[0];
    const char* src = qst->name.c_str();
    const char* qf = file(qst);
    d.erase(last_component(qst->name));
    check_saved(fn, qst, U8());
    const char* text = reinterpret_cast<const char*>(qst->data);
    if (qst->nbytes >= 3 && std::memcmp(text, "\xEF\xBB\xBF", 3) == 0)  // Python's json.loads refuses a BOM
        throw Invalid(format("%s: %s: %s is not a JSON object (Unexpected UTF-8 BOM)", qf, fn, src));
    json fields;
    try {
        fields = json::parse(text, text + qst->nbytes);
    } catch (const json::exception& e) {
        throw Invalid(format("%s: %s: %s is not a JSON object (%s)", qf, fn, src, e.what()));
    }
    if (!fields.is_object())
        throw Invalid(format("%s: %s: %s is not a JSON object but %s", qf, fn, src, fields.type_name()));
    const std::string suffix = qst->name.substr(qst->name.rfind("__") + 2);
    const auto qt = fields.find("quant_type");
    if (qt == fields.end() || !qt->is_string() || qt->get<std::string>() != suffix)
        throw Invalid(format("%s: %s: %s: quant_type %s does not match the key's '%s'", qf, fn, src,
                             qt == fields.end() ? "None" : shown(*qt).c_str(), suffix.c_str()));
    // A JSON field named like a tensor replaces it (Python's d.update(fields)): then that entry is no
    // array; a tensor named like a JSON field that the JSON lacks is not a valid value either.
    for (const char* k : kTensorFields)
        if (fields.contains(k))
            throw Invalid(format("%s: %s: %s: %s must be an array, not the JSON value %s", qf, fn, src, k,
                                 shown(fields[k]).c_str()));
    auto has = [&](const char* k) { return fields.contains(k) || d.count(k); };
    bool nested = false;
    for (const char* k : kNestedKeys) nested = nested || has(k);
    std::string missing;
    for (const char* k : {"quant_type", "absmax", "blocksize", "quant_map", "dtype", "shape"})
        if (!has(k)) missing += (missing.empty() ? "" : ", ") + std::string(k);
    if (nested)
        for (const char* k : kNestedKeys)
            if (!has(k)) missing += (missing.empty() ? "" : ", ") + std::string(k);
    if (!missing.empty()) throw Invalid(format("%s: %s: %s: missing %s", qf, fn, src, missing.c_str()));
    // The scalar fields: from the JSON; a tensor of that name is not a value.
    auto scalar = [&](const char* k) -> const json& {
        if (!fields.contains(k))
            throw Invalid(format("%s: %s: %s: %s is the tensor %s, not a JSON value", qf, fn, src, k,
                                 d.at(k)->name.c_str()));
        return fields[k];
    };
    auto blocksize_of = [&](const char* k) {
        const json& v = scalar(k);
        uint64_t b = 0;
        if (json_size(v, b) && b >= KBIT_BLOCKSIZE_MIN && b <= KBIT_BLOCKSIZE_MAX && (b & (b - 1)) == 0)
            return static_cast<int32_t>(b);
        throw Invalid(format("%s: %s: %s: %s %s is not one of %s", qf, fn, src, k, shown(v).c_str(),
                             blocksizes_text().c_str()));
    };
    auto choice = [&](const char* k, std::initializer_list<const char*> allowed) {
        const json& v = scalar(k);
        if (v.is_string())
            for (const char* a : allowed)
                if (v.get<std::string>() == a) return std::string(a);
        std::string list;
        for (const char* a : allowed) list += (list.empty() ? "" : ", ") + std::string(a);
        throw Invalid(format("%s: %s: %s: %s %s is not one of %s", qf, fn, src, k, shown(v).c_str(), list.c_str()));
    };
    // (quant_type is the key's suffix, fp4 or nf4, checked above.)
    const int32_t blocksize = blocksize_of("blocksize");
    L.dtype_name = choice("dtype", {"float32", "float16", "bfloat16"});
    const json& shape = scalar("shape");
    bool shape_ok = shape.is_array();
    if (shape_ok)
        for (const json& s : shape) {
            uint64_t x = 0;
            shape_ok = shape_ok && json_size(s, x);
        }
    if (!shape_ok)
        throw Invalid(format("%s: %s: %s: shape %s is not a list of non-negative integers", qf, fn, src,
                             shown(shape).c_str()));
    // numpy's limits on an array of that shape: 64 dimensions, the byte size (zero dimensions counted
    // as 1) within int64.
    const uint64_t item = L.dtype_name == "float32" ? 4 : 2;
    uint64_t numel = 1, bytes = item;
    bool fits = shape.size() <= kMaxDims;
    for (const json& s : shape) {
        uint64_t x = 0;
        json_size(s, x);
        if (x > static_cast<uint64_t>(INT64_MAX)) fits = false;
        const uint64_t m = std::max<uint64_t>(x, 1);
        if (!fits || bytes > static_cast<uint64_t>(INT64_MAX) / m) {
            fits = false;
            break;
        }
        bytes *= m;
        numel *= x;
        L.shape.push_back(static_cast<int64_t>(x));
    }
    if (!fits)
        throw Invalid(format("%s: %s: %s: shape %s is not the shape of a possible %s array", qf, fn, src,
                             shown(shape).c_str(), L.dtype_name.c_str()));
    const uint64_t blocks = ceil_div(numel, static_cast<uint64_t>(blocksize));
    const std::string need = "the shape " + shape_text(L.shape) + " with blocksize " + std::to_string(blocksize) +
                             " needs";
    const Tensor* quant_map = d.at("quant_map");
    const Tensor* absmax = d.at("absmax");
    check_saved(fn, quant_map, F32(), 16);
    check_saved(fn, absmax, nested ? U8() : F32(), blocks, need);
    kbit_io_quant& q = L.desc;
    if (nested) {
        q.nested_blocksize = blocksize_of("nested_blocksize");
        choice("nested_dtype", {"float32"});
        const json& off = scalar("nested_offset");
        const double lim = static_cast<double>(std::numeric_limits<float>::max());
        double x = 0;
        if (off.is_number_float()) x = off.get<double>();
        else if (off.is_number_unsigned()) x = static_cast<double>(off.get<uint64_t>());
        else if (off.is_number_integer()) x = static_cast<double>(off.get<int64_t>());
        if (!off.is_number() || !(std::fabs(x) <= lim))
            throw Invalid(format("%s: %s: %s: nested_offset %s is not a finite float32 number", qf, fn, src,
                                 shown(off).c_str()));
        q.nested_offset = static_cast<float>(x);
        const Tensor* nqm = d.at("nested_quant_map");
        const Tensor* nab = d.at("nested_absmax");
        check_saved(fn, nqm, F32(), 256);
        q.nested_blocks = ceil_div(blocks, static_cast<uint64_t>(q.nested_blocksize));
        check_saved(fn, nab, F32(), q.nested_blocks, std::to_string(blocks) + " blocks of absmax need");
        q.nested_quant_map = reinterpret_cast<const float*>(nqm->data);
        q.nested_absmax = reinterpret_cast<const float*>(nab->data);
    }
    // load_4bit: any quant_storage dtype, only the byte count is fixed.
    if (packed->nbytes != numel / 2 + numel % 2)
        throw Invalid(format("%s: load_4bit: %s holds %" PRIu64 " bytes, its quant_state shape %s needs %" PRIu64,
                             file(packed), name.c_str(), packed->nbytes, shape_text(L.shape).c_str(),
                             numel / 2 + numel % 2));
    const Tensor* bias = parameter ? nullptr : find(prefix + ".bias");
    if (bias && L.shape.size() == 2 && bias->numel != static_cast<uint64_t>(L.shape[0]))
        throw Invalid(format("%s: load_4bit: %s.bias has %" PRIu64 " elements, the quant_state shape %s of %s "
                             "needs %" PRId64, file(bias), prefix.c_str(), bias->numel, shape_text(L.shape).c_str(),
                             name.c_str(), L.shape[0]));
    L.format = suffix == "nf4" ? KBIT_IO_FORMAT_NF4 : KBIT_IO_FORMAT_FP4;
    q.blocksize = blocksize;
    q.numel = numel;
    q.dtype = L.dtype_name == "float32" ? KBIT_DTYPE_FP32 : L.dtype_name == "float16" ? KBIT_DTYPE_FP16 : KBIT_DTYPE_BF16;
    q.nested = nested;
    q.storage_dtype = packed->dtype->id;
    q.weight = packed->data;
    q.weight_bytes = packed->nbytes;
    q.absmax = absmax->data;
    q.absmax_dtype = absmax->dtype->id;
    q.blocks = blocks;
    q.absmax_bytes = absmax->nbytes;
    q.quant_map = reinterpret_cast<const float*>(quant_map->data);
    q.aligned = aligned_to(q.absmax, nested ? 1 : 4) && aligned_to(q.quant_map, 4) &&
                (!nested || (aligned_to(q.nested_absmax, 4) && aligned_to(q.nested_quant_map, 4)));
    q.scb = nullptr;
    q.parameter = parameter;
    q.experts = parameter && L.shape.size() == 3 ? static_cast<uint64_t>(L.shape[0]) : 0;
}

void Checker::layer_int8(const std::string& prefix, Layer& L) const {
    const std::string wname = prefix + ".weight", sname = prefix + ".SCB", fname = prefix + ".weight_format";
    L.weight_name = wname;
    L.format = KBIT_IO_FORMAT_INT8;
    const Tensor* scb = find(sname);  // present: it names the layer
    if (const Tensor* fmt = find(fname)) {
        if (fmt->numel != 1 || (fmt->dtype->kind != 'i' && fmt->dtype->kind != 'u'))
            throw Invalid(format("%s: load_int8: %s must be one integer, not %s %s", file(fmt), fname.c_str(),
                                 fmt->dtype->name, shape_text(fmt->shape).c_str()));
        // Little-endian integer of the dtype's size.
        uint64_t raw = 0;
        for (uint32_t i = fmt->dtype->size; i-- > 0;) raw = (raw << 8) | fmt->data[i];
        int64_t value = static_cast<int64_t>(raw);
        if (fmt->dtype->kind == 'i' && fmt->dtype->size < 8) {
            const uint64_t sign = uint64_t{1} << (8 * fmt->dtype->size - 1);
            value = static_cast<int64_t>((raw ^ sign) - sign);
        }
        if (value != 0) {
            if (fmt->dtype->kind == 'u' && fmt->dtype->size == 8)
                throw Invalid(format("%s: load_int8: %s is %" PRIu64 "; only 0 (row) is supported", file(fmt),
                                     fname.c_str(), raw));
            throw Invalid(format("%s: load_int8: %s is %" PRId64 "; only 0 (row) is supported", file(fmt),
                                 fname.c_str(), value));
        }
    }
    const Tensor* w = find(wname);
    if (!w) throw Invalid(format("%s: load_int8: %s not in the checkpoint", file(scb), wname.c_str()));
    check_saved("load_int8", w, dtype_by_id(KBIT_IO_DTYPE_I8));
    if (w->shape.size() != 2)
        throw Invalid(format("%s: load_int8: %s must be 2-D [out, in], not %s", file(w), wname.c_str(),
                             shape_text(w->shape).c_str()));
    const uint64_t rows = static_cast<uint64_t>(w->shape[0]);
    check_saved("load_int8", scb, F32(), rows, "the weight's " + std::to_string(rows) + " rows need");
    if (scb->shape.size() != 1)
        throw Invalid(format("%s: load_int8: %s must be 1-D [%" PRIu64 "], not %s", file(scb), sname.c_str(), rows,
                             shape_text(scb->shape).c_str()));
    L.shape = w->shape;
    kbit_io_quant& q = L.desc;
    q.blocksize = 0;
    q.numel = w->numel;
    q.dtype = -1;
    q.storage_dtype = w->dtype->id;
    q.weight = w->data;
    q.weight_bytes = w->nbytes;
    q.absmax = nullptr;
    q.absmax_dtype = -1;
    q.scb = reinterpret_cast<const float*>(scb->data);
    q.aligned = aligned_to(q.scb, 4);
}

}  // namespace

std::vector<Layer> find_layers(const std::vector<const Tensor*>& tensors, const std::vector<std::string>& labels) {
    std::map<std::string, const Tensor*> by_name;
    for (const Tensor* t : tensors) by_name[t->name] = t;
    // kbit.checkpoint.quantized_prefixes(): sorted sets of prefixes.
    std::vector<std::string> four, eight;
    std::map<std::string, bool> parameter;  // 4-bit prefixes that are parameters (their quant_state key)
    for (const Tensor* t : tensors) {
        if (t->name.find(kQsMarker) != std::string::npos)  // rsplit(".weight.quant_state.", 1)[0]
            four.push_back(t->name.substr(0, t->name.rfind(".weight.quant_state.")));
        // A parameter T: T.quant_state.bitsandbytes__<type> (no dot in the type), T not ending in .weight.
        const size_t pm = t->name.rfind(kParamMarker);
        if (pm != std::string::npos && pm > 0 &&
            t->name.find('.', pm + std::strlen(kParamMarker)) == std::string::npos &&
            !ends_with(t->name.substr(0, pm), ".weight")) {
            four.push_back(t->name.substr(0, pm));
            parameter[four.back()] = true;
        }
        if (ends_with(t->name, ".SCB")) {
            const std::string p = t->name.substr(0, t->name.size() - 4);
            if (by_name.count(p + ".weight")) eight.push_back(p);
        }
    }
    for (auto* v : {&four, &eight}) {
        std::sort(v->begin(), v->end());
        v->erase(std::unique(v->begin(), v->end()), v->end());
    }
    Checker check(by_name, labels);
    std::vector<Layer> layers;
    for (int kind = 0; kind < 2; ++kind)
        for (const std::string& p : kind == 0 ? four : eight) {
            Layer L;
            L.prefix = p;
            L.format = kind == 0 ? KBIT_IO_FORMAT_NF4 : KBIT_IO_FORMAT_INT8;
            try {
                if (kind == 0) check.layer_4bit(p, parameter.count(p) > 0, tensors, L);
                else check.layer_int8(p, L);
                L.ok = true;
            } catch (const Invalid& e) {
                L.ok = false;
                L.error = e.what();
            }
            layers.push_back(std::move(L));
        }
    return layers;
}

void finish_layers(std::vector<Layer>& layers) {
    for (Layer& L : layers) {
        kbit_io_quant& q = L.desc;
        q.size = sizeof(kbit_io_quant);
        q.prefix = L.prefix.c_str();
        q.format = L.format;
        q.ndim = static_cast<int32_t>(L.shape.size());
        static const int64_t kNoDims[1] = {0};
        q.shape = L.shape.empty() ? kNoDims : L.shape.data();
        q.dtype_name = L.dtype_name.c_str();
        q.weight_name = L.weight_name.c_str();
    }
}

// ---- a layer to its tensors (writing) --------------------------------------------------------

std::string python_float_repr(double v) {
    if (v == 0) return std::signbit(v) ? "-0.0" : "0.0";
    // The shortest digits that read back as v, as Python's repr() finds them; then its layout:
    // positional for decimal exponents -4 ... 15, else d[.ddd]e[+-]XX.
    char buf[64];
    const auto r = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific);
    std::string s(buf, r.ptr);
    const size_t e = s.find('e');
    std::string mant = s.substr(0, e);
    const int exp = std::stoi(s.substr(e + 1));
    std::string sign;
    if (mant[0] == '-') {
        sign = "-";
        mant.erase(0, 1);
    }
    std::string digits;
    for (char c : mant)
        if (c != '.') digits += c;
    if (exp < -4 || exp >= 16) {
        std::string out = sign + digits.substr(0, 1);
        if (digits.size() > 1) out += "." + digits.substr(1);
        char ex[16];
        std::snprintf(ex, sizeof ex, "e%c%02d", exp < 0 ? '-' : '+', std::abs(exp));
        return out + ex;
    }
    if (exp < 0) return sign + "0." + std::string(static_cast<size_t>(-exp - 1), '0') + digits;
    const size_t point = static_cast<size_t>(exp) + 1;
    if (digits.size() <= point) return sign + digits + std::string(point - digits.size(), '0') + ".0";
    return sign + digits.substr(0, point) + "." + digits.substr(point);
}

void layer_tensors(const kbit_io_quant* layer, const std::string& file, bool with_data,
                   const std::function<void(LayerTensor&&)>& each) {
    const char* f = file.c_str();
    if (layer->size < offsetof(kbit_io_quant, weight_name))
        throw Invalid(format("%s: layer->size %zu is smaller than a kbit_io_quant of io 1.0", f, layer->size));
    if (!layer->prefix || !*layer->prefix) throw Invalid(format("%s: layer->prefix is NULL or empty", f));
    const std::string P = layer->prefix;
    const char* p = P.c_str();
    if (layer->ndim < 0 || static_cast<size_t>(layer->ndim) > kMaxDims || (layer->ndim > 0 && !layer->shape))
        throw Invalid(format("%s: layer '%s': ndim %d / shape are not a valid shape", f, p, static_cast<int>(layer->ndim)));
    std::vector<int64_t> shape(layer->shape, layer->shape + layer->ndim);
    uint64_t numel = 1;
    for (int64_t s : shape) {
        if (s < 0 || (s != 0 && numel > (UINT64_MAX >> 8) / static_cast<uint64_t>(s)))
            throw Invalid(format("%s: layer '%s': shape %s is not a valid shape", f, p, shape_text(shape).c_str()));
        numel *= static_cast<uint64_t>(s);
    }
    // io 1.3: a 4-bit parameter is written under its own key P (fused experts), not P.weight.
    const bool parameter = layer->size > offsetof(kbit_io_quant, parameter) && layer->parameter;
    if (layer->format == KBIT_IO_FORMAT_INT8) {
        if (parameter) throw Invalid(format("%s: layer '%s': an INT8 layer cannot be a parameter", f, p));
        if (layer->ndim != 2) throw Invalid(format("%s: layer '%s': an INT8 layer needs ndim 2, not %d", f, p, static_cast<int>(layer->ndim)));
        if (with_data && numel && (!layer->weight || !layer->scb))
            throw Invalid(format("%s: layer '%s': weight and scb must not be NULL", f, p));
        each({P + ".weight", KBIT_IO_DTYPE_I8, 2, shape.data(), layer->weight, {}});
        each({P + ".SCB", KBIT_IO_DTYPE_F32, 1, shape.data(), layer->scb, {}});
        each({P + ".weight_format", KBIT_IO_DTYPE_U8, 0, nullptr, "", std::string(1, '\0')});  // "row"
        return;
    }
    if (layer->format != KBIT_IO_FORMAT_NF4 && layer->format != KBIT_IO_FORMAT_FP4)
        throw Invalid(format("%s: layer '%s': format %d is not NF4, FP4 or INT8", f, p, static_cast<int>(layer->format)));
    auto blocksize_ok = [](int64_t b) { return b >= KBIT_BLOCKSIZE_MIN && b <= KBIT_BLOCKSIZE_MAX && (b & (b - 1)) == 0; };
    if (!blocksize_ok(layer->blocksize))
        throw Invalid(format("%s: layer '%s': blocksize %d is not a power of two in %d ... %d", f, p,
                             static_cast<int>(layer->blocksize), KBIT_BLOCKSIZE_MIN, KBIT_BLOCKSIZE_MAX));
    const char* dtype_name = layer->dtype == KBIT_DTYPE_FP32   ? "float32"
                             : layer->dtype == KBIT_DTYPE_FP16 ? "float16"
                             : layer->dtype == KBIT_DTYPE_BF16 ? "bfloat16"
                                                               : nullptr;
    if (!dtype_name)
        throw Invalid(format("%s: layer '%s': dtype %d is not KBIT_DTYPE_FP32, FP16 or BF16", f, p, static_cast<int>(layer->dtype)));
    const DtypeInfo* storage = dtype_by_id(layer->storage_dtype);
    const uint64_t packed = numel / 2 + numel % 2;
    if (!storage || packed % storage->size)
        throw Invalid(format("%s: layer '%s': storage_dtype %d does not hold the %" PRIu64 " packed bytes in whole elements",
                             f, p, static_cast<int>(layer->storage_dtype), packed));
    const uint64_t blocks = numel / static_cast<uint64_t>(layer->blocksize) + (numel % static_cast<uint64_t>(layer->blocksize) != 0);
    if (with_data && ((packed && !layer->weight) || (blocks && !layer->absmax) || !layer->quant_map))
        throw Invalid(format("%s: layer '%s': weight, absmax and quant_map must not be NULL", f, p));
    const std::string W = parameter ? P : P + ".weight";
    const int64_t wshape[2] = {static_cast<int64_t>(packed / storage->size), 1};
    const int64_t n_blocks = static_cast<int64_t>(blocks), sixteen = 16, map256 = 256;
    each({W, storage->id, 2, wshape, layer->weight, {}});
    each({W + ".absmax", layer->nested ? KBIT_IO_DTYPE_U8 : KBIT_IO_DTYPE_F32, 1, &n_blocks, layer->absmax, {}});
    each({W + ".quant_map", KBIT_IO_DTYPE_F32, 1, &sixteen, layer->quant_map, {}});
    std::string js = std::string("{\"quant_type\": \"") + (layer->format == KBIT_IO_FORMAT_NF4 ? "nf4" : "fp4") +
                     "\", \"blocksize\": " + std::to_string(layer->blocksize) + ", \"dtype\": \"" + dtype_name +
                     "\", \"shape\": " + shape_text(shape);
    if (layer->nested) {
        if (!blocksize_ok(layer->nested_blocksize))
            throw Invalid(format("%s: layer '%s': nested_blocksize %d is not a power of two in %d ... %d", f, p,
                                 static_cast<int>(layer->nested_blocksize), KBIT_BLOCKSIZE_MIN, KBIT_BLOCKSIZE_MAX));
        if (!std::isfinite(layer->nested_offset))
            throw Invalid(format("%s: layer '%s': nested_offset is not finite", f, p));
        const uint64_t nb = static_cast<uint64_t>(layer->nested_blocksize);
        const int64_t nested_blocks = static_cast<int64_t>(blocks / nb + (blocks % nb != 0));
        if (with_data && ((nested_blocks && !layer->nested_absmax) || !layer->nested_quant_map))
            throw Invalid(format("%s: layer '%s': nested_absmax and nested_quant_map must not be NULL", f, p));
        each({W + ".nested_absmax", KBIT_IO_DTYPE_F32, 1, &nested_blocks, layer->nested_absmax, {}});
        each({W + ".nested_quant_map", KBIT_IO_DTYPE_F32, 1, &map256, layer->nested_quant_map, {}});
        js += ", \"nested_blocksize\": " + std::to_string(layer->nested_blocksize) +
              ", \"nested_dtype\": \"float32\", \"nested_offset\": " + python_float_repr(static_cast<double>(layer->nested_offset));
    }
    js += "}";
    const int64_t js_len = static_cast<int64_t>(js.size());
    each({W + ".quant_state.bitsandbytes__" + (layer->format == KBIT_IO_FORMAT_NF4 ? "nf4" : "fp4"), KBIT_IO_DTYPE_U8, 1,
          &js_len, js.data(), js});
}

}  // namespace kbit::io
