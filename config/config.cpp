#include <mccl/config.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/socket.h>
#include <unistd.h> // environ (declared under _GNU_SOURCE, which g++ and clang++ define)

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <limits>
#include <sstream>
#include <system_error>
#include <thread>
#include <utility>

namespace mccl {

const char* to_string(transport_kind kind) noexcept {
  switch (kind) {
    case transport_kind::auto_select: return "auto";
    case transport_kind::tcp: return "tcp";
    case transport_kind::shm: return "shm";
    case transport_kind::rdma: return "rdma";
  }
  return "?";
}

const char* to_string(link_profile profile) noexcept {
  switch (profile) {
    case link_profile::default_profile: return "default";
    case link_profile::loopback: return "loopback";
    case link_profile::ethernet: return "ethernet";
    case link_profile::thunderbolt: return "thunderbolt";
  }
  return "?";
}

const char* to_string(compression_kind kind) noexcept {
  switch (kind) {
    case compression_kind::none: return "none";
    case compression_kind::fp16: return "fp16";
    case compression_kind::bf16: return "bf16";
    case compression_kind::topk: return "topk";
  }
  return "?";
}

const char* to_string(setting_source source) noexcept {
  switch (source) {
    case setting_source::default_value: return "default";
    case setting_source::profile: return "profile";
    case setting_source::environment: return "environment";
    case setting_source::explicit_value: return "explicit";
  }
  return "?";
}

namespace {

constexpr std::size_t kib = std::size_t{1} << 10;
constexpr std::size_t mib = std::size_t{1} << 20;
constexpr std::size_t gib = std::size_t{1} << 30;
constexpr std::size_t max_job_token_bytes = 64;

/// Signals a malformed or out-of-range value; resolve_config() turns it into
/// the uniform "NAME="value": expected <allowed>" message.
struct bad_value {};

using apply_fn = void (*)(config& cfg, const std::string& text);

struct setting_def {
  const char* name;
  const char* default_value;
  const char* allowed;
  const char* doc;
  apply_fn apply;
};

char ascii_lower(char c) {
  return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
}

char ascii_upper(char c) {
  return (c >= 'a' && c <= 'z') ? static_cast<char>(c - 'a' + 'A') : c;
}

// ASCII only: std::tolower depends on the process locale.
bool iequals(const std::string& a, const char* b) {
  std::size_t n = 0;
  for (; b[n] != '\0'; ++n)
    if (n >= a.size() || ascii_lower(a[n]) != ascii_lower(b[n]))
      return false;
  return n == a.size();
}

std::string to_upper(std::string s) {
  for (auto& c : s)
    c = ascii_upper(c);
  return s;
}

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

/// Strict decimal integer: optional '-', then digits, nothing else. Leading
/// whitespace and '+' are rejected because strtoll would silently accept them.
long long parse_int(const std::string& text, long long lo, long long hi) {
  std::size_t i = 0;
  bool negative = false;
  if (i < text.size() && text[i] == '-') {
    negative = true;
    ++i;
  }
  if (i == text.size())
    throw bad_value{};
  long long value = 0;
  for (; i < text.size(); ++i) {
    if (!is_digit(text[i]))
      throw bad_value{};
    int digit = text[i] - '0';
    // Accumulate toward the sign so that the most negative value fits.
    if (negative) {
      if (value < (std::numeric_limits<long long>::min() + digit) / 10)
        throw bad_value{};
      value = value * 10 - digit;
    } else {
      if (value > (std::numeric_limits<long long>::max() - digit) / 10)
        throw bad_value{};
      value = value * 10 + digit;
    }
  }
  if (value < lo || value > hi)
    throw bad_value{};
  return value;
}

/// The CPUs of a Linux CPU list ("0-3,8,10-11", as taskset and /proc
/// write them), ascending and each once; empty text: none. Every CPU is
/// below 1024, the size of the kernel's cpu_set_t in glibc.
std::vector<int> parse_cpu_list(const std::string& text) {
  std::vector<int> cpus;
  std::size_t begin = 0;
  while (!text.empty() && begin <= text.size()) {
    auto end = std::min(text.find(',', begin), text.size());
    auto item = text.substr(begin, end - begin);
    auto dash = item.find('-');
    auto first = parse_int(item.substr(0, dash), 0, 1023);
    auto last = dash == std::string::npos ? first : parse_int(item.substr(dash + 1), 0, 1023);
    if (last < first)
      throw bad_value{};
    for (auto c = first; c <= last; ++c)
      cpus.push_back(static_cast<int>(c));
    begin = end + 1;
  }
  std::sort(cpus.begin(), cpus.end());
  cpus.erase(std::unique(cpus.begin(), cpus.end()), cpus.end());
  return cpus;
}

/// parse_cpu_list's inverse, with runs: {0, 1, 2, 5} -> "0-2,5".
std::string cpu_list_text(const std::vector<int>& cpus) {
  std::string out;
  for (std::size_t i = 0; i < cpus.size();) {
    auto j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1)
      ++j;
    out += (out.empty() ? "" : ",") + std::to_string(cpus[i]) + (j > i ? "-" + std::to_string(cpus[j]) : "");
    i = j + 1;
  }
  return out;
}

std::size_t parse_bytes(const std::string& text, std::size_t lo, std::size_t hi) {
  auto value = parse_byte_size(text);
  if (!value || *value < lo || *value > hi)
    throw bad_value{};
  return *value;
}

bool parse_bool(const std::string& text) {
  for (const char* yes : {"1", "true", "yes", "on"})
    if (iequals(text, yes))
      return true;
  for (const char* no : {"0", "false", "no", "off"})
    if (iequals(text, no))
      return false;
  throw bad_value{};
}

/// Locale-independent (strtod would read "0,5" under a German locale).
double parse_real(const std::string& text) {
  double value = 0;
  const char* first = text.data();
  const char* last = first + text.size();
  auto [ptr, ec] = std::from_chars(first, last, value);
  if (text.empty() || ec != std::errc{} || ptr != last || !std::isfinite(value))
    throw bad_value{};
  return value;
}

template <class Enum, std::size_t N>
Enum parse_enum(const std::string& text, const Enum (&values)[N]) {
  for (auto value : values)
    if (iequals(text, to_string(value)))
      return value;
  throw bad_value{};
}

bool is_ip_literal(const std::string& text) {
  unsigned char buf[sizeof(in6_addr)];
  return ::inet_pton(AF_INET, text.c_str(), buf) == 1
         || ::inet_pton(AF_INET6, text.c_str(), buf) == 1;
}

bool is_ifname_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || is_digit(c) || c == '_'
         || c == '.' || c == ':' || c == '-';
}

