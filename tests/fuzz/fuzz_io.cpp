// fuzz_io: libkbit_io's checkpoint reader (src/io) on fuzzed files. The input is written to an
// in-memory file (memfd) and opened through the public API (kbit_io_open on /proc/self/fd/N, so the
// mmap path runs too). Checks:
//   - no crash, hang or sanitizer report in the parser or the layer checks;
//   - a failure returns KBIT_STATUS_INVALID_ARGUMENT with a "kbit_io_open: " message;
//   - an accepted file really is what the handle promises, recomputed from the bytes: every tensor's
//     range lies inside the file, after the header, holds numel * dtype size bytes and the same bytes
//     as the input; the ranges tile the data exactly; every described layer's pointers and byte
//     counts lie inside one tensor of the right name, with the counts its fields imply;
//   - the writer (io 1.1) on what was accepted: every plain tensor and every valid layer written back
//     (kbit_io_writer_add / _add_quant) gives a file the reader accepts, with the same bytes, dtypes
//     and shapes for the plain tensors and the same description (fields and bytes, the nested offset
//     bit for bit) for each layer; a failing add returns KBIT_STATUS_INVALID_ARGUMENT with its message;
//   - the same with every tensor declared first (io 1.2, plain tensors then added in reverse order):
//     the same file byte for byte.
#include <sys/mman.h>
#include <unistd.h>

#include <map>
#include <set>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>
#include <algorithm>

#include "kbit/kbit_io.h"

