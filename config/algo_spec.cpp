#include <mccl/algo_spec.hpp>

#include <mccl/config.hpp>
#include <mccl/error.hpp>

#include <algorithm>
#include <cstdio>
#include <utility>

namespace mccl {

namespace {

constexpr const char* variable_name = "MCCL_ALGO";
constexpr const char* size_hint = "expected a number with an optional K/M/G suffix";
constexpr const char* range_hint = "expected [size]-[size], e.g. 0-64K or 64K-";
constexpr const char* name_hint = "expected lower-case letters, digits and '_'";

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

bool is_algo_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
}


/// A piece of the value with surrounding whitespace removed, and the offset of
/// its first character in the whole value (of where it would be, if blank).
struct token {
  std::string text;
  std::size_t offset = 0;

  bool blank() const { return text.empty(); }
};

token trimmed(const std::string& value, std::size_t first, std::size_t last) {
  auto begin = first;
  while (begin < last && is_space(value[begin]))
    ++begin;
  auto end = last;
  while (end > begin && is_space(value[end - 1]))
    --end;
  return token{value.substr(begin, end - begin), begin == last ? first : begin};
}

/// Pieces of `value` in [first, last) between `separator`s, trimmed.
std::vector<token> split(const std::string& value, std::size_t first, std::size_t last,
                         char separator) {
  std::vector<token> out;
  auto start = first;
  for (auto i = first; i <= last; ++i) {
    if (i == last || value[i] == separator) {
      out.push_back(trimmed(value, start, i));
      start = i + 1;
    }
  }
  return out;
}

std::string op_name_list() {
  std::string out;
  for (const auto& name : algo_op_names()) {
    if (!out.empty())
      out += ", ";
    out += name;
  }
  return out;
}

std::string format_range(const algo_rule& rule) {
  return format_byte_size(rule.min_bytes) + "-"
         + (rule.max_bytes == SIZE_MAX ? std::string{} : format_byte_size(rule.max_bytes));
}

bool covers_everything(const algo_rule& rule) {
  return rule.min_bytes == 0 && rule.max_bytes == SIZE_MAX;
}

/// One alternative as parsed, with where it came from for later messages.
struct parsed_alt {
  algo_rule rule;
  token source;
};

class parser {
public:
  explicit parser(const std::string& value) : value_(value) {}

  algo_spec run() {
    algo_spec spec;
    spec.text = value_;
    std::map<std::string, std::size_t> op_offsets;
    auto rules = split(value_, 0, value_.size(), ';');
    for (std::size_t i = 0; i < rules.size(); ++i) {
      if (rules[i].blank()) {
        // "" is no rules, and one trailing ';' is allowed; any other gap is a typo.
        if (i + 1 == rules.size())
          continue;
        fail("empty rule at offset " + std::to_string(rules[i].offset)
             + " (expected op=algorithm[:range][,...], rules separated by ';')");
      }
      parse_rule(rules[i], spec, op_offsets);
    }
    return spec;
  }

private:
  [[noreturn]] void fail(const std::string& what) const {
    throw error(errc::invalid_config,
                std::string(variable_name) + "=" + quoted(value_) + ": " + what);
  }

  static std::string at(const token& t) {
    return quoted(t.text) + " at offset " + std::to_string(t.offset);
  }

  void parse_rule(const token& rule, algo_spec& spec,
                  std::map<std::string, std::size_t>& op_offsets) const {
    const auto rule_end = rule.offset + rule.text.size();
    const auto eq = value_.find('=', rule.offset);
    if (eq == std::string::npos || eq >= rule_end)
      fail("missing '=' in rule " + at(rule) + " (expected op=algorithm[:range][,...])");

    auto op = trimmed(value_, rule.offset, eq);
    if (op.blank())
      fail("missing operation name before '=' at offset " + std::to_string(eq)
           + " (expected one of " + op_name_list() + ")");
    const auto& names = algo_op_names();
    if (std::find(names.begin(), names.end(), op.text) == names.end())
      fail("unknown operation " + at(op) + " (expected one of " + op_name_list() + ")");
    if (auto seen = op_offsets.find(op.text); seen != op_offsets.end())
      fail("operation " + quoted(op.text) + " given twice, at offset "
           + std::to_string(seen->second) + " and at offset " + std::to_string(op.offset)
           + " (list all its algorithms in one rule, separated by ',')");
    op_offsets.emplace(op.text, op.offset);

    std::vector<parsed_alt> alts;
    for (const auto& alt : split(value_, eq + 1, rule_end, ','))
      alts.push_back(parse_alt(alt));

    for (std::size_t i = 0; i < alts.size(); ++i) {
      for (std::size_t j = i + 1; j < alts.size(); ++j) {
        const auto& a = alts[i].rule;
        const auto& b = alts[j].rule;
        if (a.min_bytes < b.max_bytes && b.min_bytes < a.max_bytes)
          fail("overlapping ranges for " + op.text + ": " + at(alts[i].source) + " and "
               + at(alts[j].source) + " (the ranges of one operation must not overlap)");
      }
    }

    std::sort(alts.begin(), alts.end(), [](const parsed_alt& a, const parsed_alt& b) {
      return a.rule.min_bytes < b.rule.min_bytes;
    });
    auto& out = spec.rules[op.text];
    for (auto& alt : alts)
      out.push_back(std::move(alt.rule));
  }

