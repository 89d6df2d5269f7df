// kbit_host_contexts.h — the int8 GEMM contexts of a backend that keeps no per-context state (the CPU
// backend, the OpenCL backend): kbit_context is an empty object, recorded in a LiveSet while it is
// live, and the three context operations of kbit_ops_8bit.h are defined here. Include this header in
// exactly one source file of such a backend (it defines functions, not just declares them).
#pragma once

#include <memory>

#include "kbit_live_set.h"
#include "kbit_ops_8bit.h"

struct kbit_context {};

namespace kbit {

inline LiveSet<kbit_context>& host_contexts() {
    static LiveSet<kbit_context> live;  // trivially destructible: usable during exit too
    return live;
}

namespace ops {

kbit_context* context_create(const char* fn) {
    auto made = std::make_unique<kbit_context>();
    if (!host_contexts().add(made.get())) {
        set_error(KBIT_STATUS_OUT_OF_MEMORY, fn, "%zu contexts are live already", host_contexts().capacity());
        return nullptr;
    }
    return made.release();
}

kbit_status context_destroy(const char* fn, kbit_context* context) {
    if (kbit_status st = forget_live_context(fn, host_contexts(), context); st != KBIT_STATUS_SUCCESS) return st;
    delete context;
    return KBIT_STATUS_SUCCESS;
}

bool context_is_live(const kbit_context* context) { return host_contexts().contains(context); }

}  // namespace ops
}  // namespace kbit
