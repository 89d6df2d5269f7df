#include "backend.h"

#include <dlfcn.h>
#include <link.h>

#include <cstring>

#include "elf_check.h"
#include "loader_state.h"
#include "stubs.h"

kbit_backend::~kbit_backend() {
    kbit::loader::release_slot(slot);
    kbit::loader::release_guard(guard);
    close_handle();
}

void kbit_backend::close_handle() {
    if (handle != nullptr) {
        const kbit::loader::VendorCode vendor;  // its destructors (for example while the default is chosen)
        dlclose(handle);
    }
    handle = nullptr;
}

namespace kbit::loader {
namespace {

// Symbols count only when the backend file itself defines them: dlsym() on a handle also searches
// the file's dependencies (for example a backend that links libkbit.so by mistake).
class OwnSymbols {
public:
    explicit OwnSymbols(void* handle) : handle_(handle) {
        if (dlinfo(handle, RTLD_DI_LINKMAP, &map_) != 0) map_ = nullptr;
    }
    // The symbol's address, or NULL; *elsewhere names the object that defines it instead, if any.
    void* get(const char* name, std::string* elsewhere = nullptr) const {
        void* sym = dlsym(handle_, name);
        if (sym == nullptr) return nullptr;
        Dl_info info{};
        link_map* owner = nullptr;
        if (dladdr1(sym, &info, reinterpret_cast<void**>(&owner), RTLD_DL_LINKMAP) != 0 && owner == map_)
            return sym;
        if (elsewhere != nullptr && info.dli_fname != nullptr)
            *elsewhere = std::string(" (defined only by ") + info.dli_fname + ")";
        return nullptr;
    }

private:
    void* handle_;
    link_map* map_ = nullptr;
};

// One function of an accepted interface: its address in the backend, or NULL (counted as newer
// than the backend's minor, or as missing and listed in *missing).
void* resolve_one(const OwnSymbols& own, const char* name, uint32_t since, uint32_t minor,
                  kbit_loader_interface_record& rec, std::string* missing) {
    if (since > minor) {
        ++rec.newer_count;
        return nullptr;
    }
    std::string elsewhere;
    void* sym = own.get(name, &elsewhere);
    if (sym == nullptr) {
        ++rec.missing_count;
        *missing += (missing->empty() ? "" : ", ") + std::string(name) + elsewhere;
    }
    return sym;
}

// Fills the table of interface T from the backend's own symbols, as far as its minor reaches.
template <class T>
void resolve(kbit_backend& b, const OwnSymbols& own) {
    constexpr int id = T::id;
    kbit_loader_interface_record& rec = b.record.ifaces[id];
    auto& table = table_of<id>(b.tables);
    table.size = sizeof table;
    table.version = rec.state == KBIT_INTERFACE_ACCEPTED ? rec.version : 0;
    if (rec.state != KBIT_INTERFACE_ACCEPTED) return;
    const uint32_t minor = KBIT_VERSION_MINOR_OF(rec.version);
    std::string missing;
    for_each(typename T::Functions{}, [&](auto* d) {
        using D = std::remove_pointer_t<decltype(d)>;
        table.*D::member = reinterpret_cast<typename D::Ptr>(resolve_one(own, D::id, D::since, minor, rec, &missing));
    });
    if (rec.missing_count != 0)
        b.record.set_interface_message(
            id, std::to_string(rec.missing_count) + " function" + (rec.missing_count == 1 ? "" : "s") + " of " +
                    interface_info(id).name + " " + version_text(rec.version).text + " missing (now stubs): " + missing);
}

// Reads the version symbol of every interface; false when the core interface is unusable.
bool check_versions(kbit_backend& b, const OwnSymbols& own) {
    Candidate& c = b.record;
    for (int i = 0; i < kInterfaces; ++i) {
        const InterfaceInfo& info = interface_info(i);
        kbit_loader_interface_record& rec = c.ifaces[i];
        void* sym = own.get(info.version_symbol);
        if (sym == nullptr) {
            if (i == KBIT_INTERFACE_CORE) {
                c.reject(KBIT_VERDICT_REJECTED, std::string("does not export ") + info.version_symbol +
                                                    ": not a kbit backend");
                return false;
            }
            continue;
        }
        rec.version = reinterpret_cast<uint32_t (*)(void)>(sym)();
        if (KBIT_VERSION_MAJOR_OF(rec.version) == info.major) {
            rec.state = KBIT_INTERFACE_ACCEPTED;
            continue;
        }
        rec.state = KBIT_INTERFACE_REJECTED;
        const std::string why = std::string(info.name) + " interface version " + version_text(rec.version).text +
                                " rejected: this loader expects major " + std::to_string(info.major) +
                                " (it implements " + info.name + " " +
                                version_text(KBIT_MAKE_VERSION(info.major, info.minor)).text + ")";
        c.set_interface_message(i, c.path() + ": " + why);
        if (i == KBIT_INTERFACE_CORE) {
            c.reject(KBIT_VERDICT_REJECTED, why);
            return false;
        }
    }
    return true;
}

}  // namespace

std::unique_ptr<kbit_backend> validate(const std::string& path, const std::string& name, int32_t source,
                                       const std::function<void(const Candidate&)>& on_stage) {
    const VendorCode vendor;  // constructors, version functions, probe
    auto b = std::make_unique<kbit_backend>(name, path, source);
    Candidate& c = b->record;
    auto reach = [&](int32_t stage) {
        c.pub.stage = stage;
        if (on_stage) on_stage(c);
    };
    c.set_trust(check_file_trust(path));
    if (std::string why = check_elf(path); !why.empty()) {
        c.reject(KBIT_VERDICT_REJECTED, why);
        return b;
    }
    reach(KBIT_STAGE_FILE_CHECKED);

    b->handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (b->handle == nullptr) {
        const char* error = dlerror();
        c.reject(KBIT_VERDICT_REJECTED, std::string("dlopen failed: ") + (error ? error : "unknown error"));
        return b;
    }
    reach(KBIT_STAGE_OPENED);
    const OwnSymbols own(b->handle);
    if (own.get("kbit_loader_interface_version") != nullptr) {
        c.reject(KBIT_VERDICT_REJECTED, "is a kbit loader (it exports kbit_loader_interface_version), not a backend");
        b->close_handle();
        return b;
    }
    if (!check_versions(*b, own)) {
        b->close_handle();
        return b;
    }
    reach(KBIT_STAGE_VERSIONS_CHECKED);

    for_each_interface([&](auto traits) { resolve<decltype(traits)>(*b, own); });
    if (b->tables.core.kbit_backend_probe == nullptr) {
        c.reject(KBIT_VERDICT_REJECTED, "does not define kbit_backend_probe(), which every backend must export");
        b->close_handle();
        return b;
    }
    b->vendor_last_error = b->tables.core.kbit_last_error_message;
    reach(KBIT_STAGE_RESOLVED);

    c.pub.score = b->tables.core.kbit_backend_probe();
    reach(KBIT_STAGE_PROBED);
    if (c.pub.score <= 0) {
        // The backend's own sentence says why (no driver, no device, a device setting that matches
        // nothing), where it offers one.
        std::string why;
        if (const char* info = b->tables.core.kbit_backend_info ? b->tables.core.kbit_backend_info() : nullptr)
            why = std::string(info, strnlen(info, 400));
        c.reject(KBIT_VERDICT_REJECTED, "kbit_backend_probe() returned " + std::to_string(c.pub.score) +
                                            ": the backend cannot run on this machine" +
                                            (why.empty() ? "" : " (it says: " + why + ")"));
        b->close_handle();
        return b;
    }
    c.pub.verdict = KBIT_VERDICT_USABLE;
    return b;
}

bool finalize(kbit_backend& backend, std::string* error) {
    return install_stubs(backend, error) && install_guards(backend, error);
}

namespace {

// A backend without a file: every function is a stub of `slot`.
std::unique_ptr<kbit_backend> make_stand_in(const std::string& name, const std::string& reason, int slot) {
    auto b = std::make_unique<kbit_backend>(name, "", KBIT_SOURCE_LOADER_DIRECTORY);
    b->record.reject(KBIT_VERDICT_REJECTED, reason);
    b->slot = slot;
    for_each_interface([&](auto traits) {
        auto& table = table_of<decltype(traits)::id>(b->tables);
        table.size = sizeof table;
        table.version = 0;
    });
    std::string unused;
    install_stubs(*b, &unused);
    b->loader_owned = true;
    return b;
}

}  // namespace

std::unique_ptr<kbit_backend> make_null_backend(const std::string& reason) {
    return make_stand_in("none", reason, null_slot(reason));
}

std::unique_ptr<kbit_backend> make_reentry_backend() {
    return make_stand_in("(choosing)", "libkbit.so has not chosen its default backend yet", reentry_slot());
}

}  // namespace kbit::loader
