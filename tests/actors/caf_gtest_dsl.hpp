#pragma once
/// CAF 0.17's deterministic test DSL (caf/test/dsl.hpp: test_coordinator_fixture,
/// expect / allow / inject) inside a GoogleTest binary.
///
/// Include this header LAST, after every project and CAF header: dsl.hpp
/// defines function-like macros named expect, allow, inject and disallow,
/// and puts `_`, `wildcard` and a few helper templates in the global
/// namespace.
///
/// Why a bridge is needed (CAF 0.17.6 as Debian ships it):
/// - dsl.hpp reports through CAF's own unit-test macros (CAF_CHECK_EQUAL,
///   CAF_REQUIRE, CAF_FAIL, ...), which write to
///   caf::test::engine::current_test(). That is only set while CAF's own
///   test runner runs a test; under GoogleTest it is null and the first check
///   the DSL makes (every expect() makes several) dereferences it: SIGSEGV.
///   Below those macros are redefined to report to GoogleTest instead. They
///   must be redefined after caf/test/unit_test.hpp and before dsl.hpp,
///   because dsl.hpp's templates expand them where they are defined.
/// - dsl.hpp calls an undefined FAIL(msg) in test_coordinator_fixture's
///   request<T>() helper; gtest.h defines FAIL() with no parameters, so
///   including gtest.h first is a preprocessor error ("macro FAIL passed 1
///   arguments, but takes just 0"). FAIL is remapped while dsl.hpp is read.
/// - The engine / logger functions the DSL calls (engine::argc(),
///   engine::argv(), logger::instance(), ...) are not in libcaf_core: they
///   live in caf/test/unit_test_impl.hpp, which exactly one translation unit
///   must include with CAF_TEST_NO_MAIN defined (caf_test_support.cpp), so
///   that GoogleTest's main is the one that runs.
///
/// CAF_CHECK* become non-fatal GoogleTest expectations. A failed
/// CAF_REQUIRE* / CAF_FAIL (expect() on an actor with no message, wrong
/// sender, wrong type or content, ...) records a GoogleTest failure,
/// which GoogleTest prints at once with file and line, and then aborts the
/// process, exactly as CAF's own runner does (caf::test::detail::
/// requirement_failed calls abort()). Throwing instead is not safe: most of
/// these checks run inside an expect_clause, either in its destructor (a
/// throw there calls std::terminate) or in to(), where unwinding runs the
/// clause's destructor, which then inspects the mailbox of an actor it never
/// found and crashes with SIGSEGV. ctest runs every test in its own process,
/// so one failed requirement costs only its own test there.

#include <gtest/gtest.h>

#include <caf/deep_to_string.hpp>
#include <caf/test/unit_test.hpp>

#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>

namespace caf_gtest {

/// Ends the process after a failed requirement (see above); the failure has
/// been reported to GoogleTest already.
[[noreturn]] inline void stop() {
  std::fflush(stdout);
  std::fflush(stderr);
  std::abort();
}

/// Renders a value the way CAF's test macros do.
template <class T>
std::string render(const T& x) {
  return caf::deep_to_string(x);
}

} // namespace caf_gtest

#undef CAF_MESSAGE
#undef CAF_ERROR
#undef CAF_FAIL
#undef CAF_CHECK
#undef CAF_CHECK_FAIL
#undef CAF_CHECK_FUNC
#undef CAF_REQUIRE
#undef CAF_REQUIRE_FUNC

/// Trace text of the DSL (expect / allow / inject): dropped.
#define CAF_MESSAGE(msg)                                                       \
  do {                                                                         \
  } while (false)

#define CAF_ERROR(msg)                                                         \
  do {                                                                         \
    std::ostringstream caf_gtest_os_;                                          \
    caf_gtest_os_ << msg;                                                      \
    ADD_FAILURE_AT(__FILE__, __LINE__) << caf_gtest_os_.str();                 \
  } while (false)

