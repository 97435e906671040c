#include <mccl/algo_spec.hpp>
#include <mccl/config.hpp>

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

using namespace mccl;

namespace {

constexpr std::size_t K = std::size_t{1} << 10;
constexpr std::size_t M = std::size_t{1} << 20;
constexpr std::size_t G = std::size_t{1} << 30;

/// Parses `text`, expects an invalid_config error and returns its message.
std::string spec_error(const std::string& text) {
  try {
    parse_algo_spec(text);
  } catch (const error& e) {
    EXPECT_EQ(e.code(), errc::invalid_config) << e.what();
    return e.message();
  }
  ADD_FAILURE() << "expected mccl::error(invalid_config) for \"" << text << '"';
  return {};
}

/// Expects `text` to be refused with a message that quotes the whole value up
/// front and contains every one of `parts`.
void expect_error(const std::string& text, const std::vector<std::string>& parts) {
  SCOPED_TRACE("MCCL_ALGO=\"" + text + "\"");
  auto msg = spec_error(text);
  EXPECT_EQ(msg.rfind("MCCL_ALGO=\"" + text + "\": ", 0), 0u) << msg;
  for (const auto& part : parts)
    EXPECT_NE(msg.find(part), std::string::npos) << "missing: " << part << "\nin: " << msg;
}

std::string resolve_error(const config_overrides& overrides, const environment& env) {
  try {
    resolve_config(overrides, env);
  } catch (const error& e) {
    EXPECT_EQ(e.code(), errc::invalid_config) << e.what();
    return e.message();
  }
  ADD_FAILURE() << "expected mccl::error(invalid_config)";
  return {};
}

void expect_rule(const algo_rule& rule, const std::string& algorithm, std::size_t min,
                 std::size_t max) {
  EXPECT_EQ(rule.algorithm, algorithm);
  EXPECT_EQ(rule.min_bytes, min) << algorithm;
  EXPECT_EQ(rule.max_bytes, max) << algorithm;
}

const std::string example = "allreduce=rd:0-64K,ring:64K-;broadcast=tree";
const std::string example_canonical = "allreduce=rd:0-64K,ring:64K-; broadcast=tree";

} // namespace

// ---- valid specs -------------------------------------------------------------

TEST(AlgoSpec, OpNames) {
  EXPECT_EQ(algo_op_names(),
            (std::vector<std::string>{"allreduce", "broadcast", "reduce", "allgather",
                                      "reduce_scatter", "gather", "scatter", "alltoall",
                                      "barrier"}));
  EXPECT_EQ(&algo_op_names(), &algo_op_names());
}

TEST(AlgoSpec, TheExample) {
  auto spec = parse_algo_spec(example);
  EXPECT_FALSE(spec.empty());
  EXPECT_EQ(spec.text, example);
  ASSERT_EQ(spec.rules.size(), 2u);
  const auto& allreduce = spec.rules.at("allreduce");
  ASSERT_EQ(allreduce.size(), 2u);
  expect_rule(allreduce[0], "rd", 0, 64 * K);
  expect_rule(allreduce[1], "ring", 64 * K, SIZE_MAX);
  const auto& broadcast = spec.rules.at("broadcast");
  ASSERT_EQ(broadcast.size(), 1u);
  expect_rule(broadcast[0], "tree", 0, SIZE_MAX);
  EXPECT_EQ(describe(spec), example_canonical);
}

TEST(AlgoSpec, EmptyMeansNoRules) {
  for (const char* text : {"", " ", "\t \n"}) {
    auto spec = parse_algo_spec(text);
    EXPECT_TRUE(spec.empty()) << '"' << text << '"';
    EXPECT_EQ(spec.text, text);
    EXPECT_EQ(describe(spec), "");
    EXPECT_EQ(algo_for(spec, "allreduce", 0), "");
  }
  EXPECT_TRUE(algo_spec{}.empty());
}

