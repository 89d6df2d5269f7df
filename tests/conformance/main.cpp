// The kbit conformance suite: checks one backend (--backend cpu|cuda|NAME|PATH) against the scalar
// reference, golden vectors recorded from bitsandbytes, and the error rules of the ABI.
#define CATCH_CONFIG_RUNNER
#include <cstdio>

#include <catch2/catch.hpp>

#include "backend.h"

int main(int argc, char** argv) {
    Catch::Session session;
    std::string spec = "cpu";
    using Catch::clara::Opt;
    session.cli(session.cli() |
                Opt(spec, "name|path")["--backend"]("backend to test: cpu, cuda, a vendor name, or a .so path"));
    if (int rc = session.applyCommandLine(argc, argv)) return rc;
    std::string error;
    if (!kbit_test::open_backend(spec, &error)) {
        std::fprintf(stderr, "kbit conformance: cannot use backend '%s': %s\n", spec.c_str(), error.c_str());
        return 2;
    }
    const auto& b = kbit_test::backend();
    auto v = [](uint32_t x) {
        return x ? std::to_string(KBIT_VERSION_MAJOR_OF(x)) + "." + std::to_string(KBIT_VERSION_MINOR_OF(x))
                 : std::string("absent");
    };
    std::printf("backend %s (%s): %s\ninterfaces: core %s, 4bit %s, 8bit %s, optim8 %s\n",
                b.core.kbit_backend_name(), b.path.c_str(), b.core.kbit_backend_info(), v(b.core_version).c_str(),
                v(b.v4bit).c_str(), v(b.v8bit).c_str(), v(b.voptim8).c_str());
    return session.run();
}
