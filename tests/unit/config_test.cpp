#include <mccl/config.hpp>

#include <gtest/gtest.h>

#include <cstdlib>
#include <algorithm>
#include <functional>
#include <limits>
#include <string>
#include <thread>
#include <vector>

using namespace mccl;
using namespace std::chrono_literals;

namespace {

/// Resolves from an explicit environment only, never the real one.
config resolve_env(const environment& env) {
  return resolve_config(config_overrides{}, env);
}

const setting_info& info_of(const std::string& name) {
  for (const auto& info : all_settings())
    if (info.name == name)
      return info;
  ADD_FAILURE() << "no setting " << name;
  static setting_info none;
  return none;
}

/// Runs `fn`, expects an invalid_config error and returns its message.
std::string config_error(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const error& e) {
    EXPECT_EQ(e.code(), errc::invalid_config) << e.what();
    return e.message();
  }
  ADD_FAILURE() << "expected mccl::error(invalid_config)";
  return {};
}

std::string env_error(const environment& env) {
  return config_error([&] { resolve_env(env); });
}

std::string override_error(const config_overrides& overrides, const environment& env = {}) {
  return config_error([&] { resolve_config(overrides, env); });
}

int auto_worker_threads() {
  auto hw = static_cast<int>(std::thread::hardware_concurrency());
  return hw > 4 ? 2 : 1;
}

const std::vector<std::string> expected_names = {
  "MCCL_TRANSPORT",      "MCCL_LOG_LEVEL",     "MCCL_LISTEN_ADDR",  "MCCL_IFNAME",
  "MCCL_PORT_BASE",      "MCCL_SOCKETS_PER_PEER", "MCCL_SHM_RING_BYTES", "MCCL_SHM_BOARD_BYTES", "MCCL_SHM_STAGE_BYTES", "MCCL_SHM_SINGLE_COPY_BYTES", "MCCL_HOST_ID", "MCCL_CHUNK_BYTES",   "MCCL_SMALL_MSG_THRESHOLD", "MCCL_INLINE_BYTES", "MCCL_OP_THREAD_BYTES", "MCCL_ALGO",
  "MCCL_TRANSPORT_CRC",  "MCCL_TIMEOUT_MS",    "MCCL_CONNECT_TIMEOUT_MS",
  "MCCL_HEARTBEAT_MS",   "MCCL_HEARTBEAT_MISSES", "MCCL_RECONNECT_MS", "MCCL_CRC_RETRIES", "MCCL_FAULTS",
  "MCCL_FAULTS_REPORT",  "MCCL_LINK_PROFILE",  "MCCL_COMPRESSION",  "MCCL_TOPK_RATIO",
  "MCCL_WORKER_THREADS", "MCCL_HELPER_CPUS",   "MCCL_SPIN_US",       "MCCL_FLIGHT_RECORDER", "MCCL_FAST_MATH",
  "MCCL_GPU_THRESHOLD",  "MCCL_SHADER_PATH",   "MCCL_TRACE", "MCCL_METRICS_PORT", "MCCL_METRICS_ADDR",
  "MCCL_JOB_TOKEN",      "MCCL_JOB_ID",
};

} // namespace

// ---- the settings table ----------------------------------------------------

TEST(ConfigSettings, AllSettingsInStableOrder) {
  const auto& settings = all_settings();
  ASSERT_EQ(settings.size(), expected_names.size());
  for (std::size_t i = 0; i < settings.size(); ++i) {
    EXPECT_EQ(settings[i].name, expected_names[i]);
    EXPECT_FALSE(settings[i].allowed.empty()) << settings[i].name;
    EXPECT_FALSE(settings[i].doc.empty()) << settings[i].name;
  }
  EXPECT_EQ(&all_settings(), &settings);
}

TEST(ConfigSettings, DocumentedDefaults) {
  EXPECT_EQ(info_of("MCCL_TRANSPORT").default_value, "auto");
  EXPECT_EQ(info_of("MCCL_LOG_LEVEL").default_value, "WARN");
  EXPECT_EQ(info_of("MCCL_LISTEN_ADDR").default_value, "");
  EXPECT_EQ(info_of("MCCL_IFNAME").default_value, "");
  EXPECT_EQ(info_of("MCCL_PORT_BASE").default_value, "0");
  EXPECT_EQ(info_of("MCCL_SOCKETS_PER_PEER").default_value, "0");
  EXPECT_EQ(info_of("MCCL_CHUNK_BYTES").default_value, "1M");
  EXPECT_EQ(info_of("MCCL_SMALL_MSG_THRESHOLD").default_value, "64K");
  EXPECT_EQ(info_of("MCCL_ALGO").default_value, "");
  EXPECT_EQ(info_of("MCCL_TRANSPORT_CRC").default_value, "0");
  EXPECT_EQ(info_of("MCCL_TIMEOUT_MS").default_value, "300000");
  EXPECT_EQ(info_of("MCCL_CONNECT_TIMEOUT_MS").default_value, "30000");
  EXPECT_EQ(info_of("MCCL_HEARTBEAT_MS").default_value, "1000");
  EXPECT_EQ(info_of("MCCL_LINK_PROFILE").default_value, "default");
  EXPECT_EQ(info_of("MCCL_COMPRESSION").default_value, "none");
  EXPECT_EQ(info_of("MCCL_TOPK_RATIO").default_value, "0.01");
  EXPECT_EQ(info_of("MCCL_WORKER_THREADS").default_value, "0");
  EXPECT_EQ(info_of("MCCL_SPIN_US").default_value, "auto");
  EXPECT_EQ(info_of("MCCL_JOB_TOKEN").default_value, "");
}

// Writing every documented default into the environment must be accepted and
// give the same config as leaving it out.
TEST(ConfigSettings, DocumentedDefaultsRoundTripThroughEnvironment) {
  environment env;
  for (const auto& info : all_settings())
    env[info.name] = info.default_value;
  auto from_env = resolve_env(env);
  auto from_defaults = resolve_env({});
  EXPECT_EQ(from_env.transport, from_defaults.transport);
  EXPECT_EQ(from_env.log_level, from_defaults.log_level);
  EXPECT_EQ(from_env.listen_addr, from_defaults.listen_addr);
  EXPECT_EQ(from_env.ifname, from_defaults.ifname);
  EXPECT_EQ(from_env.port_base, from_defaults.port_base);
  EXPECT_EQ(from_env.sockets_per_peer, from_defaults.sockets_per_peer);
  EXPECT_EQ(from_env.chunk_bytes, from_defaults.chunk_bytes);
  EXPECT_EQ(from_env.small_msg_threshold, from_defaults.small_msg_threshold);
  EXPECT_TRUE(from_env.algo.empty());
  EXPECT_EQ(from_env.transport_crc, from_defaults.transport_crc);
  EXPECT_EQ(from_env.timeout, from_defaults.timeout);
  EXPECT_EQ(from_env.connect_timeout, from_defaults.connect_timeout);
  EXPECT_EQ(from_env.heartbeat, from_defaults.heartbeat);
  EXPECT_EQ(from_env.profile, from_defaults.profile);
  EXPECT_EQ(from_env.socket_buffer_bytes, from_defaults.socket_buffer_bytes);
  EXPECT_EQ(from_env.compression, from_defaults.compression);
  EXPECT_EQ(from_env.topk_ratio, from_defaults.topk_ratio);
  EXPECT_EQ(from_env.worker_threads, from_defaults.worker_threads);
  EXPECT_EQ(from_env.spin, from_defaults.spin);
  EXPECT_EQ(from_env.job_token, from_defaults.job_token);
  for (const auto& info : all_settings())
    EXPECT_EQ(from_env.sources.at(info.name), setting_source::environment) << info.name;
}

TEST(ConfigSettings, EnumNames) {
  EXPECT_STREQ(to_string(transport_kind::auto_select), "auto");
  EXPECT_STREQ(to_string(transport_kind::tcp), "tcp");
  EXPECT_STREQ(to_string(transport_kind::shm), "shm");
  EXPECT_STREQ(to_string(transport_kind::rdma), "rdma");
  EXPECT_STREQ(to_string(link_profile::default_profile), "default");
  EXPECT_STREQ(to_string(link_profile::loopback), "loopback");
  EXPECT_STREQ(to_string(link_profile::ethernet), "ethernet");
  EXPECT_STREQ(to_string(link_profile::thunderbolt), "thunderbolt");
  EXPECT_STREQ(to_string(compression_kind::none), "none");
  EXPECT_STREQ(to_string(compression_kind::fp16), "fp16");
  EXPECT_STREQ(to_string(compression_kind::bf16), "bf16");
  EXPECT_STREQ(to_string(compression_kind::topk), "topk");
  EXPECT_STREQ(to_string(setting_source::default_value), "default");
  EXPECT_STREQ(to_string(setting_source::profile), "profile");
  EXPECT_STREQ(to_string(setting_source::environment), "environment");
  EXPECT_STREQ(to_string(setting_source::explicit_value), "explicit");
}