TEST(AlgoSpec, WhitespaceAroundTokensIsIgnored) {
  for (const char* text :
       {" allreduce = rd : 0 - 64K , ring : 64K - ; broadcast = tree ",
        "\tallreduce=rd:0-64K ,ring:64K-\n;\nbroadcast=tree\n",
        "allreduce =rd: 0 -64K,ring :64K-;  broadcast=  tree"}) {
    SCOPED_TRACE(text);
    auto spec = parse_algo_spec(text);
    EXPECT_EQ(describe(spec), example_canonical);
    EXPECT_EQ(spec.text, text);
  }
}

TEST(AlgoSpec, TrailingSemicolon) {
  for (const char* text : {"broadcast=tree;", "broadcast=tree ; ", "broadcast=tree;\n"}) {
    SCOPED_TRACE(text);
    auto spec = parse_algo_spec(text);
    EXPECT_EQ(describe(spec), "broadcast=tree");
  }
  EXPECT_EQ(describe(parse_algo_spec(example + ";")), example_canonical);
}

TEST(AlgoSpec, SizeSuffixes) {
  auto spec = parse_algo_spec(
    "allreduce=a:0-4096,b:4096-8k,c:8KB-1m,d:1MiB-2mb,e:2M-1g,f:1GiB-3G,g:3gib-");
  const auto& r = spec.rules.at("allreduce");
  ASSERT_EQ(r.size(), 7u);
  expect_rule(r[0], "a", 0, 4 * K);
  expect_rule(r[1], "b", 4 * K, 8 * K);
  expect_rule(r[2], "c", 8 * K, M);
  expect_rule(r[3], "d", M, 2 * M);
  expect_rule(r[4], "e", 2 * M, G);
  expect_rule(r[5], "f", G, 3 * G);
  expect_rule(r[6], "g", 3 * G, SIZE_MAX);
  EXPECT_EQ(describe(spec), "allreduce=a:0-4K,b:4K-8K,c:8K-1M,d:1M-2M,e:2M-1G,f:1G-3G,g:3G-");
}

TEST(AlgoSpec, OpenRanges) {
  auto spec = parse_algo_spec("allreduce=small:-4K,big:1M-");
  const auto& r = spec.rules.at("allreduce");
  ASSERT_EQ(r.size(), 2u);
  expect_rule(r[0], "small", 0, 4 * K);
  expect_rule(r[1], "big", M, SIZE_MAX);
  EXPECT_EQ(describe(spec), "allreduce=small:0-4K,big:1M-");
  // A gap is left to the built-in table.
  EXPECT_EQ(algo_for(spec, "allreduce", 4 * K - 1), "small");
  EXPECT_EQ(algo_for(spec, "allreduce", 4 * K), "");
  EXPECT_EQ(algo_for(spec, "allreduce", M - 1), "");
  EXPECT_EQ(algo_for(spec, "allreduce", M), "big");

  // "-" alone is every size, the same as no range.
  auto all = parse_algo_spec("barrier=x:-");
  expect_rule(all.rules.at("barrier").at(0), "x", 0, SIZE_MAX);
  EXPECT_EQ(describe(all), "barrier=x");
}

TEST(AlgoSpec, NoRangeCoversAllSizes) {
  auto spec = parse_algo_spec("barrier=dissemination");
  expect_rule(spec.rules.at("barrier").at(0), "dissemination", 0, SIZE_MAX);
  EXPECT_EQ(algo_for(spec, "barrier", 0), "dissemination");
  EXPECT_EQ(algo_for(spec, "barrier", 12345), "dissemination");
  EXPECT_EQ(algo_for(spec, "barrier", SIZE_MAX), "dissemination");
}

TEST(AlgoSpec, EveryOpNameAndAnyAlgorithmName) {
  std::string text;
  for (const auto& op : algo_op_names())
    text += op + "=algo_" + op + "_2;";
  auto spec = parse_algo_spec(text);
  ASSERT_EQ(spec.rules.size(), algo_op_names().size());
  for (const auto& op : algo_op_names())
    EXPECT_EQ(algo_for(spec, op, 1), "algo_" + op + "_2") << op;
  // Canonical order is algo_op_names() order, whatever order the value used.
  EXPECT_EQ(describe(parse_algo_spec("barrier=b;allgather=g;allreduce=r")),
            "allreduce=r; allgather=g; barrier=b");
}