/// Syntax only: interfaces differ between hosts, so existence is checked
/// where the transport picks one.
bool is_ifname_spec(const std::string& text) {
  if (text.empty())
    return true;
  std::size_t i = text[0] == '^' ? 1 : 0;
  if (i == text.size())
    return false;
  std::size_t item_len = 0;
  for (; i < text.size(); ++i) {
    if (text[i] == ',') {
      if (item_len == 0)
        return false;
      item_len = 0;
    } else if (is_ifname_char(text[i])) {
      ++item_len;
    } else {
      return false;
    }
  }
  return item_len > 0;
}


std::string format_real(double value) {
  char buf[64];
  auto [ptr, ec] = std::to_chars(buf, buf + sizeof buf, value);
  if (ec != std::errc{})
    return std::to_string(value);
  return std::string(buf, ptr);
}

// Order here is the public order of all_settings().
const setting_def setting_table[] = {
  {"MCCL_TRANSPORT", "auto", "one of auto, tcp, shm, rdma (case-insensitive)",
   "Transport for peer links: auto = shared memory between ranks of one host, TCP between hosts; "
   "shm insists on shared memory with every peer; tcp never uses it; rdma tries RDMA and falls back to TCP "
   "with a warning naming the reason (this version has no RDMA data path; auto probes for RDMA and "
   "says at INFO why it is not used).",
   [](config& cfg, const std::string& text) {
     static constexpr transport_kind values[] = {transport_kind::auto_select, transport_kind::tcp,
                                                 transport_kind::shm, transport_kind::rdma};
     cfg.transport = parse_enum(text, values);
   }},
  {"MCCL_LOG_LEVEL", "WARN",
   "one of TRACE, DEBUG, INFO, WARN, ERROR, FATAL, OFF (case-insensitive)",
   "Messages below this level are not logged.",
   [](config& cfg, const std::string& text) {
     static constexpr mccl::log_level values[] = {
       log_level::trace, log_level::debug, log_level::info, log_level::warn,
       log_level::error, log_level::fatal, log_level::off};
     cfg.log_level = parse_enum(text, values);
   }},
  {"MCCL_LISTEN_ADDR", "",
   "an IPv4 or IPv6 address literal (e.g. 10.0.0.5 or fe80::1), several separated by commas "
   "(one connection per peer each), or empty to choose automatically",
   "Address(es) to listen on for peer connections; empty chooses automatically.",
   [](config& cfg, const std::string& text) {
     // Syntax only: whether the address belongs to this host is checked
     // where the transport binds it.
     std::size_t begin = 0;
     while (!text.empty() && begin <= text.size()) {
       auto end = std::min(text.find(',', begin), text.size());
       if (!is_ip_literal(text.substr(begin, end - begin)))
         throw bad_value{};
       begin = end + 1;
     }
     cfg.listen_addr = text;
   }},
  {"MCCL_IFNAME", "",
   "an interface name or comma-separated list of name prefixes made of [A-Za-z0-9_.:-], "
   "optionally starting with ^ to exclude them (e.g. eth0 or ^lo,docker), or empty for any",
   "Network interfaces to use (prefix match); a leading ^ excludes instead.",
   [](config& cfg, const std::string& text) {
     if (!is_ifname_spec(text))
       throw bad_value{};
     cfg.ifname = text;
   }},
  {"MCCL_PORT_BASE", "0", "an integer, 0 or between 1024 and 65535",
   "Rank r listens on base+r; 0 means any free port, published through rendezvous.",
   [](config& cfg, const std::string& text) {
     auto port = parse_int(text, 0, 65535);
     if (port != 0 && port < 1024)
       throw bad_value{};
     cfg.port_base = static_cast<int>(port);
   }},
  {"MCCL_SOCKETS_PER_PEER", "0", "an integer between 0 and 16 (0 = auto)",
   "TCP connections per peer, the stream striped across them; 0 (auto): one per address the "
   "peer listens on. Every rank must use the same value.",
   [](config& cfg, const std::string& text) {
     cfg.sockets_per_peer = static_cast<int>(parse_int(text, 0, max_sockets_per_peer));
   }},
  {"MCCL_SHM_RING_BYTES", "2M", "a power of two between 64K and 1G (suffixes K, M, G; e.g. 2M)",
   "Each direction's ring between two ranks of one host (shared memory); every rank must use the "
   "same value.",
   [](config& cfg, const std::string& text) {
     auto bytes = parse_bytes(text, 64 * kib, gib);
     if ((bytes & (bytes - 1)) != 0)
       throw bad_value{};
     cfg.shm_ring_bytes = bytes;
   }},
  {"MCCL_SHM_BOARD_BYTES", "16K", "a byte size between 0 and 1M (suffixes K, M, G; e.g. 16K)",
   "When every rank is on one host: collectives whose input is up to this many bytes per rank "
   "(allreduce, reduce, broadcast, allgather, reduce_scatter, barrier; at most MCCL_INLINE_BYTES) go "
   "through one shared board instead of the links, in the call; 0: never. "
   "Every rank must use the same value.",
   [](config& cfg, const std::string& text) {
     cfg.shm_board_bytes = parse_bytes(text, 0, mib);
   }},
  {"MCCL_SHM_STAGE_BYTES", "1M", "0, or a multiple of 4K between 4K and 64M (suffixes K, M, G; e.g. 256K)",
   "When every rank is on one host and the board is on: each rank's stage on the board for "
   "collectives above MCCL_SHM_BOARD_BYTES (above MCCL_INLINE_BYTES on the communicator's board thread), "
   "and allreduces and reduces whose ranks' inputs add up to 16K or more. Allreduce and reduce of 3 "
   "or more ranks run as board_rs (every rank stages its input, reduces one slice of everyone's and "
   "copies the reduced whole out; a reduce, its root only; two ranks keep the links' direct exchange); "
   "broadcast, allgather and reduce_scatter as board_stage "
   "(every rank stages what it gives, then copies out or reduces what it needs). MCCL_ALGO naming "
   "them (e.g. broadcast=board_stage) puts every size there. Inputs larger than this go "
   "through in pieces of this size. Costs a little over 2x this of shared memory per rank and "
   "communicator (taken as first used); 0: no stage, such collectives go over the links. "
   "Every rank must use the same value.",
   [](config& cfg, const std::string& text) {
     auto bytes = parse_bytes(text, 0, 64 * mib);
     if (bytes != 0 && (bytes < 4 * kib || bytes % (4 * kib) != 0))
       throw bad_value{};
     cfg.shm_stage_bytes = bytes;
   }},
  {"MCCL_SHM_SINGLE_COPY_BYTES", "auto",
   "auto, or a byte size between 0 and 1G (suffixes K, M, G; e.g. 64K)",
   "Between ranks of one host, payloads of at least this many bytes are copied once, straight "
   "from the sender's memory (process_vm_readv), instead of into the ring and out again; "
   "where the kernel refuses that, they pass through the ring (logged at INFO); 0: always the ring; "
   "auto: 64K where 4 or more ranks of the communicator share the host, else 0.",
   [](config& cfg, const std::string& text) {
     cfg.shm_single_copy_bytes =
       iequals(text, "auto") ? config::single_copy_auto : parse_bytes(text, 0, gib);
   }},
  {"MCCL_HOST_ID", "", "up to 64 letters, digits, '.', '_', ':' or '-', or empty",
   "Splits a machine into several hosts: ranks with different values never share memory and "
   "count as different hosts (containers that share a kernel; host-aware algorithms tried on "
   "one machine). Ranks on different machines are different hosts whatever it says.",
   [](config& cfg, const std::string& text) {
     if (text.size() > 64)
       throw bad_value{};
     for (char c : text)
       if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != ':'
           && c != '-')
         throw bad_value{};
     cfg.host_id = text;
   }},
  {"MCCL_CHUNK_BYTES", "1M", "a byte size between 4K and 1G (suffixes K, M, G; e.g. 1M)",
   "Pipelining chunk size; the default comes from MCCL_LINK_PROFILE.",
   [](config& cfg, const std::string& text) {
     cfg.chunk_bytes = parse_bytes(text, 4 * kib, gib);
   }},
  {"MCCL_SMALL_MSG_THRESHOLD", "64K",
   "a byte size between 0 and 16M (suffixes K, M, G; e.g. 64K)",
   "Ops of up to this many bytes take the latency path instead of pipelining.",
   [](config& cfg, const std::string& text) {
     cfg.small_msg_threshold = parse_bytes(text, 0, 16 * mib);
   }},
  {"MCCL_INLINE_BYTES", "64K", "a byte size between 0 and 4G (suffixes K, M, G; e.g. 64K)",
   "Collectives of up to this many bytes run to their end on the calling thread (the call "
   "returns once the op is done); 0: every op returns at once.",
   [](config& cfg, const std::string& text) {
     cfg.inline_bytes = parse_bytes(text, 0, std::size_t{4} << 30);
   }},
  {"MCCL_OP_THREAD_BYTES", "4G", "a byte size between 0 and 4G (suffixes K, M, G; e.g. 16M)",
   "Ops of up to this many bytes that no caller waits for are moved by the communicator's op "
   "thread, larger ones by the progress actor; 0: always the progress actor.",
   [](config& cfg, const std::string& text) {
     cfg.op_thread_bytes = parse_bytes(text, 0, std::size_t{4} << 30);
   }},
  {"MCCL_ALGO", "",
   "rules op=algorithm[:range][,...] separated by ';', a range being [size]-[size] "
   "(lower inclusive, upper exclusive; e.g. allreduce=rd:0-64K,ring:64K-;broadcast=tree), "
   "or empty",
   "Per-op algorithm choice by message size, e.g. allreduce=rd:0-64K,ring:64K-; empty: "
   "built-in table.",
   [](config& cfg, const std::string& text) {
     // Throws its own invalid_config error, which points at the offending token.
     cfg.algo = parse_algo_spec(text);
   }},
  {"MCCL_TRANSPORT_CRC", "0", "a boolean: 1/0, true/false, yes/no, on/off (case-insensitive)",
   "Checksum every chunk with CRC32C.",
   [](config& cfg, const std::string& text) { cfg.transport_crc = parse_bool(text); }},
  {"MCCL_TIMEOUT_MS", "300000", "an integer number of milliseconds between 1 and 86400000",
   "Deadline for one collective op.",
   [](config& cfg, const std::string& text) {
     cfg.timeout = std::chrono::milliseconds{parse_int(text, 1, 86400000)};
   }},
  {"MCCL_CONNECT_TIMEOUT_MS", "30000",
   "an integer number of milliseconds between 1 and 3600000",
   "Deadline for connecting to a peer, retries included.",
   [](config& cfg, const std::string& text) {
     cfg.connect_timeout = std::chrono::milliseconds{parse_int(text, 1, 3600000)};
   }},
  {"MCCL_HEARTBEAT_MS", "1000", "an integer number of milliseconds between 10 and 600000",
   "A link that sent nothing for half this long sends a heartbeat.",
   [](config& cfg, const std::string& text) {
     cfg.heartbeat = std::chrono::milliseconds{parse_int(text, 10, 600000)};
   }},
  {"MCCL_HEARTBEAT_MISSES", "5", "an integer, 0 or between 2 and 1000",
   "A peer silent for MCCL_HEARTBEAT_MS times this many is declared dead, failing the ops that "
   "wait on it; 0: never (the op deadline still applies).",
   [](config& cfg, const std::string& text) {
     auto misses = parse_int(text, 0, 1000);
     if (misses == 1)
       throw bad_value{}; // heartbeats go out every 0.5..1 interval: one miss is normal jitter
     cfg.heartbeat_misses = static_cast<int>(misses);
   }},
  {"MCCL_RECONNECT_MS", "0", "an integer number of milliseconds between 0 and 86400000",
   "With MCCL_TRANSPORT_CRC, a connection that is reset or closed without the peer's BYE or "
   "ABORT is re-established within this long (at most MCCL_TIMEOUT_MS) and the op resumes; "
   "0: it fails the op at once.",
   [](config& cfg, const std::string& text) {
     cfg.reconnect = std::chrono::milliseconds{parse_int(text, 0, 86400000)};
   }},
  {"MCCL_CRC_RETRIES", "3", "an integer between 0 and 100",
   "With MCCL_TRANSPORT_CRC, how often one chunk is retransmitted after CRC32C mismatches before "
   "the op fails naming the link.",
   [](config& cfg, const std::string& text) {
     cfg.crc_retries = static_cast<int>(parse_int(text, 0, 100));
   }},
  {"MCCL_FAULTS", "", "a path to a fault scenario file (JSON), or empty",
   "Fault-injection scenario (see examples/faults/); empty: no faults are injected.",
   [](config& cfg, const std::string& text) { cfg.faults = text; }},
  {"MCCL_FAULTS_REPORT", "", "a path prefix, or empty",
   "Where each rank writes its fault report: PREFIX.rankR.txt and .json; empty: next to the "
   "scenario file.",
   [](config& cfg, const std::string& text) { cfg.faults_report = text; }},
  {"MCCL_LINK_PROFILE", "default",
   "one of default, loopback, ethernet, thunderbolt (case-insensitive)",
   "Preset for chunk size and socket buffers: default (1M; OS autotuning, 4M between ranks on one "
   "host), loopback (1M, 4M), "
   "ethernet (256K, 2M), thunderbolt (1M, 8M). Between ranks on one host the send buffer is a "
   "quarter of that size.",
   [](config& cfg, const std::string& text) {
     static constexpr link_profile values[] = {link_profile::default_profile,
                                               link_profile::loopback, link_profile::ethernet,
                                               link_profile::thunderbolt};
     cfg.profile = parse_enum(text, values);
   }},
  {"MCCL_COMPRESSION", "none", "one of none, fp16, bf16, topk (case-insensitive)",
   "How float32 payloads of allreduce, reduce, reduce_scatter, allgather and broadcast above "
   "MCCL_SMALL_MSG_THRESHOLD travel: fp16 or bf16 halve the bytes (rounded to nearest even; "
   "reductions add in float32; every rank ends with the same bits); topk sends only the "
   "MCCL_TOPK_RATIO largest-magnitude elements of a sum or avg allreduce, keeping the rest for "
   "the next op on the same buffer (error feedback); none sends them exactly.",
   [](config& cfg, const std::string& text) {
     static constexpr compression_kind values[] = {compression_kind::none, compression_kind::fp16,
                                                   compression_kind::bf16, compression_kind::topk};
     cfg.compression = parse_enum(text, values);
   }},
  {"MCCL_TOPK_RATIO", "0.01", "a real number in (0, 1], e.g. 0.01",
   "Fraction of elements each rank sends under topk compression (at least one).",
   [](config& cfg, const std::string& text) {
     double ratio = parse_real(text);
     if (!(ratio > 0.0 && ratio <= 1.0))
       throw bad_value{};
     cfg.topk_ratio = ratio;
   }},
  {"MCCL_WORKER_THREADS", "0", "an integer between 0 and 256 (0 = auto)",
   "CAF scheduler threads; 0 (auto) means 1 on machines with up to 4 hardware threads, else 2.",
   [](config& cfg, const std::string& text) {
     cfg.worker_threads = static_cast<int>(parse_int(text, 0, 256));
   }},
  {"MCCL_HELPER_CPUS", "",
   "a list of CPU numbers and ranges below 1024 (e.g. 0-15 or 0-7,16-23), or empty",
   "The CPUs a communicator's own threads (its op thread and board thread) run on; empty: those of "
   "the thread that creates it. mcclrun, when it binds each rank to its share of the CPUs, sets the "
   "CPUs of all its ranks on that host.",
   [](config& cfg, const std::string& text) { cfg.helper_cpus = parse_cpu_list(text); }},
  {"MCCL_SPIN_US", "auto", "auto, or an integer number of microseconds between 0 and 1000000",
   "How long a thread that moves an op polls without traffic before sleeping until a "
   "connection is ready; auto: 2000 when this process may run on as many CPUs as its host has ranks, "
   "or is bound to two or more CPUs of its own (its share of the host, as mcclrun binds), else 200.",
   [](config& cfg, const std::string& text) {
     cfg.spin = text == "auto" ? spin_auto : std::chrono::microseconds{parse_int(text, 0, 1000000)};
   }},
  {"MCCL_FLIGHT_RECORDER", "64", "an integer number of ops between 0 and 100000 (0 = off)",
   "How many of the latest ops each communicator remembers and logs at ERROR when it aborts or times out.",
   [](config& cfg, const std::string& text) {
     cfg.flight_recorder = static_cast<std::size_t>(parse_int(text, 0, 100000));
   }},
  // MCCL's Metal backend (the API mccl follows) has these; scripts written
  // for it set them. Checked like any setting, then logged once as having
  // no effect: mccl's payloads live in CPU memory.
  {"MCCL_FAST_MATH", "1", "a boolean: 1/0, true/false, yes/no, on/off (case-insensitive)",
   "GPU kernels with fast math (MCCL's Metal backend); no effect on CPU memory, accepted for "
   "compatibility.",
   [](config& cfg, const std::string& text) { cfg.fast_math = parse_bool(text); }},
  {"MCCL_GPU_THRESHOLD", "8K", "a byte size between 0 and 1G (suffixes K, M, G; e.g. 8192 or 8K)",
   "Size from which MCCL's Metal backend reduces on the GPU; no effect on CPU memory, accepted "
   "for compatibility.",
   [](config& cfg, const std::string& text) { cfg.gpu_threshold = parse_bytes(text, 0, gib); }},
  {"MCCL_SHADER_PATH", "", "a file system path (any string without control characters)",
   "Where MCCL's Metal backend finds its shaders; no effect on CPU memory, accepted for "
   "compatibility.",
   [](config& cfg, const std::string& text) {
     for (char c : text)
       if (static_cast<unsigned char>(c) < 0x20)
         throw bad_value{};
     cfg.shader_path = text;
   }},
  {"MCCL_TRACE", "", "a directory path (made if missing), or empty for off",
   "Each rank writes a timeline of every communicator (ops, chunks, waits) in Chrome's trace "
   "format to DIR/mccl-trace.rank<R>.comm<C>.json when it is finalized; tools/mccl-trace merges "
   "them for Perfetto.",
   [](config& cfg, const std::string& text) {
     for (char c : text)
       if (static_cast<unsigned char>(c) < 0x20)
         throw bad_value{};
     cfg.trace = text;
   }},
  {"MCCL_METRICS_PORT", "0", "an integer, 0 or between 1024 and 65535",
   "Rank r serves GET /metrics (Prometheus text) and GET /status (what each communicator is "
   "doing, JSON) over HTTP on MCCL_METRICS_ADDR port base+r; 0: off.",
   [](config& cfg, const std::string& text) {
     auto port = parse_int(text, 0, 65535);
     if (port != 0 && port < 1024)
       throw bad_value{};
     cfg.metrics_port = static_cast<int>(port);
   }},
  {"MCCL_METRICS_ADDR", "127.0.0.1", "an IPv4 or IPv6 address literal",
   "Where MCCL_METRICS_PORT listens: loopback unless told otherwise (0.0.0.0 for every interface).",
   [](config& cfg, const std::string& text) {
     if (!is_ip_literal(text))
       throw bad_value{};
     cfg.metrics_addr = text;
   }},
  {"MCCL_JOB_TOKEN", "", "any string of at most 64 bytes",
   "Shared secret checked in every connection handshake; empty: rank 0 makes one per job and hands it out through rendezvous.",
   [](config& cfg, const std::string& text) {
     if (text.size() > max_job_token_bytes)
       throw bad_value{};
     cfg.job_token = text;
   }},
  {"MCCL_JOB_ID", "", "any string of at most 64 bytes",
   "Names one launch of a job (mcclrun sets a fresh one); every rank must have the same, or rendezvous refuses the rank as one of another job on the same MASTER_PORT.",
   [](config& cfg, const std::string& text) {
     if (text.size() > max_job_token_bytes)
       throw bad_value{};
     cfg.job_id = text;
   }},
};

