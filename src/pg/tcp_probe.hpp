// The byte counters of the server's TCP connections, read from outside the
// backends that own them (only the server port's connections: the kernel
// filters the dump): Linux's sock_diag (inet_diag) netlink interface,
// which any process may ask about the sockets of its network namespace
// (what `ss -ti` shows). The supervisor uses it to tell a client that reads
// a large result slowly (bytes acknowledged move) from one that stopped.
// No PostgreSQL header: plain system calls, no allocation, noexcept.
#pragma once

#include <sys/socket.h>

#include <cstddef>
#include <cstdint>

namespace fencing::pg::tcp_probe {

struct Counters {
    bool found = false;
    std::uint64_t bytes_acked = 0;     // sent by the server and acknowledged by the client
    std::uint64_t bytes_received = 0;  // received from the client
};

// For each peer address (a client's address and port, as pg_stat_activity's
// client_addr/client_port have it) of a connection to local_port, the
// counters of that connection; found is false for a peer that is not a TCP
// connection to local_port (a Unix-domain socket, a closed connection) or
// when the kernel refused the request.
void read(int local_port, const sockaddr_storage* peers, std::size_t n, Counters* out) noexcept;

}  // namespace fencing::pg::tcp_probe