TEST(AlgoSpec, AlternativesAreSortedByLowerBound) {
  auto spec = parse_algo_spec("allreduce=ring:64K-,rd:0-64K");
  const auto& r = spec.rules.at("allreduce");
  ASSERT_EQ(r.size(), 2u);
  expect_rule(r[0], "rd", 0, 64 * K);
  expect_rule(r[1], "ring", 64 * K, SIZE_MAX);
  EXPECT_EQ(describe(spec), "allreduce=rd:0-64K,ring:64K-");
}

TEST(AlgoSpec, AdjacentRangesDoNotOverlap) {
  auto spec = parse_algo_spec("allreduce=a:0-1K,b:1K-2K,c:2K-");
  EXPECT_EQ(spec.rules.at("allreduce").size(), 3u);
}

TEST(AlgoSpec, DescribeReadsBack) {
  for (const char* text :
       {"allreduce=rd:0-64K,ring:64K-;broadcast=tree", "reduce=x:1-2,y:3-4; scatter=z:-1G",
        "alltoall=pairwise:1536K-", "gather=a:100-4097;reduce_scatter=b"}) {
    SCOPED_TRACE(text);
    auto spec = parse_algo_spec(text);
    auto again = parse_algo_spec(describe(spec));
    EXPECT_EQ(describe(again), describe(spec));
    ASSERT_EQ(again.rules.size(), spec.rules.size());
    for (const auto& [op, rules] : spec.rules) {
      const auto& other = again.rules.at(op);
      ASSERT_EQ(other.size(), rules.size()) << op;
      for (std::size_t i = 0; i < rules.size(); ++i)
        expect_rule(other[i], rules[i].algorithm, rules[i].min_bytes, rules[i].max_bytes);
    }
  }
}

// ---- lookup --------------------------------------------------------------------

TEST(AlgoFor, BoundariesOfTheExample) {
  auto spec = parse_algo_spec(example);
  EXPECT_EQ(algo_for(spec, "allreduce", 0), "rd");
  EXPECT_EQ(algo_for(spec, "allreduce", 1), "rd");
  EXPECT_EQ(algo_for(spec, "allreduce", 64 * K - 1), "rd");
  EXPECT_EQ(algo_for(spec, "allreduce", 64 * K), "ring"); // upper bound is exclusive
  EXPECT_EQ(algo_for(spec, "allreduce", 64 * K + 1), "ring");
  EXPECT_EQ(algo_for(spec, "allreduce", SIZE_MAX), "ring");
  EXPECT_EQ(algo_for(spec, "broadcast", 0), "tree");
  EXPECT_EQ(algo_for(spec, "broadcast", 64 * K), "tree");
  // Ops the spec does not mention, and names that are no op at all.
  EXPECT_EQ(algo_for(spec, "barrier", 0), "");
  EXPECT_EQ(algo_for(spec, "reduce", 64 * K), "");
  EXPECT_EQ(algo_for(spec, "nonsense", 1), "");
}

TEST(AlgoFor, ClosedRangeBothEnds) {
  auto spec = parse_algo_spec("allreduce=mid:1K-64K");
  EXPECT_EQ(algo_for(spec, "allreduce", 0), "");
  EXPECT_EQ(algo_for(spec, "allreduce", K - 1), "");
  EXPECT_EQ(algo_for(spec, "allreduce", K), "mid"); // lower bound is inclusive
  EXPECT_EQ(algo_for(spec, "allreduce", 64 * K - 1), "mid");
  EXPECT_EQ(algo_for(spec, "allreduce", 64 * K), "");
}

TEST(AlgoFor, FirstMatchingRuleWins) {
  // The parser refuses overlaps, so build one by hand.
  algo_spec spec;
  spec.rules["allreduce"] = {algo_rule{"first", 0, 100}, algo_rule{"second", 50, SIZE_MAX}};
  EXPECT_EQ(algo_for(spec, "allreduce", 60), "first");
  EXPECT_EQ(algo_for(spec, "allreduce", 100), "second");
}

// ---- errors ----------------------------------------------------------------------