// ---- defaults ----------------------------------------------------------------

TEST(ConfigDefaults, EveryVariable) {
  auto cfg = resolve_env({});
  EXPECT_EQ(cfg.transport, transport_kind::auto_select);
  EXPECT_EQ(cfg.log_level, log_level::warn);
  EXPECT_EQ(cfg.listen_addr, "");
  EXPECT_EQ(cfg.ifname, "");
  EXPECT_EQ(cfg.port_base, 0);
  EXPECT_EQ(cfg.chunk_bytes, 1u << 20);
  EXPECT_EQ(cfg.small_msg_threshold, 64u << 10);
  EXPECT_TRUE(cfg.algo.empty());
  EXPECT_FALSE(cfg.transport_crc);
  EXPECT_EQ(cfg.timeout, 300000ms);
  EXPECT_EQ(cfg.connect_timeout, 30000ms);
  EXPECT_EQ(cfg.heartbeat, 1000ms);
  EXPECT_EQ(cfg.profile, link_profile::default_profile);
  EXPECT_EQ(cfg.socket_buffer_bytes, 0u);
  EXPECT_EQ(cfg.compression, compression_kind::none);
  EXPECT_DOUBLE_EQ(cfg.topk_ratio, 0.01);
  EXPECT_EQ(cfg.worker_threads, auto_worker_threads());
  EXPECT_EQ(cfg.spin, spin_auto);
  EXPECT_EQ(cfg.job_token, "");
  ASSERT_EQ(cfg.sources.size(), expected_names.size());
  for (const auto& name : expected_names)
    EXPECT_EQ(cfg.sources.at(name), setting_source::default_value) << name;
}

TEST(ConfigDefaults, DefaultConstructedMatchesResolvedDefaults) {
  config plain;
  auto resolved = resolve_env({});
  EXPECT_EQ(plain.chunk_bytes, resolved.chunk_bytes);
  EXPECT_EQ(plain.small_msg_threshold, resolved.small_msg_threshold);
  EXPECT_EQ(plain.timeout, resolved.timeout);
  EXPECT_EQ(plain.connect_timeout, resolved.connect_timeout);
  EXPECT_EQ(plain.heartbeat, resolved.heartbeat);
  EXPECT_EQ(plain.socket_buffer_bytes, resolved.socket_buffer_bytes);
  EXPECT_EQ(plain.spin, resolved.spin);
  EXPECT_DOUBLE_EQ(plain.topk_ratio, resolved.topk_ratio);
}

// ---- accepted values from the environment ------------------------------------

TEST(ConfigEnv, Transport) {
  EXPECT_EQ(resolve_env({{"MCCL_TRANSPORT", "tcp"}}).transport, transport_kind::tcp);
  EXPECT_EQ(resolve_env({{"MCCL_TRANSPORT", "shm"}}).transport, transport_kind::shm);
  EXPECT_EQ(resolve_env({{"MCCL_TRANSPORT", "rdma"}}).transport, transport_kind::rdma);
  EXPECT_EQ(resolve_env({{"MCCL_TRANSPORT", "auto"}}).transport, transport_kind::auto_select);
  EXPECT_EQ(resolve_env({{"MCCL_TRANSPORT", "TCP"}}).transport, transport_kind::tcp);
  EXPECT_EQ(resolve_env({{"MCCL_TRANSPORT", "Rdma"}}).transport, transport_kind::rdma);
  EXPECT_EQ(resolve_env({{"MCCL_TRANSPORT", "tcp"}}).sources.at("MCCL_TRANSPORT"),
            setting_source::environment);
}

TEST(ConfigEnv, LogLevel) {
  EXPECT_EQ(resolve_env({{"MCCL_LOG_LEVEL", "TRACE"}}).log_level, log_level::trace);
  EXPECT_EQ(resolve_env({{"MCCL_LOG_LEVEL", "DEBUG"}}).log_level, log_level::debug);
  EXPECT_EQ(resolve_env({{"MCCL_LOG_LEVEL", "INFO"}}).log_level, log_level::info);
  EXPECT_EQ(resolve_env({{"MCCL_LOG_LEVEL", "WARN"}}).log_level, log_level::warn);
  EXPECT_EQ(resolve_env({{"MCCL_LOG_LEVEL", "ERROR"}}).log_level, log_level::error);
  EXPECT_EQ(resolve_env({{"MCCL_LOG_LEVEL", "FATAL"}}).log_level, log_level::fatal);
  EXPECT_EQ(resolve_env({{"MCCL_LOG_LEVEL", "OFF"}}).log_level, log_level::off);
  EXPECT_EQ(resolve_env({{"MCCL_LOG_LEVEL", "info"}}).log_level, log_level::info);
  EXPECT_EQ(resolve_env({{"MCCL_LOG_LEVEL", "Debug"}}).log_level, log_level::debug);
}

TEST(ConfigEnv, ListenAddr) {
  EXPECT_EQ(resolve_env({{"MCCL_LISTEN_ADDR", "10.0.0.5"}}).listen_addr, "10.0.0.5");
  EXPECT_EQ(resolve_env({{"MCCL_LISTEN_ADDR", "0.0.0.0"}}).listen_addr, "0.0.0.0");
  EXPECT_EQ(resolve_env({{"MCCL_LISTEN_ADDR", "::1"}}).listen_addr, "::1");
  EXPECT_EQ(resolve_env({{"MCCL_LISTEN_ADDR", "fe80::1:2"}}).listen_addr, "fe80::1:2");
  EXPECT_EQ(resolve_env({{"MCCL_LISTEN_ADDR", "::ffff:10.1.2.3"}}).listen_addr,
            "::ffff:10.1.2.3");
  EXPECT_EQ(resolve_env({{"MCCL_LISTEN_ADDR", "10.0.0.5,10.1.0.5"}}).listen_addr, "10.0.0.5,10.1.0.5");
  auto empty = resolve_env({{"MCCL_LISTEN_ADDR", ""}});
  EXPECT_EQ(empty.listen_addr, "");
  EXPECT_EQ(empty.sources.at("MCCL_LISTEN_ADDR"), setting_source::environment);
}

TEST(ConfigEnv, Ifname) {
  EXPECT_EQ(resolve_env({{"MCCL_IFNAME", "eth0"}}).ifname, "eth0");
  EXPECT_EQ(resolve_env({{"MCCL_IFNAME", "eth,en"}}).ifname, "eth,en");
  EXPECT_EQ(resolve_env({{"MCCL_IFNAME", "^lo,docker"}}).ifname, "^lo,docker");
  EXPECT_EQ(resolve_env({{"MCCL_IFNAME", "eth0.100"}}).ifname, "eth0.100");
  EXPECT_EQ(resolve_env({{"MCCL_IFNAME", "ib0:1,br-abc_1"}}).ifname, "ib0:1,br-abc_1");
  EXPECT_EQ(resolve_env({{"MCCL_IFNAME", ""}}).ifname, "");
}

TEST(ConfigEnv, PortBase) {
  EXPECT_EQ(resolve_env({{"MCCL_PORT_BASE", "0"}}).port_base, 0);
  EXPECT_EQ(resolve_env({{"MCCL_PORT_BASE", "1024"}}).port_base, 1024);
  EXPECT_EQ(resolve_env({{"MCCL_PORT_BASE", "29500"}}).port_base, 29500);
  EXPECT_EQ(resolve_env({{"MCCL_PORT_BASE", "65535"}}).port_base, 65535);
  EXPECT_EQ(resolve_env({}).sockets_per_peer, 0);
  EXPECT_EQ(resolve_env({{"MCCL_SOCKETS_PER_PEER", "1"}}).sockets_per_peer, 1);
  EXPECT_EQ(resolve_env({{"MCCL_SOCKETS_PER_PEER", "16"}}).sockets_per_peer, 16);
}

TEST(ConfigEnv, ShmRingBytes) {
  EXPECT_EQ(resolve_env({}).shm_ring_bytes, 2u << 20);
  EXPECT_EQ(resolve_env({{"MCCL_SHM_RING_BYTES", "64K"}}).shm_ring_bytes, 64u << 10);
  EXPECT_EQ(resolve_env({{"MCCL_SHM_RING_BYTES", "8M"}}).shm_ring_bytes, 8u << 20);
  EXPECT_EQ(resolve_env({}).shm_board_bytes, 16u << 10);
  EXPECT_EQ(resolve_env({{"MCCL_SHM_BOARD_BYTES", "0"}}).shm_board_bytes, 0u);
  EXPECT_EQ(resolve_env({}).shm_stage_bytes, 1u << 20);
  EXPECT_EQ(resolve_env({{"MCCL_SHM_STAGE_BYTES", "0"}}).shm_stage_bytes, 0u);
  EXPECT_EQ(resolve_env({{"MCCL_SHM_STAGE_BYTES", "4K"}}).shm_stage_bytes, 4u << 10);
  EXPECT_EQ(resolve_env({{"MCCL_SHM_STAGE_BYTES", "64M"}}).shm_stage_bytes, 64u << 20);
}

