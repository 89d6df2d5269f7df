// The exported loader API (kbit_loader.h).
#include "default_backend.h"
#include "discovery.h"
#include "kbit_error.h"
#include "loader_state.h"
#include "names.h"

namespace kbit::loader {
namespace {

// Runs an API body behind the exception barrier (kbit::guarded); an exception that stops it counts as
// the loader's failure.
template <class F>
kbit_status api_call(const char* fn, F&& body) noexcept {
    bool returned = false;
    const kbit_status status = kbit::guarded(fn, [&] {
        const kbit_status s = body();
        returned = true;
        return s;
    });
    if (!returned) thread_state().last = Source::Loader;
    return status;
}

// Opening, choosing or discovering backends from a backend's probe, constructor or destructor (run
// by the loader in this thread) would validate backends again, recursively.
kbit_status refuse_reentry(const char* fn) noexcept {
    return fail(KBIT_STATUS_NOT_SUPPORTED, fn,
                "called from a backend's probe, constructor or destructor (libkbit.so would validate "
                "backends again, recursively)");
}

template <int I, class Public>
const Public* table(const kbit_backend* b, const char* fn) noexcept {
    if (b == nullptr) {
        fail(KBIT_STATUS_INVALID_ARGUMENT, fn, "backend is NULL");
        return nullptr;
    }
    const kbit_loader_interface_record& rec = b->record.ifaces[I];
    if (rec.state == KBIT_INTERFACE_ABSENT) {
        fail(KBIT_STATUS_NOT_SUPPORTED, fn, "backend %s (%s) does not export the %s interface", b->record.pub.name,
             b->record.pub.path, interface_info(I).name);
        return nullptr;
    }
    if (rec.state == KBIT_INTERFACE_REJECTED) {
        fail(KBIT_STATUS_NOT_SUPPORTED, fn, "%s", rec.message);
        return nullptr;
    }
    return reinterpret_cast<const Public*>(&table_of<I>(b->tables));
}

}  // namespace
}  // namespace kbit::loader

using namespace kbit::loader;

