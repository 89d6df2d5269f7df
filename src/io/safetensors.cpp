// safetensors.cpp — the safetensors container, read and written: an 8-byte little-endian header
// length N, N bytes of JSON {name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__":
// {str: str}}, then the data. Read, it is checked as the safetensors library (Rust, 0.4+) checks it on
// load: N at most 100 MB and inside the file, the header a JSON object starting with '{', every dtype
// known, every shape a list of non-negative integers, data_offsets two non-negative integers; sorted
// by offset the tensors follow each other without gap or overlap, each holding exactly numel * dtype
// size bytes, and the last ends at the end of the file. Written (for writer.cpp), it is laid out as
// that library's serialize() lays it out, byte for byte.
#include <algorithm>
#include <cinttypes>
#include <cstring>

#include <nlohmann/json.hpp>

#include "io_internal.h"

namespace kbit::io {

namespace {

const DtypeInfo kDtypes[] = {
    {"BOOL", KBIT_IO_DTYPE_BOOL, 1, 'b'},   {"U8", KBIT_IO_DTYPE_U8, 1, 'u'},
    {"I8", KBIT_IO_DTYPE_I8, 1, 'i'},       {"I16", KBIT_IO_DTYPE_I16, 2, 'i'},
    {"U16", KBIT_IO_DTYPE_U16, 2, 'u'},     {"F16", KBIT_IO_DTYPE_F16, 2, 'f'},
    {"BF16", KBIT_IO_DTYPE_BF16, 2, 'f'},   {"I32", KBIT_IO_DTYPE_I32, 4, 'i'},
    {"U32", KBIT_IO_DTYPE_U32, 4, 'u'},     {"F32", KBIT_IO_DTYPE_F32, 4, 'f'},
    {"F64", KBIT_IO_DTYPE_F64, 8, 'f'},     {"I64", KBIT_IO_DTYPE_I64, 8, 'i'},
    {"U64", KBIT_IO_DTYPE_U64, 8, 'u'},     {"F8_E5M2", KBIT_IO_DTYPE_F8_E5M2, 1, 'f'},
    {"F8_E4M3", KBIT_IO_DTYPE_F8_E4M3, 1, 'f'},
};

// A JSON value in a message, shortened.
std::string shown(const nlohmann::json& v) {
    std::string s = v.dump(-1, ' ', true, nlohmann::json::error_handler_t::replace);
    if (s.size() > 60) s = s.substr(0, 57) + "...";
    return s;
}

// The position of a dtype in the safetensors library's Dtype enumeration: its writer orders the
// tensors by this, descending, then by name.
int dtype_rank(int32_t id) {
    static const int32_t kOrder[] = {KBIT_IO_DTYPE_BOOL, KBIT_IO_DTYPE_U8,  KBIT_IO_DTYPE_I8,  KBIT_IO_DTYPE_F8_E5M2,
                                     KBIT_IO_DTYPE_F8_E4M3, KBIT_IO_DTYPE_I16, KBIT_IO_DTYPE_U16, KBIT_IO_DTYPE_F16,
                                     KBIT_IO_DTYPE_BF16, KBIT_IO_DTYPE_I32, KBIT_IO_DTYPE_U32, KBIT_IO_DTYPE_F32,
                                     KBIT_IO_DTYPE_F64, KBIT_IO_DTYPE_I64, KBIT_IO_DTYPE_U64};
    for (int i = 0; i < static_cast<int>(sizeof kOrder / sizeof kOrder[0]); ++i)
        if (kOrder[i] == id) return i;
    return -1;
}

// A JSON string as serde_json writes it (", \, \b \f \n \r \t, other controls \u00xx, the rest raw);
// nlohmann's dump escapes the same set the same way.
std::string quoted(const std::string& s) { return nlohmann::json(s).dump(); }

}  // namespace

std::string shape_text(const std::vector<int64_t>& shape, const char* sep) {
    std::string s = "[";
    for (size_t i = 0; i < shape.size(); ++i) s += (i ? sep : "") + std::to_string(shape[i]);
    return s + "]";
}

bool json_size(const nlohmann::json& v, uint64_t& out) {
    if (v.is_number_unsigned()) {
        out = v.get<uint64_t>();
        return true;
    }
    if (v.is_number_integer() && v.get<int64_t>() == 0) {  // "-0"
        out = 0;
        return true;
    }
    return false;
}

namespace {

// serde_json's usize: a JSON integer without a sign ("-0" is the float -0.0 there, refused).
bool header_size(const nlohmann::json& v, uint64_t& out) {
    if (!v.is_number_unsigned()) return false;
    out = v.get<uint64_t>();
    return true;
}

}  // namespace

const DtypeInfo* dtype_by_name(const std::string& name) {
    for (const DtypeInfo& d : kDtypes)
        if (name == d.name) return &d;
    return nullptr;
}

const DtypeInfo* dtype_by_id(int32_t id) {
    for (const DtypeInfo& d : kDtypes)
        if (d.id == id) return &d;
    return nullptr;
}

void parse_safetensors(const uint8_t* bytes, size_t size, const std::string& label, size_t shard, File& out) {
    const char* f = label.c_str();
    if (size < 8) throw Invalid(format("%s: the file is %zu bytes, too short for the 8-byte header length", f, size));
    uint64_t n = 0;
    for (int i = 7; i >= 0; --i) n = (n << 8) | bytes[i];
    if (n > kMaxHeader)
        throw Invalid(format("%s: header length %" PRIu64 " is larger than the limit of %" PRIu64 " bytes", f, n,
                             kMaxHeader));
    if (n > size - 8)
        throw Invalid(format("%s: header length %" PRIu64 " runs past the end of the file (%zu bytes after the "
                             "length)", f, n, size - 8));
    const char* text = reinterpret_cast<const char*>(bytes + 8);
    if (n == 0 || text[0] != '{') throw Invalid(format("%s: the header does not start with '{'", f));
    nlohmann::json header;
    try {
        header = nlohmann::json::parse(text, text + n);
    } catch (const nlohmann::json::exception& e) {
        throw Invalid(format("%s: the header is not valid JSON (%s)", f, e.what()));
    }
    if (!header.is_object()) throw Invalid(format("%s: the header is not a JSON object", f));

    const uint64_t data_size = size - 8 - n;
    File file;
    file.label = label;
    file.bytes = bytes;
    file.size = size;
    for (auto it = header.begin(); it != header.end(); ++it) {  // nlohmann's object: key order
        const std::string& name = it.key();
        const nlohmann::json& v = it.value();
        if (name == "__metadata__") {
            if (!v.is_object()) throw Invalid(format("%s: __metadata__ is not a JSON object", f));
            for (auto m = v.begin(); m != v.end(); ++m) {
                if (!m.value().is_string())
                    throw Invalid(format("%s: __metadata__ '%s' is %s, not a string", f, m.key().c_str(),
                                         shown(m.value()).c_str()));
                file.metadata.emplace_back(m.key(), m.value().get<std::string>());
            }
            continue;
        }
        const char* t = name.c_str();
        if (!v.is_object()) throw Invalid(format("%s: tensor '%s' is %s, not a JSON object", f, t, shown(v).c_str()));
        Tensor tensor;
        tensor.name = name;
        tensor.shard = shard;
        const auto dt = v.find("dtype");
        if (dt == v.end()) throw Invalid(format("%s: tensor '%s': missing dtype", f, t));
        if (!dt->is_string() || !(tensor.dtype = dtype_by_name(dt->get<std::string>())))
            throw Invalid(format("%s: tensor '%s': unknown dtype %s", f, t, shown(*dt).c_str()));
        const auto sh = v.find("shape");
        if (sh == v.end()) throw Invalid(format("%s: tensor '%s': missing shape", f, t));
        if (!sh->is_array()) throw Invalid(format("%s: tensor '%s': shape %s is not a list", f, t, shown(*sh).c_str()));
        if (sh->size() > kMaxDims)
            throw Invalid(format("%s: tensor '%s': shape has %zu dimensions, more than %zu", f, t, sh->size(), kMaxDims));
        for (const nlohmann::json& d : *sh) {
            uint64_t x = 0;
            if (!header_size(d, x) || x > static_cast<uint64_t>(INT64_MAX))
                throw Invalid(format("%s: tensor '%s': shape %s is not a list of non-negative integers", f, t,
                                     shown(*sh).c_str()));
            if (x != 0 && tensor.numel > UINT64_MAX / x)
                throw Invalid(format("%s: tensor '%s': shape %s overflows", f, t, shown(*sh).c_str()));
            tensor.numel *= x;
            tensor.shape.push_back(static_cast<int64_t>(x));
        }
        const auto off = v.find("data_offsets");
        if (off == v.end()) throw Invalid(format("%s: tensor '%s': missing data_offsets", f, t));
        uint64_t begin = 0, end = 0;
        if (!off->is_array() || off->size() != 2 || !header_size((*off)[0], begin) ||
            !header_size((*off)[1], end))
            throw Invalid(format("%s: tensor '%s': data_offsets %s is not two non-negative integers", f, t,
                                 shown(*off).c_str()));
        if (end < begin)
            throw Invalid(format("%s: tensor '%s': data_offsets [%" PRIu64 ", %" PRIu64 "] end before they begin", f,
                                 t, begin, end));
        if (end > data_size)
            throw Invalid(format("%s: tensor '%s': data_offsets [%" PRIu64 ", %" PRIu64 "] run past the end of the "
                                 "data (%" PRIu64 " bytes)", f, t, begin, end, data_size));
        if (tensor.numel > UINT64_MAX / tensor.dtype->size)
            throw Invalid(format("%s: tensor '%s': shape %s overflows", f, t, shape_text(tensor.shape).c_str()));
        tensor.nbytes = tensor.numel * tensor.dtype->size;
        if (end - begin != tensor.nbytes)
            throw Invalid(format("%s: tensor '%s': data_offsets [%" PRIu64 ", %" PRIu64 "] hold %" PRIu64
                                 " bytes, shape %s of %s needs %" PRIu64, f, t, begin, end, end - begin,
                                 shape_text(tensor.shape).c_str(), tensor.dtype->name, tensor.nbytes));
        tensor.file_offset = 8 + n + begin;
        tensor.data = bytes + tensor.file_offset;
        file.tensors.push_back(std::move(tensor));
    }
    // Sorted by their offsets the tensors must tile the data exactly.
    std::vector<const Tensor*> order;
    for (const Tensor& t : file.tensors) order.push_back(&t);
    std::sort(order.begin(), order.end(), [](const Tensor* a, const Tensor* b) {
        return a->file_offset != b->file_offset ? a->file_offset < b->file_offset : a->nbytes < b->nbytes;
    });
    uint64_t expect = 8 + n;
    for (const Tensor* t : order) {
        if (t->file_offset != expect)
            throw Invalid(format("%s: tensor '%s': data_offsets begin at %" PRIu64 ", where the previous tensor "
                                 "%s %" PRIu64 " (tensors must follow each other without gap or overlap)", f,
                                 t->name.c_str(), t->file_offset - 8 - n,
                                 t->file_offset < expect ? "ends after it, at" : "ends before it, at",
                                 expect - 8 - n));
        expect += t->nbytes;
    }
    if (expect != size)
        throw Invalid(format("%s: the tensors hold %" PRIu64 " bytes of data, the file has %" PRIu64 " after the "
                             "header", f, expect - 8 - n, data_size));
    out = std::move(file);
}

// ---- writing -----------------------------------------------------------------------------------

void sort_for_safetensors(std::vector<OutTensor*>& tensors) {
    std::sort(tensors.begin(), tensors.end(), [](const OutTensor* a, const OutTensor* b) {
        const int ra = dtype_rank(a->dtype->id), rb = dtype_rank(b->dtype->id);
        return ra != rb ? ra > rb : a->name < b->name;
    });
}

std::string safetensors_header(const std::map<std::string, std::string>& metadata,
                               const std::vector<OutTensor*>& tensors, const std::string& label) {
    std::string h = "{";
    if (!metadata.empty()) {
        h += "\"__metadata__\":{";
        bool first = true;
        for (const auto& kv : metadata) {
            h += (first ? "" : ",") + quoted(kv.first) + ":" + quoted(kv.second);
            first = false;
        }
        h += "}";
    }
    uint64_t off = 0;
    for (const OutTensor* t : tensors) {
        if (h.size() > 1) h += ",";
        h += quoted(t->name) + ":{\"dtype\":\"" + t->dtype->name + "\",\"shape\":" + shape_text(t->shape, ",") +
             ",\"data_offsets\":[" + std::to_string(off) + "," + std::to_string(off + t->nbytes) + "]}";
        off += t->nbytes;
    }
    h += "}";
    h.append((8 - h.size() % 8) % 8, ' ');
    if (h.size() > kMaxHeader)
        throw Invalid(format("%s: the header takes %zu bytes, more than the %" PRIu64 " safetensors reads", label.c_str(),
                             h.size(), kMaxHeader));
    std::string bytes(8, '\0');
    for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>(static_cast<uint64_t>(h.size()) >> (8 * i));
    return bytes + h;
}

}  // namespace kbit::io
