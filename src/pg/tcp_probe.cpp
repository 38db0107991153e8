#include "pg/tcp_probe.hpp"

#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/sock_diag.h>
#include <linux/tcp.h>
#include <netinet/in.h>
#include <string.h>
#include <unistd.h>

#include <cstddef>

namespace fencing::pg::tcp_probe {

namespace {

bool same_peer(const sockaddr_storage& peer, const inet_diag_msg& m) {
    if (peer.ss_family != m.idiag_family) return false;
    if (peer.ss_family == AF_INET) {
        const auto& a = reinterpret_cast<const sockaddr_in&>(peer);
        return a.sin_port == m.id.idiag_dport && memcmp(&a.sin_addr, m.id.idiag_dst, 4) == 0;
    }
    if (peer.ss_family == AF_INET6) {
        const auto& a = reinterpret_cast<const sockaddr_in6&>(peer);
        return a.sin6_port == m.id.idiag_dport && memcmp(&a.sin6_addr, m.id.idiag_dst, 16) == 0;
    }
    return false;
}

// One dump of the family's TCP sockets; fills the counters of the peers of
// that family that it finds.
void dump(int family, int local_port, const sockaddr_storage* peers, std::size_t n, Counters* out) {
    const int fd = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
    if (fd < 0) return;
    // The request, and a filter the kernel runs on each socket: local port
    // >= local_port and <= local_port (what `ss sport = :PORT` sends), so
    // that only the server's own connections come back.
    struct {
        nlmsghdr nlh;
        inet_diag_req_v2 req;
        rtattr bc_attr;
        inet_diag_bc_op bc[4];
    } msg;
    memset(&msg, 0, sizeof msg);
    msg.nlh.nlmsg_len = sizeof msg;
    msg.bc_attr.rta_type = INET_DIAG_REQ_BYTECODE;
    msg.bc_attr.rta_len = RTA_LENGTH(sizeof msg.bc);
    // A jump to 4 bytes past the end rejects the socket; running off the
    // end accepts it.
    const unsigned short total = sizeof msg.bc;
    msg.bc[0] = inet_diag_bc_op{INET_DIAG_BC_S_GE, 2 * sizeof(inet_diag_bc_op), static_cast<unsigned short>(total + 4)};
    msg.bc[1] = inet_diag_bc_op{0, 0, static_cast<unsigned short>(local_port)};
    msg.bc[2] = inet_diag_bc_op{INET_DIAG_BC_S_LE, 2 * sizeof(inet_diag_bc_op),
                                static_cast<unsigned short>(total - 2 * sizeof(inet_diag_bc_op) + 4)};
    msg.bc[3] = inet_diag_bc_op{0, 0, static_cast<unsigned short>(local_port)};
    msg.nlh.nlmsg_type = SOCK_DIAG_BY_FAMILY;
    msg.nlh.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
    msg.req.sdiag_family = static_cast<std::uint8_t>(family);
    msg.req.sdiag_protocol = IPPROTO_TCP;
    msg.req.idiag_states = ~0u;
    msg.req.idiag_ext = 1u << (INET_DIAG_INFO - 1);
    sockaddr_nl kernel;
    memset(&kernel, 0, sizeof kernel);
    kernel.nl_family = AF_NETLINK;
    if (sendto(fd, &msg, sizeof msg, 0, reinterpret_cast<sockaddr*>(&kernel), sizeof kernel) < 0) {
        close(fd);
        return;
    }
    alignas(nlmsghdr) char buf[32768];
    const std::uint16_t port_be = htons(static_cast<std::uint16_t>(local_port));
    for (bool done = false; !done;) {
        const ssize_t got = recv(fd, buf, sizeof buf, 0);
        if (got <= 0) break;
        int len = static_cast<int>(got);
        for (auto* h = reinterpret_cast<nlmsghdr*>(buf); NLMSG_OK(h, len); h = NLMSG_NEXT(h, len)) {
            if (h->nlmsg_type == NLMSG_DONE || h->nlmsg_type == NLMSG_ERROR) {
                done = true;
                break;
            }
            const auto* m = static_cast<const inet_diag_msg*>(NLMSG_DATA(h));
            if (m->id.idiag_sport != port_be) continue;
            for (std::size_t i = 0; i < n; ++i) {
                if (out[i].found || !same_peer(peers[i], *m)) continue;
                int alen = static_cast<int>(h->nlmsg_len - NLMSG_LENGTH(sizeof *m));
                for (auto* a = reinterpret_cast<const rtattr*>(m + 1); RTA_OK(a, alen); a = RTA_NEXT(a, alen)) {
                    if (a->rta_type != INET_DIAG_INFO) continue;
                    tcp_info info;
                    memset(&info, 0, sizeof info);
                    const std::size_t have = RTA_PAYLOAD(a);
                    memcpy(&info, RTA_DATA(a), have < sizeof info ? have : sizeof info);
                    if (have < offsetof(tcp_info, tcpi_bytes_received) + sizeof info.tcpi_bytes_received) break;
                    out[i].found = true;
                    out[i].bytes_acked = info.tcpi_bytes_acked;
                    out[i].bytes_received = info.tcpi_bytes_received;
                }
            }
        }
    }
    close(fd);
}

}  // namespace

void read(int local_port, const sockaddr_storage* peers, std::size_t n, Counters* out) noexcept {
    bool v4 = false, v6 = false;
    for (std::size_t i = 0; i < n; ++i) {
        out[i] = Counters{};
        v4 = v4 || peers[i].ss_family == AF_INET;
        v6 = v6 || peers[i].ss_family == AF_INET6;
    }
    if (v4) dump(AF_INET, local_port, peers, n, out);
    if (v6) dump(AF_INET6, local_port, peers, n, out);
}

}  // namespace fencing::pg::tcp_probe