TEST(AlgoSpecError, ExactMessageForBadSize) {
  EXPECT_EQ(spec_error("allreduce=rd:0-64Q"),
            "MCCL_ALGO=\"allreduce=rd:0-64Q\": bad size \"64Q\" at offset 15 (expected a "
            "number with an optional K/M/G suffix)");
}

TEST(AlgoSpecError, ExactMessageForUnknownOperation) {
  EXPECT_EQ(spec_error("allredce=ring"),
            "MCCL_ALGO=\"allredce=ring\": unknown operation \"allredce\" at offset 0 (expected "
            "one of allreduce, broadcast, reduce, allgather, reduce_scatter, gather, scatter, "
            "alltoall, barrier)");
}

TEST(AlgoSpecError, UnknownOperation) {
  expect_error("broadcast=tree; AllReduce=ring", {"unknown operation \"AllReduce\" at offset 16"});
  expect_error("all reduce=ring", {"unknown operation \"all reduce\" at offset 0"});
  expect_error("reducescatter=x", {"unknown operation \"reducescatter\" at offset 0",
                                   "reduce_scatter"});
}

TEST(AlgoSpecError, BadSize) {
  expect_error("allreduce=ring:1.5K-", {"bad size \"1.5K\" at offset 15", "K/M/G"});
  expect_error("allreduce=ring:0-2T", {"bad size \"2T\" at offset 17"});
  expect_error("allreduce=ring:-1-", {"bad size \"1-\" at offset 16"});
  expect_error("allreduce=ring: 64 K-", {"bad size \"64 K\" at offset 16"});
  expect_error("allreduce=ring:0-99999999999999999999999",
               {"bad size \"99999999999999999999999\" at offset 17"});
}

TEST(AlgoSpecError, MissingEquals) {
  expect_error("allreduce", {"missing '=' in rule \"allreduce\" at offset 0"});
  expect_error("allreduce ring", {"missing '=' in rule \"allreduce ring\" at offset 0"});
  expect_error("broadcast=tree; allreduce:ring",
               {"missing '=' in rule \"allreduce:ring\" at offset 16"});
}

TEST(AlgoSpecError, MissingOperationName) {
  expect_error("=ring", {"missing operation name before '=' at offset 0"});
  expect_error("broadcast=tree;  =ring", {"missing operation name before '=' at offset 17"});
}

TEST(AlgoSpecError, EmptyAlgorithmName) {
  expect_error("allreduce=", {"empty algorithm name at offset 10"});
  expect_error("allreduce=  ", {"empty algorithm name at offset 10"});
  expect_error("allreduce=ring,", {"empty algorithm name at offset 15"});
  expect_error("allreduce=ring,,rd", {"empty algorithm name at offset 15"});
  expect_error("allreduce=:0-1K", {"empty algorithm name at offset 10"});
  expect_error("allreduce=ring, :1K-", {"empty algorithm name at offset 16"});
}

TEST(AlgoSpecError, BadCharactersInAlgorithmName) {
  expect_error("allreduce=Ring",
               {"bad character \"R\" at offset 10 in algorithm name \"Ring\" at offset 10",
                "lower-case letters, digits and '_'"});
  expect_error("allreduce=ring-2", {"bad character \"-\" at offset 14",
                                    "algorithm name \"ring-2\" at offset 10"});
  expect_error("allreduce=my algo", {"bad character \" \" at offset 12",
                                     "algorithm name \"my algo\" at offset 10"});
  expect_error("allreduce=ring=rd", {"bad character \"=\" at offset 14"});
  expect_error("broadcast=tree;allreduce=r\xc3\xa9", {"bad character \"\xc3\" at offset 26"});
}

TEST(AlgoSpecError, BadRange) {
  expect_error("allreduce=ring:", {"missing range after ':' at offset 14"});
  expect_error("allreduce=ring:  ,rd", {"missing range after ':' at offset 14"});
  expect_error("allreduce=ring:64K", {"bad range \"64K\" at offset 15", "[size]-[size]"});
  expect_error("allreduce=ring:0-1K:2K", {"bad size \"1K:2K\" at offset 17"});
}

