/// mccl-docgen: prints the reference tables of the docs from the code, so
/// that the pages cannot drift from it.
///
///   mccl-docgen settings   the table of docs/configuration.md (all_settings())
///   mccl-docgen errors     the table of docs/c-api.md (mccl_status_t)
///
/// scripts/generated_docs.py pastes the output into the pages (--write) or
/// checks that they hold it (--check; the ctest test docs_generated_tables).

#include <mccl/config.hpp>
#include <mccl/error.hpp>
#include <mccl/mccl.h>

#include <cstdio>
#include <iostream>
#include <string>

namespace {

/// Table cells: a '|' would end the cell, a newline the row, and a '<'
/// would open an HTML tag (DIR/mccl-trace.rank<R>.json).
std::string cell(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '|')
      out += "\\|";
    else if (c == '<')
      out += "&lt;";
    else if (c == '\n')
      out += ' ';
    else
      out += c;
  }
  return out;
}

void print_settings() {
  std::cout << "| variable | default | allowed | meaning |\n|---|---|---|---|\n";
  for (const auto& s : mccl::all_settings()) {
    std::string def = s.default_value.empty() ? "(empty)" : "`" + s.default_value + "`";
    std::cout << "| `" << s.name << "` | " << def << " | " << cell(s.allowed) << " | "
              << cell(s.doc) << " |\n";
  }
}

struct status_entry {
  mccl_status_t value;
  const char* constant;
};

// Spelled through the enumerators themselves: a misspelled or removed
// constant does not compile, and print_errors() checks the numbering.
#define MCCL_STATUS(x) {x, #x}
constexpr status_entry statuses[] = {
  MCCL_STATUS(MCCL_OK),
  MCCL_STATUS(MCCL_ERR_INVALID_CONFIG),
  MCCL_STATUS(MCCL_ERR_INVALID_ARGUMENT),
  MCCL_STATUS(MCCL_ERR_UNSUPPORTED),
  MCCL_STATUS(MCCL_ERR_RENDEZVOUS_FAILED),
  MCCL_STATUS(MCCL_ERR_CONNECT_FAILED),
  MCCL_STATUS(MCCL_ERR_HANDSHAKE_REFUSED),
  MCCL_STATUS(MCCL_ERR_TIMEOUT),
  MCCL_STATUS(MCCL_ERR_PEER_LOST),
  MCCL_STATUS(MCCL_ERR_ABORTED),
  MCCL_STATUS(MCCL_ERR_PROTOCOL),
  MCCL_STATUS(MCCL_ERR_FINALIZED),
  MCCL_STATUS(MCCL_ERR_INTERNAL),
  MCCL_STATUS(MCCL_ERR_DESYNC),
  MCCL_STATUS(MCCL_ERR_REVOKED),
};
#undef MCCL_STATUS

int print_errors() {
  constexpr int count = static_cast<int>(sizeof statuses / sizeof statuses[0]);
  // mccl_status_name() knows every status the library returns: the table
  // above must cover exactly those, in order.
  for (int i = 0; i < count; ++i) {
    if (static_cast<int>(statuses[i].value) != i) {
      std::fprintf(stderr, "mccl-docgen: %s is %d, expected %d\n", statuses[i].constant,
                   static_cast<int>(statuses[i].value), i);
      return 1;
    }
  }
  if (std::string(mccl_status_name(static_cast<mccl_status_t>(count))) != "unknown") {
    std::fprintf(stderr, "mccl-docgen: mccl_status_t has a value %d this tool does not list\n",
                 count);
    return 1;
  }
  std::cout << "| value | C status | `mccl_status_name()`, C++ `mccl::errc` | meaning |\n"
               "|---|---|---|---|\n";
  for (const auto& entry : statuses) {
    auto code = static_cast<mccl::errc>(entry.value);
    std::string name = mccl_status_name(entry.value);
    std::string errc = entry.value == MCCL_OK ? "`ok` (`errc::none`)"
                                              : "`" + name + "`";
    std::cout << "| " << static_cast<int>(entry.value) << " | `" << entry.constant << "` | "
              << errc << " | " << cell(mccl::describe(code)) << " |\n";
  }
  return 0;
}

int usage(std::FILE* to) {
  std::fputs("usage: mccl-docgen settings|errors\n"
             "  settings  the markdown table of every MCCL_* setting (docs/configuration.md)\n"
             "  errors    the markdown table of the C API's status codes (docs/c-api.md)\n",
             to);
  return to == stdout ? 0 : 2;
}

} // namespace

int main(int argc, char** argv) {
  if (argc != 2)
    return usage(stderr);
  std::string what = argv[1];
  if (what == "--help" || what == "-h")
    return usage(stdout);
  if (what == "settings") {
    print_settings();
    return 0;
  }
  if (what == "errors")
    return print_errors();
  return usage(stderr);
}
