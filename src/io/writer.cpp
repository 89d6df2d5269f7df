// writer.cpp — kbit_io_writer_* (abi/kbit_io.def, io 1.1 and 1.2): where each tensor's bytes go and
// when. The header bytes come from safetensors.cpp (the safetensors library's layout), a layer's
// tensors from layers.cpp (as kbit.checkpoint writes them), the temporary file from fsutil.h.
//
// The header (which holds every offset) precedes the data, and a nested layer's quant_state JSON has a
// length that depends on its offset, known only once the layer is quantized. So without declarations
// the bytes of each tensor go to an unlinked scratch file as they are added, and finish() writes the
// header and copies the data (copy_file_range, in the kernel) into the temporary file before renaming
// it. With every tensor declared first (io 1.2) the header is known before the first add, and each add
// writes its bytes once, at their place in the temporary file. The caller never holds more than one
// tensor.
//
// The file is written as a kbit::fs::TempFile (fsutil.h): without a name where the file system and
// /proc allow it, so a process killed part way leaves nothing behind, not a file as large as the
// model; finish() gives it PATH.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "io_internal.h"
#include "kbit_error.h"

struct kbit_io_writer {
    using Entry = kbit::io::OutTensor;
    std::string path;
    kbit::fs::TempFile file;  // becomes path at finish()
    int scratch_fd = -1;
    uint64_t scratch_size = 0;
    std::map<std::string, std::string> metadata;
    std::vector<Entry> entries;
    std::map<std::string, size_t> names;
    bool declared = false;  // tensors were declared before the first add (io 1.2)
    bool fixed = false;     // declared, and the header is in the temporary file
    uint64_t end = 0;       // once fixed: the file's size

    ~kbit_io_writer() {
        if (scratch_fd >= 0) close(scratch_fd);
    }
    // The name messages give the file being written.
    const std::string& shown() const { return file.shown(); }
};

namespace {

using kbit::io::Invalid;
using kbit::io::format;

bool valid_utf8(const std::string& s) {
    try {
        (void)nlohmann::json(s).dump();
        return true;
    } catch (const nlohmann::json::exception&) {
        return false;
    }
}

void write_all(int fd, const void* data, uint64_t n, uint64_t offset, const std::string& label) {
    const char* p = static_cast<const char*>(data);
    while (n > 0) {
        const size_t chunk = static_cast<size_t>(std::min<uint64_t>(n, 1u << 30));
        const ssize_t w = pwrite(fd, p, chunk, static_cast<off_t>(offset));
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) throw Invalid(format("%s: cannot write: %s", label.c_str(), w < 0 ? std::strerror(errno) : "no space"));
        p += w;
        n -= static_cast<uint64_t>(w);
        offset += static_cast<uint64_t>(w);
    }
}

void copy_range(int in, uint64_t in_off, int out, uint64_t out_off, uint64_t n, const std::string& label) {
    bool kernel = true;
    while (n > 0) {
        if (kernel) {
            loff_t a = static_cast<loff_t>(in_off), b = static_cast<loff_t>(out_off);
            const ssize_t c = copy_file_range(in, &a, out, &b, static_cast<size_t>(std::min<uint64_t>(n, 1u << 30)), 0);
            if (c > 0) {
                in_off += static_cast<uint64_t>(c);
                out_off += static_cast<uint64_t>(c);
                n -= static_cast<uint64_t>(c);
                continue;
            }
            if (c < 0 && errno == EINTR) continue;
            kernel = false;  // EXDEV, ENOSYS, EINVAL ...: copy through a buffer
        }
        std::vector<char> buf(static_cast<size_t>(std::min<uint64_t>(n, 4u << 20)));
        const ssize_t r = pread(in, buf.data(), buf.size(), static_cast<off_t>(in_off));
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) throw Invalid(format("%s: cannot read the scratch file: %s", label.c_str(), r < 0 ? std::strerror(errno) : "short"));
        write_all(out, buf.data(), static_cast<uint64_t>(r), out_off, label);
        in_off += static_cast<uint64_t>(r);
        out_off += static_cast<uint64_t>(r);
        n -= static_cast<uint64_t>(r);
    }
}

// A pending tensor of one add call: checked, not yet in the writer.
struct Pending {
    std::string name;
    const kbit::io::DtypeInfo* dtype;
    std::vector<int64_t> shape;
    uint64_t nbytes;
    const void* data;
    std::string owned;  // bytes made here (the quant_state JSON, weight_format)
};