  parsed_alt parse_alt(const token& alt) const {
    if (alt.blank())
      fail("empty algorithm name at offset " + std::to_string(alt.offset) + " (" + name_hint
           + ")");
    const auto alt_end = alt.offset + alt.text.size();
    auto colon = value_.find(':', alt.offset);
    if (colon >= alt_end)
      colon = alt_end;

    parsed_alt out;
    out.source = alt;
    auto name = trimmed(value_, alt.offset, colon);
    if (name.blank())
      fail("empty algorithm name at offset " + std::to_string(name.offset) + " (" + name_hint
           + ")");
    for (std::size_t k = 0; k < name.text.size(); ++k) {
      if (!is_algo_char(name.text[k]))
        fail("bad character " + quoted(std::string(1, name.text[k])) + " at offset "
             + std::to_string(name.offset + k) + " in algorithm name " + at(name) + " ("
             + name_hint + ")");
    }
    out.rule.algorithm = name.text;

    if (colon == alt_end)
      return out; // no range: every size

    auto range = trimmed(value_, colon + 1, alt_end);
    if (range.blank())
      fail("missing range after ':' at offset " + std::to_string(colon) + " (" + range_hint
           + ")");
    const auto range_end = range.offset + range.text.size();
    const auto dash = value_.find('-', range.offset);
    if (dash >= range_end)
      fail("bad range " + at(range) + " (" + range_hint + ")");

    auto lower = trimmed(value_, range.offset, dash);
    auto upper = trimmed(value_, dash + 1, range_end);
    if (!lower.blank())
      out.rule.min_bytes = parse_size(lower);
    if (!upper.blank())
      out.rule.max_bytes = parse_size(upper);
    if (out.rule.min_bytes >= out.rule.max_bytes)
      fail("empty range " + at(range) + ": the lower bound "
           + format_byte_size(out.rule.min_bytes) + " is not below the upper bound "
           + (upper.blank() ? std::string("(unbounded)") : format_byte_size(out.rule.max_bytes))
           + " (the lower bound is inclusive, the upper bound exclusive)");
    return out;
  }

  std::size_t parse_size(const token& size) const {
    auto value = parse_byte_size(size.text);
    if (!value)
      fail("bad size " + at(size) + " (" + size_hint + ")");
    return *value;
  }

  const std::string& value_;
};

} // namespace

const std::vector<std::string>& algo_op_names() {
  static const std::vector<std::string> names = {
    "allreduce", "broadcast", "reduce",   "allgather", "reduce_scatter",
    "gather",    "scatter",   "alltoall", "barrier",
  };
  return names;
}

algo_spec parse_algo_spec(const std::string& text) {
  return parser(text).run();
}

std::string algo_for(const algo_spec& spec, const std::string& op, std::size_t bytes) {
  auto i = spec.rules.find(op);
  if (i == spec.rules.end())
    return {};
  for (const auto& rule : i->second)
    if (bytes >= rule.min_bytes && (bytes < rule.max_bytes || rule.max_bytes == SIZE_MAX))
      return rule.algorithm;
  return {};
}

std::string describe(const algo_spec& spec) {
  std::string out;
  auto append = [&](const std::string& op, const std::vector<algo_rule>& rules) {
    if (!out.empty())
      out += "; ";
    out += op + "=";
    for (std::size_t i = 0; i < rules.size(); ++i) {
      if (i != 0)
        out += ',';
      out += rules[i].algorithm;
      if (!covers_everything(rules[i]))
        out += ":" + format_range(rules[i]);
    }
  };
  const auto& names = algo_op_names();
  for (const auto& op : names)
    if (auto i = spec.rules.find(op); i != spec.rules.end())
      append(op, i->second);
  // Only a hand-built spec can hold other names; show them rather than hide them.
  for (const auto& [op, rules] : spec.rules)
    if (std::find(names.begin(), names.end(), op) == names.end())
      append(op, rules);
  return out;
}

} // namespace mccl