extern "C" {

KBIT_API uint32_t kbit_loader_interface_version(void) {
    return KBIT_MAKE_VERSION(KBIT_LOADER_VERSION_MAJOR, KBIT_LOADER_VERSION_MINOR);
}

KBIT_API kbit_status kbit_loader_open(const char* backend, kbit_backend** out) {
    static const char* fn = "kbit_loader_open";
    if (out == nullptr) return fail(KBIT_STATUS_INVALID_ARGUMENT, fn, "out is NULL");
    *out = nullptr;
    if (in_vendor_code()) return refuse_reentry(fn);
    return api_call(fn, [&] {
        std::string why;
        std::unique_ptr<kbit_backend> b;
        if (backend == nullptr || backend[0] == '\0') {
            b = choose_default(&why);
            if (b == nullptr) return fail(KBIT_STATUS_NOT_SUPPORTED, fn, "%s", why.c_str());
        } else {
            kbit_status status = KBIT_STATUS_SUCCESS;
            b = open_named(backend, &status, &why);
            if (b == nullptr) return fail(status, fn, "%s", why.c_str());
        }
        *out = b.release();
        return KBIT_STATUS_SUCCESS;
    });
}

KBIT_API kbit_status kbit_loader_default(kbit_backend** out) {
    static const char* fn = "kbit_loader_default";
    if (out == nullptr) return fail(KBIT_STATUS_INVALID_ARGUMENT, fn, "out is NULL");
    *out = nullptr;
    if (default_backend_if_chosen() == nullptr && in_vendor_code())
        return fail(KBIT_STATUS_NOT_SUPPORTED, fn,
                    "called from a backend's probe, constructor or destructor before libkbit.so has chosen "
                    "its default backend");
    return api_call(fn, [&] {
        const kbit_backend& b = default_backend();
        if (b.handle == nullptr) return fail(KBIT_STATUS_NOT_SUPPORTED, fn, "%s", default_backend_problem().c_str());
        *out = const_cast<kbit_backend*>(&b);
        return KBIT_STATUS_SUCCESS;
    });
}

KBIT_API kbit_status kbit_loader_close(kbit_backend* backend) {
    if (backend == nullptr) return KBIT_STATUS_SUCCESS;
    if (backend->loader_owned)
        return fail(KBIT_STATUS_INVALID_ARGUMENT, "kbit_loader_close",
                    "the default backend belongs to the loader and is never closed");
    delete backend;
    return KBIT_STATUS_SUCCESS;
}

KBIT_API const kbit_loader_candidate* kbit_loader_backend_candidate(const kbit_backend* backend) {
    if (backend == nullptr) {
        fail(KBIT_STATUS_INVALID_ARGUMENT, "kbit_loader_backend_candidate", "backend is NULL");
        return nullptr;
    }
    return &backend->record.pub;
}

KBIT_API const kbit_core_table* kbit_loader_core_table(const kbit_backend* backend) {
    return table<KBIT_INTERFACE_CORE, kbit_core_table>(backend, "kbit_loader_core_table");
}

KBIT_API const kbit_4bit_table* kbit_loader_4bit_table(const kbit_backend* backend) {
    return table<KBIT_INTERFACE_4BIT, kbit_4bit_table>(backend, "kbit_loader_4bit_table");
}

KBIT_API const kbit_8bit_table* kbit_loader_8bit_table(const kbit_backend* backend) {
    return table<KBIT_INTERFACE_8BIT, kbit_8bit_table>(backend, "kbit_loader_8bit_table");
}

KBIT_API const kbit_optim8_table* kbit_loader_optim8_table(const kbit_backend* backend) {
    return table<KBIT_INTERFACE_OPTIM8, kbit_optim8_table>(backend, "kbit_loader_optim8_table");
}

KBIT_API kbit_status kbit_loader_discover(kbit_loader_report** out) {
    static const char* fn = "kbit_loader_discover";
    if (out == nullptr) return fail(KBIT_STATUS_INVALID_ARGUMENT, fn, "out is NULL");
    *out = nullptr;
    if (in_vendor_code()) return refuse_reentry(fn);
    return api_call(fn, [&] {
        Discovery d = discover(false);
        if (debug_enabled()) debug_discovery(d);
        auto report = std::make_unique<kbit_loader_report>();
        if (d.plan.backend_set) report->search.push_back({d.plan.backend, KBIT_SOURCE_KBIT_BACKEND});
        for (const SearchEntry& dir : d.plan.dirs) report->search.push_back(dir);
        for (const auto& b : d.backends) report->candidates.push_back(std::make_unique<Candidate>(b->record));
        report->default_index = d.chosen;
        report->summary = d.summary;
        *out = report.release();
        return KBIT_STATUS_SUCCESS;
    });
}

KBIT_API kbit_status kbit_loader_report_free(kbit_loader_report* report) {
    delete report;
    return KBIT_STATUS_SUCCESS;
}

KBIT_API size_t kbit_loader_report_search_count(const kbit_loader_report* report) {
    return report != nullptr ? report->search.size() : 0;
}

KBIT_API const char* kbit_loader_report_search_entry(const kbit_loader_report* report, size_t index,
                                                     int32_t* source) {
    if (report == nullptr || index >= report->search.size()) return nullptr;
    if (source != nullptr) *source = report->search[index].source;
    return report->search[index].text.c_str();
}

KBIT_API size_t kbit_loader_report_candidate_count(const kbit_loader_report* report) {
    return report != nullptr ? report->candidates.size() : 0;
}

KBIT_API const kbit_loader_candidate* kbit_loader_report_candidate(const kbit_loader_report* report,
                                                                   size_t index) {
    if (report == nullptr || index >= report->candidates.size()) return nullptr;
    return &report->candidates[index]->pub;
}

KBIT_API const kbit_loader_candidate* kbit_loader_report_default(const kbit_loader_report* report) {
    if (report == nullptr || report->default_index < 0) return nullptr;
    return &report->candidates[static_cast<size_t>(report->default_index)]->pub;
}

KBIT_API const char* kbit_loader_report_summary(const kbit_loader_report* report) {
    return report != nullptr ? report->summary.c_str() : "";
}

KBIT_API const kbit_loader_interface_record* kbit_loader_candidate_interface(const kbit_loader_candidate* candidate,
                                                                             int32_t iface) {
    if (candidate == nullptr || iface < 0 || iface >= kInterfaces) return nullptr;
    return &Candidate::from(candidate)->ifaces[iface];
}

KBIT_API const char* kbit_loader_library_path(void) { return loader_library_path().c_str(); }

KBIT_API const char* kbit_loader_interface_name(int32_t iface) { return interface_name(iface); }

KBIT_API const char* kbit_loader_interface_state_name(int32_t state) { return interface_state_name(state); }

KBIT_API const char* kbit_loader_source_name(int32_t source) { return source_name(source); }

KBIT_API const char* kbit_loader_stage_name(int32_t stage) { return stage_name(stage); }

KBIT_API const char* kbit_loader_verdict_name(int32_t verdict) { return verdict_name(verdict); }

}  // extern "C"