// `with_data` false: a declaration, whose data is not read.
Pending make_pending(const kbit_io_writer& w, const std::string& name, int32_t dtype, int32_t ndim,
                     const int64_t* shape, const void* data, bool with_data = true) {
    const char* n = name.c_str();
    const kbit::io::DtypeInfo* d = kbit::io::dtype_by_id(dtype);
    if (!d) throw Invalid(format("%s: tensor '%s': unknown dtype %d", w.path.c_str(), n, static_cast<int>(dtype)));
    if (ndim < 0 || static_cast<size_t>(ndim) > kbit::io::kMaxDims)
        throw Invalid(format("%s: tensor '%s': ndim %d is not in 0 ... %zu", w.path.c_str(), n, static_cast<int>(ndim),
                             kbit::io::kMaxDims));
    if (ndim > 0 && !shape) throw Invalid(format("%s: tensor '%s': shape is NULL", w.path.c_str(), n));
    if (name == "__metadata__") throw Invalid(format("%s: a tensor may not be named __metadata__", w.path.c_str()));
    if (!valid_utf8(name)) throw Invalid(format("%s: a tensor name is not valid UTF-8", w.path.c_str()));
    Pending p{name, d, {}, 0, with_data ? data : nullptr, {}};
    uint64_t numel = 1;
    for (int32_t i = 0; i < ndim; ++i) {
        if (shape[i] < 0) throw Invalid(format("%s: tensor '%s': shape[%d] is %" PRId64 ", negative", w.path.c_str(), n, i, shape[i]));
        const uint64_t x = static_cast<uint64_t>(shape[i]);
        if (x != 0 && numel > UINT64_MAX / x) throw Invalid(format("%s: tensor '%s': the shape overflows", w.path.c_str(), n));
        numel *= x;
        p.shape.push_back(shape[i]);
    }
    if (numel > (UINT64_MAX >> 4) / d->size) throw Invalid(format("%s: tensor '%s': the shape overflows", w.path.c_str(), n));
    p.nbytes = numel * d->size;
    if (with_data && p.nbytes > 0 && !data) throw Invalid(format("%s: tensor '%s': data is NULL", w.path.c_str(), n));
    return p;
}

void no_repeats(const kbit_io_writer& w, const std::vector<Pending>& pending, const char* verb) {
    for (size_t i = 0; i < pending.size(); ++i)
        for (size_t j = 0; j < i; ++j)
            if (pending[i].name == pending[j].name)
                throw Invalid(format("%s: tensor '%s' was already %s", w.path.c_str(), pending[i].name.c_str(), verb));
}

// The tensors in data order: by dtype in the safetensors order, then by name.
std::vector<kbit_io_writer::Entry*> data_order(kbit_io_writer& w) {
    std::vector<kbit_io_writer::Entry*> order;
    for (auto& e : w.entries) order.push_back(&e);
    kbit::io::sort_for_safetensors(order);
    return order;
}

// Writes the length and the header of the tensors `order` (laid out in that order, without gaps) at
// the start of the temporary file; returns where the data begins.
uint64_t write_header(const kbit_io_writer& w, const std::vector<kbit_io_writer::Entry*>& order) {
    const std::string h = kbit::io::safetensors_header(w.metadata, order, w.path);
    write_all(w.file.fd(), h.data(), h.size(), 0, w.shown());
    return h.size();
}

// Allocates the declared file's blocks before its data is written, so that the page-cache writes
// that follow skip the file system's per-block delayed-allocation bookkeeping (ext4: a 0.3 GB output
// written 20-40% faster from a 256 KB buffer, 2 vCPUs, Linux 6.18). Only for speed: where it fails
// (no fallocate() in the file system, no space, a file-size limit) the writes go on as before and
// report the failure themselves, at the tensor that meets it.
void reserve(const kbit_io_writer& w) {
    while (fallocate(w.file.fd(), 0, 0, static_cast<off_t>(w.end)) != 0 && errno == EINTR) {
    }
}

// A declared writer's first add: the header goes into the temporary file, each tensor gets its place.
void fix_layout(kbit_io_writer& w) {
    const std::vector<kbit_io_writer::Entry*> order = data_order(w);
    uint64_t pos = write_header(w, order);
    for (auto* e : order) {
        e->offset = pos;
        pos += e->nbytes;
    }
    w.end = pos;
    reserve(w);
    w.fixed = true;
}

std::string dtype_shape(const kbit::io::DtypeInfo* d, const std::vector<int64_t>& shape) {
    return std::string(d->name) + " " + kbit::io::shape_text(shape);
}

