// backend.h — one opened backend (the public opaque kbit_backend) and its validation.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "candidate.h"
#include "loader_fns.h"

struct kbit_backend {
    kbit::loader::Candidate record;
    void* handle = nullptr;  // dlopen handle; NULL once rejected (and for the "no backend" default)
    int slot = -1;           // stub identity slot (stubs.h), -1 when the backend needs no stub
    int guard = -1;          // string guard identity (stubs.h), -1 before finalize()
    bool loader_owned = false;  // the trampolines' default: kbit_loader_close() refuses it
    kbit::loader::Tables tables{};
    const char* (*vendor_last_error)() = nullptr;  // the backend's own kbit_last_error_message

    kbit_backend(const std::string& name, const std::string& path, int32_t source)
        : record(name, path, source) {}
    kbit_backend(const kbit_backend&) = delete;
    kbit_backend& operator=(const kbit_backend&) = delete;
    ~kbit_backend();

    bool accepted(int iface) const { return record.ifaces[iface].state == KBIT_INTERFACE_ACCEPTED; }
    bool usable() const { return record.pub.verdict == KBIT_VERDICT_USABLE; }
    void close_handle();
};

namespace kbit::loader {

// Runs every validation stage on one file, up to and including kbit_backend_probe(). The result's
// record says how far it got; a usable backend keeps its handle open, a rejected one is closed.
// Missing functions are left NULL in the tables: finalize() replaces them with stubs. on_stage, if
// set, sees the record each time a stage is reached (before the next one runs).
std::unique_ptr<kbit_backend> validate(const std::string& path, const std::string& name, int32_t source,
                                       const std::function<void(const kbit::loader::Candidate&)>& on_stage = {});

// Makes a usable backend ready for callers: every NULL table member becomes a stub naming this
// backend, and its string functions never return NULL. False (with *error) when no stub slot or
// guard identity is free.
bool finalize(kbit_backend& backend, std::string* error);

// The trampolines' stand-in when no backend can be used: every function is a stub that reports
// "no kbit backend is available: <reason>".
std::unique_ptr<kbit_backend> make_null_backend(const std::string& reason);

// What a trampoline called from a backend's probe, constructor or destructor (run by the loader in this thread)
// gets while the default backend is not chosen: stubs returning KBIT_STATUS_NOT_SUPPORTED.
std::unique_ptr<kbit_backend> make_reentry_backend();

}  // namespace kbit::loader