TEST(ConfigEnv, ChunkBytes) {
  EXPECT_EQ(resolve_env({{"MCCL_CHUNK_BYTES", "4K"}}).chunk_bytes, 4096u);
  EXPECT_EQ(resolve_env({{"MCCL_CHUNK_BYTES", "4096"}}).chunk_bytes, 4096u);
  EXPECT_EQ(resolve_env({{"MCCL_CHUNK_BYTES", "512k"}}).chunk_bytes, 512u << 10);
  EXPECT_EQ(resolve_env({{"MCCL_CHUNK_BYTES", "2MiB"}}).chunk_bytes, 2u << 20);
  EXPECT_EQ(resolve_env({{"MCCL_CHUNK_BYTES", "1G"}}).chunk_bytes, 1u << 30);
  auto cfg = resolve_env({{"MCCL_CHUNK_BYTES", "8M"}});
  EXPECT_EQ(cfg.chunk_bytes, 8u << 20);
  EXPECT_EQ(cfg.sources.at("MCCL_CHUNK_BYTES"), setting_source::environment);
}

TEST(ConfigEnv, SmallMsgThreshold) {
  EXPECT_EQ(resolve_env({{"MCCL_SMALL_MSG_THRESHOLD", "0"}}).small_msg_threshold, 0u);
  EXPECT_EQ(resolve_env({{"MCCL_SMALL_MSG_THRESHOLD", "128K"}}).small_msg_threshold, 128u << 10);
  EXPECT_EQ(resolve_env({{"MCCL_SMALL_MSG_THRESHOLD", "16M"}}).small_msg_threshold, 16u << 20);
  EXPECT_EQ(resolve_env({{"MCCL_SMALL_MSG_THRESHOLD", "100"}}).small_msg_threshold, 100u);
}

TEST(ConfigEnv, InlineBytes) {
  EXPECT_EQ(resolve_env({}).inline_bytes, 64u << 10);
  EXPECT_EQ(resolve_env({}).op_thread_bytes, std::size_t{4} << 30);
  EXPECT_EQ(resolve_env({{"MCCL_OP_THREAD_BYTES", "0"}}).op_thread_bytes, 0u);
  EXPECT_EQ(resolve_env({{"MCCL_INLINE_BYTES", "0"}}).inline_bytes, 0u);
  EXPECT_EQ(resolve_env({{"MCCL_INLINE_BYTES", "1M"}}).inline_bytes, 1u << 20);
}

TEST(ConfigEnv, TransportCrc) {
  for (const char* yes : {"1", "true", "TRUE", "yes", "Yes", "on", "ON"})
    EXPECT_TRUE(resolve_env({{"MCCL_TRANSPORT_CRC", yes}}).transport_crc) << yes;
  for (const char* no : {"0", "false", "False", "no", "NO", "off", "Off"})
    EXPECT_FALSE(resolve_env({{"MCCL_TRANSPORT_CRC", no}}).transport_crc) << no;
}

TEST(ConfigEnv, Timeouts) {
  EXPECT_EQ(resolve_env({{"MCCL_TIMEOUT_MS", "1"}}).timeout, 1ms);
  EXPECT_EQ(resolve_env({{"MCCL_TIMEOUT_MS", "86400000"}}).timeout, 86400000ms);
  EXPECT_EQ(resolve_env({{"MCCL_CONNECT_TIMEOUT_MS", "1"}}).connect_timeout, 1ms);
  EXPECT_EQ(resolve_env({{"MCCL_CONNECT_TIMEOUT_MS", "3600000"}}).connect_timeout, 3600000ms);
  EXPECT_EQ(resolve_env({{"MCCL_HEARTBEAT_MS", "10"}}).heartbeat, 10ms);
  EXPECT_EQ(resolve_env({{"MCCL_HEARTBEAT_MS", "600000"}}).heartbeat, 600000ms);
}

TEST(ConfigEnv, LinkProfile) {
  EXPECT_EQ(resolve_env({{"MCCL_LINK_PROFILE", "default"}}).profile,
            link_profile::default_profile);
  EXPECT_EQ(resolve_env({{"MCCL_LINK_PROFILE", "loopback"}}).profile, link_profile::loopback);
  EXPECT_EQ(resolve_env({{"MCCL_LINK_PROFILE", "Ethernet"}}).profile, link_profile::ethernet);
  EXPECT_EQ(resolve_env({{"MCCL_LINK_PROFILE", "THUNDERBOLT"}}).profile,
            link_profile::thunderbolt);
}

TEST(ConfigEnv, CompressionAndDefaultTopkRatio) {
  EXPECT_EQ(resolve_env({{"MCCL_COMPRESSION", "none"}}).compression, compression_kind::none);
  EXPECT_EQ(resolve_env({{"MCCL_COMPRESSION", "NONE"}}).compression, compression_kind::none);
  EXPECT_EQ(resolve_env({{"MCCL_COMPRESSION", "fp16"}}).compression, compression_kind::fp16);
  EXPECT_EQ(resolve_env({{"MCCL_COMPRESSION", "FP16"}}).compression, compression_kind::fp16);
  EXPECT_EQ(resolve_env({{"MCCL_COMPRESSION", "bf16"}}).compression, compression_kind::bf16);
  EXPECT_DOUBLE_EQ(resolve_env({{"MCCL_TOPK_RATIO", "0.01"}}).topk_ratio, 0.01);
  EXPECT_DOUBLE_EQ(resolve_env({{"MCCL_TOPK_RATIO", "1e-2"}}).topk_ratio, 0.01);
}

// Settings of MCCL's GPU backend: accepted and checked, reported as without
// effect only when set.
TEST(ConfigEnv, GpuBackendSettingsAreCheckedAndReported) {
  auto defaults = resolve_env({});
  EXPECT_TRUE(defaults.fast_math);
  EXPECT_EQ(defaults.gpu_threshold, 8192u);
  EXPECT_EQ(settings_without_effect(defaults), "");
  auto set = resolve_env({{"MCCL_FAST_MATH", "0"}, {"MCCL_GPU_THRESHOLD", "16K"},
                          {"MCCL_SHADER_PATH", "/opt/mccl/shaders"}});
  EXPECT_FALSE(set.fast_math);
  EXPECT_EQ(set.gpu_threshold, 16384u);
  EXPECT_EQ(set.shader_path, "/opt/mccl/shaders");
  EXPECT_EQ(settings_without_effect(set),
            "MCCL_FAST_MATH=0, MCCL_GPU_THRESHOLD=16K, MCCL_SHADER_PATH=\"/opt/mccl/shaders\"");
  auto one = resolve_config(config_overrides{}.set("MCCL_GPU_THRESHOLD", 8192LL), {});
  EXPECT_EQ(settings_without_effect(one), "MCCL_GPU_THRESHOLD=8K");
}

TEST(ConfigEnv, WorkerThreads) {
  EXPECT_EQ(resolve_env({{"MCCL_WORKER_THREADS", "1"}}).worker_threads, 1);
  EXPECT_EQ(resolve_env({{"MCCL_WORKER_THREADS", "4"}}).worker_threads, 4);
  EXPECT_EQ(resolve_env({{"MCCL_WORKER_THREADS", "256"}}).worker_threads, 256);
  auto automatic = resolve_env({{"MCCL_WORKER_THREADS", "0"}});
  EXPECT_EQ(automatic.worker_threads, auto_worker_threads());
  EXPECT_GE(automatic.worker_threads, 1);
  EXPECT_LE(automatic.worker_threads, 2);
}

TEST(ConfigEnv, HelperCpus) {
  EXPECT_TRUE(resolve_env({}).helper_cpus.empty()) << "default: the creating thread's CPUs";
  EXPECT_TRUE(resolve_env({{"MCCL_HELPER_CPUS", ""}}).helper_cpus.empty());
  EXPECT_EQ(resolve_env({{"MCCL_HELPER_CPUS", "3"}}).helper_cpus, (std::vector<int>{3}));
  EXPECT_EQ(resolve_env({{"MCCL_HELPER_CPUS", "8,0-2,5,1"}}).helper_cpus, (std::vector<int>{0, 1, 2, 5, 8}));
  EXPECT_EQ(resolve_env({{"MCCL_HELPER_CPUS", "1020-1023"}}).helper_cpus, (std::vector<int>{1020, 1021, 1022, 1023}));
  for (const char* bad : {"3-1", "1024", "-1", "a", "0-", "1,,2", "0 -2", "2,"}) {
    auto why = env_error({{"MCCL_HELPER_CPUS", bad}});
    EXPECT_NE(why.find("MCCL_HELPER_CPUS"), std::string::npos) << bad << ": " << why;
    EXPECT_NE(why.find("below 1024"), std::string::npos) << bad << ": " << why;
  }
}