// Adds every pending tensor or none. Without declarations the bytes go to the end of the scratch file
// (a failed write cuts it back); with them, each must be a declared tensor and goes to its place.
void commit(kbit_io_writer& w, std::vector<Pending>& pending) {
    no_repeats(w, pending, "added");
    if (w.declared) {
        std::vector<kbit_io_writer::Entry*> dest;
        for (const Pending& p : pending) {
            const auto it = w.names.find(p.name);
            if (it == w.names.end())
                throw Invalid(format("%s: tensor '%s' was not declared (a writer given declarations takes only those)",
                                     w.path.c_str(), p.name.c_str()));
            kbit_io_writer::Entry& e = w.entries[it->second];
            if (e.added) throw Invalid(format("%s: tensor '%s' was already added", w.path.c_str(), p.name.c_str()));
            if (e.dtype != p.dtype || e.shape != p.shape)
                throw Invalid(format("%s: tensor '%s' was declared as %s, added as %s", w.path.c_str(), p.name.c_str(),
                                     dtype_shape(e.dtype, e.shape).c_str(), dtype_shape(p.dtype, p.shape).c_str()));
            dest.push_back(&e);
        }
        if (!w.fixed) fix_layout(w);
        for (size_t i = 0; i < pending.size(); ++i)
            write_all(w.file.fd(), pending[i].owned.empty() ? pending[i].data : pending[i].owned.data(), pending[i].nbytes,
                      dest[i]->offset, w.shown());
        for (auto* e : dest) e->added = true;
        return;
    }
    for (const Pending& p : pending)
        if (w.names.count(p.name)) throw Invalid(format("%s: tensor '%s' was already added", w.path.c_str(), p.name.c_str()));
    uint64_t off = w.scratch_size;
    try {
        for (const Pending& p : pending) {
            write_all(w.scratch_fd, p.owned.empty() ? p.data : p.owned.data(), p.nbytes, off, w.path + " (scratch file)");
            off += p.nbytes;
        }
    } catch (...) {
        if (ftruncate(w.scratch_fd, static_cast<off_t>(w.scratch_size)) != 0) { /* the size is what counts */ }
        throw;
    }
    off = w.scratch_size;
    for (Pending& p : pending) {
        w.names[p.name] = w.entries.size();
        w.entries.push_back({std::move(p.name), p.dtype, std::move(p.shape), p.nbytes, off, true});
        off += p.nbytes;
    }
    w.scratch_size = off;
}

// Records every pending tensor as declared, or none.
void declare(kbit_io_writer& w, std::vector<Pending>& pending) {
    if (w.fixed || (!w.declared && !w.entries.empty()))
        throw Invalid(format("%s: tensor '%s' is declared after the first add; declare every tensor before adding any",
                             w.path.c_str(), pending.front().name.c_str()));
    no_repeats(w, pending, "declared");
    for (const Pending& p : pending)
        if (w.names.count(p.name)) throw Invalid(format("%s: tensor '%s' was already declared", w.path.c_str(), p.name.c_str()));
    for (Pending& p : pending) {
        w.names[p.name] = w.entries.size();
        w.entries.push_back({std::move(p.name), p.dtype, std::move(p.shape), p.nbytes, 0, false});
    }
    w.declared = true;
}

// The tensors kbit_io_writer_add_quant() adds for `layer`, checked (`with_data` false: a declaration,
// whose data pointers are not read).
std::vector<Pending> layer_pending(const kbit_io_writer& w, const kbit_io_quant* layer, bool with_data) {
    std::vector<Pending> pend;
    kbit::io::layer_tensors(layer, w.path, with_data, [&](kbit::io::LayerTensor&& t) {
        Pending p = make_pending(w, t.name, t.dtype, t.ndim, t.shape, t.data, with_data);
        p.owned = std::move(t.owned);
        pend.push_back(std::move(p));
    });
    return pend;
}

// Invalid (a bad argument) or kbit::fs::Error (the temporary file): the status and the message of `fn`.
kbit_status fail(const char* fn, const std::exception& e) {
    return kbit::set_error(KBIT_STATUS_INVALID_ARGUMENT, fn, "%s", e.what());
}

// An entry point that adds or declares tensors: `body` throws Invalid for a bad argument, which
// becomes the status and the message of `fn`.
template <class F>
kbit_status tensors_call(const char* fn, bool given, const char* arguments, F&& body) {
    return kbit::guarded(fn, [&]() -> kbit_status {
        if (!given) return kbit::set_error(KBIT_STATUS_INVALID_ARGUMENT, fn, "%s must not be NULL", arguments);
        try {
            body();
        } catch (const Invalid& e) {
            return fail(fn, e);
        }
        return KBIT_STATUS_SUCCESS;
    });
}

}  // namespace

