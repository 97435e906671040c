#include <mccl/faults.hpp>

#include <mccl/collective.hpp>
#include <mccl/error.hpp>

#include <nlohmann/json.hpp>

#include <fstream>
#include <set>
#include <sstream>

namespace mccl::transport {

const char* to_string(fault_kind kind) noexcept {
  switch (kind) {
    case fault_kind::drop: return "drop";
    case fault_kind::delay: return "delay";
    case fault_kind::duplicate: return "duplicate";
    case fault_kind::reorder: return "reorder";
    case fault_kind::corrupt: return "corrupt";
    case fault_kind::close: return "close";
    case fault_kind::stall: return "stall";
    case fault_kind::crash: return "crash";
    case fault_kind::freeze: return "freeze";
  }
  return "?";
}

const char* to_string(fault_layer layer) noexcept {
  return layer == fault_layer::chunk ? "chunk" : "link";
}

const char* to_string(membership_change change) noexcept {
  switch (change) {
    case membership_change::none: return "";
    case membership_change::shrink: return "shrink";
    case membership_change::grow: return "grow";
    case membership_change::reconfigure: return "reconfigure";
  }
  return "?";
}

bool is_link_fault(fault_kind kind) noexcept {
  return kind != fault_kind::crash && kind != fault_kind::freeze;
}

namespace {

using json = nlohmann::json;

constexpr fault_kind all_kinds[] = {fault_kind::drop,    fault_kind::delay,  fault_kind::duplicate,
                                    fault_kind::reorder, fault_kind::corrupt, fault_kind::close,
                                    fault_kind::stall,   fault_kind::crash,  fault_kind::freeze};

std::string kind_list() {
  std::string out;
  for (auto k : all_kinds)
    out += (out.empty() ? "" : ", ") + std::string(to_string(k));
  return out;
}

/// Reads one fault object, with `where` ("scenario.json: fault #2 (delay)")
/// in front of every complaint.
class fault_reader {
public:
  fault_reader(const json& j, std::string where) : j_(j), where_(std::move(where)) {}

  [[noreturn]] void bad(const std::string& key, const std::string& expected) const {
    auto got = j_.contains(key) ? j_.at(key).dump() : std::string("nothing");
    throw error(errc::invalid_config,
                where_ + ": \"" + key + "\" must be " + expected + ", got " + got);
  }

  bool has(const char* key) const { return j_.contains(key); }

  uint64_t uint(const char* key, uint64_t lo, uint64_t hi, const std::string& what) const {
    const auto& v = j_.at(key);
    if (!v.is_number_integer() || (v.is_number_integer() && !v.is_number_unsigned() && v.get<int64_t>() < 0)
        || v.get<uint64_t>() < lo || v.get<uint64_t>() > hi)
      bad(key, what);
    return v.get<uint64_t>();
  }

  double real(const char* key, double lo, double hi, const std::string& what) const {
    const auto& v = j_.at(key);
    if (!v.is_number() || v.get<double>() < lo || v.get<double>() > hi)
      bad(key, what);
    return v.get<double>();
  }

  int rank(const char* key, bool wildcard) const {
    const auto& v = j_.at(key);
    if (wildcard && v.is_string() && v.get<std::string>() == "*")
      return any_rank;
    return static_cast<int>(uint(key, 0, 1u << 20, wildcard ? "a rank number or \"*\"" : "a rank number"));
  }

  /// "a->b", with a and b rank numbers or "*".
  std::pair<int, int> link() const {
    const auto& v = j_.at("link");
    auto expected = "a link \"a->b\" (rank numbers, or * for any rank)";
    if (!v.is_string())
      bad("link", expected);
    auto text = v.get<std::string>();
    auto arrow = text.find("->");
    if (arrow == std::string::npos)
      bad("link", expected);
    auto side = [&](std::string s) {
      while (!s.empty() && s.front() == ' ') s.erase(s.begin());
      while (!s.empty() && s.back() == ' ') s.pop_back();
      if (s == "*")
        return any_rank;
      if (s.empty() || s.size() > 7 || s.find_first_not_of("0123456789") != std::string::npos)
        bad("link", expected);
      return std::stoi(s);
    };
    auto from = side(text.substr(0, arrow));
    auto to = side(text.substr(arrow + 2));
    if (from == to && from != any_rank)
      bad("link", "a link between two different ranks");
    return {from, to};
  }

