// functions.h — the exported C functions by name: which test cases call which function, and the
// check that they really do.
//
// The choice: every test case names each exported function it calls in a Catch2 tag
// "[fn:NAME]" (NAME as in abi/kbit_<iface>.def), written in its TEST_CASE line, so that
//   - `grep -rn cdequantize_blockwise_fp32_nf4 tests/conformance` finds its tests,
//   - `kbit_conformance --function NAME` is the test spec "[fn:NAME]": chosen before anything runs,
//   - `kbit_conformance --list-functions` counts the test cases carrying each tag.
// Tags could drift from the code, so the suite also records calls at run time: open_backend() puts a
// counting wrapper in front of every function of every table (and of bnb_cpu), and
// `--check-function-tags` (ctest conformance.function_tags) fails the run for every test case that
// calls a function without carrying its tag, or carries a tag of a function it never calls.
//
// Two rules make the tags precise:
//   - Plumbing is not counted: the memory calls of DeviceBuffer and the status and message lookups of
//     require_ok() and check_invalid() run inside a Plumbing scope. A test case that calls
//     kbit_memcpy or kbit_last_error_message itself (test_core.cpp) carries their tags.
//   - A TEMPLATE_TEST_CASE lists the functions of all its instances; each instance ("NAME - T")
//     keeps the tags of the functions whose element type (the T of the .def entry's variant column)
//     is its own T, and those without a T. A function that every instance calls whatever its T is
//     tagged "[fn:NAME:all-types]". settle_function_tags() applies this before the run.
#pragma once

#include <string>

#include "backend.h"

namespace kbit_test {

// Every function of the backend interfaces (abi/generated/kbit_all.def), then those of bnb_cpu.
enum FunctionId : int {
#define KBIT_INTERFACE_BEGIN(name, NAME, ns)
#define KBIT_INTERFACE_END(name, NAME, ns)
#define KBIT_FN(minor, ret, name, params, args, variant) fn_##name,
#include "kbit_all.def"
#include "kbit_bnb_cpu.def"
#undef KBIT_FN
#undef KBIT_INTERFACE_END
#undef KBIT_INTERFACE_BEGIN
    kFunctionCount
};

// Calls inside a Plumbing scope (on this thread) are the suite's own, not the test case's: they are
// not recorded.
struct Plumbing {
    Plumbing();
    ~Plumbing();
    Plumbing(Plumbing&&) = delete;  // one scope, one count: neither moved nor copied
};

// Puts the counting wrappers in front of the backend's functions (called by open_backend()).
void count_calls(Backend& b);

// Applies the template-instance rule to the [fn:] tags of every registered test case; false and a
// message when a tag names no function of the .def lists. Called by main() before anything runs.
bool settle_function_tags(std::string* error);

// Hides and tags [absent-interface] every test case that calls a function of an interface the backend
// does not export, so that a partial backend runs the cases of what it implements; returns their
// number. main() excludes them from every test spec too (Catch2 runs a hidden case that a tag names),
// and a case that still calls a missing function fails at that call.
int hide_cases_of_absent_interfaces();

// The Catch2 test spec of `--function NAME`; false and a message for a name of no exported function.
bool function_test_spec(const std::string& name, std::string* spec, std::string* error);

// `--list-functions`: prints every function the backend exports with the number of test cases that
// call it; returns 1 (naming them) when some function has none, else 0.
int list_functions();

// `--check-function-tags`: compare every test case's calls with its tags (see above). After the run,
// check_function_tags_result() prints every mismatch and returns their number.
void check_function_tags();
int check_function_tags_result();

}  // namespace kbit_test
