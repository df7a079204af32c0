// What every csdkit fuzz harness shares: how a finding that is not a sanitizer report (an
// exception of an undocumented type, a broken invariant) stops the run.
//
// A harness catches the exceptions its function under test documents and lets nothing else
// pass: everything else ends in Finding() or Violation(), which print what happened and abort(),
// so libFuzzer records the input as a crash ("deadly signal") and writes the reproducer.
// With CSDKIT_FUZZ_VERBOSE=1 in the environment a harness also says what became of each input
// (accepted, or refused and why): for replaying a reproducer or checking a seed by hand.
#ifndef CSDKIT_TESTS_FUZZ_FUZZ_UTIL_H_
#define CSDKIT_TESTS_FUZZ_FUZZ_UTIL_H_

#include <cxxabi.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>
#include <string>
#include <typeinfo>

namespace csdkit::fuzz {

/// The dynamic type of `e`, demangled ("nlohmann::json_abi_v3_11_2::detail::type_error").
inline std::string TypeName(const std::exception& e) {
  int status = 0;
  const char* mangled = typeid(e).name();
  std::unique_ptr<char, void (*)(void*)> d(abi::__cxa_demangle(mangled, nullptr, nullptr, &status),
                                           std::free);
  return status == 0 && d ? std::string(d.get()) : std::string(mangled);
}

/// Whether CSDKIT_FUZZ_VERBOSE is set (and not "0").
inline bool Verbose() {
  static const bool on = [] {
    const char* v = std::getenv("CSDKIT_FUZZ_VERBOSE");
    return v != nullptr && *v != '\0' && std::string(v) != "0";
  }();
  return on;
}

/// An expected refusal (a documented exception): printed only when verbose.
inline void Refused(const char* target, const std::exception& e) {
  if (Verbose()) {
    std::fprintf(stderr, "%s: refused (%s): %s\n", target, TypeName(e).c_str(), e.what());
  }
}

/// An accepted input: printed only when verbose.
inline void Accepted(const char* target, const std::string& what) {
  if (Verbose()) std::fprintf(stderr, "%s: accepted: %s\n", target, what.c_str());
}

/// An exception the function under test does not document: print its type and message, abort.
[[noreturn]] inline void Finding(const char* target, const std::exception& e) {
  std::fprintf(stderr, "\n%s: FINDING: undocumented exception %s: %s\n", target,
               TypeName(e).c_str(), e.what());
  std::abort();
}

/// An exception that is not even a std::exception.
[[noreturn]] inline void FindingUnknown(const char* target) {
  std::fprintf(stderr, "\n%s: FINDING: an exception not derived from std::exception\n", target);
  std::abort();
}

/// A broken invariant of an accepted input: print what was expected and found, abort.
[[noreturn]] inline void Violation(const char* target, const std::string& what) {
  std::fprintf(stderr, "\n%s: FINDING: %s\n", target, what.c_str());
  std::abort();
}

}  // namespace csdkit::fuzz

#endif  // CSDKIT_TESTS_FUZZ_FUZZ_UTIL_H_