  /// "link" (the default) or "chunk"; chunk only for the kinds that act
  /// on a chunk message.
  fault_layer layer(fault_kind kind) const {
    const auto& v = j_.at("on");
    bool chunk_kind = kind == fault_kind::drop || kind == fault_kind::delay || kind == fault_kind::duplicate
                      || kind == fault_kind::reorder;
    auto expected = chunk_kind ? "\"link\" (the frames a link sends) or \"chunk\" (the chunks an op receives)"
                               : "\"link\" (only drop, delay, duplicate and reorder act on chunks)";
    if (!v.is_string())
      bad("on", expected);
    auto text = v.get<std::string>();
    if (text == "link")
      return fault_layer::link;
    if (text != "chunk" || !chunk_kind)
      bad("on", expected);
    return fault_layer::chunk;
  }

  /// An op kind's name, as MCCL_ALGO spells it.
  std::string op_kind_name(const char* key) const {
    const auto& v = j_.at(key);
    op_kind kind;
    if (!v.is_string() || !op_kind_from_string(v.get<std::string>(), kind))
      bad(key, "an op kind (allreduce, broadcast, reduce, allgather, reduce_scatter, gather, scatter, "
               "alltoall, barrier, send, custom)");
    return v.get<std::string>();
  }

  /// "shrink", "grow" or "reconfigure".
  membership_change change(const char* key) const {
    const auto& v = j_.at(key);
    auto expected = "\"shrink\", \"grow\" or \"reconfigure\" (the membership change inside which "
                    "the rank fault fires)";
    if (!v.is_string())
      bad(key, expected);
    for (auto c : {membership_change::shrink, membership_change::grow, membership_change::reconfigure})
      if (v.get<std::string>() == to_string(c))
        return c;
    bad(key, expected);
  }