TEST(ConfigEnv, SpinUs) {
  EXPECT_EQ(resolve_env({{"MCCL_SPIN_US", "auto"}}).spin, spin_auto);
  EXPECT_EQ(resolve_env({{"MCCL_SPIN_US", "0"}}).spin, 0us);
  EXPECT_EQ(resolve_env({{"MCCL_SPIN_US", "200"}}).spin, 200us);
  EXPECT_EQ(resolve_env({{"MCCL_SPIN_US", "1000000"}}).spin, 1000000us);
}

// auto: long polling where every rank of the host has a core, short where
// ranks share cores; a number is kept as it is.
TEST(ConfigSpin, AutoPollsLongerWhereEveryRankHasACore) {
  EXPECT_EQ(resolved_spin(spin_auto, 1), 2000us) << "one rank always has a core";
  EXPECT_EQ(resolved_spin(spin_auto, 1 << 20), 200us) << "more ranks than any machine's cores";
  EXPECT_EQ(resolved_spin(0us, 1), 0us);
  EXPECT_EQ(resolved_spin(700us, 1 << 20), 700us);
}

// A rank bound to a share of the host's CPUs (mcclrun's default) has them
// to itself when the shares fit side by side; unbound, its part of the
// CPUs it may run on.
TEST(ConfigSpin, RanksBoundToSharesOfTheHostHaveThemToThemselves) {
  EXPECT_EQ(cpus_per_rank(32, 64, 64), 2) << "unbound, 64 CPUs";
  EXPECT_EQ(cpus_per_rank(4, 2, 2), 0) << "4 ranks on 2 CPUs";
  EXPECT_EQ(cpus_per_rank(32, 2, 64), 2) << "bound to 2 of 64 CPUs each";
  EXPECT_EQ(cpus_per_rank(64, 1, 64), 1) << "bound to 1 of 64 CPUs each";
  EXPECT_EQ(cpus_per_rank(65, 1, 64), 0) << "more ranks than CPUs";
  EXPECT_EQ(cpus_per_rank(32, 4, 64), 0) << "shares of 4 for 32 ranks overlap on 64 CPUs";
  EXPECT_EQ(cpus_per_rank(8, 4, 4), 0) << "unbound on 4 CPUs, 8 ranks";
  EXPECT_EQ(cpus_per_rank(1, 2, 2), 2);
  // The polling time that follows.
  EXPECT_EQ(resolved_spin(spin_auto, 16, 16, 16), 2000us) << "unbound, a CPU per rank";
  EXPECT_EQ(resolved_spin(spin_auto, 32, 2, 64), 2000us) << "bound to 2 CPUs each";
  EXPECT_EQ(resolved_spin(spin_auto, 64, 1, 64), 200us) << "bound to 1 CPU each";
  EXPECT_EQ(resolved_spin(spin_auto, 4, 2, 2), 200us) << "4 ranks on 2 CPUs";
  EXPECT_EQ(resolved_spin(300us, 32, 2, 64), 300us);
}

TEST(ConfigEnv, FlightRecorder) {
  EXPECT_EQ(resolve_env({}).flight_recorder, 64u);
  EXPECT_EQ(resolve_env({{"MCCL_FLIGHT_RECORDER", "0"}}).flight_recorder, 0u);
  EXPECT_EQ(resolve_env({{"MCCL_FLIGHT_RECORDER", "100000"}}).flight_recorder, 100000u);
  for (const char* bad : {"-1", "100001", "many"}) {
    try {
      resolve_env({{"MCCL_FLIGHT_RECORDER", bad}});
      ADD_FAILURE() << "MCCL_FLIGHT_RECORDER=" << bad << " was accepted";
    } catch (const mccl::error& e) {
      EXPECT_NE(std::string(e.what()).find("MCCL_FLIGHT_RECORDER"), std::string::npos) << e.what();
    }
  }
}

TEST(ConfigEnv, JobToken) {
  EXPECT_EQ(resolve_env({{"MCCL_JOB_TOKEN", "s3cret token!"}}).job_token, "s3cret token!");
  std::string max(64, 'x');
  EXPECT_EQ(resolve_env({{"MCCL_JOB_TOKEN", max}}).job_token, max);
  EXPECT_EQ(resolve_env({{"MCCL_JOB_TOKEN", ""}}).job_token, "");
}

TEST(ConfigEnv, JobId) {
  EXPECT_EQ(resolve_env({}).job_id, "");
  EXPECT_EQ(resolve_env({{"MCCL_JOB_ID", "mcclrun-host-42-1700000000"}}).job_id, "mcclrun-host-42-1700000000");
  EXPECT_EQ(resolve_env({{"MCCL_JOB_ID", std::string(64, 'j')}}).job_id, std::string(64, 'j'));
}

