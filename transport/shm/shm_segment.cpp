#include "transport/shm/shm_segment.hpp"

#include <mccl/error.hpp>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <new>
#include <random>
#include <utility>

namespace mccl::transport {
namespace {

constexpr uint64_t segment_magic = 0x314d48534c43434dull; // "MCCLSHM1"
constexpr std::size_t page = 4096;

struct segment_header {
  uint64_t magic;
  uint64_t nonce;
  uint64_t bytes;
};

std::string os_error(const char* what) {
  return std::string(what) + ": " + std::strerror(errno);
}

} // namespace

std::string boot_id() {
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::string id;
  std::getline(in, id);
  return id;
}

shm_segment shm_segment::create(std::size_t bytes) {
  shm_segment s;
  s.bytes_ = bytes;
  auto total = page + bytes;
  s.fd_ = ::memfd_create("mccl-shm", MFD_CLOEXEC);
  if (s.fd_ < 0)
    throw error(errc::unsupported, os_error("memfd_create"));
  if (::ftruncate(s.fd_, static_cast<off_t>(total)) != 0)
    throw error(errc::unsupported, os_error("ftruncate of the shared segment"));
  // Pages come when first touched, not here: a host of 64 ranks has 2016
  // pairs with two 2 MiB rings each, most of which its algorithms never
  // fill, and populating them all took 64 ranks' setup from about 0.5 s to
  // 1.3-1.4 s (docs/performance.md).
  void* p = ::mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_SHARED, s.fd_, 0);
  if (p == MAP_FAILED)
    throw error(errc::unsupported, os_error("mmap of the shared segment"));
  s.base_ = static_cast<uint8_t*>(p);
  std::random_device rd;
  uint64_t nonce = (uint64_t{rd()} << 32) ^ rd();
  new (s.base_) segment_header{segment_magic, nonce, bytes};
  return s;
}

std::string shm_segment::open(pid_t pid, int fd, std::size_t bytes, uint64_t nonce, shm_segment& out) {
  auto path = "/proc/" + std::to_string(pid) + "/fd/" + std::to_string(fd);
  int mine = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (mine < 0)
    return os_error(("open " + path).c_str());
  shm_segment s;
  s.bytes_ = bytes;
  auto total = page + bytes;
  struct stat st {};
  if (::fstat(mine, &st) != 0 || static_cast<std::size_t>(st.st_size) != total) {
    ::close(mine);
    return path + " is not the peer's segment (size differs)";
  }
  void* p = ::mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_SHARED, mine, 0);
  ::close(mine);
  if (p == MAP_FAILED)
    return os_error(("mmap " + path).c_str());
  s.base_ = static_cast<uint8_t*>(p);
  const auto* h = reinterpret_cast<const segment_header*>(s.base_);
  if (h->magic != segment_magic || h->nonce != nonce || h->bytes != bytes)
    return path + " is not the peer's segment (its header differs: another process, or another "
                  "PID namespace)";
  out = std::move(s);
  return {};
}

shm_segment::shm_segment(shm_segment&& other) noexcept
  : fd_(std::exchange(other.fd_, -1)), base_(std::exchange(other.base_, nullptr)),
    bytes_(std::exchange(other.bytes_, 0)) {}

shm_segment& shm_segment::operator=(shm_segment&& other) noexcept {
  if (this != &other) {
    this->~shm_segment();
    new (this) shm_segment(std::move(other));
  }
  return *this;
}

shm_segment::~shm_segment() {
  drop_fd();
  if (base_)
    ::munmap(base_, page + bytes_);
}

uint64_t shm_segment::nonce() const noexcept {
  return base_ ? reinterpret_cast<const segment_header*>(base_)->nonce : 0;
}

void shm_segment::drop_fd() noexcept {
  if (fd_ >= 0)
    ::close(std::exchange(fd_, -1));
}

uint8_t* shm_segment::data() const noexcept {
  return base_ ? base_ + page : nullptr;
}

std::size_t pair_segment_bytes(std::size_t ring_bytes) noexcept {
  return 2 * (page + ring_bytes);
}

static_assert(sizeof(shm_ring_control) <= page, "a ring's control block fits its page");

// The control blocks need no construction: zeroed memory is a valid
// std::atomic of an integer (lock-free, no other state).
shm_ring pair_ring(const shm_segment& s, std::size_t ring_bytes, int direction) noexcept {
  auto* at = s.data() + static_cast<std::size_t>(direction) * (page + ring_bytes);
  return shm_ring(reinterpret_cast<shm_ring_control*>(at), at + page, ring_bytes);
}

} // namespace mccl::transport
