// functions.cpp — the exported functions by name, the counting wrappers and the [fn:] tags (the
// design is described in functions.h).
#include "functions.h"

#include <atomic>
#include <cstdio>
#include <set>
#include <stdexcept>
#include <vector>

#define CATCH_CONFIG_EXTERNAL_INTERFACES  // Catch::TestEventListenerBase
#include <catch2/catch.hpp>

namespace kbit_test {
namespace {

struct FunctionInfo {
    const char* name;
    const char* interface;  // "core", "4bit", ..., "bnb_cpu"
    int32_t interface_id;   // KBIT_INTERFACE_<NAME>, -1 for bnb_cpu
    std::string element_type;  // T of the variant column ("" when the entry has none)
};

// The value of key T in a variant column "(T=float, dt=fp32, fmt=nf4)", quotes removed; "" if absent.
std::string element_type_of(const std::string& variant) {
    std::vector<std::string> items(1);
    bool quoted = false;
    for (char ch : variant.substr(1, variant.size() - 2)) {
        if (ch == '"') quoted = !quoted;
        else if (ch == ',' && !quoted) items.emplace_back();
        else if (ch != ' ' || quoted) items.back() += ch;
    }
    for (const std::string& item : items)
        if (item.rfind("T=", 0) == 0) return item.substr(2);
    return "";
}

const std::vector<FunctionInfo>& functions() {
    static const std::vector<FunctionInfo> table = [] {
        std::vector<FunctionInfo> v;
        const char* iface = nullptr;
        int32_t iface_id = -1;
#define KBIT_INTERFACE_BEGIN(name, NAME, ns) \
    iface = #name;                           \
    iface_id = KBIT_INTERFACE_##NAME;
#define KBIT_INTERFACE_END(name, NAME, ns)
#define KBIT_FN(minor, ret, name, params, args, variant) v.push_back({#name, iface, iface_id, element_type_of(#variant)});
#include "kbit_all.def"
        iface = "bnb_cpu";
        iface_id = -1;
#include "kbit_bnb_cpu.def"
#undef KBIT_FN
#undef KBIT_INTERFACE_END
#undef KBIT_INTERFACE_BEGIN
        return v;
    }();
    return table;
}

int find_function(const std::string& name) {
    const auto& fs = functions();
    for (size_t i = 0; i < fs.size(); ++i)
        if (name == fs[i].name) return static_cast<int>(i);
    return -1;
}

bool exported(const FunctionInfo& f) {
    const Backend& b = backend();
    if (f.interface_id < 0) return b.has_bnb_cpu();
    return f.interface_id == KBIT_INTERFACE_CORE || b.has(f.interface_id);
}

// ---- Recording calls --------------------------------------------------------------------------------

thread_local int t_plumbing = 0;
std::atomic<bool> g_called[kFunctionCount];

void note_call(FunctionId id) {
    if (t_plumbing == 0) g_called[id].store(true, std::memory_order_relaxed);
}

// The functions behind the wrappers (names are unique across the interfaces).
struct RealFunctions {
#define KBIT_INTERFACE_BEGIN(name, NAME, ns)
#define KBIT_INTERFACE_END(name, NAME, ns)
#define KBIT_FN(minor, ret, name, params, args, variant) ret(*name) params = nullptr;
#include "kbit_all.def"
#include "kbit_bnb_cpu.def"
#undef KBIT_FN
#undef KBIT_INTERFACE_END
#undef KBIT_INTERFACE_BEGIN
} g_real;

#define KBIT_INTERFACE_BEGIN(name, NAME, ns)
#define KBIT_INTERFACE_END(name, NAME, ns)
// A function of an interface the backend does not export fails the test case that calls it (instead
// of a call through NULL); such cases are hidden unless asked for (hide_cases_of_absent_interfaces()).
[[noreturn]] void fail_absent(const char* name) {
    FAIL(name << ": the backend does not export this function's interface");
    throw std::logic_error("unreachable");  // FAIL throws; this keeps the compiler's flow analysis simple
}

#define KBIT_FN(minor, ret, name, params, args, variant) \
    ret counted_##name params {                          \
        note_call(fn_##name);                            \
        if (g_real.name == nullptr) fail_absent(#name);  \
        return g_real.name args;                         \
    }
#include "kbit_all.def"
#include "kbit_bnb_cpu.def"
#undef KBIT_FN
#undef KBIT_INTERFACE_END
#undef KBIT_INTERFACE_BEGIN

// Moves one struct's functions behind their wrappers.
#define KBIT_WRAP(name)     \
    g_real.name = fns.name; \
    fns.name = &counted_##name;
#define KBIT_INTERFACE_BEGIN(name, NAME, ns) void wrap(Fns_##name& fns) {
#define KBIT_INTERFACE_END(name, NAME, ns) }
#define KBIT_FN(minor, ret, name, params, args, variant) KBIT_WRAP(name)
#include "kbit_all.def"
KBIT_INTERFACE_BEGIN(bnb_cpu, BNB_CPU, bnb_cpu)
#include "kbit_bnb_cpu.def"
KBIT_INTERFACE_END(bnb_cpu, BNB_CPU, bnb_cpu)
#undef KBIT_FN
#undef KBIT_INTERFACE_END
#undef KBIT_INTERFACE_BEGIN
#undef KBIT_WRAP

// ---- Tags ---------------------------------------------------------------------------------------------

constexpr char kTagPrefix[] = "fn:";
const std::string kAllTypes = ":all-types";  // [fn:NAME:all-types]: every instance of a template calls NAME

bool is_function_tag(const std::string& tag) { return tag.rfind(kTagPrefix, 0) == 0; }

// The functions a test case's [fn:] tags name (after settle_function_tags(), its own).
std::set<int> tagged_functions(const Catch::TestCaseInfo& info) {
    std::set<int> ids;
    for (const std::string& tag : info.tags)
        if (is_function_tag(tag)) ids.insert(find_function(tag.substr(sizeof kTagPrefix - 1)));
    return ids;
}

// The element type of a TEMPLATE_TEST_CASE instance: its name ends with " - T" for a T of the lists.
std::string instance_type(const std::string& test_name) {
    for (const FunctionInfo& f : functions()) {
        const std::string suffix = " - " + f.element_type;
        if (!f.element_type.empty() && test_name.size() > suffix.size() &&
            test_name.compare(test_name.size() - suffix.size(), suffix.size(), suffix) == 0)
            return f.element_type;
    }
    return "";
}

// ---- Checking tags against calls ------------------------------------------------------------------------

bool g_checking = false;
std::vector<std::string> g_mismatches;

// "NAME" (tests/conformance/FILE:LINE)
std::string where(const Catch::TestCaseInfo& info) {
    std::string file = info.lineInfo.file;
    const auto at = file.rfind("tests/conformance/");
    if (at != std::string::npos) file.erase(0, at);
    return "\"" + info.name + "\" (" + file + ":" + std::to_string(info.lineInfo.line) + ")";
}

struct FunctionTagListener : Catch::TestEventListenerBase {
    using TestEventListenerBase::TestEventListenerBase;

    void testCaseStarting(const Catch::TestCaseInfo& info) override {
        for (auto& called : g_called) called.store(false, std::memory_order_relaxed);
        TestEventListenerBase::testCaseStarting(info);
    }

    void testCaseEnded(const Catch::TestCaseStats& stats) override {
        if (g_checking) {
            const Catch::TestCaseInfo& info = stats.testInfo;
            const std::set<int> tagged = tagged_functions(info);
            for (int id = 0; id < kFunctionCount; ++id) {
                const bool called = g_called[id].load(std::memory_order_relaxed);
                const std::string name = functions()[static_cast<size_t>(id)].name;
                if (called && !tagged.count(id))
                    g_mismatches.push_back(where(info) + " calls " + name + " but has no tag [fn:" + name + "]");
                else if (!called && tagged.count(id))
                    g_mismatches.push_back(where(info) + " has the tag [fn:" + name + "] but never calls " + name);
            }
        }
        TestEventListenerBase::testCaseEnded(stats);
    }
};

}  // namespace

CATCH_REGISTER_LISTENER(FunctionTagListener)

Plumbing::Plumbing() { ++t_plumbing; }
Plumbing::~Plumbing() { --t_plumbing; }

void count_calls(Backend& b) {
#define KBIT_INTERFACE(name, NAME, ns) wrap(b.fns_##name);
#include "interfaces.def"
#undef KBIT_INTERFACE
    wrap(b.fns_bnb_cpu);
}

bool settle_function_tags(std::string* error) {
    // The registry hands out its test cases read-only; their tags are Catch's own to set (setTags
    // keeps its lower-case copies in step), and nothing has been sorted or filtered yet.
    for (const Catch::TestCase& registered : Catch::getRegistryHub().getTestCaseRegistry().getAllTests()) {
        auto& info = const_cast<Catch::TestCaseInfo&>(static_cast<const Catch::TestCaseInfo&>(registered));
        const std::string type = instance_type(info.name);
        std::vector<std::string> tags;
        for (std::string tag : info.tags) {
            if (is_function_tag(tag)) {
                const bool all_types = tag.size() > kAllTypes.size() &&
                                       tag.compare(tag.size() - kAllTypes.size(), kAllTypes.size(), kAllTypes) == 0;
                if (all_types && type.empty()) {
                    *error = where(info) + ": tag [" + tag + "] outside a TEMPLATE_TEST_CASE";
                    return false;
                }
                if (all_types) tag.resize(tag.size() - kAllTypes.size());
                const int id = find_function(tag.substr(sizeof kTagPrefix - 1));
                if (id < 0) {
                    *error = where(info) + ": tag [" + tag + "] names no function of abi/*.def";
                    return false;
                }
                const std::string& own = functions()[static_cast<size_t>(id)].element_type;
                if (!all_types && !type.empty() && !own.empty() && own != type) continue;  // another instance's
            }
            tags.push_back(tag);
        }
        setTags(info, tags);
    }
    return true;
}

int hide_cases_of_absent_interfaces() {
    int hidden = 0;
    for (const Catch::TestCase& registered : Catch::getRegistryHub().getTestCaseRegistry().getAllTests()) {
        auto& info = const_cast<Catch::TestCaseInfo&>(static_cast<const Catch::TestCaseInfo&>(registered));
        if (info.isHidden()) continue;
        for (int id : tagged_functions(info)) {
            if (exported(functions()[static_cast<size_t>(id)])) continue;
            std::vector<std::string> tags = info.tags;
            tags.push_back(".");  // hidden, and excluded from every test spec by main()
            tags.push_back("absent-interface");
            setTags(info, tags);
            ++hidden;
            break;
        }
    }
    return hidden;
}

bool function_test_spec(const std::string& name, std::string* spec, std::string* error) {
    const int id = find_function(name);
    if (id < 0 || !exported(functions()[static_cast<size_t>(id)])) {
        *error = "--function " + name + ": " +
                 (id < 0 ? "no such function in abi/*.def" : "the backend does not export its interface") +
                 " (--list-functions lists them)";
        return false;
    }
    *spec = std::string("[") + kTagPrefix + name + "]";
    return true;
}

int list_functions() {
    std::vector<int> cases(functions().size(), 0);
    for (const Catch::TestCase& tc : Catch::getRegistryHub().getTestCaseRegistry().getAllTests())
        if (!tc.isHidden())
            for (int id : tagged_functions(tc.getTestCaseInfo())) ++cases[static_cast<size_t>(id)];
    std::vector<std::string> untested;
    size_t listed = 0;
    std::printf("%-40s %-8s %s\n", "function", "iface", "test cases");
    for (size_t id = 0; id < functions().size(); ++id) {
        const FunctionInfo& f = functions()[id];
        if (!exported(f)) continue;
        ++listed;
        std::printf("%-40s %-8s %d\n", f.name, f.interface, cases[id]);
        if (cases[id] == 0) untested.push_back(f.name);
    }
    std::printf("%zu functions, %zu without a test case\n", listed, untested.size());
    for (const std::string& name : untested) std::printf("no test case calls %s\n", name.c_str());
    return untested.empty() ? 0 : 1;
}

void check_function_tags() { g_checking = true; }

int check_function_tags_result() {
    for (const std::string& m : g_mismatches) std::printf("function tags: %s\n", m.c_str());
    if (g_checking && g_mismatches.empty()) std::printf("function tags: every test case that ran calls exactly the functions of its tags\n");
    return static_cast<int>(g_mismatches.size());
}

}  // namespace kbit_test

// The checker's own test (ctest conformance.function_tags_selftest runs it with --check-function-tags
// and expects both mismatches): hidden, so it never runs or counts otherwise.
TEST_CASE("function tags self-test: calls a function without its tag, carries a tag of one it never calls",
          "[.][function_tags_selftest][fn:kbit_backend_name]") {
    CHECK(kbit_test::backend().fns_core.kbit_backend_probe() > 0);
}