#define CAF_FAIL(msg)                                                          \
  do {                                                                         \
    std::ostringstream caf_gtest_os_;                                          \
    caf_gtest_os_ << msg;                                                      \
    ADD_FAILURE_AT(__FILE__, __LINE__) << caf_gtest_os_.str();                 \
    ::caf_gtest::stop();                                                       \
  } while (false)

#define CAF_CHECK(...)                                                         \
  do {                                                                         \
    if (!static_cast<bool>(__VA_ARGS__))                                       \
      ADD_FAILURE_AT(__FILE__, __LINE__) << "check failed: " #__VA_ARGS__;     \
  } while (false)

#define CAF_CHECK_FAIL(...)                                                    \
  do {                                                                         \
    if (static_cast<bool>(__VA_ARGS__))                                        \
      ADD_FAILURE_AT(__FILE__, __LINE__)                                       \
        << "check expected to fail: " #__VA_ARGS__;                            \
  } while (false)

/// CAF's comparators (::caf::test::equal_to, ...) compare what CAF compares,
/// including the unboxing of variants; only the reporting changes.
#define CAF_CHECK_FUNC(func, x_expr, y_expr)                                   \
  do {                                                                         \
    func comparator;                                                           \
    auto&& x_val___ = x_expr;                                                  \
    auto&& y_val___ = y_expr;                                                  \
    if (!comparator(x_val___, y_val___))                                       \
      ADD_FAILURE_AT(__FILE__, __LINE__)                                       \
        << "check failed: " << CAF_FUNC_EXPR(func, x_expr, y_expr) << ": "     \
        << ::caf_gtest::render(x_val___) << " vs "                             \
        << ::caf_gtest::render(y_val___);                                      \
  } while (false)

#define CAF_REQUIRE(...)                                                       \
  do {                                                                         \
    if (!static_cast<bool>(__VA_ARGS__))                                       \
      CAF_FAIL("requirement failed: " #__VA_ARGS__);                           \
  } while (false)

#define CAF_REQUIRE_FUNC(func, x_expr, y_expr)                                 \
  do {                                                                         \
    func comparator;                                                           \
    auto&& x_val___ = x_expr;                                                  \
    auto&& y_val___ = y_expr;                                                  \
    if (!comparator(x_val___, y_val___))                                       \
      CAF_FAIL("requirement failed: "                                          \
               << CAF_FUNC_EXPR(func, x_expr, y_expr) << ": "                  \
               << ::caf_gtest::render(x_val___) << " vs "                      \
               << ::caf_gtest::render(y_val___));                              \
  } while (false)

#pragma push_macro("FAIL")
#undef FAIL
#define FAIL(msg) CAF_FAIL(msg)
#include <caf/test/dsl.hpp>
#pragma pop_macro("FAIL")

// The DSL's checks fail at a line of dsl.hpp; a scoped trace adds the test's
// own line (and the clause) to every failure an expect / inject / allow
// reports. Otherwise as in dsl.hpp.
#undef expect
#undef inject
#undef allow

#define expect(types, fields)                                                  \
  do {                                                                         \
    SCOPED_TRACE("expect" #types "." #fields);                                 \
    expect_clause<CAF_EXPAND(CAF_DSL_LIST types)>{sched}.fields;               \
  } while (false)

#define inject(types, fields)                                                  \
  do {                                                                         \
    SCOPED_TRACE("inject" #types "." #fields);                                 \
    inject_clause<CAF_EXPAND(CAF_DSL_LIST types)>{sched}.fields;               \
  } while (false)

#define allow(types, fields)                                                   \
  ([&] {                                                                       \
    SCOPED_TRACE("allow" #types "." #fields);                                  \
    allow_clause<CAF_EXPAND(CAF_DSL_LIST types)> x{sched};                     \
    x.fields;                                                                  \
    return x.eval();                                                           \
  })()
