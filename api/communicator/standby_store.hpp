#pragma once
/// Standby stores: how the ranks still meet when the process that serves
/// their rendezvous store is gone.
///
/// Every process that takes part in a communicator of more than one rank
/// also serves a small rendezvous store of its own (tcp_store_server on the
/// runtime's reactor thread: one listening socket, no thread), one per
/// process however many communicators it has. Each rank announces its
/// address during setup, beside the host record that every rank reads
/// anyway (transport/shm/shm_setup.hpp), so every member knows every
/// member's standby store before anything fails, at no extra round trip.
/// shrink() meets in the lowest survivor's when the store's own host is
/// excluded, grow() in rank 0's, reconfigure() in the first listed
/// member's. Keys there are namespaced by the communicator id ("mccl/<id>/")
/// like those of any store.

#include "actors/runtime_impl.hpp"

#include <mccl/store.hpp>

#include <chrono>
#include <string>

namespace mccl::detail {

/// "ip:port" of this process's standby store, started on `ip` (an address
/// the peers can reach: the rank's advertised listen address) on first use;
/// later calls return the same address whatever `ip`.
std::string serve_standby(runtime::impl& rt, const std::string& ip);

/// The same for a process that has no communicator to take an address
/// from: the address this rank's links would listen on (MCCL_LISTEN_ADDR,
/// MCCL_IFNAME, else the route to `master_addr`).
std::string serve_standby(runtime::impl& rt, const config& cfg, const std::string& master_addr);

/// A client of the standby store at `address` ("ip:port"), served by
/// `server` (e.g. "rank 2"), for errors; waits bounded by `timeout`.
store_ptr standby_client(const std::string& address, int rank, std::chrono::milliseconds timeout,
                         const std::string& server);

/// Throws invalid_argument naming `what` unless `address` is "ip:port"
/// (IPv6 in brackets) with a port in 1..65535.
void check_store_address(const std::string& address, const std::string& what);

/// The ip of a checked "ip:port": a newcomer listens on the interface that
/// routes there, as a rank's links do towards MASTER_ADDR.
std::string store_host(const std::string& address);

} // namespace mccl::detail