constexpr const char* job_token_name = "MCCL_JOB_TOKEN";
constexpr const char* chunk_bytes_name = "MCCL_CHUNK_BYTES";
constexpr const char* link_profile_name = "MCCL_LINK_PROFILE";

const setting_def* find_setting(const std::string& name) {
  for (const auto& def : setting_table)
    if (name == def.name)
      return &def;
  return nullptr;
}

struct profile_preset {
  std::size_t chunk_bytes;
  std::size_t socket_buffer_bytes;
};

profile_preset preset_of(link_profile profile) {
  switch (profile) {
    case link_profile::default_profile: return {mib, 0};
    case link_profile::loopback: return {mib, 4 * mib};
    case link_profile::ethernet: return {256 * kib, 2 * mib};
    case link_profile::thunderbolt: return {mib, 8 * mib};
  }
  return {mib, 0};
}

/// The token is a secret: errors and logs show its length, never its bytes.
std::string shown_value(const char* name, const std::string& value) {
  if (std::string(name) == job_token_name && !value.empty())
    return "<" + std::to_string(value.size()) + (value.size() == 1 ? " byte" : " bytes")
           + ", not shown>";
  return quoted(value);
}

/// Optimal string alignment distance (Levenshtein plus adjacent swaps), so
/// that "MCCL_TIMOEUT_MS" counts as one typo.
std::size_t edit_distance(const std::string& a, const std::string& b) {
  const std::size_t n = a.size();
  const std::size_t m = b.size();
  std::vector<std::vector<std::size_t>> d(n + 1, std::vector<std::size_t>(m + 1));
  for (std::size_t i = 0; i <= n; ++i)
    d[i][0] = i;
  for (std::size_t j = 0; j <= m; ++j)
    d[0][j] = j;
  for (std::size_t i = 1; i <= n; ++i) {
    for (std::size_t j = 1; j <= m; ++j) {
      std::size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[n][m];
}

constexpr std::size_t max_suggestion_distance = 3;

/// Closest known name, compared case-insensitively so "MCCL_Chunk_Bytes"
/// still gets a suggestion; nullptr when nothing is within reach.
const char* closest_setting(const std::string& name) {
  auto upper = to_upper(name);
  const char* best = nullptr;
  std::size_t best_distance = max_suggestion_distance + 1;
  for (const auto& def : setting_table) {
    auto distance = edit_distance(upper, def.name);
    if (distance < best_distance) {
      best = def.name;
      best_distance = distance;
    }
  }
  return best;
}

std::string known_names() {
  std::string out;
  for (const auto& def : setting_table) {
    if (!out.empty())
      out += ", ";
    out += def.name;
  }
  return out;
}

[[noreturn]] void unknown_variable(const std::string& what, const std::string& name,
                                   const std::string& value) {
  auto suggestion = closest_setting(name);
  // A misspelt MCCL_JOB_TOKEN still holds the secret.
  std::string msg = what + " " + name + "="
                    + shown_value(suggestion != nullptr ? suggestion : "", value);
  if (suggestion != nullptr)
    msg += std::string(" (did you mean ") + suggestion + "?)";
  msg += "; known variables: " + known_names();
  throw error(errc::invalid_config, msg);
}

bool has_mccl_prefix(const std::string& name) {
  return name.compare(0, 5, "MCCL_") == 0;
}

} // namespace

const std::vector<setting_info>& all_settings() {
  static const std::vector<setting_info> infos = [] {
    std::vector<setting_info> out;
    for (const auto& def : setting_table)
      out.push_back(setting_info{def.name, def.default_value, def.allowed, def.doc});
    return out;
  }();
  return infos;
}

config_overrides& config_overrides::set(const std::string& name, const std::string& value) {
  values_[name] = value;
  return *this;
}

config_overrides& config_overrides::set(const std::string& name, const char* value) {
  return set(name, std::string(value != nullptr ? value : ""));
}

config_overrides& config_overrides::set(const std::string& name, long long value) {
  return set(name, std::to_string(value));
}

config_overrides& config_overrides::set(const std::string& name, bool value) {
  return set(name, std::string(value ? "1" : "0"));
}

config_overrides& config_overrides::set(const std::string& name, double value) {
  return set(name, format_real(value));
}

const std::map<std::string, std::string>& config_overrides::values() const {
  return values_;
}

environment process_environment() {
  environment env;
  if (environ == nullptr)
    return env;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    std::string kv(*entry);
    auto eq = kv.find('=');
    if (eq == std::string::npos)
      continue;
    // emplace keeps the first duplicate, matching what getenv() returns.
    env.emplace(kv.substr(0, eq), kv.substr(eq + 1));
  }
  return env;
}

