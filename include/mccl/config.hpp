#pragma once
/// mccl's runtime settings. Each setting has one MCCL_* environment variable,
/// a default, a valid range and a doc line (see all_settings()). Resolution
/// order: defaults < environment < explicit C++ overrides. Anything invalid,
/// including an MCCL_* variable mccl does not know, is an
/// mccl::error(errc::invalid_config) naming the variable, the value and what
/// is allowed, so a typo never silently falls back to a default.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include <mccl/algo_spec.hpp>
#include <mccl/error.hpp>
#include <mccl/types.hpp>

namespace mccl {

/// Threshold of mccl's log (MCCL_LOG_LEVEL).
enum class log_level : uint8_t { trace, debug, info, warn, error, fatal, off };

/// "TRACE", "DEBUG", ... "OFF".
const char* to_string(log_level level) noexcept;

/// Transport for peer links.
enum class transport_kind : uint8_t { auto_select, tcp, shm, rdma };

/// Named presets for link-dependent tuning (chunk size, socket buffers).
enum class link_profile : uint8_t { default_profile, loopback, ethernet, thunderbolt };

/// "auto", "tcp", "shm" or "rdma".
const char* to_string(transport_kind kind) noexcept;

/// "default", "loopback", "ethernet" or "thunderbolt".
const char* to_string(link_profile profile) noexcept;

/// Where a resolved value came from (for the INFO log).
enum class setting_source : uint8_t { default_value, profile, environment, explicit_value };

/// "default", "profile", "environment" or "explicit".
const char* to_string(setting_source source) noexcept;

/// Static description of one setting, for docs, --help output and errors.
struct setting_info {
  /// The environment variable, e.g. "MCCL_CHUNK_BYTES"; also the override key.
  std::string name;
  /// The default as it would be written in the environment.
  std::string default_value;
  /// What values are accepted, phrased to follow "expected ".
  std::string allowed;
  /// One line on what the setting does.
  std::string doc;
};

/// Every setting, in a stable order (MCCL_TRANSPORT first, MCCL_JOB_TOKEN last).
const std::vector<setting_info>& all_settings();

/// Upper bound of MCCL_SOCKETS_PER_PEER (and of the sockets "auto" opens).
constexpr int max_sockets_per_peer = 16;

/// config::spin's value for MCCL_SPIN_US=auto.
inline constexpr std::chrono::microseconds spin_auto{-1};

/// Fully resolved runtime settings. A default-constructed config holds the
/// defaults of the default link profile; resolve_config() is the validated
/// way to build one.
struct config {
  /// auto: shared memory within a host, TCP across hosts.
  transport_kind transport = transport_kind::auto_select;
  /// Qualified because the member name shadows the type inside the class.
  mccl::log_level log_level = mccl::log_level::warn;
  /// "" = choose automatically.
  std::string listen_addr;
  /// "" = any interface; else a name or prefix list, leading ^ excludes.
  std::string ifname;
  /// 0 = any free port; else rank r listens on port_base + r.
  int port_base = 0;
  /// TCP connections per peer; 0 = auto: one per address the peer listens
  /// on (one when it has one address).
  int sockets_per_peer = 0;
  /// Each direction's shared-memory ring between two ranks of one host.
  std::size_t shm_ring_bytes = std::size_t{2} << 20;
  /// All ranks on one host: collectives up to this many bytes per rank go
  /// over the host board; 0: never.
  std::size_t shm_board_bytes = std::size_t{16} << 10;
  /// All ranks on one host, a board present: each rank's stage bank for
  /// allreduces larger than the board's banks (the two-phase "board_rs");
  /// larger allreduces go through it in pieces of this size. 0: none.
  std::size_t shm_stage_bytes = std::size_t{1} << 20;
  /// Payloads of at least this many bytes between ranks of one host are
  /// copied once, straight from the sender's memory; 0: through the ring;
  /// single_copy_auto: 64K where 4 or more ranks share the host, else 0.
  static constexpr std::size_t single_copy_auto = ~std::size_t{0};
  std::size_t shm_single_copy_bytes = single_copy_auto;
  /// Appended to this rank's host identity: ranks with different values are
  /// different hosts even on one machine; "" = the machine decides alone.
  std::string host_id;
  /// Pipelining chunk size in bytes; the default comes from the profile.
  std::size_t chunk_bytes = std::size_t{1} << 20;
  /// Ops of at most this many bytes take the latency path.
  std::size_t small_msg_threshold = std::size_t{64} << 10;
  std::size_t inline_bytes = std::size_t{64} << 10; ///< MCCL_INLINE_BYTES (0: off)
  std::size_t op_thread_bytes = std::size_t{4} << 30; ///< MCCL_OP_THREAD_BYTES (0: off)
  /// Per-op algorithm choice by message size; empty = the built-in table.
  /// Algorithm names are not checked here: they are registered at run time.
  algo_spec algo;
  /// CRC32C on every chunk.
  bool transport_crc = false;
  /// Op deadline.
  std::chrono::milliseconds timeout{300000};
  /// Deadline for reaching a peer.
  std::chrono::milliseconds connect_timeout{30000};
  /// Interval of liveness probes on idle links.
  std::chrono::milliseconds heartbeat{1000};
  /// A peer silent for heartbeat x heartbeat_misses is declared dead; 0: never.
  int heartbeat_misses = 5;
  /// How long a lost connection may take to be re-established (with
  /// transport_crc; capped at `timeout` when used); 0: never.
  std::chrono::milliseconds reconnect{0};
  /// Retransmits of one chunk after CRC32C mismatches before the op fails.
  int crc_retries = 3;
  /// Not a setting: how many hosts the communicator's ranks run on, derived
  /// when it connects, the same on every rank. The built-in algorithm table
  /// uses it where links, not CPUs, are the limit.
  int hosts = 1;
  /// Not a setting: the host of every rank (ranks with equal values share a
  /// host; hosts are numbered 0.. in the order of their lowest rank), derived
  /// with `hosts`. Empty: unknown, taken as one host. Host-aware algorithms
  /// (MCCL_ALGO=...:hier) plan their steps from it.
  std::vector<int> host_of;
  /// Fault-injection scenario file (JSON); "" = no faults injected.
  std::string faults;
  /// Where the fault report goes; "" = next to the scenario (docs/fault-injection.md).
  std::string faults_report;
  /// Link preset that chunk_bytes and socket_buffer_bytes defaulted from.
  link_profile profile = link_profile::default_profile;
  /// From the profile; 0 = leave the OS default (autotuning).
  std::size_t socket_buffer_bytes = 0;
  /// How float32 payloads of large collectives travel (op_options).
  compression_kind compression = compression_kind::none;
  /// Fraction of elements kept by topk compression.
  double topk_ratio = 0.01;
  /// CAF scheduler threads; 0 in input means auto, resolved to >= 1.
  int worker_threads = 0;
  /// The CPUs a communicator's own threads (op thread, board thread) run
  /// on, ascending; empty: those of the thread that creates it.
  std::vector<int> helper_cpus;
  /// How long a thread moving an op polls (yielding) before it sleeps;
  /// spin_auto (MCCL_SPIN_US=auto, the default) until the communicator
  /// knows how many of its ranks share this host (resolved_spin).
  std::chrono::microseconds spin = spin_auto;
  /// Ops kept per communicator by the flight recorder; 0 = off.
  std::size_t flight_recorder = 64;
  /// MCCL_FAST_MATH, MCCL_GPU_THRESHOLD, MCCL_SHADER_PATH: settings of the
  /// GPU backend of the API mccl follows, accepted and checked, without
  /// effect on CPU memory (settings_without_effect()).
  bool fast_math = true;
  std::size_t gpu_threshold = 8192;
  std::string shader_path;
  /// MCCL_TRACE: where each communicator's timeline goes; "" = off.
  std::string trace;
  /// 0 = off; else rank r serves /metrics and /status on metrics_port + r.
  int metrics_port = 0;
  std::string metrics_addr = "127.0.0.1";
  /// Shared secret for handshakes; "" = none.
  std::string job_token;
  /// Names one launch of a job (mcclrun sets it); every rank must have the
  /// same one, so a rank of another job on the same MASTER_PORT is refused.
  std::string job_id;
  /// Setting name (MCCL_*) -> where its value came from.
  std::map<std::string, setting_source> sources;
};

/// Explicit values, by variable name, as strings (validated exactly like env
/// values when resolved; an unknown name is an error then).
class config_overrides {
public:
  /// Sets `name` to `value`, replacing an earlier value.
  config_overrides& set(const std::string& name, const std::string& value);