namespace {

int g_fd = -1;
std::string g_path;
std::string g_out;           // where the writer's round trip goes
std::string g_out_declared;  // the same, with every tensor declared first

[[noreturn]] void fail(const std::string& what) {
    std::fprintf(stderr, "fuzz_io: %s\n", what.c_str());
    std::fflush(stderr);
    std::abort();
}

const kbit_io_tensor* tensor(const kbit_io_checkpoint* ck, const std::string& name) {
    const kbit_io_tensor* t = nullptr;
    if (kbit_io_tensor_find(ck, name.c_str(), &t) != KBIT_STATUS_SUCCESS) return nullptr;
    return t;
}

// The tensor that serves a 4-bit layer's field: as in QuantState.from_dict, any key under P.weight.
// whose last dotted component is the field, the last such in name order winning ("P.weight.x.absmax"
// is a valid absmax when no later key ends in ".absmax").
// The tensor under a 4-bit weight's key W (P.weight, or a parameter's own key) named `field` last.
const kbit_io_tensor* field_tensor(const kbit_io_checkpoint* ck, const std::string& weight, const std::string& field) {
    const std::string under = weight + ".";
    const kbit_io_tensor* found = nullptr;
    for (size_t i = 0; i < kbit_io_tensor_count(ck); ++i) {
        const kbit_io_tensor* t = nullptr;
        kbit_io_tensor_at(ck, i, &t);
        const std::string n = t->name;
        if (n.compare(0, under.size(), under) == 0 && n.substr(n.rfind('.') + 1) == field) found = t;
    }
    return found;
}

// `p` .. p + bytes is exactly the data of `t`, the tensor called `name` (a field's name when looked up
// by field_tensor).
void same_range(const char* prefix, const kbit_io_tensor* t, const std::string& name, const void* p, uint64_t bytes) {
    if (!t) fail(std::string(prefix) + ": described, but no tensor " + name);
    if (t->data != p || t->nbytes != bytes)
        fail(std::string(prefix) + ": pointer or size of " + name + " differs from its tensor");
}

void check_accepted(const kbit_io_checkpoint* ck, const uint8_t* data, size_t size) {
    if (kbit_io_shard_count(ck) != 1) fail("one file gave other than one shard");
    uint64_t n = 0;
    for (int i = 7; i >= 0; --i) n = (n << 8) | data[i];
    if (size < 8 || n > size - 8) fail("accepted a header length past the end");
    struct Range {
        uint64_t begin, end;
    };
    std::vector<Range> ranges;
    std::string prev;
    for (size_t i = 0; i < kbit_io_tensor_count(ck); ++i) {
        const kbit_io_tensor* t = nullptr;
        if (kbit_io_tensor_at(ck, i, &t) != KBIT_STATUS_SUCCESS || !t) fail("tensor_at failed in range");
        if (i && !(prev < t->name)) fail("tensors not in name order");
        prev = t->name;
        if (t->file_offset < 8 + n || t->file_offset > size || t->nbytes > size - t->file_offset)
            fail(std::string("tensor ") + t->name + " outside the data");
        uint64_t numel = 1;
        for (int32_t d = 0; d < t->ndim; ++d) numel *= static_cast<uint64_t>(t->shape[d]);
        if (numel != t->numel) fail(std::string("tensor ") + t->name + ": numel is not the product of the shape");
        if (std::memcmp(t->data, data + t->file_offset, t->nbytes) != 0)
            fail(std::string("tensor ") + t->name + ": bytes differ from the input");
        ranges.push_back({t->file_offset, t->file_offset + t->nbytes});
    }
    std::sort(ranges.begin(), ranges.end(), [](const Range& a, const Range& b) {
        return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
    });
    uint64_t at = 8 + n;
    for (const Range& r : ranges) {
        if (r.begin != at) fail("accepted tensors with a gap or an overlap");
        at = r.end;
    }
    if (at != size) fail("accepted tensors that do not cover the data");

    for (size_t i = 0; i < kbit_io_quant_count(ck); ++i) {
        const kbit_io_quant* q = nullptr;
        if (kbit_io_quant_describe(ck, i, &q) != KBIT_STATUS_SUCCESS) {
            if (std::strncmp(kbit_io_last_error_message(), "kbit_io_quant_describe: ", 24) != 0)
                fail("a bad layer's message does not name the function");
            continue;
        }
        const std::string P = q->prefix;
        const char* p = q->prefix;
        uint64_t numel = 1;
        for (int32_t d = 0; d < q->ndim; ++d) numel *= static_cast<uint64_t>(q->shape[d]);
        if (numel != q->numel) fail(P + ": numel is not the product of the shape");
        if (q->format == KBIT_IO_FORMAT_INT8) {
            if (q->ndim != 2) fail(P + ": int8 weight not 2-D");
            same_range(p, tensor(ck, P + ".weight"), P + ".weight", q->weight, q->numel);
            same_range(p, tensor(ck, P + ".SCB"), P + ".SCB", q->scb, 4 * static_cast<uint64_t>(q->shape[0]));
            continue;
        }
        if (q->format != KBIT_IO_FORMAT_NF4 && q->format != KBIT_IO_FORMAT_FP4) fail(P + ": unknown format");
        const int32_t b = q->blocksize;
        if (b < KBIT_BLOCKSIZE_MIN || b > KBIT_BLOCKSIZE_MAX || (b & (b - 1))) fail(P + ": bad blocksize accepted");
        const uint64_t blocks = q->numel / b + (q->numel % b != 0);
        if (q->blocks != blocks) fail(P + ": blocks is not ceil(numel / blocksize)");
        const std::string W = q->weight_name;  // P.weight, or P for a 4-bit parameter (io 1.3)
        if (W != (q->parameter ? P : P + ".weight")) fail(P + ": weight_name");
        same_range(p, tensor(ck, W), W, q->weight, (q->numel + 1) / 2);
        same_range(p, field_tensor(ck, W, "absmax"), W + ".*.absmax", q->absmax,
                   q->nested ? blocks : 4 * blocks);
        if (q->absmax_bytes != (q->nested ? blocks : 4 * blocks)) fail(P + ": absmax_bytes");
        same_range(p, field_tensor(ck, W, "quant_map"), W + ".*.quant_map", q->quant_map, 64);
        if (q->nested) {
            const int32_t nb = q->nested_blocksize;
            if (nb < KBIT_BLOCKSIZE_MIN || nb > KBIT_BLOCKSIZE_MAX || (nb & (nb - 1))) fail(P + ": bad nested_blocksize");
            if (!(q->nested_offset == q->nested_offset) || q->nested_offset - q->nested_offset != 0.0f)
                fail(P + ": non-finite nested_offset accepted");
            const uint64_t nblocks = blocks / nb + (blocks % nb != 0);
            if (q->nested_blocks != nblocks) fail(P + ": nested_blocks");
            same_range(p, field_tensor(ck, W, "nested_absmax"), W + ".*.nested_absmax", q->nested_absmax,
                       4 * nblocks);
            same_range(p, field_tensor(ck, W, "nested_quant_map"), W + ".*.nested_quant_map",
                       q->nested_quant_map, 1024);
        }
    }
}

bool same_bytes(const void* a, const void* b, uint64_t n) { return n == 0 || std::memcmp(a, b, n) == 0; }

// Layer fields and the bytes they point at, as the writer must reproduce them.
void same_layer(const kbit_io_quant* a, const kbit_io_quant* b) {
    const std::string P = a->prefix;
    if (a->format != b->format || a->ndim != b->ndim || a->numel != b->numel || a->dtype != b->dtype ||
        a->nested != b->nested || a->blocksize != b->blocksize || a->weight_bytes != b->weight_bytes)
        fail(P + ": the written layer's fields differ");
    for (int32_t d = 0; d < a->ndim; ++d)
        if (a->shape[d] != b->shape[d]) fail(P + ": the written layer's shape differs");
    if (!same_bytes(a->weight, b->weight, a->weight_bytes)) fail(P + ": the written weight differs");
    if (a->format == KBIT_IO_FORMAT_INT8) {
        if (!same_bytes(a->scb, b->scb, 4 * static_cast<uint64_t>(a->shape[0]))) fail(P + ": the written SCB differs");
        return;
    }
    if (a->absmax_bytes != b->absmax_bytes || !same_bytes(a->absmax, b->absmax, a->absmax_bytes) ||
        !same_bytes(a->quant_map, b->quant_map, 64))
        fail(P + ": the written absmax or quant_map differs");
    if (a->nested) {
        uint32_t x, y;
        std::memcpy(&x, &a->nested_offset, 4);
        std::memcpy(&y, &b->nested_offset, 4);
        if (x != y) fail(P + ": the written nested_offset differs (Python's repr did not read back)");
        if (a->nested_blocksize != b->nested_blocksize || a->nested_blocks != b->nested_blocks ||
            !same_bytes(a->nested_absmax, b->nested_absmax, 4 * a->nested_blocks) ||
            !same_bytes(a->nested_quant_map, b->nested_quant_map, 1024))
            fail(P + ": the written nested scales differ");
    }
}

// Writes ck back to `out` (declared: every tensor declared first); false when an add was refused.
bool write_back(const kbit_io_checkpoint* ck, bool declared, const std::string& out) {
    // The tensors of each valid layer are regenerated by add_quant; the rest are copied.
    std::vector<const kbit_io_quant*> layers;
    std::set<std::string> prefixes4, prefixes8;  // 4-bit: the weights' keys (P.weight, or a parameter's P)
    for (size_t i = 0; i < kbit_io_quant_count(ck); ++i) {
        const kbit_io_quant* q = nullptr;
        if (kbit_io_quant_describe(ck, i, &q) != KBIT_STATUS_SUCCESS) continue;
        layers.push_back(q);
        if (q->format == KBIT_IO_FORMAT_INT8) prefixes8.insert(q->prefix);
        else prefixes4.insert(q->weight_name);
    }
    auto in_layer = [&](const std::string& n) {
        for (const std::string& w : prefixes4)
            if (n == w || n.compare(0, w.size() + 1, w + ".") == 0) return true;
        for (const std::string& p : prefixes8)
            if (n == p + ".weight" || n == p + ".SCB" || n == p + ".weight_format") return true;
        return false;
    };
    kbit_io_writer* w = nullptr;
    if (kbit_io_writer_create(out.c_str(), &w) != KBIT_STATUS_SUCCESS) fail("writer_create failed");
    std::map<std::string, const kbit_io_tensor*> plain;
    auto refused = [&](kbit_status st, const char* fn) {
        if (st == KBIT_STATUS_SUCCESS) return false;
        if (st != KBIT_STATUS_INVALID_ARGUMENT || std::strncmp(kbit_io_last_error_message(), fn, std::strlen(fn)) != 0)
            fail(std::string("a failing ") + fn + " returned status " + std::to_string(st) + " / " + kbit_io_last_error_message());
        kbit_io_writer_discard(w);
        return true;
    };
    std::vector<const kbit_io_tensor*> order;
    for (size_t i = 0; i < kbit_io_tensor_count(ck); ++i) {
        const kbit_io_tensor* t = nullptr;
        kbit_io_tensor_at(ck, i, &t);
        if (!in_layer(t->name)) order.push_back(t);
    }
    if (declared) {
        for (const kbit_io_tensor* t : order)
            if (refused(kbit_io_writer_declare(w, t->name, t->dtype, t->ndim, t->shape), "kbit_io_writer_declare")) return false;
        for (const kbit_io_quant* q : layers)
            if (refused(kbit_io_writer_declare_quant(w, q), "kbit_io_writer_declare_quant")) return false;
        std::reverse(order.begin(), order.end());
    }
    for (const kbit_io_tensor* t : order) {
        if (refused(kbit_io_writer_add(w, t->name, t->dtype, t->ndim, t->shape, t->data), "kbit_io_writer_add")) return false;
        plain[t->name] = t;
    }
    for (const kbit_io_quant* q : layers)  // refused e.g. when its names are taken by another layer
        if (refused(kbit_io_writer_add_quant(w, q), "kbit_io_writer_add_quant")) return false;
    if (kbit_io_writer_finish(w) != KBIT_STATUS_SUCCESS) fail(std::string("writer_finish: ") + kbit_io_last_error_message());
    kbit_io_checkpoint* back = nullptr;
    if (kbit_io_open(out.c_str(), &back) != KBIT_STATUS_SUCCESS)
        fail(std::string("the written file is not accepted: ") + kbit_io_last_error_message());
    for (const auto& kv : plain) {
        const kbit_io_tensor* a = kv.second;
        const kbit_io_tensor* b = tensor(back, kv.first);
        if (!b || a->dtype != b->dtype || a->ndim != b->ndim || a->nbytes != b->nbytes ||
            !same_bytes(a->data, b->data, a->nbytes))
            fail("tensor " + kv.first + " differs after writing");
        for (int32_t d = 0; d < a->ndim; ++d)
            if (a->shape[d] != b->shape[d]) fail("tensor " + kv.first + ": shape differs after writing");
    }
    for (const kbit_io_quant* q : layers) {
        const kbit_io_quant* b = nullptr;
        // A 4-bit and an int8 layer may share a prefix: compare with the one of the same kind.
        bool found = false;
        for (size_t i = 0; i < kbit_io_quant_count(back) && !found; ++i)
            if (kbit_io_quant_describe(back, i, &b) == KBIT_STATUS_SUCCESS && std::strcmp(b->prefix, q->prefix) == 0 &&
                (b->format == KBIT_IO_FORMAT_INT8) == (q->format == KBIT_IO_FORMAT_INT8))
                found = true;
        if (!found) fail(std::string(q->prefix) + ": the written layer is not described");
        same_layer(q, b);
    }
    kbit_io_close(back);
    return true;
}

std::string file_bytes(const std::string& path) {
    std::string s;
    if (FILE* f = std::fopen(path.c_str(), "rb")) {
        char buf[65536];
        for (size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;) s.append(buf, n);
        std::fclose(f);
    }
    return s;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
    g_fd = memfd_create("fuzz_io", 0);
    if (g_fd < 0) fail("memfd_create failed");
    g_path = "/proc/self/fd/" + std::to_string(g_fd);
    char dir[] = "/tmp/fuzz_io.XXXXXX";
    if (!mkdtemp(dir)) fail("mkdtemp failed");
    g_out = std::string(dir) + "/written.safetensors";
    g_out_declared = std::string(dir) + "/declared.safetensors";
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (ftruncate(g_fd, 0) != 0 || pwrite(g_fd, data, size, 0) != static_cast<ssize_t>(size)) fail("memfd write");
    kbit_io_checkpoint* ck = nullptr;
    const kbit_status s = kbit_io_open(g_path.c_str(), &ck);
    if (s != KBIT_STATUS_SUCCESS) {
        if (s != KBIT_STATUS_INVALID_ARGUMENT) fail("open returned status " + std::to_string(s));
        if (ck) fail("a failed open wrote the handle");
        if (std::strncmp(kbit_io_last_error_message(), "kbit_io_open: ", 14) != 0)
            fail("a failed open's message does not name the function");
        return 0;
    }
    check_accepted(ck, data, size);
    const bool plain_ok = write_back(ck, false, g_out);
    const bool declared_ok = write_back(ck, true, g_out_declared);
    if (plain_ok != declared_ok) fail("a write was refused with declarations and not without, or the other way round");
    if (plain_ok && file_bytes(g_out) != file_bytes(g_out_declared)) fail("the declared writer wrote other bytes");
    kbit_io_close(ck);
    return 0;
}