TEST(ConfigEnv, AllAtOnce) {
  environment env{
    {"MCCL_TRANSPORT", "tcp"},          {"MCCL_LOG_LEVEL", "debug"},
    {"MCCL_LISTEN_ADDR", "127.0.0.1"},  {"MCCL_IFNAME", "^lo"},
    {"MCCL_PORT_BASE", "40000"},        {"MCCL_CHUNK_BYTES", "256K"},
    {"MCCL_SMALL_MSG_THRESHOLD", "8K"}, {"MCCL_TRANSPORT_CRC", "yes"},
    {"MCCL_TIMEOUT_MS", "5000"},        {"MCCL_CONNECT_TIMEOUT_MS", "2000"},
    {"MCCL_HEARTBEAT_MS", "100"},       {"MCCL_LINK_PROFILE", "ethernet"},
    {"MCCL_COMPRESSION", "none"},       {"MCCL_TOPK_RATIO", "0.01"},
    {"MCCL_WORKER_THREADS", "3"},       {"MCCL_HELPER_CPUS", "0-3"},     {"MCCL_SPIN_US", "10"},
    {"MCCL_JOB_TOKEN", "abc"},          {"MCCL_ALGO", "broadcast=tree"},
    {"MCCL_INLINE_BYTES", "4K"},        {"MCCL_FLIGHT_RECORDER", "8"},
    {"MCCL_HEARTBEAT_MISSES", "4"},     {"MCCL_CRC_RETRIES", "6"},
    {"MCCL_RECONNECT_MS", "2000"},
    {"MCCL_FAST_MATH", "off"},          {"MCCL_GPU_THRESHOLD", "4K"},
    {"MCCL_SHADER_PATH", "/s"},         {"MCCL_METRICS_PORT", "9400"},
    {"MCCL_METRICS_ADDR", "0.0.0.0"},   {"MCCL_TRACE", "/tmp/t"},
    {"MCCL_FAULTS", "/tmp/f.json"},     {"MCCL_FAULTS_REPORT", "/tmp/r"},
    {"MCCL_SOCKETS_PER_PEER", "3"},     {"MCCL_OP_THREAD_BYTES", "32M"},
    {"MCCL_SHM_RING_BYTES", "4M"},     {"MCCL_SHM_BOARD_BYTES", "4K"},
    {"MCCL_SHM_STAGE_BYTES", "64K"},
    {"MCCL_HOST_ID", "rack2:node-7"}, {"MCCL_SHM_SINGLE_COPY_BYTES", "1M"},
    {"MCCL_JOB_ID", "job-7"},
  };
  auto cfg = resolve_env(env);
  EXPECT_EQ(cfg.shm_stage_bytes, 64u << 10);
  EXPECT_EQ(cfg.heartbeat_misses, 4);
  EXPECT_EQ(cfg.crc_retries, 6);
  EXPECT_EQ(cfg.reconnect.count(), 2000);
  EXPECT_EQ(cfg.faults, "/tmp/f.json");
  EXPECT_EQ(cfg.faults_report, "/tmp/r");
  EXPECT_EQ(cfg.transport, transport_kind::tcp);
  EXPECT_EQ(cfg.log_level, log_level::debug);
  EXPECT_EQ(cfg.listen_addr, "127.0.0.1");
  EXPECT_EQ(cfg.ifname, "^lo");
  EXPECT_EQ(cfg.port_base, 40000);
  EXPECT_EQ(cfg.sockets_per_peer, 3);
  EXPECT_EQ(cfg.chunk_bytes, 256u << 10);
  EXPECT_EQ(cfg.shm_ring_bytes, 4u << 20);
  EXPECT_EQ(cfg.shm_board_bytes, 4u << 10);
  EXPECT_EQ(cfg.host_id, "rack2:node-7");
  EXPECT_EQ(cfg.shm_single_copy_bytes, 1u << 20);
  EXPECT_EQ(resolve_env({}).shm_single_copy_bytes, config::single_copy_auto);
  EXPECT_EQ(resolve_env({{"MCCL_SHM_SINGLE_COPY_BYTES", "AUTO"}}).shm_single_copy_bytes,
            config::single_copy_auto);
  EXPECT_EQ(resolve_env({{"MCCL_SHM_SINGLE_COPY_BYTES", "0"}}).shm_single_copy_bytes, 0u);
  EXPECT_EQ(cfg.small_msg_threshold, 8u << 10);
  EXPECT_EQ(cfg.inline_bytes, 4u << 10);
  EXPECT_EQ(cfg.op_thread_bytes, 32u << 20);
  EXPECT_EQ(algo_for(cfg.algo, "broadcast", 1), "tree");
  EXPECT_TRUE(cfg.transport_crc);
  EXPECT_EQ(cfg.timeout, 5000ms);
  EXPECT_EQ(cfg.connect_timeout, 2000ms);
  EXPECT_EQ(cfg.heartbeat, 100ms);
  EXPECT_EQ(cfg.profile, link_profile::ethernet);
  EXPECT_EQ(cfg.socket_buffer_bytes, 2u << 20);
  EXPECT_EQ(cfg.compression, compression_kind::none);
  EXPECT_EQ(cfg.worker_threads, 3);
  EXPECT_EQ(cfg.helper_cpus, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(cfg.spin, 10us);
  EXPECT_EQ(cfg.job_token, "abc");
  EXPECT_EQ(cfg.flight_recorder, 8u);
  for (const auto& name : expected_names)
    EXPECT_EQ(cfg.sources.at(name), setting_source::environment) << name;
}

// ---- rejected values -----------------------------------------------------------

struct bad_case {
  std::string name;
  std::string value;
};

// Every setting has at least one bad value; all messages must name the
// variable, quote the value and say what is allowed.
const std::vector<bad_case> bad_cases = {
  {"MCCL_TRANSPORT", "udp"},
  {"MCCL_TRANSPORT", ""},
  {"MCCL_TRANSPORT", "tcp "},
  {"MCCL_LOG_LEVEL", "verbose"},
  {"MCCL_LOG_LEVEL", "WARNING"},
  {"MCCL_LOG_LEVEL", ""},
  {"MCCL_LISTEN_ADDR", "1.2.3"},
  {"MCCL_LISTEN_ADDR", "localhost"},
  {"MCCL_LISTEN_ADDR", "256.0.0.1"},
  {"MCCL_LISTEN_ADDR", "::g"},
  {"MCCL_LISTEN_ADDR", " 10.0.0.1"},
  {"MCCL_LISTEN_ADDR", "10.0.0.1:80"},
  {"MCCL_LISTEN_ADDR", "10.0.0.1,"},
  {"MCCL_LISTEN_ADDR", "10.0.0.1,,10.0.0.2"},
  {"MCCL_LISTEN_ADDR", ",10.0.0.1"},
  {"MCCL_IFNAME", "eth0,"},
  {"MCCL_IFNAME", ",eth0"},
  {"MCCL_IFNAME", "eth0,,en"},
  {"MCCL_IFNAME", "^"},
  {"MCCL_IFNAME", "eth 0"},
  {"MCCL_IFNAME", "eth/0"},
  {"MCCL_IFNAME", "^^lo"},
  {"MCCL_SOCKETS_PER_PEER", "17"},
  {"MCCL_SOCKETS_PER_PEER", "-1"},
  {"MCCL_SOCKETS_PER_PEER", "two"},
  {"MCCL_PORT_BASE", "80"},
  {"MCCL_PORT_BASE", "1023"},
  {"MCCL_PORT_BASE", "65536"},
  {"MCCL_PORT_BASE", "-1"},
  {"MCCL_PORT_BASE", "12x"},
  {"MCCL_PORT_BASE", ""},
  {"MCCL_PORT_BASE", " 5"},
  {"MCCL_PORT_BASE", "+2000"},
  {"MCCL_PORT_BASE", "99999999999999999999999"},
  {"MCCL_SHM_RING_BYTES", "3M"},
  {"MCCL_SHM_BOARD_BYTES", "2M"},
  {"MCCL_SHM_BOARD_BYTES", "lots"},
  {"MCCL_SHM_STAGE_BYTES", "5000"},
  {"MCCL_SHM_STAGE_BYTES", "2K"},
  {"MCCL_SHM_STAGE_BYTES", "128M"},
  {"MCCL_SHM_SINGLE_COPY_BYTES", "2G"},
  {"MCCL_SHM_SINGLE_COPY_BYTES", "-1"},
  {"MCCL_SHM_SINGLE_COPY_BYTES", "sometimes"},
  {"MCCL_HOST_ID", "node 7"},
  {"MCCL_HOST_ID", "node/7"},
  {"MCCL_HOST_ID", "a-name-that-goes-on-and-on-for-far-more-than-sixty-four-characters-in-all"},
  {"MCCL_SHM_RING_BYTES", "32K"},
  {"MCCL_SHM_RING_BYTES", "2G"},
  {"MCCL_CHUNK_BYTES", "12Q"},
  {"MCCL_CHUNK_BYTES", "1K"},
  {"MCCL_CHUNK_BYTES", "4095"},
  {"MCCL_CHUNK_BYTES", "2G"},
  {"MCCL_CHUNK_BYTES", "1.5M"},
  {"MCCL_CHUNK_BYTES", ""},
  {"MCCL_CHUNK_BYTES", "-1M"},
  {"MCCL_CHUNK_BYTES", "99999999999999999999999G"},
  {"MCCL_INLINE_BYTES", "5G"},
  {"MCCL_INLINE_BYTES", "some"},
  {"MCCL_OP_THREAD_BYTES", "5G"},
  {"MCCL_OP_THREAD_BYTES", "-1"},
  {"MCCL_SMALL_MSG_THRESHOLD", "17M"},
  {"MCCL_SMALL_MSG_THRESHOLD", "-1"},
  {"MCCL_SMALL_MSG_THRESHOLD", "lots"},
  {"MCCL_SMALL_MSG_THRESHOLD", ""},
  {"MCCL_TRANSPORT_CRC", "2"},
  {"MCCL_TRANSPORT_CRC", "maybe"},
  {"MCCL_TRANSPORT_CRC", "y"},
  {"MCCL_TRANSPORT_CRC", ""},
  {"MCCL_TIMEOUT_MS", "0"},
  {"MCCL_TIMEOUT_MS", "86400001"},
  {"MCCL_TIMEOUT_MS", "5s"},
  {"MCCL_TIMEOUT_MS", ""},
  {"MCCL_CONNECT_TIMEOUT_MS", "0"},
  {"MCCL_CONNECT_TIMEOUT_MS", "3600001"},
  {"MCCL_CONNECT_TIMEOUT_MS", "1e3"},
  {"MCCL_HEARTBEAT_MS", "9"},
  {"MCCL_HEARTBEAT_MS", "600001"},
  {"MCCL_HEARTBEAT_MS", "-100"},
  {"MCCL_FLIGHT_RECORDER", "-1"},
  {"MCCL_FLIGHT_RECORDER", "100001"},
  {"MCCL_LINK_PROFILE", "fast"},
  {"MCCL_LINK_PROFILE", "default_profile"},
  {"MCCL_LINK_PROFILE", ""},
  {"MCCL_METRICS_PORT", "80"},
  {"MCCL_METRICS_PORT", "65536"},
  {"MCCL_METRICS_PORT", "x"},
  {"MCCL_JOB_ID", std::string(65, 'j')},
  {"MCCL_METRICS_ADDR", "localhost"},
  {"MCCL_METRICS_ADDR", ""},
  {"MCCL_FAST_MATH", "maybe"},
  {"MCCL_FAST_MATH", ""},
  {"MCCL_GPU_THRESHOLD", "lots"},
  {"MCCL_GPU_THRESHOLD", "-1"},
  {"MCCL_GPU_THRESHOLD", "2G"},
  {"MCCL_COMPRESSION", "zstd"},
  {"MCCL_COMPRESSION", ""},
  {"MCCL_TOPK_RATIO", "0"},
  {"MCCL_TOPK_RATIO", "1.5"},
  {"MCCL_TOPK_RATIO", "-0.1"},
  {"MCCL_TOPK_RATIO", "abc"},
  {"MCCL_TOPK_RATIO", "nan"},
  {"MCCL_TOPK_RATIO", "inf"},
  {"MCCL_TOPK_RATIO", "0.01x"},
  {"MCCL_TOPK_RATIO", ""},
  {"MCCL_WORKER_THREADS", "257"},
  {"MCCL_WORKER_THREADS", "-1"},
  {"MCCL_WORKER_THREADS", "auto"},
  {"MCCL_WORKER_THREADS", ""},
  {"MCCL_HELPER_CPUS", "3-1"},
  {"MCCL_HELPER_CPUS", "1024"},
  {"MCCL_HELPER_CPUS", "0,"},
  {"MCCL_SPIN_US", "1000001"},
  {"MCCL_SPIN_US", "x"},
  {"MCCL_SPIN_US", "1.5"},
  {"MCCL_HEARTBEAT_MISSES", "1"},
  {"MCCL_HEARTBEAT_MISSES", "-1"},
  {"MCCL_HEARTBEAT_MISSES", "1001"},
  {"MCCL_HEARTBEAT_MISSES", "x"},
  {"MCCL_CRC_RETRIES", "101"},
  {"MCCL_RECONNECT_MS", "-1"},
  {"MCCL_RECONNECT_MS", "86400001"},
  {"MCCL_RECONNECT_MS", "3s"},
  {"MCCL_CRC_RETRIES", "-1"},
  {"MCCL_CRC_RETRIES", ""},
};

TEST(ConfigInvalid, EveryBadEnvValueNamesVariableValueAndAllowed) {
  for (const auto& bad : bad_cases) {
    SCOPED_TRACE(bad.name + "=\"" + bad.value + "\"");
    auto msg = env_error({{bad.name, bad.value}});
    EXPECT_NE(msg.find(bad.name + "=\"" + bad.value + "\""), std::string::npos) << msg;
    EXPECT_NE(msg.find("expected " + info_of(bad.name).allowed), std::string::npos) << msg;
  }
}

TEST(ConfigInvalid, EveryBadOverrideValueIsRejectedTheSameWay) {
  for (const auto& bad : bad_cases) {
    SCOPED_TRACE(bad.name + "=\"" + bad.value + "\"");
    auto msg = override_error(config_overrides{}.set(bad.name, bad.value));
    EXPECT_NE(msg.find(bad.name + "=\"" + bad.value + "\""), std::string::npos) << msg;
    EXPECT_NE(msg.find("expected " + info_of(bad.name).allowed), std::string::npos) << msg;
  }
}

TEST(ConfigInvalid, ShaderPathRefusesControlCharacters) {
  auto msg = env_error({{"MCCL_SHADER_PATH", "a\nb"}});
  EXPECT_NE(msg.find("MCCL_SHADER_PATH=\"a\\x0ab\""), std::string::npos) << msg;
  EXPECT_NE(msg.find("without control characters"), std::string::npos) << msg;
}

TEST(ConfigInvalid, EveryVariableHasABadCase) {
  for (const auto& name : expected_names) {
    // Covered by their own tests: the token is secret; MCCL_ALGO errors point at
    // the offending token instead of repeating the grammar (algo_spec_test.cpp).
    // MCCL_FAULTS and MCCL_FAULTS_REPORT are any path: a bad scenario file
    // is refused when it is read (fault_scenario_test.cpp).
    // MCCL_SHADER_PATH's and MCCL_TRACE's only bad values are control
    // characters, which the message shows escaped
    // (ShaderPathRefusesControlCharacters).
    bool found = name == "MCCL_JOB_TOKEN" || name == "MCCL_ALGO" || name == "MCCL_FAULTS"
                 || name == "MCCL_FAULTS_REPORT" || name == "MCCL_SHADER_PATH"
                 || name == "MCCL_TRACE";
    for (const auto& bad : bad_cases)
      found = found || bad.name == name;
    EXPECT_TRUE(found) << name;
  }
}

TEST(ConfigInvalid, ExactMessageForChunkBytes) {
  try {
    resolve_env({{"MCCL_CHUNK_BYTES", "12Q"}});
    FAIL() << "no error";
  } catch (const error& e) {
    EXPECT_EQ(e.code(), errc::invalid_config);
    EXPECT_EQ(e.message(), "MCCL_CHUNK_BYTES=\"12Q\": expected a byte size between 4K and 1G "
                           "(suffixes K, M, G; e.g. 1M)");
    EXPECT_EQ(std::string(e.what()), "mccl: invalid_config: " + e.message());
  }
}

TEST(ConfigInvalid, IntegerMessageCarriesRange) {
  auto msg = env_error({{"MCCL_TIMEOUT_MS", "12x"}});
  EXPECT_NE(msg.find("MCCL_TIMEOUT_MS=\"12x\""), std::string::npos) << msg;
  EXPECT_NE(msg.find("between 1 and 86400000"), std::string::npos) << msg;
  msg = env_error({{"MCCL_PORT_BASE", "80"}});
  EXPECT_NE(msg.find("0 or between 1024 and 65535"), std::string::npos) << msg;
}

TEST(ConfigInvalid, OverlongJobTokenIsRejectedWithoutEchoingIt) {
  std::string token(65, 'k');
  for (bool via_override : {false, true}) {
    auto msg = via_override
                 ? override_error(config_overrides{}.set("MCCL_JOB_TOKEN", token))
                 : env_error({{"MCCL_JOB_TOKEN", token}});
    EXPECT_NE(msg.find("MCCL_JOB_TOKEN"), std::string::npos) << msg;
    EXPECT_NE(msg.find("65 bytes"), std::string::npos) << msg;
    EXPECT_NE(msg.find(info_of("MCCL_JOB_TOKEN").allowed), std::string::npos) << msg;
    EXPECT_EQ(msg.find(token), std::string::npos) << msg;
  }
}

TEST(ConfigInvalid, ControlCharactersInValuesAreEscaped) {
  auto msg = env_error({{"MCCL_TRANSPORT", "tcp\n\x1b[31m\"x"}});
  EXPECT_NE(msg.find("MCCL_TRANSPORT=\"tcp\\x0a\\x1b[31m\\\"x\""), std::string::npos) << msg;
  EXPECT_EQ(msg.find('\n'), std::string::npos);
}

TEST(ConfigInvalid, BadValueInEnvIsReportedEvenWhenOverriddenElsewhere) {
  // An override only shadows its own variable.
  auto msg = override_error(config_overrides{}.set("MCCL_TIMEOUT_MS", 10LL),
                            {{"MCCL_SPIN_US", "fast"}});
  EXPECT_NE(msg.find("MCCL_SPIN_US=\"fast\""), std::string::npos) << msg;
}

TEST(ConfigInvalid, OverrideShadowsBadEnvValueOfSameVariable) {
  // The environment value is never read when an override replaces it.
  auto cfg = resolve_config(config_overrides{}.set("MCCL_SPIN_US", 7LL),
                            {{"MCCL_SPIN_US", "fast"}});
  EXPECT_EQ(cfg.spin, 7us);
}

TEST(ConfigEnv, CompressionTopkAndAnyRatio) {
  auto cfg = resolve_env({{"MCCL_COMPRESSION", "TopK"}, {"MCCL_TOPK_RATIO", "0.25"}});
  EXPECT_EQ(cfg.compression, compression_kind::topk);
  EXPECT_DOUBLE_EQ(cfg.topk_ratio, 0.25);
  EXPECT_DOUBLE_EQ(resolve_env({{"MCCL_TOPK_RATIO", "1"}}).topk_ratio, 1.0);
  EXPECT_DOUBLE_EQ(resolve_env({{"MCCL_TOPK_RATIO", "1e-3"}}).topk_ratio, 0.001);
}

// ---- precedence and sources ----------------------------------------------------

TEST(ConfigPrecedence, OverrideBeatsEnvBeatsDefault) {
  environment env{{"MCCL_TIMEOUT_MS", "1000"}, {"MCCL_HEARTBEAT_MS", "50"}};
  config_overrides overrides;
  overrides.set("MCCL_TIMEOUT_MS", 2000LL);
  auto cfg = resolve_config(overrides, env);
  EXPECT_EQ(cfg.timeout, 2000ms);
  EXPECT_EQ(cfg.sources.at("MCCL_TIMEOUT_MS"), setting_source::explicit_value);
  EXPECT_EQ(cfg.heartbeat, 50ms);
  EXPECT_EQ(cfg.sources.at("MCCL_HEARTBEAT_MS"), setting_source::environment);
  EXPECT_EQ(cfg.connect_timeout, 30000ms);
  EXPECT_EQ(cfg.sources.at("MCCL_CONNECT_TIMEOUT_MS"), setting_source::default_value);
}

TEST(ConfigPrecedence, OverridesForEveryKindOfSetting) {
  environment env{
    {"MCCL_TRANSPORT", "shm"},    {"MCCL_LOG_LEVEL", "ERROR"}, {"MCCL_IFNAME", "eth"},
    {"MCCL_TRANSPORT_CRC", "0"},  {"MCCL_CHUNK_BYTES", "64K"}, {"MCCL_JOB_TOKEN", "env"},
  };
  auto overrides = config_overrides{}
                     .set("MCCL_TRANSPORT", "tcp")
                     .set("MCCL_LOG_LEVEL", "trace")
                     .set("MCCL_IFNAME", std::string("^docker"))
                     .set("MCCL_TRANSPORT_CRC", true)
                     .set("MCCL_CHUNK_BYTES", "2M")
                     .set("MCCL_JOB_TOKEN", "explicit");
  auto cfg = resolve_config(overrides, env);
  EXPECT_EQ(cfg.transport, transport_kind::tcp);
  EXPECT_EQ(cfg.log_level, log_level::trace);
  EXPECT_EQ(cfg.ifname, "^docker");
  EXPECT_TRUE(cfg.transport_crc);
  EXPECT_EQ(cfg.chunk_bytes, 2u << 20);
  EXPECT_EQ(cfg.job_token, "explicit");
  for (const char* name : {"MCCL_TRANSPORT", "MCCL_LOG_LEVEL", "MCCL_IFNAME",
                           "MCCL_TRANSPORT_CRC", "MCCL_CHUNK_BYTES", "MCCL_JOB_TOKEN"})
    EXPECT_EQ(cfg.sources.at(name), setting_source::explicit_value) << name;
}

TEST(ConfigPrecedence, EmptyStringOverrideBeatsEnv) {
  auto cfg = resolve_config(config_overrides{}.set("MCCL_LISTEN_ADDR", ""),
                            {{"MCCL_LISTEN_ADDR", "10.0.0.1"}});
  EXPECT_EQ(cfg.listen_addr, "");
  EXPECT_EQ(cfg.sources.at("MCCL_LISTEN_ADDR"), setting_source::explicit_value);
}

TEST(ConfigOverrides, ConvenienceSetters) {
  config_overrides o;
  o.set("MCCL_PORT_BASE", 2000)       // int picks the integer overload, not bool
    .set("MCCL_SPIN_US", 5LL)
    .set("MCCL_WORKER_THREADS", 3u)
    .set("MCCL_TRANSPORT_CRC", false)
    .set("MCCL_TOPK_RATIO", 0.01)
    .set("MCCL_TRANSPORT", "rdma");   // string literal picks the string overload
  EXPECT_EQ(o.values().at("MCCL_PORT_BASE"), "2000");
  EXPECT_EQ(o.values().at("MCCL_SPIN_US"), "5");
  EXPECT_EQ(o.values().at("MCCL_WORKER_THREADS"), "3");
  EXPECT_EQ(o.values().at("MCCL_TRANSPORT_CRC"), "0");
  EXPECT_EQ(o.values().at("MCCL_TOPK_RATIO"), "0.01");
  EXPECT_EQ(o.values().at("MCCL_TRANSPORT"), "rdma");
  EXPECT_EQ(config_overrides{}.set("MCCL_TRANSPORT_CRC", true).values().at("MCCL_TRANSPORT_CRC"),
            "1");
  o.set("MCCL_PORT_BASE", 3000);
  EXPECT_EQ(o.values().at("MCCL_PORT_BASE"), "3000");
  auto cfg = resolve_config(o, {});
  EXPECT_EQ(cfg.port_base, 3000);
  EXPECT_EQ(cfg.spin, 5us);
  EXPECT_EQ(cfg.worker_threads, 3);
  EXPECT_FALSE(cfg.transport_crc);
  EXPECT_EQ(cfg.transport, transport_kind::rdma);
}

// ---- unknown and foreign variables ------------------------------------------------

TEST(ConfigUnknown, MisspeltVariableGetsSuggestion) {
  auto msg = env_error({{"MCCL_CHUNKBYTES", "1M"}});
  EXPECT_NE(msg.find("unknown variable MCCL_CHUNKBYTES=\"1M\" (did you mean MCCL_CHUNK_BYTES?)"),
            std::string::npos)
    << msg;
  EXPECT_NE(msg.find("known variables: MCCL_TRANSPORT, MCCL_LOG_LEVEL"), std::string::npos)
    << msg;
  for (const auto& name : expected_names)
    EXPECT_NE(msg.find(name), std::string::npos) << name;
}

TEST(ConfigUnknown, SuggestionsWithinThreeEdits) {
  EXPECT_NE(env_error({{"MCCL_TIMEOUT", "5"}}).find("did you mean MCCL_TIMEOUT_MS?"),
            std::string::npos);
  EXPECT_NE(env_error({{"MCCL_TIMOEUT_MS", "5"}}).find("did you mean MCCL_TIMEOUT_MS?"),
            std::string::npos);
  EXPECT_NE(env_error({{"MCCL_LOGLEVEL", "INFO"}}).find("did you mean MCCL_LOG_LEVEL?"),
            std::string::npos);
  EXPECT_NE(env_error({{"MCCL_Chunk_Bytes", "1M"}}).find("did you mean MCCL_CHUNK_BYTES?"),
            std::string::npos);
}

TEST(ConfigUnknown, NoSuggestionWhenNothingIsClose) {
  auto msg = env_error({{"MCCL_ENABLE_MAGIC", "1"}});
  EXPECT_NE(msg.find("unknown variable MCCL_ENABLE_MAGIC=\"1\""), std::string::npos) << msg;
  EXPECT_EQ(msg.find("did you mean"), std::string::npos) << msg;
  EXPECT_NE(msg.find("known variables:"), std::string::npos) << msg;
}

TEST(ConfigUnknown, MisspeltTokenVariableDoesNotLeakTheSecret) {
  auto msg = env_error({{"MCCL_JOB_TOKN", "hunter2"}});
  EXPECT_NE(msg.find("did you mean MCCL_JOB_TOKEN?"), std::string::npos) << msg;
  EXPECT_EQ(msg.find("hunter2"), std::string::npos) << msg;
}

TEST(ConfigUnknown, UnknownOverrideNameIsAnError) {
  auto msg = override_error(config_overrides{}.set("MCCL_CHUNK_BYTE", "1M"));
  EXPECT_NE(msg.find("MCCL_CHUNK_BYTE=\"1M\""), std::string::npos) << msg;
  EXPECT_NE(msg.find("did you mean MCCL_CHUNK_BYTES?"), std::string::npos) << msg;
  msg = override_error(config_overrides{}.set("chunk_bytes", "1M"));
  EXPECT_NE(msg.find("chunk_bytes"), std::string::npos) << msg;
  EXPECT_NE(msg.find("known variables:"), std::string::npos) << msg;
}

TEST(ConfigUnknown, NonMcclVariablesAreIgnored) {
  environment env{
    {"PATH", "/usr/bin"},        {"HOME", "/root"},          {"NCCL_SOCKET_IFNAME", "eth0"},
    {"MCCLX", "1"},              {"mccl_chunk_bytes", "12Q"}, {"XMCCL_TRANSPORT", "udp"},
    {"MCCL", "1"},               {"OMPI_MCA_x", "y"},
  };
  auto cfg = resolve_env(env);
  EXPECT_EQ(cfg.chunk_bytes, 1u << 20);
  EXPECT_EQ(cfg.transport, transport_kind::auto_select);
}

// ---- link profiles ---------------------------------------------------------------

TEST(ConfigProfile, Presets) {
  struct expected {
    const char* name;
    link_profile profile;
    std::size_t chunk;
    std::size_t socket;
  };
  for (auto e : {expected{"default", link_profile::default_profile, 1u << 20, 0},
                 expected{"loopback", link_profile::loopback, 1u << 20, 4u << 20},
                 expected{"ethernet", link_profile::ethernet, 256u << 10, 2u << 20},
                 expected{"thunderbolt", link_profile::thunderbolt, 1u << 20, 8u << 20}}) {
    SCOPED_TRACE(e.name);
    auto cfg = resolve_env({{"MCCL_LINK_PROFILE", e.name}});
    EXPECT_EQ(cfg.profile, e.profile);
    EXPECT_EQ(cfg.chunk_bytes, e.chunk);
    EXPECT_EQ(cfg.socket_buffer_bytes, e.socket);
    EXPECT_EQ(cfg.sources.at("MCCL_LINK_PROFILE"), setting_source::environment);
    EXPECT_EQ(cfg.sources.at("MCCL_CHUNK_BYTES"), setting_source::profile);
  }
}

TEST(ConfigProfile, ExplicitChunkBeatsProfile) {
  auto from_env = resolve_env({{"MCCL_LINK_PROFILE", "ethernet"}, {"MCCL_CHUNK_BYTES", "4M"}});
  EXPECT_EQ(from_env.chunk_bytes, 4u << 20);
  EXPECT_EQ(from_env.socket_buffer_bytes, 2u << 20);
  EXPECT_EQ(from_env.sources.at("MCCL_CHUNK_BYTES"), setting_source::environment);

  auto from_override = resolve_config(config_overrides{}.set("MCCL_CHUNK_BYTES", "8K"),
                                      {{"MCCL_LINK_PROFILE", "thunderbolt"}});
  EXPECT_EQ(from_override.chunk_bytes, 8u << 10);
  EXPECT_EQ(from_override.socket_buffer_bytes, 8u << 20);
  EXPECT_EQ(from_override.sources.at("MCCL_CHUNK_BYTES"), setting_source::explicit_value);
}

TEST(ConfigProfile, ProfileFromOverrideBeatsEnvProfile) {
  auto cfg = resolve_config(config_overrides{}.set("MCCL_LINK_PROFILE", "ethernet"),
                            {{"MCCL_LINK_PROFILE", "loopback"}});
  EXPECT_EQ(cfg.profile, link_profile::ethernet);
  EXPECT_EQ(cfg.chunk_bytes, 256u << 10);
  EXPECT_EQ(cfg.socket_buffer_bytes, 2u << 20);
  EXPECT_EQ(cfg.sources.at("MCCL_LINK_PROFILE"), setting_source::explicit_value);
  EXPECT_EQ(cfg.sources.at("MCCL_CHUNK_BYTES"), setting_source::profile);
}

TEST(ConfigProfile, UnchosenProfileLeavesChunkAsPlainDefault) {
  auto cfg = resolve_env({});
  EXPECT_EQ(cfg.sources.at("MCCL_CHUNK_BYTES"), setting_source::default_value);
}

// ---- parse_byte_size ---------------------------------------------------------------

TEST(ParseByteSize, Accepts) {
  EXPECT_EQ(parse_byte_size("0"), 0u);
  EXPECT_EQ(parse_byte_size("4"), 4u);
  EXPECT_EQ(parse_byte_size("4B"), 4u);
  EXPECT_EQ(parse_byte_size("4b"), 4u);
  EXPECT_EQ(parse_byte_size("64K"), 64u << 10);
  EXPECT_EQ(parse_byte_size("64k"), 64u << 10);
  EXPECT_EQ(parse_byte_size("64KB"), 64u << 10);
  EXPECT_EQ(parse_byte_size("64KiB"), 64u << 10);
  EXPECT_EQ(parse_byte_size("64kib"), 64u << 10);
  EXPECT_EQ(parse_byte_size("1M"), 1u << 20);
  EXPECT_EQ(parse_byte_size("1mb"), 1u << 20);
  EXPECT_EQ(parse_byte_size("1MiB"), 1u << 20);
  EXPECT_EQ(parse_byte_size("2G"), std::size_t{2} << 30);
  EXPECT_EQ(parse_byte_size("2GiB"), std::size_t{2} << 30);
  EXPECT_EQ(parse_byte_size("007K"), 7u << 10);
  EXPECT_EQ(parse_byte_size("1048576"), 1u << 20);
}

TEST(ParseByteSize, RejectsJunkAndOverflow) {
  for (const char* junk : {"", " ", "K", "B", "iB", "-1", "+1", " 1K", "1K ", "1 K", "1.5M",
                           "1KK", "1KBB", "1T", "1Q", "4iB", "1Kb2", "0x10", "1e3", "1,024",
                           "99999999999999999999999", "18446744073709551616",
                           "18014398509481984K", "17179869184G"}) {
    EXPECT_EQ(parse_byte_size(junk), std::nullopt) << '"' << junk << '"';
  }
}

TEST(ParseByteSize, LargestValues) {
  constexpr auto max = std::numeric_limits<std::size_t>::max();
  EXPECT_EQ(parse_byte_size(std::to_string(max)), max);
  EXPECT_EQ(parse_byte_size(std::to_string(max / (1u << 30)) + "G"),
            (max / (1u << 30)) * (std::size_t{1} << 30));
}

TEST(FormatByteSize, RoundTrips) {
  EXPECT_EQ(format_byte_size(0), "0");
  EXPECT_EQ(format_byte_size(4097), "4097");
  EXPECT_EQ(format_byte_size(4096), "4K");
  EXPECT_EQ(format_byte_size(1u << 20), "1M");
  EXPECT_EQ(format_byte_size(3u << 30), "3G");
  EXPECT_EQ(format_byte_size(1536u << 10), "1536K");
  for (std::size_t v : {std::size_t{0}, std::size_t{1}, std::size_t{4097}, std::size_t{1} << 20,
                        std::size_t{1536} << 10, std::size_t{5} << 30})
    EXPECT_EQ(parse_byte_size(format_byte_size(v)), v);
}

// ---- describe ------------------------------------------------------------------------

TEST(ConfigDescribe, MentionsEveryVariableWithValueAndSource) {
  auto cfg = resolve_config(config_overrides{}.set("MCCL_TIMEOUT_MS", 1234LL),
                            {{"MCCL_LINK_PROFILE", "loopback"}, {"MCCL_SPIN_US", "7"}});
  auto text = describe(cfg);
  for (const auto& name : expected_names)
    EXPECT_NE(text.find(name + "="), std::string::npos) << name << "\n" << text;
  EXPECT_NE(text.find("MCCL_TIMEOUT_MS=1234 (explicit)"), std::string::npos) << text;
  EXPECT_NE(text.find("MCCL_SPIN_US=7 (environment)"), std::string::npos) << text;
  EXPECT_NE(text.find("MCCL_LINK_PROFILE=loopback (environment)"), std::string::npos) << text;
  EXPECT_NE(text.find("MCCL_CHUNK_BYTES=1M (profile)"), std::string::npos) << text;
  EXPECT_NE(text.find("MCCL_HEARTBEAT_MS=1000 (default)"), std::string::npos) << text;
  EXPECT_NE(text.find("MCCL_TRANSPORT=auto (default)"), std::string::npos) << text;
  EXPECT_NE(text.find("MCCL_LOG_LEVEL=WARN (default)"), std::string::npos) << text;
  EXPECT_NE(text.find("socket_buffer_bytes=4M"), std::string::npos) << text;
  // One line per setting plus the derived socket buffer line.
  std::size_t lines = 1;
  for (char c : text)
    lines += c == '\n' ? 1 : 0;
  EXPECT_EQ(lines, expected_names.size() + 1) << text;
}

TEST(ConfigDescribe, NeverShowsTheJobToken) {
  auto cfg = resolve_env({{"MCCL_JOB_TOKEN", "hunter2"}});
  auto text = describe(cfg);
  EXPECT_EQ(text.find("hunter2"), std::string::npos) << text;
  EXPECT_NE(text.find("MCCL_JOB_TOKEN=<7 bytes, not shown> (environment)"), std::string::npos)
    << text;
  EXPECT_NE(describe(resolve_env({})).find("MCCL_JOB_TOKEN=\"\" (default)"), std::string::npos);
}

// ---- the real process environment ---------------------------------------------------

TEST(ProcessEnvironment, SnapshotsAllVariables) {
  // Not MCCL_-prefixed, so a resolve_config() elsewhere cannot trip over it.
  ASSERT_EQ(::setenv("MCCLTEST_PROBE", "a=b=c", 1), 0);
  auto env = process_environment();
  ::unsetenv("MCCLTEST_PROBE");
  ASSERT_EQ(env.count("MCCLTEST_PROBE"), 1u);
  EXPECT_EQ(env.at("MCCLTEST_PROBE"), "a=b=c");
  EXPECT_EQ(process_environment().count("MCCLTEST_PROBE"), 0u);
}

// ---- fault tolerance settings -------------------------------------------------

TEST(ConfigFaultSettings, MissCountRejectsOneAndNamesTheVariable) {
  EXPECT_EQ(resolve_config({}, {{"MCCL_HEARTBEAT_MISSES", "0"}}).heartbeat_misses, 0);
  EXPECT_EQ(resolve_config({}, {{"MCCL_HEARTBEAT_MISSES", "7"}}).heartbeat_misses, 7);
  EXPECT_EQ(resolve_config({}, {}).heartbeat_misses, 5);
  auto msg = env_error({{"MCCL_HEARTBEAT_MISSES", "1"}});
  EXPECT_NE(msg.find("MCCL_HEARTBEAT_MISSES"), std::string::npos) << msg;
  EXPECT_NE(msg.find("0 or between 2 and 1000"), std::string::npos) << msg;
}

TEST(ConfigFaultSettings, ReconnectWindowDefaultsToOffAndNamesTheVariable) {
  EXPECT_EQ(resolve_config({}, {}).reconnect.count(), 0);
  EXPECT_EQ(resolve_config({}, {{"MCCL_RECONNECT_MS", "2500"}}).reconnect.count(), 2500);
  auto msg = env_error({{"MCCL_RECONNECT_MS", "3s"}});
  EXPECT_NE(msg.find("MCCL_RECONNECT_MS"), std::string::npos) << msg;
  EXPECT_NE(msg.find("between 0 and 86400000"), std::string::npos) << msg;
}

TEST(ConfigFaultSettings, CrcRetriesAndScenarioPaths) {
  auto cfg = resolve_config({}, {{"MCCL_CRC_RETRIES", "5"}, {"MCCL_FAULTS", "/tmp/s.json"},
                                 {"MCCL_FAULTS_REPORT", "/tmp/r"}});
  EXPECT_EQ(cfg.crc_retries, 5);
  EXPECT_EQ(cfg.faults, "/tmp/s.json");
  EXPECT_EQ(cfg.faults_report, "/tmp/r");
  EXPECT_EQ(resolve_config({}, {}).crc_retries, 3);
  auto msg = env_error({{"MCCL_CRC_RETRIES", "101"}});
  EXPECT_NE(msg.find("MCCL_CRC_RETRIES=\"101\""), std::string::npos) << msg;
}
