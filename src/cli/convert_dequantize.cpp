// convert_dequantize.cpp — the body of `kbit dequantize`: every bitsandbytes layer of the input
// (NF4/FP4, nested or not; LLM.int8) turned back into one dense P.weight by the CPU backend, as
// bitsandbytes computes it, its other tensors dropped, the rest copied; config.json loses its
// quantization_config.
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "convert_job.h"
#include "kbit_half.h"
#include "kbit_half_array.h"
#include "progress.h"

namespace kbit::cli {

namespace {

using json = nlohmann::json;

}  // namespace

int run_dequantize_job(Job& j, int32_t out_dtype, bool quiet) {
    open_job(j);
    // The layer whose weight each P.weight (a 4-bit parameter's: P) is; the other tensors of a layer
    // (P.weight.* of a 4-bit layer, P.* of a 4-bit parameter, P.SCB and P.weight_format of an int8
    // one) are dropped.
    std::map<std::string, const kbit_io_quant*> layer_of_weight;
    std::map<std::string, int32_t> format_of;  // prefix -> format
    std::map<std::string, bool> parameters;    // the 4-bit parameters' keys
    for (size_t i = 0; i < kbit_io_quant_count(j.ck); ++i) {
        const kbit_io_quant* q;
        check_io(kbit_io_quant_describe(j.ck, i, &q));
        layer_of_weight[q->weight_name] = q;
        if (q->parameter) parameters[q->prefix] = true;
        else format_of[q->prefix] = q->format;
    }
    auto companion = [&](const std::string& n) {
        for (size_t at = n.find('.'); at != std::string::npos; at = n.find('.', at + 1))
            if (parameters.count(n.substr(0, at))) return true;
        for (size_t at = n.find(".weight."); at != std::string::npos; at = n.find(".weight.", at + 1)) {
            const auto f = format_of.find(n.substr(0, at));
            if (f != format_of.end() && f->second != KBIT_IO_FORMAT_INT8) return true;
        }
        for (const char* suffix : {".SCB", ".weight_format"}) {
            const size_t len = std::strlen(suffix);
            if (n.size() > len && n.compare(n.size() - len, len, suffix) == 0) {
                const auto f = format_of.find(n.substr(0, n.size() - len));
                if (f != format_of.end() && f->second == KBIT_IO_FORMAT_INT8) return true;
            }
        }
        return false;
    };
    const size_t count = kbit_io_tensor_count(j.ck);
    const uint64_t total_in = tensor_bytes(j.ck);
    Progress progress("kbit dequantize", quiet, count, total_in);
    std::map<std::string, size_t> weight_map;
    std::vector<float> absmax;
    std::vector<uint8_t> outputs[2];  // one being written while the other is computed
    size_t dequantized = 0;
    WriteBehind write_behind(j.compute.count() > 1);
    auto dense_dtype = [&](const kbit_io_quant* q) {
        return out_dtype >= 0 ? out_dtype : q->format == KBIT_IO_FORMAT_INT8 ? KBIT_DTYPE_FP16 : q->dtype;
    };
    // Every output tensor declared first, so each shard's bytes are written once (docs/cli.md).
    for (size_t i = 0; i < count; ++i) {
        const kbit_io_tensor* t;
        check_io(kbit_io_tensor_at(j.ck, i, &t));
        if (companion(t->name)) continue;
        const auto it = layer_of_weight.find(t->name);
        if (it == layer_of_weight.end())
            check_io(kbit_io_writer_declare(j.writers[t->shard], t->name, t->dtype, t->ndim, t->shape));
        else
            check_io(kbit_io_writer_declare(j.writers[t->shard], t->name, io_dtype_of(dense_dtype(it->second)),
                                            it->second->ndim, it->second->shape));
    }
    for (size_t i = 0; i < count; ++i) {
        const kbit_io_tensor* t;
        check_io(kbit_io_tensor_at(j.ck, i, &t));
        const std::string name = t->name;
        kbit_io_writer* w = j.writers[t->shard];
        if (companion(name)) {
            progress.step(name, t->nbytes, "dropped (part of a layer)");
            continue;
        }
        const auto it = layer_of_weight.find(name);
        if (it == layer_of_weight.end()) {
            write_behind.submit([=] { check_io(kbit_io_writer_add(w, t->name, t->dtype, t->ndim, t->shape, t->data)); });
            weight_map[name] = t->shard;
            progress.step(name, t->nbytes, "copied");
            continue;
        }
        const kbit_io_quant* q = it->second;
        std::vector<uint8_t>& out = outputs[dequantized++ % 2];
        const int64_t n = static_cast<int64_t>(q->numel);
        const int32_t dt = dense_dtype(q);
        out.resize(static_cast<size_t>(n) * dtype_size(dt));
        if (q->format == KBIT_IO_FORMAT_INT8) {
            const int64_t rows = q->shape[0], cols = q->shape[1];
            const int8_t* cbp = static_cast<const int8_t*>(q->weight);
            std::vector<float> scb_copy(static_cast<size_t>(rows));  // copied: the file may not align it
            std::memcpy(scb_copy.data(), static_cast<const void*>(q->scb), static_cast<size_t>(rows) * 4);
            j.compute.run(rows, rows_per_piece(cols), [&](int64_t r0, int64_t r1) {
                std::vector<float> row(static_cast<size_t>(cols));
                std::vector<uint16_t> h(dt == KBIT_DTYPE_FP32 ? 0 : static_cast<size_t>(cols));
                for (int64_t r = r0; r < r1; ++r) {
                    // bitsandbytes' int8_vectorwise_dequant: CB * SCB * (1 / 127) in float32.
                    const int8_t* in = cbp + r * cols;
                    for (int64_t c = 0; c < cols; ++c) row[c] = static_cast<float>(in[c]) * scb_copy[r] * 7.874015718698502e-3f;
                    uint8_t* dst = out.data() + static_cast<size_t>(r * cols) * dtype_size(dt);
                    if (dt == KBIT_DTYPE_FP32) {
                        std::memcpy(dst, row.data(), static_cast<size_t>(cols) * 4);
                        continue;
                    }
                    if (dt == KBIT_DTYPE_FP16)
                        kbit::float_to_half_array(row.data(), h.data(), cols);
                    else
                        for (int64_t c = 0; c < cols; ++c) h[c] = kbit::float_to_bf16(row[c]);
                    std::memcpy(dst, h.data(), static_cast<size_t>(cols) * 2);
                }
            });
        } else {
            absmax.resize(q->blocks);
            if (q->nested) {
                std::vector<float> nab(q->nested_blocks), nqm(256);
                std::memcpy(nab.data(), static_cast<const void*>(q->nested_absmax), q->nested_blocks * 4);
                std::memcpy(nqm.data(), static_cast<const void*>(q->nested_quant_map), 256 * 4);
                check(j.t4->kbit_nested_absmax_dequantize(static_cast<const uint8_t*>(q->absmax), nqm.data(), nab.data(),
                                                          q->nested_offset, absmax.data(), static_cast<int64_t>(q->blocks),
                                                          q->nested_blocksize, nullptr),
                      t->name);
            } else {
                std::memcpy(absmax.data(), q->absmax, q->absmax_bytes);
            }
            const int64_t bs = q->blocksize;
            const size_t elem = dtype_size(dt);
            j.compute.run(n, piece_of(bs), [&](int64_t begin, int64_t end) {
                check(j.t4->kbit_dequantize_4bit(q->format == KBIT_IO_FORMAT_NF4 ? KBIT_QUANT_NF4 : KBIT_QUANT_FP4, dt,
                                                 static_cast<const uint8_t*>(q->weight) + begin / 2, absmax.data() + begin / bs,
                                                 out.data() + begin * elem, bs, end - begin, nullptr),
                      t->name);
            });
        }
        write_behind.submit([=, data = out.data()] {
            check_io(kbit_io_writer_add(w, t->name, io_dtype_of(dt), q->ndim, q->shape, data));
        });
        weight_map[name] = t->shard;
        progress.step(name, t->nbytes, std::string(kbit_io_format_name(q->format)) + " to " + torch_name(dt));
    }
    write_behind.wait();
    finish_job(j, weight_map, [](json& cfg) { cfg.erase("quantization_config"); });
    progress.finish(j.out);
    return 0;
}

}  // namespace kbit::cli
