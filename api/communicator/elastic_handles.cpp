// The printable handles of grow and reconfigure (api/communicator/elastic_handles.hpp).

#include "api/communicator/elastic_handles.hpp"

#include "api/communicator/communicator_impl.hpp"
#include "api/communicator/standby_store.hpp"

#include <cerrno>
#include <cstdlib>
#include <map>
#include <random>
#include <sstream>
#include <vector>

namespace mccl::detail {

namespace {

/// The key=value fields of a handle whose first word is `kind`; throws
/// invalid_argument naming `who` and the expected form otherwise.
std::map<std::string, std::string> handle_fields(const std::string& text, const std::string& kind,
                                                 const std::vector<std::string>& keys, const std::string& who,
                                                 const std::string& form) {
  auto bad = [&](const std::string& why) {
    return error(errc::invalid_argument, who + ": handle " + mccl::quoted(text) + " " + why + " (expected " + form + ")");
  };
  std::istringstream in(text);
  std::string word;
  if (!(in >> word) || word != kind)
    throw bad("does not start with \"" + kind + "\"");
  std::map<std::string, std::string> fields;
  while (in >> word) {
    auto eq = word.find('=');
    if (eq == std::string::npos || eq == 0)
      throw bad("has " + mccl::quoted(word) + ", not key=value");
    fields[word.substr(0, eq)] = word.substr(eq + 1);
  }
  for (const auto& k : keys)
    if (fields[k].empty())
      throw bad("has no " + k + "=");
  return fields;
}

/// A whole number in [lo, hi] from handle field `name`.
int64_t number_field(const std::map<std::string, std::string>& f, const std::string& name, int base, int64_t lo,
                     int64_t hi, const std::string& who) {
  const auto& text = f.at(name);
  char* end = nullptr;
  errno = 0;
  long long v = std::strtoll(text.c_str(), &end, base);
  if (*end != '\0' || errno != 0 || v < lo || v > hi)
    throw error(errc::invalid_argument, who + ": handle field " + name + "=" + text + " is not a number in "
                                          + std::to_string(lo) + ".." + std::to_string(hi));
  return v;
}

const char* grow_form = "\"mccl-grow/1 store=<ip:port> comm=<id> epoch=<hex> old=<n> new=<m>\", "
                        "as communicator::grow_handle() makes it";

const char* member_form = "\"mccl-member/1 store=<ip:port> id=<hex>\", as get_reconfigure_handle() makes it";

} // namespace

std::string random_hex(int digits) {
  std::random_device rd;
  std::string out;
  static const char* hex = "0123456789abcdef";
  for (int i = 0; i < digits; ++i)
    out.push_back(hex[rd() & 15]);
  return out;
}

uint32_t grow_ticket::grown_id() const {
  return derived_comm_id(comm, {0x67726f77 /* "grow" */, epoch, static_cast<uint64_t>(new_size)});
}

std::string format_grow(const grow_ticket& t) {
  std::ostringstream out;
  out << "mccl-grow/1 store=" << t.store << " comm=" << t.comm << " epoch=" << std::hex << t.epoch << std::dec
      << " old=" << t.old_size << " new=" << t.new_size;
  return out.str();
}

grow_ticket parse_grow(const std::string& text, const std::string& who) {
  auto f = handle_fields(text, "mccl-grow/1", {"store", "comm", "epoch", "old", "new"}, who, grow_form);
  grow_ticket t;
  t.store = f["store"];
  check_store_address(t.store, who);
  t.comm = static_cast<uint32_t>(number_field(f, "comm", 10, 0, UINT32_MAX, who));
  t.epoch = std::strtoull(f["epoch"].c_str(), nullptr, 16);
  t.old_size = static_cast<int>(number_field(f, "old", 10, 1, 1 << 20, who));
  t.new_size = static_cast<int>(number_field(f, "new", 10, 2, 1 << 20, who));
  if (t.new_size <= t.old_size)
    throw error(errc::invalid_argument, who + ": handle " + mccl::quoted(text) + " grows " + std::to_string(t.old_size)
                                          + " ranks to " + std::to_string(t.new_size) + ", not more");
  return t;
}

member_ticket parse_member(const std::string& text, const std::string& who) {
  auto f = handle_fields(text, "mccl-member/1", {"store", "id"}, who, member_form);
  check_store_address(f["store"], who);
  return {f["store"], f["id"]};
}

std::string member_handle(const std::string& store) {
  return "mccl-member/1 store=" + store + " id=" + random_hex(16);
}

} // namespace mccl::detail