  void only(const std::set<std::string>& allowed) const {
    for (auto it = j_.begin(); it != j_.end(); ++it)
      if (!allowed.count(it.key())) {
        std::string list;
        for (const auto& a : allowed)
          list += (list.empty() ? "" : ", ") + a;
        throw error(errc::invalid_config, where_ + ": unknown key \"" + it.key()
                                            + "\" (this fault takes: " + list + ")");
      }
  }

private:
  const json& j_;
  std::string where_;
};

fault_spec read_fault(const json& j, const std::string& origin, std::size_t index) {
  auto where = origin + ": fault #" + std::to_string(index);
  if (!j.is_object())
    throw error(errc::invalid_config, where + " must be a JSON object, got " + j.dump());
  if (!j.contains("kind") || !j.at("kind").is_string())
    throw error(errc::invalid_config, where + ": \"kind\" is missing or not a string (one of "
                                        + kind_list() + ")");
  auto name = j.at("kind").get<std::string>();
  fault_spec f;
  bool known = false;
  for (auto k : all_kinds)
    if (name == to_string(k)) {
      f.kind = k;
      known = true;
    }
  if (!known)
    throw error(errc::invalid_config, where + ": unknown kind \"" + name + "\" (one of "
                                        + kind_list() + ")");
  fault_reader r(j, where + " (" + name + ")");
  std::set<std::string> allowed{"kind", "after_ms", "seq", "note"};
  if (is_link_fault(f.kind)) {
    allowed.insert({"link", "step", "chunk", "probability", "count", "on"});
    if (!r.has("link"))
      r.bad("link", "a link \"a->b\" (rank numbers, or * for any rank)");
    std::tie(f.from, f.to) = r.link();
    if (r.has("on"))
      f.on = r.layer(f.kind);
    if (f.on == fault_layer::chunk) {
      allowed.insert("op");
      if (r.has("op"))
        f.op = r.op_kind_name("op");
    }
  } else {
    allowed.insert({"rank", "during"});
    if (!r.has("rank"))
      r.bad("rank", "the rank number this fault acts on");
    f.rank = r.rank("rank", false);
    if (r.has("during")) {
      f.during = r.change("during");
      // The change is the trigger: a second one would leave it unclear
      // which fires.
      for (const char* other : {"seq", "after_ms"})
        if (r.has(other))
          r.bad(other, std::string("absent when \"during\" is given (the fault fires inside the ")
                         + to_string(f.during) + ")");
    }
  }
  switch (f.kind) {
    case fault_kind::delay: {
      // A chunk is held in the engine's memory while its op waits: past a
      // minute the op's timeout would end it anyway (that is a drop).
      auto range = f.on == fault_layer::chunk ? std::string("the delay in milliseconds (1..60000)")
                                              : std::string("the delay in milliseconds (1..600000)");
      allowed.insert("ms");
      if (!r.has("ms"))
        r.bad("ms", range);
      f.ms = r.uint("ms", 1, f.on == fault_layer::chunk ? 60000 : 600000, range);
      break;
    }
    case fault_kind::stall:
      allowed.insert("ms");
      if (r.has("ms"))
        f.ms = r.uint("ms", 0, 86400000, "the stall in milliseconds (0: until the link closes)");
      break;
    case fault_kind::corrupt:
      allowed.insert({"bits", "bytes"});
      if (r.has("bits") && r.has("bytes"))
        r.bad("bytes", "absent when \"bits\" is given (a corruption flips bits or overwrites bytes)");
      if (r.has("bytes"))
        f.bytes = static_cast<uint32_t>(r.uint("bytes", 1, 1u << 20, "a byte count (1..1048576)"));
      else
        f.bits = r.has("bits") ? static_cast<uint32_t>(r.uint("bits", 1, 1u << 20, "a bit count (1..1048576)"))
                               : 1;
      break;
    case fault_kind::crash:
      allowed.insert("exit_code");
      if (r.has("exit_code"))
        f.exit_code = static_cast<int>(r.uint("exit_code", 1, 255, "an exit status (1..255)"));
      break;
    default:
      break;
  }
  r.only(allowed);
  if (r.has("seq"))
    f.seq = r.uint("seq", 0, UINT64_MAX, "an op sequence number (0, 1, ...)");
  if (r.has("step"))
    f.step = static_cast<uint32_t>(r.uint("step", 0, UINT32_MAX, "a step number"));
  if (r.has("chunk"))
    f.chunk = static_cast<uint32_t>(r.uint("chunk", 0, UINT32_MAX, "a chunk number"));
  if (r.has("after_ms"))
    f.after_ms = r.uint("after_ms", 0, 86400000, "milliseconds since the start (0..86400000)");
  if (r.has("probability"))
    f.probability = r.real("probability", 0.0, 1.0, "a probability between 0 and 1");
  if (r.has("count"))
    f.count = r.uint("count", 0, UINT64_MAX, "how often it fires (0: every time it matches)");
  return f;
}

} // namespace

fault_scenario parse_fault_scenario(const std::string& json_text, const std::string& origin) {
  json doc;
  try {
    doc = json::parse(json_text);
  } catch (const json::parse_error& e) {
    throw error(errc::invalid_config, origin + ": not valid JSON: " + e.what());
  }
  if (!doc.is_object())
    throw error(errc::invalid_config, origin + ": expected a JSON object {\"seed\": ..., \"faults\": [...]}");
  fault_scenario s;
  s.source = origin;
  for (auto it = doc.begin(); it != doc.end(); ++it)
    if (it.key() != "seed" && it.key() != "faults" && it.key() != "note")
      throw error(errc::invalid_config, origin + ": unknown key \"" + it.key()
                                          + "\" (a scenario has seed, faults and note)");
  if (doc.contains("seed")) {
    const auto& seed = doc.at("seed");
    if (!seed.is_number_unsigned())
      throw error(errc::invalid_config, origin + ": \"seed\" must be a non-negative integer, got "
                                          + seed.dump());
    s.seed = seed.get<uint64_t>();
  }
  if (!doc.contains("faults") || !doc.at("faults").is_array())
    throw error(errc::invalid_config, origin + ": \"faults\" must be a list of faults");
  std::size_t i = 0;
  for (const auto& f : doc.at("faults"))
    s.faults.push_back(read_fault(f, origin, i++));
  return s;
}

fault_scenario load_fault_scenario(const std::string& path) {
  std::ifstream in(path);
  if (!in)
    throw error(errc::invalid_config, "MCCL_FAULTS=" + quoted(path) + ": cannot open the scenario file");
  std::ostringstream text;
  text << in.rdbuf();
  return parse_fault_scenario(text.str(), "MCCL_FAULTS=" + quoted(path));
}

void check_fault_ranks(const fault_scenario& s, int world) {
  for (std::size_t i = 0; i < s.faults.size(); ++i) {
    const auto& f = s.faults[i];
    if (f.during != membership_change::none)
      continue;
    for (int r : {f.from, f.to, f.rank})
      if (r != any_rank && r >= world)
        throw error(errc::invalid_config, s.source + ": fault #" + std::to_string(i) + " ("
                                            + to_string(f.kind) + ") names rank " + std::to_string(r)
                                            + ", but the job has ranks 0.." + std::to_string(world - 1));
  }
}

} // namespace mccl::transport