config resolve_config(const config_overrides& overrides, const environment& env) {
  for (const auto& [name, value] : overrides.values())
    if (find_setting(name) == nullptr)
      unknown_variable("unknown setting in overrides:", name, value);
  for (const auto& [name, value] : env)
    if (has_mccl_prefix(name) && find_setting(name) == nullptr)
      unknown_variable("unknown variable", name, value);

  config cfg;
  for (const auto& def : setting_table) {
    const std::string* text = nullptr;
    auto source = setting_source::default_value;
    if (auto i = overrides.values().find(def.name); i != overrides.values().end()) {
      text = &i->second;
      source = setting_source::explicit_value;
    } else if (auto j = env.find(def.name); j != env.end()) {
      text = &j->second;
      source = setting_source::environment;
    }
    cfg.sources[def.name] = source;
    if (text == nullptr)
      continue;
    try {
      def.apply(cfg, *text);
    } catch (const bad_value&) {
      throw error(errc::invalid_config, std::string(def.name) + "=" + shown_value(def.name, *text)
                                          + ": expected " + def.allowed);
    }
  }

  // mlx.launch --verbose sets MLX_RING_VERBOSE for every rank: programs
  // started that way log at INFO unless MCCL_LOG_LEVEL says otherwise.
  if (auto v = env.find("MLX_RING_VERBOSE"); v != env.end() && !v->second.empty() && v->second != "0"
      && cfg.sources["MCCL_LOG_LEVEL"] == setting_source::default_value) {
    cfg.log_level = log_level::info;
    cfg.sources["MCCL_LOG_LEVEL"] = setting_source::environment;
  }

  auto preset = preset_of(cfg.profile);
  cfg.socket_buffer_bytes = preset.socket_buffer_bytes;
  if (cfg.sources[chunk_bytes_name] == setting_source::default_value) {
    cfg.chunk_bytes = preset.chunk_bytes;
    // Only a chosen profile counts as the origin; otherwise it is a plain default.
    if (cfg.sources[link_profile_name] != setting_source::default_value)
      cfg.sources[chunk_bytes_name] = setting_source::profile;
  }

  if (cfg.worker_threads == 0) {
    // Measured with mccl-bench on 2 vCPUs: one worker per rank beats two
    // (4 ranks: 4 B allreduce p50 ~560-700 us vs ~720-770 us; 64 MiB busbw
    // 0.72-0.83 vs 0.57-0.78 GB/s), since ranks already share the cores.
    // hardware_concurrency() may report 0 when unknown.
    auto hw = static_cast<int>(std::thread::hardware_concurrency());
    cfg.worker_threads = hw > 4 ? 2 : 1;
  }
  return cfg;
}