extern "C" {

KBIT_API kbit_status kbit_io_writer_create(const char* path, kbit_io_writer** out) {
    static const char* fn = "kbit_io_writer_create";
    return kbit::guarded(fn, [&]() -> kbit_status {
        if (!path || !out) return kbit::set_error(KBIT_STATUS_INVALID_ARGUMENT, fn, "path and out must not be NULL");
        if (!*path) return kbit::set_error(KBIT_STATUS_INVALID_ARGUMENT, fn, "path is empty");
        auto w = std::make_unique<kbit_io_writer>();
        w->path = path;
        if (kbit::fs::is_dir(path))
            return kbit::set_error(KBIT_STATUS_INVALID_ARGUMENT, fn, "%s: is a directory", path);
        try {
            w->file.create(w->path);
        } catch (const kbit::fs::Error& e) {
            return fail(fn, e);
        }
        w->scratch_fd = kbit::fs::open_scratch(w->path);
        if (w->scratch_fd < 0)
            return kbit::set_error(KBIT_STATUS_INVALID_ARGUMENT, fn, "%s: cannot create a scratch file beside it: %s",
                                   path, std::strerror(errno));
        *out = w.release();
        return KBIT_STATUS_SUCCESS;
    });
}

KBIT_API kbit_status kbit_io_writer_metadata(kbit_io_writer* writer, const char* key, const char* value) {
    static const char* fn = "kbit_io_writer_metadata";
    return kbit::guarded(fn, [&]() -> kbit_status {
        if (!writer || !key || !value)
            return kbit::set_error(KBIT_STATUS_INVALID_ARGUMENT, fn, "writer, key and value must not be NULL");
        if (!valid_utf8(key) || !valid_utf8(value))
            return kbit::set_error(KBIT_STATUS_INVALID_ARGUMENT, fn, "%s: metadata key or value is not valid UTF-8",
                                   writer->path.c_str());
        if (writer->fixed)
            return kbit::set_error(KBIT_STATUS_INVALID_ARGUMENT, fn,
                                   "%s: the layout was fixed by the first add after declarations; set metadata before it",
                                   writer->path.c_str());
        writer->metadata[key] = value;
        return KBIT_STATUS_SUCCESS;
    });
}

KBIT_API kbit_status kbit_io_writer_add(kbit_io_writer* writer, const char* name, int32_t dtype, int32_t ndim,
                                        const int64_t* shape, const void* data) {
    return tensors_call("kbit_io_writer_add", writer && name, "writer and name", [&] {
        std::vector<Pending> p;
        p.push_back(make_pending(*writer, name, dtype, ndim, shape, data));
        commit(*writer, p);
    });
}

KBIT_API kbit_status kbit_io_writer_add_quant(kbit_io_writer* writer, const kbit_io_quant* layer) {
    return tensors_call("kbit_io_writer_add_quant", writer && layer, "writer and layer", [&] {
        std::vector<Pending> p = layer_pending(*writer, layer, true);
        commit(*writer, p);
    });
}

KBIT_API kbit_status kbit_io_writer_declare(kbit_io_writer* writer, const char* name, int32_t dtype, int32_t ndim,
                                            const int64_t* shape) {
    return tensors_call("kbit_io_writer_declare", writer && name, "writer and name", [&] {
        std::vector<Pending> p;
        p.push_back(make_pending(*writer, name, dtype, ndim, shape, nullptr, false));
        declare(*writer, p);
    });
}

KBIT_API kbit_status kbit_io_writer_declare_quant(kbit_io_writer* writer, const kbit_io_quant* layer) {
    return tensors_call("kbit_io_writer_declare_quant", writer && layer, "writer and layer", [&] {
        std::vector<Pending> p = layer_pending(*writer, layer, false);
        declare(*writer, p);
    });
}

KBIT_API kbit_status kbit_io_writer_finish(kbit_io_writer* writer) {
    static const char* fn = "kbit_io_writer_finish";
    std::unique_ptr<kbit_io_writer> w(writer);  // freed (and its temporary file removed) in every case
    return kbit::guarded(fn, [&]() -> kbit_status {
        if (!w) return kbit::set_error(KBIT_STATUS_INVALID_ARGUMENT, fn, "writer must not be NULL");
        try {
            uint64_t end;
            if (w->declared) {
                for (const auto& e : w->entries)
                    if (!e.added)
                        throw Invalid(format("%s: tensor '%s' was declared but never added", w->path.c_str(), e.name.c_str()));
                if (!w->fixed) fix_layout(*w);
                end = w->end;
            } else {
                const std::vector<kbit_io_writer::Entry*> order = data_order(*w);
                end = write_header(*w, order);
                for (const auto* e : order) {
                    copy_range(w->scratch_fd, e->offset, w->file.fd(), end, e->nbytes, w->shown());
                    end += e->nbytes;
                }
            }
            if (ftruncate(w->file.fd(), static_cast<off_t>(end)) != 0)
                throw Invalid(format("%s: cannot set its size: %s", w->shown().c_str(), std::strerror(errno)));
            w->file.publish();
        } catch (const Invalid& e) {
            return fail(fn, e);
        } catch (const kbit::fs::Error& e) {
            return fail(fn, e);
        }
        return KBIT_STATUS_SUCCESS;
    });
}

KBIT_API kbit_status kbit_io_writer_discard(kbit_io_writer* writer) {
    delete writer;
    return KBIT_STATUS_SUCCESS;
}

}  // extern "C"