TEST(AlgoSpecError, LowerNotBelowUpper) {
  expect_error("allreduce=ring:64K-64K",
               {"empty range \"64K-64K\" at offset 15", "lower bound 64K",
                "upper bound 64K", "exclusive"});
  expect_error("allreduce=rd:0-1K,ring:1M-64K",
               {"empty range \"1M-64K\" at offset 23", "lower bound 1M", "upper bound 64K"});
  expect_error("allreduce=ring:0-0", {"empty range \"0-0\" at offset 15"});
  expect_error("allreduce=ring:-0", {"empty range \"-0\" at offset 15"});
}

TEST(AlgoSpecError, SameOperationTwice) {
  expect_error("allreduce=ring;allreduce=rd",
               {"operation \"allreduce\" given twice, at offset 0 and at offset 15"});
  expect_error("allreduce=rd:0-1K; broadcast=tree; allreduce = ring:1K-",
               {"operation \"allreduce\" given twice, at offset 0 and at offset 35"});
}

TEST(AlgoSpecError, OverlappingRanges) {
  expect_error("allreduce=rd:0-64K,ring:32K-",
               {"overlapping ranges for allreduce: \"rd:0-64K\" at offset 10 and "
                "\"ring:32K-\" at offset 19"});
  // No range means every size, so it overlaps anything else.
  expect_error("allreduce=ring,rd:0-1K",
               {"overlapping ranges for allreduce: \"ring\" at offset 10 and \"rd:0-1K\" at "
                "offset 15"});
  expect_error("broadcast=a:0-1K,b:1K-2K, c : 1536-4K",
               {"overlapping ranges for broadcast: \"b:1K-2K\" at offset 17 and "
                "\"c : 1536-4K\" at offset 26"});
  expect_error("barrier=x,x", {"overlapping ranges for barrier: \"x\" at offset 8 and \"x\" "
                               "at offset 10"});
}

TEST(AlgoSpecError, EmptyRule) {
  expect_error(";", {"empty rule at offset 0"});
  expect_error(" ; ", {"empty rule at offset 0"});
  expect_error(";broadcast=tree", {"empty rule at offset 0"});
  expect_error("allreduce=ring;;broadcast=tree", {"empty rule at offset 15"});
  expect_error("broadcast=tree;;", {"empty rule at offset 15"});
}

TEST(AlgoSpecError, ControlCharactersAreEscaped) {
  auto msg = spec_error("allreduce=ring\n;\x1b[31m");
  EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  EXPECT_EQ(msg.find('\x1b'), std::string::npos) << msg;
  EXPECT_NE(msg.find("MCCL_ALGO=\"allreduce=ring\\x0a;\\x1b[31m\""), std::string::npos) << msg;
  EXPECT_NE(msg.find("missing '=' in rule \"\\x1b[31m\" at offset 16"), std::string::npos)
    << msg;
}

// ---- through resolve_config -------------------------------------------------------

TEST(AlgoConfig, DefaultIsTheBuiltInTable) {
  auto cfg = resolve_config(config_overrides{}, {});
  EXPECT_TRUE(cfg.algo.empty());
  EXPECT_EQ(cfg.sources.at("MCCL_ALGO"), setting_source::default_value);
  EXPECT_NE(describe(cfg).find("MCCL_ALGO=(built-in table) (default)"), std::string::npos)
    << describe(cfg);
  EXPECT_TRUE(config{}.algo.empty());
}

TEST(AlgoConfig, SettingIsDocumented) {
  const setting_info* info = nullptr;
  for (const auto& s : all_settings())
    if (s.name == "MCCL_ALGO")
      info = &s;
  ASSERT_NE(info, nullptr);
  EXPECT_EQ(info->default_value, "");
  EXPECT_NE(info->doc.find("allreduce=rd:0-64K,ring:64K-"), std::string::npos) << info->doc;
  EXPECT_NE(info->doc.find("built-in table"), std::string::npos) << info->doc;
  EXPECT_FALSE(info->allowed.empty());
}