int cpus_per_rank(int local_ranks, int usable, int online) noexcept {
  if (local_ranks <= 0 || usable <= 0)
    return 0;
  if (local_ranks <= usable)
    return usable / local_ranks;
  // Bound to a share: the ranks' shares side by side fit the host.
  return usable < online && static_cast<long>(usable) * local_ranks <= online ? usable : 0;
}

namespace {

/// This process's CPUs (sched_getaffinity) and the host's online ones.
std::pair<int, int> usable_and_online_cpus() noexcept {
  auto online = static_cast<int>(::sysconf(_SC_NPROCESSORS_ONLN));
  if (online <= 0)
    online = static_cast<int>(std::thread::hardware_concurrency());
  cpu_set_t set;
  int usable = ::sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : online;
  return {usable, online};
}

} // namespace

int cpus_per_rank(int local_ranks) noexcept {
  auto [usable, online] = usable_and_online_cpus();
  return cpus_per_rank(local_ranks, usable, online);
}

std::chrono::microseconds resolved_spin(std::chrono::microseconds spin, int local_ranks, int usable,
                                        int online) noexcept {
  if (spin != spin_auto)
    return spin;
  using namespace std::chrono_literals;
  // Left to the kernel with a CPU per rank, or bound to two or more CPUs
  // of its own: long polling (measured in both, resolved_spin's comment).
  return local_ranks <= usable || cpus_per_rank(local_ranks, usable, online) >= 2 ? 2000us : 200us;
}

