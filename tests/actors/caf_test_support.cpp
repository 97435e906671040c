// The out-of-line parts of CAF 0.17's unit-test engine, which the test DSL
// (caf/test/dsl.hpp) calls but libcaf_core does not contain: engine::argc()
// and argv() (test_coordinator_fixture parses them into its config),
// logger::instance(), requirement_failed(), ... Exactly one translation unit
// of the binary may include unit_test_impl.hpp. CAF_TEST_NO_MAIN keeps its
// main() out: GoogleTest's gtest_main is the entry point.
//
// engine::args() is never called, so the fixture's config parses an empty
// command line (GoogleTest's flags are not CAF options).

#define CAF_TEST_NO_MAIN
#include <caf/test/unit_test_impl.hpp>
