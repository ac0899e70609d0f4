/*
 * net_key_test.c — the server's connection counting (tools/serve/serve_conns.c)
 * by network: IPv4 addresses each their own, IPv4-mapped IPv6 as IPv4, and
 * every IPv6 address of one /64 together; and the admission at the cap and
 * at a network's share (sv_conns_admit). Run by tests/serve/test_attack.py;
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

/* A connection of the test: a socket pair, the table watching one end. */
typedef struct conn {
    int id, s[2];
} conn;

static void open_conn(sv_conns *t, conn *c, const char *addr)
{
    CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, c->s) == 0);
    struct sockaddr_storage a = addr_of(addr);
    sv_conns_opened(t, &c->id, c->s[0], (struct sockaddr *)&a);
}

/* 1 when the table shut the connection down (its peer reads the end). */
static int was_shut(const conn *c)
{
    char b;
    return recv(c->s[1], &b, 1, MSG_DONTWAIT) == 0;
}

static int admit(sv_conns *t, const char *addr, int cap, int per_net)
{
    struct sockaddr_storage a = addr_of(addr);
    return sv_conns_admit(t, (struct sockaddr *)&a, cap, per_net);
}

static void close_all(sv_conns *t, conn *c, int n)
{
    sv_conns_stop(t);
    for (int i = 0; i < n; i++)
        close(c[i].s[0]), close(c[i].s[1]);
}

/* At the cap (4 here), a newcomer takes the place of the oldest connection
 * still receiving of the network holding the most of them, when it holds two
 * more than the newcomer's; a network at its share gives its own oldest
 * receiving connection's place, and with none the newcomer's rank is past
 * the share (429). */
static void test_admission(void)
{
    sv_conns *t = sv_conns_start(60);
    conn c[8];
    open_conn(t, &c[0], "10.0.0.1"); /* A */
    open_conn(t, &c[1], "10.0.0.1");
    open_conn(t, &c[2], "10.0.0.1");
    open_conn(t, &c[3], "10.0.0.2"); /* B */
    CHECK(admit(t, "10.0.0.3", 4, 0));            /* A holds 3 >= 0 + 2: its oldest gives way */
    CHECK(was_shut(&c[0]) && !was_shut(&c[1]) && !was_shut(&c[3]));
    open_conn(t, &c[4], "10.0.0.3");
    CHECK(!admit(t, "10.0.0.1", 4, 0));           /* A's own newcomer: not from itself */
    CHECK(admit(t, "10.0.0.4", 4, 0) && was_shut(&c[1]));
    open_conn(t, &c[5], "10.0.0.4");
    CHECK(!admit(t, "10.0.0.5", 4, 0));           /* every network holds one: the bound */
    CHECK(!was_shut(&c[2]) && !was_shut(&c[3]) && !was_shut(&c[4]) && !was_shut(&c[5]));
    close_all(t, c, 6);

    t = sv_conns_start(60);
    open_conn(t, &c[0], "10.0.0.1");
    open_conn(t, &c[1], "10.0.0.1");
    CHECK(admit(t, "10.0.0.1", 100, 2) && was_shut(&c[0]) && !was_shut(&c[1])); /* the idle one gives way */
    open_conn(t, &c[2], "10.0.0.1");
    CHECK(sv_conns_rank(t, &c[2].id) == 2);
    sv_conns_received(t, &c[1].id); /* both busy with requests */
    sv_conns_received(t, &c[2].id);
    CHECK(admit(t, "10.0.0.1", 100, 2) && !was_shut(&c[1]) && !was_shut(&c[2]));
    open_conn(t, &c[3], "10.0.0.1");
    CHECK(sv_conns_rank(t, &c[3].id) == 3); /* past the share: answered 429 */
    close_all(t, c, 4);

    t = sv_conns_start(60); /* connections shut but not yet closed count against twice the cap */
    for (int i = 0; i < 4; i++)
        open_conn(t, &c[i], "10.0.0.1");
    CHECK(admit(t, "10.0.0.1", 2, 1) == 0);
    close_all(t, c, 4);
}

int main(void)
{
    test_admission();
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