TEST(AlgoConfig, FromEnvironment) {
  auto cfg = resolve_config(config_overrides{}, {{"MCCL_ALGO", example}, {"PATH", "/bin"}});
  EXPECT_EQ(cfg.sources.at("MCCL_ALGO"), setting_source::environment);
  EXPECT_EQ(cfg.algo.text, example);
  EXPECT_EQ(algo_for(cfg.algo, "allreduce", 64 * K - 1), "rd");
  EXPECT_EQ(algo_for(cfg.algo, "allreduce", 64 * K), "ring");
  EXPECT_EQ(algo_for(cfg.algo, "broadcast", 1), "tree");
  EXPECT_NE(describe(cfg).find("MCCL_ALGO=\"" + example_canonical + "\" (environment)"),
            std::string::npos)
    << describe(cfg);
}

TEST(AlgoConfig, EmptyEnvironmentValueIsTheBuiltInTable) {
  auto cfg = resolve_config(config_overrides{}, {{"MCCL_ALGO", ""}});
  EXPECT_TRUE(cfg.algo.empty());
  EXPECT_EQ(cfg.sources.at("MCCL_ALGO"), setting_source::environment);
  EXPECT_NE(describe(cfg).find("MCCL_ALGO=(built-in table) (environment)"), std::string::npos);
}

TEST(AlgoConfig, OverrideBeatsEnvironment) {
  auto cfg = resolve_config(config_overrides{}.set("MCCL_ALGO", "broadcast=chain:1M-"),
                            {{"MCCL_ALGO", "allreduce=ring"}});
  EXPECT_EQ(cfg.sources.at("MCCL_ALGO"), setting_source::explicit_value);
  EXPECT_EQ(algo_for(cfg.algo, "allreduce", 1), "");
  EXPECT_EQ(algo_for(cfg.algo, "broadcast", M), "chain");
  EXPECT_NE(describe(cfg).find("MCCL_ALGO=\"broadcast=chain:1M-\" (explicit)"),
            std::string::npos)
    << describe(cfg);

  // An empty override restores the built-in table.
  auto builtin = resolve_config(config_overrides{}.set("MCCL_ALGO", ""),
                                {{"MCCL_ALGO", "allreduce=ring"}});
  EXPECT_TRUE(builtin.algo.empty());
  EXPECT_EQ(builtin.sources.at("MCCL_ALGO"), setting_source::explicit_value);
}

TEST(AlgoConfig, OverrideShadowsBadEnvironmentValue) {
  auto cfg = resolve_config(config_overrides{}.set("MCCL_ALGO", "allreduce=ring"),
                            {{"MCCL_ALGO", "allredce=ring"}});
  EXPECT_EQ(algo_for(cfg.algo, "allreduce", 1), "ring");
}

TEST(AlgoConfig, BadValuesNameTheVariableAndTheOffset) {
  auto msg = resolve_error(config_overrides{}, {{"MCCL_ALGO", "allreduce=rd:0-64Q"}});
  EXPECT_EQ(msg, spec_error("allreduce=rd:0-64Q"));
  EXPECT_NE(msg.find("MCCL_ALGO=\"allreduce=rd:0-64Q\""), std::string::npos) << msg;
  EXPECT_NE(msg.find("\"64Q\" at offset 15"), std::string::npos) << msg;

  msg = resolve_error(config_overrides{}.set("MCCL_ALGO", "allredce=ring"), {});
  EXPECT_NE(msg.find("MCCL_ALGO=\"allredce=ring\": unknown operation \"allredce\" at offset 0"),
            std::string::npos)
    << msg;
}

TEST(AlgoConfig, MisspeltVariableGetsSuggestion) {
  auto msg = resolve_error(config_overrides{}, {{"MCCL_ALGOS", "allreduce=ring"}});
  EXPECT_NE(msg.find("did you mean MCCL_ALGO?"), std::string::npos) << msg;
}

TEST(AlgoConfig, AlgorithmNamesAreLeftToTheCaller) {
  // Algorithms are registered at run time, so any well-formed name is accepted here.
  auto cfg = resolve_config(config_overrides{}, {{"MCCL_ALGO", "allreduce=no_such_algo"}});
  EXPECT_EQ(algo_for(cfg.algo, "allreduce", 0), "no_such_algo");
}