  /// Without this, a string literal would pick the bool overload.
  config_overrides& set(const std::string& name, const char* value);

  /// Convenience for integer settings.
  config_overrides& set(const std::string& name, long long value);

  /// Convenience for boolean settings; stored as "1" or "0".
  config_overrides& set(const std::string& name, bool value);

  /// Convenience for real-valued settings; stored with round-trip precision.
  config_overrides& set(const std::string& name, double value);

  /// Catches every other integer type, which would otherwise be ambiguous
  /// between the long long and bool overloads.
  template <class Int,
            std::enable_if_t<std::is_integral_v<Int> && !std::is_same_v<Int, bool>, int> = 0>
  config_overrides& set(const std::string& name, Int value) {
    return set(name, std::to_string(value));
  }

  /// All values set so far, by name.
  const std::map<std::string, std::string>& values() const;

private:
  std::map<std::string, std::string> values_;
};

/// Environment variables by name.
using environment = std::map<std::string, std::string>;

/// Snapshot of the process environment (all variables, not only MCCL_*).
environment process_environment();

/// Defaults < environment < overrides; throws mccl::error(errc::invalid_config).
config resolve_config(const config_overrides& overrides = {},
                      const environment& env = process_environment());

/// Multi-line human-readable dump: one line per setting
/// "MCCL_X=value (source)" for the INFO log. The job token is never shown.
std::string describe(const config& cfg);

/// "MCCL_FAST_MATH=0, MCCL_GPU_THRESHOLD=16K": the settings of MCCL's GPU
/// backend that `cfg` sets explicitly or from the environment (they have
/// no effect on CPU memory); empty when none is set.
std::string settings_without_effect(const config& cfg);

/// Parses "4", "64K", "1M", "2G" (binary multiples, case-insensitive,
/// optional trailing 'B' or 'iB'); nullopt on junk/overflow.
std::optional<std::size_t> parse_byte_size(const std::string& text);

/// Shortest exact spelling parse_byte_size() reads back: "1M", "4097".
std::string format_byte_size(std::size_t bytes);

/// The CPUs each of `local_ranks` ranks of one host has to itself, for a
/// process that may run on `usable` of the host's `online` CPUs: its
/// share of them when it may run on at least one per rank (left to the
/// kernel); `usable` when it is bound to a share of the host (mcclrun's
/// --bind-to auto, mpirun's --bind-to core) and every rank's share fits
/// beside the others; else 0 (ranks share CPUs).
int cpus_per_rank(int local_ranks, int usable, int online) noexcept;
/// The same for this process (sched_getaffinity, the online CPUs).
int cpus_per_rank(int local_ranks) noexcept;

/// The polling time of a rank whose host runs `local_ranks` ranks of its
/// communicator (itself included), in a process that may run on `usable`
/// of the host's `online` CPUs: `spin` when set, else (spin_auto) 2000 us
/// when it may run on a CPU per rank (left to the kernel) or is bound to
/// two or more CPUs of its own (cpus_per_rank >= 2), 200 us otherwise.
/// A rank that slept cost its partners a wake-up (tens to hundreds of
/// microseconds on VMs); they too waited past a short spin and slept, and
/// the job stayed in that slow mode: 16 ranks left to the kernel on 16
/// cores, 3 of 6 runs at 200 us, none at 2000 us; 32 ranks bound to 2 CPUs
/// each of 64, small board collectives at 0.35-1.7 ms instead of 9-28 us
/// in 13 of 24 runs at 200 us (yielding), none of 12 at 2000 us. Bound to
/// one CPU each, the ranks' other threads need it too: 16 ranks on 16
/// cores measured alike at 200 and 2000 us, 64 ranks on the 64-CPU VM
/// took up to 4.7 ms per small board op at 200 us and 5-12 ms at 2000 us
/// (docs/performance.md, "The spin policy"). Where ranks outnumber the
/// CPUs, long polling takes the CPU from the peer it waits for.
std::chrono::microseconds resolved_spin(std::chrono::microseconds spin, int local_ranks, int usable,
                                        int online) noexcept;
/// The same for this process (sched_getaffinity, the online CPUs).
std::chrono::microseconds resolved_spin(std::chrono::microseconds spin, int local_ranks);

} // namespace mccl