std::chrono::microseconds resolved_spin(std::chrono::microseconds spin, int local_ranks) {
  auto [usable, online] = usable_and_online_cpus();
  return resolved_spin(spin, local_ranks, usable, online);
}

std::string format_byte_size(std::size_t bytes) {
  if (bytes != 0) {
    static constexpr std::pair<std::size_t, char> units[] = {{gib, 'G'}, {mib, 'M'}, {kib, 'K'}};
    for (auto [unit, suffix] : units)
      if (bytes % unit == 0)
        return std::to_string(bytes / unit) + suffix;
  }
  return std::to_string(bytes);
}

std::string describe(const config& cfg) {
  auto source_of = [&](const char* name) {
    auto i = cfg.sources.find(name);
    return i == cfg.sources.end() ? setting_source::default_value : i->second;
  };
  auto value_of = [&](const std::string& name) -> std::string {
    if (name == "MCCL_TRANSPORT") return to_string(cfg.transport);
    if (name == "MCCL_LOG_LEVEL") return to_string(cfg.log_level);
    if (name == "MCCL_LISTEN_ADDR") return quoted(cfg.listen_addr);
    if (name == "MCCL_IFNAME") return quoted(cfg.ifname);
    if (name == "MCCL_PORT_BASE") return std::to_string(cfg.port_base);
    if (name == "MCCL_SOCKETS_PER_PEER")
      return cfg.sockets_per_peer == 0 ? "0 (auto)" : std::to_string(cfg.sockets_per_peer);
    if (name == "MCCL_SHM_RING_BYTES") return format_byte_size(cfg.shm_ring_bytes);
    if (name == "MCCL_SHM_BOARD_BYTES") return format_byte_size(cfg.shm_board_bytes);
    if (name == "MCCL_SHM_STAGE_BYTES") return format_byte_size(cfg.shm_stage_bytes);
    if (name == "MCCL_SHM_SINGLE_COPY_BYTES")
      return cfg.shm_single_copy_bytes == config::single_copy_auto
               ? std::string("auto")
               : format_byte_size(cfg.shm_single_copy_bytes);
    if (name == "MCCL_HOST_ID") return quoted(cfg.host_id);
    if (name == "MCCL_CHUNK_BYTES") return format_byte_size(cfg.chunk_bytes);
    if (name == "MCCL_SMALL_MSG_THRESHOLD") return format_byte_size(cfg.small_msg_threshold);
    if (name == "MCCL_INLINE_BYTES") return format_byte_size(cfg.inline_bytes);
    if (name == "MCCL_OP_THREAD_BYTES") return format_byte_size(cfg.op_thread_bytes);
    if (name == "MCCL_ALGO")
      return cfg.algo.empty() ? "(built-in table)" : quoted(describe(cfg.algo));
    if (name == "MCCL_TRANSPORT_CRC") return cfg.transport_crc ? "1" : "0";
    if (name == "MCCL_TIMEOUT_MS") return std::to_string(cfg.timeout.count());
    if (name == "MCCL_CONNECT_TIMEOUT_MS") return std::to_string(cfg.connect_timeout.count());
    if (name == "MCCL_HEARTBEAT_MS") return std::to_string(cfg.heartbeat.count());
    if (name == "MCCL_HEARTBEAT_MISSES") return std::to_string(cfg.heartbeat_misses);
    if (name == "MCCL_CRC_RETRIES") return std::to_string(cfg.crc_retries);
    if (name == "MCCL_RECONNECT_MS") return std::to_string(cfg.reconnect.count());
    if (name == "MCCL_FAULTS") return quoted(cfg.faults);
    if (name == "MCCL_FAULTS_REPORT") return quoted(cfg.faults_report);
    if (name == "MCCL_LINK_PROFILE") return to_string(cfg.profile);
    if (name == "MCCL_COMPRESSION") return to_string(cfg.compression);
    if (name == "MCCL_TOPK_RATIO") return format_real(cfg.topk_ratio);
    if (name == "MCCL_WORKER_THREADS") return std::to_string(cfg.worker_threads);
    if (name == "MCCL_HELPER_CPUS") return quoted(cpu_list_text(cfg.helper_cpus));
    if (name == "MCCL_SPIN_US") return cfg.spin == spin_auto ? "auto" : std::to_string(cfg.spin.count());
    if (name == "MCCL_FLIGHT_RECORDER") return std::to_string(cfg.flight_recorder);
    if (name == "MCCL_FAST_MATH") return cfg.fast_math ? "1" : "0";
    if (name == "MCCL_GPU_THRESHOLD") return format_byte_size(cfg.gpu_threshold);
    if (name == "MCCL_SHADER_PATH") return quoted(cfg.shader_path);
    if (name == "MCCL_TRACE") return quoted(cfg.trace);
    if (name == "MCCL_METRICS_PORT") return std::to_string(cfg.metrics_port);
    if (name == "MCCL_METRICS_ADDR") return cfg.metrics_addr;
    if (name == "MCCL_JOB_TOKEN") return shown_value(job_token_name, cfg.job_token);
    if (name == "MCCL_JOB_ID") return quoted(cfg.job_id);
    return "?";
  };
  std::ostringstream os;
  for (const auto& def : setting_table)
    os << def.name << '=' << value_of(def.name) << " (" << to_string(source_of(def.name))
       << ")\n";
  // Not a variable of its own, but a resolved value worth seeing in the log.
  os << "socket_buffer_bytes=" << format_byte_size(cfg.socket_buffer_bytes)
     << (cfg.socket_buffer_bytes == 0 ? " (OS autotuning; 4M between ranks on one host)" : "") << " (profile "
     << to_string(cfg.profile) << ")";
  return os.str();
}

