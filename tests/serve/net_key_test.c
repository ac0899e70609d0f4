/*
 * net_key_test.c — the server's connection counting (tools/serve/serve_conns.c)
 * by network: IPv4 addresses each their own, IPv4-mapped IPv6 as IPv4, and
 * every IPv6 address of one /64 together. Run by tests/serve/test_attack.py;
 * prints "ok" and exits 0, or names the failed check and exits 1.
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "serve/serve.h"

static int failures;

#define CHECK(cond)                                          \
    do {                                                     \
        if (!(cond)) {                                       \
            fprintf(stderr, "FAILED line %d: %s\n", __LINE__, #cond); \
            failures++;                                      \
        }                                                    \
    } while (0)

static struct sockaddr_storage addr_of(const char *text)
{
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof ss);
    if (strchr(text, ':')) {
        struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
        a->sin6_family = AF_INET6;
        inet_pton(AF_INET6, text, &a->sin6_addr);
    } else {
        struct sockaddr_in *a = (struct sockaddr_in *)&ss;
        a->sin_family = AF_INET;
        inet_pton(AF_INET, text, &a->sin_addr);
    }
    return ss;
}

static int same_net(const char *x, const char *y)
{
    struct sockaddr_storage a = addr_of(x), b = addr_of(y);
    sv_net_key ka, kb;
    CHECK(sv_net_key_of((struct sockaddr *)&a, &ka) == 0);
    CHECK(sv_net_key_of((struct sockaddr *)&b, &kb) == 0);
    return !memcmp(&ka, &kb, sizeof ka);
}

int main(void)
{
    CHECK(same_net("2001:db8:1:2::1", "2001:db8:1:2:ffff:ffff:ffff:ffff")); /* one /64 */
    CHECK(!same_net("2001:db8:1:2::1", "2001:db8:1:3::1"));                 /* the next /64 */
    CHECK(!same_net("10.0.0.1", "10.0.0.2"));                               /* IPv4: per address */
    CHECK(same_net("::ffff:10.0.0.1", "10.0.0.1"));                         /* mapped: as IPv4 */
    CHECK(!same_net("0.0.0.1", "::1"));      /* the family is part of the key */
    CHECK(!same_net("::ffff:0.0.0.0", "::")); /* mapped 0.0.0.0 is IPv4, :: is IPv6 */
    struct sockaddr_storage unix_addr;
    memset(&unix_addr, 0, sizeof unix_addr);
    unix_addr.ss_family = AF_UNIX;
    sv_net_key k;
    CHECK(sv_net_key_of((struct sockaddr *)&unix_addr, &k) == -1);

    /* the table counts a /64 together. Each connection needs a socket the
     * table can duplicate (one it cannot watch is shut, not counted), so a
     * socket pair stands in for each client's. */
    sv_conns *t = sv_conns_start(60);
    CHECK(t != NULL);
    static const char *const opened[] = {"2001:db8::1", "2001:db8::2", "2001:db8::3:4", "2001:db8:0:1::1", "10.0.0.1"};
    int ids[5], socks[5][2];
    for (int i = 0; i < 5; i++) {
        CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, socks[i]) == 0);
        struct sockaddr_storage a = addr_of(opened[i]);
        sv_conns_opened(t, &ids[i], socks[i][0], (struct sockaddr *)&a);
    }
    struct sockaddr_storage probe = addr_of("2001:db8::ffff");
    CHECK(sv_conns_count(t, (struct sockaddr *)&probe) == 3);
    probe = addr_of("2001:db8:0:1::9");
    CHECK(sv_conns_count(t, (struct sockaddr *)&probe) == 1);
    probe = addr_of("10.0.0.2");
    CHECK(sv_conns_count(t, (struct sockaddr *)&probe) == 0);
    CHECK(sv_conns_total(t) == 5);
    sv_conns_closed(t, &ids[1]);
    probe = addr_of("2001:db8::7");
    CHECK(sv_conns_count(t, (struct sockaddr *)&probe) == 2);
    CHECK(sv_conns_total(t) == 4);
    /* a connection without a socket to watch is shut at once, never counted */
    struct sockaddr_storage lone = addr_of("10.0.0.9");
    int lone_id;
    sv_conns_opened(t, &lone_id, -1, (struct sockaddr *)&lone);
    CHECK(sv_conns_count(t, (struct sockaddr *)&lone) == 0);
    CHECK(sv_conns_total(t) == 4);
    sv_conns_stop(t);
    for (int i = 0; i < 5; i++)
        close(socks[i][0]), close(socks[i][1]);
    if (failures)
        return 1;
    printf("ok\n");
    return 0;
}
