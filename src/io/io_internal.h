// io_internal.h — the parts of libkbit_io.so behind the C API (api.cpp, writer.cpp): the safetensors
// container, read and written (safetensors.cpp), and the bitsandbytes layer layout in both directions,
// tensors to layers and a layer to its tensors (layers.cpp). Files and temporary outputs: fsutil.h.
// Everything here works on bytes already in memory, so tests/fuzz/fuzz_io.cpp can drive it directly.
// Checks throw Invalid with a message naming the file, the tensor and the field; api.cpp turns it into
// KBIT_STATUS_INVALID_ARGUMENT.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "fsutil.h"
#include "kbit/kbit_io.h"

namespace kbit::io {

// A file (or an entry of it) that breaks a rule of the format.
struct Invalid : std::runtime_error {
    using std::runtime_error::runtime_error;
};

// printf-style std::string.
using kbit::fs::format;

// A JSON integer >= 0 of a quant_state field into `out` ("-0" included: Python's json reads it as 0).
bool json_size(const nlohmann::json& v, uint64_t& out);

struct DtypeInfo {
    const char* name;  // safetensors spelling
    int32_t id;        // KBIT_IO_DTYPE_*
    uint32_t size;     // bytes per element
    char kind;         // 'b' bool, 'u' unsigned, 'i' signed, 'f' floating (numpy's dtype.kind)
};

// nullptr for names safetensors does not define (or this library does not know).
const DtypeInfo* dtype_by_name(const std::string& name);
const DtypeInfo* dtype_by_id(int32_t id);

// The largest header safetensors accepts (its MAX_HEADER_SIZE).
constexpr uint64_t kMaxHeader = 100000000;
// numpy's dimension limit; tensors and quant_state shapes beyond it cannot be loaded in Python.
constexpr size_t kMaxDims = 64;

struct Tensor {
    std::string name;
    const DtypeInfo* dtype = nullptr;
    std::vector<int64_t> shape;
    uint64_t numel = 1;
    uint64_t nbytes = 0;
    uint64_t file_offset = 0;  // of the first byte, from the start of the file
    const uint8_t* data = nullptr;
    size_t shard = 0;
};

// One parsed safetensors file; the bytes are owned by the caller (a mapping, a fuzz input).
struct File {
    std::string label;  // the path, for messages
    const uint8_t* bytes = nullptr;
    size_t size = 0;
    std::vector<std::pair<std::string, std::string>> metadata;  // __metadata__, in key order
    std::vector<Tensor> tensors;                                // in key order
};

// Parses and validates a safetensors file held in [bytes, bytes + size) by the rules of the
// safetensors library; every tensor gets `shard`. Throws Invalid.
void parse_safetensors(const uint8_t* bytes, size_t size, const std::string& label, size_t shard, File& out);

// "[4, 8]" (sep ", "), as messages and the quant_state JSON write a shape; "[4,8]" (sep ","), as the
// safetensors header does.
std::string shape_text(const std::vector<int64_t>& shape, const char* sep = ", ");

// A tensor of a safetensors file being written (writer.cpp).
struct OutTensor {
    std::string name;
    const DtypeInfo* dtype = nullptr;
    std::vector<int64_t> shape;
    uint64_t nbytes = 0;
    uint64_t offset = 0;  // where its bytes are: in the scratch file, or in the file once the layout is fixed
    bool added = false;   // false only for a declared tensor not yet added
};

// Sorts the tensors into the safetensors library's data order: by dtype, its Dtype enumeration
// descending, then by name.
void sort_for_safetensors(std::vector<OutTensor*>& tensors);

// The bytes before the data of a file holding `tensors` in that order, without gaps, as the
// safetensors library writes them: the 8-byte little-endian header length, then the header JSON
// (__metadata__ first, no spaces) padded with spaces to a multiple of 8. Throws Invalid, naming
// `label`, for a header larger than safetensors reads.
std::string safetensors_header(const std::map<std::string, std::string>& metadata,
                               const std::vector<OutTensor*>& tensors, const std::string& label);

// A bitsandbytes layer: the description (pointers into the tensors) or why it is bad.
struct Layer {
    std::string prefix;
    int32_t format = KBIT_IO_FORMAT_NF4;
    bool ok = false;
    std::string error;  // "file: tensor: ..." when !ok
    std::vector<int64_t> shape;
    std::string dtype_name;
    std::string weight_name;
    kbit_io_quant desc{};  // its string / shape pointers are set by finish_layers()
};

// Finds and checks every 4-bit and LLM.int8 layer among `tensors` (sorted by name; `files` gives
// each shard's label for messages), in the order of kbit_io_quant_describe().
std::vector<Layer> find_layers(const std::vector<const Tensor*>& tensors, const std::vector<std::string>& labels);

// Points each layer's description at its own strings and shape (after the vector stops moving).
void finish_layers(std::vector<Layer>& layers);

// Python's repr() of a float (shortest round-trip digits; positional for decimal exponents -4 ... 15),
// as json.dumps writes it: the nested_offset of a quant_state JSON.
std::string python_float_repr(double v);

// One tensor of a layer being written: its shape and bytes live until the callback returns.
struct LayerTensor {
    std::string name;
    int32_t dtype;  // KBIT_IO_DTYPE_*
    int32_t ndim;
    const int64_t* shape;
    const void* data;   // the caller's bytes (not read for a declaration)
    std::string owned;  // or bytes made here: the quant_state JSON, weight_format
};

// The tensors of `layer` as kbit.checkpoint writes them, each handed to `each` (the writer, which
// checks it as a tensor and may throw) as soon as the layer's checks before it pass. Throws Invalid,
// the message starting with `file`, the file being written. `with_data` false: a declaration, whose
// data pointers are not read.
void layer_tensors(const kbit_io_quant* layer, const std::string& file, bool with_data,
                   const std::function<void(LayerTensor&&)>& each);

}  // namespace kbit::io
