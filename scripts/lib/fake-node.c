/* Gives the processes of one fake node (scripts/fake-nodes.sh) that node's
 * own loopback address, COLLBENCH_FAKE_NODE_ADDR (127.0.77.N), so that the
 * traffic between fake nodes carries their addresses as real nodes' does
 * (a slow link is a tc filter on those addresses). Loaded with LD_PRELOAD:
 *   - the interface lists (ioctl SIOCGIFCONF and SIOCGIFADDR, which Open
 *     MPI reads, and getifaddrs) show the node's address for loopback;
 *     Open MPI's TCP transport then advertises it and binds its outgoing
 *     connections to it;
 *   - connect() of an unbound TCP socket to a loopback address binds it to
 *     the node's address first (the TCP store, PMIx, anything else).
 * A test harness, not part of collbench. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dlfcn.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

static int node_addr(struct in_addr *out) {
    const char *text = getenv("COLLBENCH_FAKE_NODE_ADDR");
    return text && inet_pton(AF_INET, text, out) == 1;
}

static int is_loopback(const struct sockaddr *sa) {
    return sa && sa->sa_family == AF_INET &&
           (ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr) >> 24) == 127;
}

static void set_addr(struct sockaddr *sa, struct in_addr node) {
    if (is_loopback(sa)) ((struct sockaddr_in *)sa)->sin_addr = node;
}

int ioctl(int fd, unsigned long request, ...) {
    static int (*real)(int, unsigned long, void *);
    if (!real) real = (int (*)(int, unsigned long, void *))dlsym(RTLD_NEXT, "ioctl");
    va_list ap;
    va_start(ap, request);
    void *arg = va_arg(ap, void *);
    va_end(ap);
    int rc = real(fd, request, arg);
    struct in_addr node;
    if (rc != 0 || !arg || !node_addr(&node)) return rc;
    if (request == SIOCGIFADDR) {
        set_addr(&((struct ifreq *)arg)->ifr_addr, node);
    } else if (request == SIOCGIFCONF) {
        struct ifconf *conf = arg;
        if (conf->ifc_req)
            for (int i = 0; i < conf->ifc_len / (int)sizeof(struct ifreq); i++)
                set_addr(&conf->ifc_req[i].ifr_addr, node);
    }
    return rc;
}

int getifaddrs(struct ifaddrs **list) {
    static int (*real)(struct ifaddrs **);
    if (!real) real = (int (*)(struct ifaddrs **))dlsym(RTLD_NEXT, "getifaddrs");
    int rc = real(list);
    struct in_addr node;
    if (rc == 0 && node_addr(&node))
        for (struct ifaddrs *i = *list; i; i = i->ifa_next) set_addr(i->ifa_addr, node);
    return rc;
}

int connect(int fd, const struct sockaddr *to, socklen_t len) {
    static int (*real)(int, const struct sockaddr *, socklen_t);
    if (!real) real = (int (*)(int, const struct sockaddr *, socklen_t))dlsym(RTLD_NEXT, "connect");
    struct in_addr node;
    if (is_loopback(to) && node_addr(&node)) {
        struct sockaddr_in mine;
        socklen_t n = sizeof mine;
        int type = 0;
        socklen_t tn = sizeof type;
        if (getsockname(fd, (struct sockaddr *)&mine, &n) == 0 && mine.sin_family == AF_INET &&
            mine.sin_addr.s_addr == htonl(INADDR_ANY) && mine.sin_port == 0 &&
            getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &tn) == 0 && type == SOCK_STREAM) {
            mine.sin_addr = node;
            (void)bind(fd, (struct sockaddr *)&mine, sizeof mine);
        }
    }
    return real(fd, to, len);
}