std::string settings_without_effect(const config& cfg) {
  std::string out;
  auto add = [&](const char* name, const std::string& value) {
    auto i = cfg.sources.find(name);
    if (i == cfg.sources.end() || i->second == setting_source::default_value)
      return;
    out += (out.empty() ? "" : ", ") + std::string(name) + "=" + value;
  };
  add("MCCL_FAST_MATH", cfg.fast_math ? "1" : "0");
  add("MCCL_GPU_THRESHOLD", format_byte_size(cfg.gpu_threshold));
  add("MCCL_SHADER_PATH", quoted(cfg.shader_path));
  return out;
}

std::optional<std::size_t> parse_byte_size(const std::string& text) {
  constexpr auto max = std::numeric_limits<std::size_t>::max();
  std::size_t i = 0;
  std::size_t value = 0;
  for (; i < text.size() && is_digit(text[i]); ++i) {
    auto digit = static_cast<std::size_t>(text[i] - '0');
    if (value > (max - digit) / 10)
      return std::nullopt;
    value = value * 10 + digit;
  }
  if (i == 0)
    return std::nullopt;
  std::size_t multiplier = 1;
  if (i < text.size()) {
    switch (ascii_upper(text[i])) {
      case 'K': multiplier = kib; break;
      case 'M': multiplier = mib; break;
      case 'G': multiplier = gib; break;
      default: break;
    }
    if (multiplier != 1)
      ++i;
  }
  auto rest = text.substr(i);
  // "iB" only makes sense after a multiplier: "4iB" is junk, "4B" is four bytes.
  bool rest_ok = rest.empty() || iequals(rest, "B") || (multiplier != 1 && iequals(rest, "iB"));
  if (!rest_ok)
    return std::nullopt;
  if (value > max / multiplier)
    return std::nullopt;
  return value * multiplier;
}

} // namespace mccl
