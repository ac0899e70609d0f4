/*
 * serve_conns.c — the server's open connections: counted per client
 * network for --max-connections-per-ip, held to the server's cap (the
 * accept policy asks before a connection is taken, and may make room), and
 * each with its request deadline (--request-timeout), enforced by a
 * watchdog thread.
 *
 * Room at the cap: a connection still receiving its request (idle, or
 * trickling its headers or body) holds a place for nothing yet, so a
 * reconnecting slow client could keep the table full. When it is full, a
 * new connection takes the place of the oldest receiving connection of the
 * network that holds the most receiving connections, if that network holds
 * at least two more of them than the newcomer's. A network's connections
 * only displace those of a network that holds more, so a client with no
 * connection receiving is refused at the cap only when every network holds
 * at most one, or none is receiving (the table is full of requests being
 * served: the server's real capacity). Likewise a network at its share
 * (--max-connections-per-ip) gives its own oldest receiving connection's
 * place to its new one; with none receiving, the new one is taken and
 * answered 429 (its rank is past the share).
 *
 * libmicrohttpd's connection timeout closes only idle connections (a byte
 * every few seconds keeps one), and it offers no per-request deadline nor a
 * thread-safe call that closes a connection. So each connection's socket is
 * duplicated when it opens; past its deadline the watchdog calls
 * shutdown(2) on the duplicate, which ends the socket for libmicrohttpd's
 * thread too (its next read sees the end), and the duplicate is closed only
 * when libmicrohttpd reports the connection closed, so the descriptor the
 * watchdog uses can never be another connection's.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "serve/serve.h"

typedef struct entry {
    const void *connection;
    int fd; /* our duplicate of its socket */
    sv_net_key key;
    double deadline; /* while receiving */
    int receiving;
    int shut;        /* shut down (deadline, or room made): closing, counts only against the hard limit */
    int rank;        /* open connections of its network, itself included, when it opened */
} entry;

struct sv_conns {
    pthread_mutex_t lock;
    pthread_cond_t wake;
    pthread_t watchdog;
    entry *v;
    size_t n, cap;
    double timeout;
    int stop;
    uint64_t expired;
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

int sv_net_key_of(const struct sockaddr *addr, sv_net_key *key)
{
    unsigned char b[16];
    const int family = sv_addr_bytes(addr, b);
    memset(key, 0, sizeof *key);
    if (!family)
        return -1;
    key->bytes[0] = family == AF_INET ? 4 : 6;
    memcpy(key->bytes + 1, b, family == AF_INET ? 4 : 8); /* IPv6: the /64 */
    return 0;
}

static entry *find(sv_conns *t, const void *connection)
{
    for (size_t i = 0; i < t->n; i++)
        if (t->v[i].connection == connection)
            return &t->v[i];
    return NULL;
}

static void *watchdog(void *arg)
{
    sv_conns *t = arg;
    pthread_mutex_lock(&t->lock);
    while (!t->stop) {
        const double now = now_s();
        for (size_t i = 0; i < t->n; i++)
            if (t->v[i].receiving && !t->v[i].shut && now > t->v[i].deadline && t->v[i].fd >= 0) {
                shutdown(t->v[i].fd, SHUT_RDWR);
                t->v[i].shut = 1; /* once */
                t->expired++;
            }
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 100 * 1000 * 1000; /* ten checks a second: deadlines hold within 0.1 s */
        if (ts.tv_nsec >= 1000000000L)
            ts.tv_sec++, ts.tv_nsec -= 1000000000L;
        pthread_cond_timedwait(&t->wake, &t->lock, &ts);
    }
    pthread_mutex_unlock(&t->lock);
    return NULL;
}

sv_conns *sv_conns_start(long request_timeout)
{
    sv_conns *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    t->timeout = (double)request_timeout;
    pthread_mutex_init(&t->lock, NULL);
    pthread_cond_init(&t->wake, NULL);
    if (pthread_create(&t->watchdog, NULL, watchdog, t)) {
        pthread_mutex_destroy(&t->lock);
        pthread_cond_destroy(&t->wake);
        free(t);
        return NULL;
    }
    return t;
}

void sv_conns_stop(sv_conns *t)
{
    if (!t)
        return;
    pthread_mutex_lock(&t->lock);
    t->stop = 1;
    pthread_cond_signal(&t->wake);
    pthread_mutex_unlock(&t->lock);
    pthread_join(t->watchdog, NULL);
    for (size_t i = 0; i < t->n; i++)
        if (t->v[i].fd >= 0)
            close(t->v[i].fd);
    free(t->v);
    pthread_mutex_destroy(&t->lock);
    pthread_cond_destroy(&t->wake);
    free(t);
}

int sv_conns_count(sv_conns *t, const struct sockaddr *addr)
{
    sv_net_key key;
    if (sv_net_key_of(addr, &key))
        return 0;
    int n = 0;
    pthread_mutex_lock(&t->lock);
    for (size_t i = 0; i < t->n; i++)
        n += !memcmp(&t->v[i].key, &key, sizeof key);
    pthread_mutex_unlock(&t->lock);
    return n;
}

int sv_conns_total(sv_conns *t)
{
    pthread_mutex_lock(&t->lock);
    const int n = (int)t->n;
    pthread_mutex_unlock(&t->lock);
    return n;
}

/* Connections of the network `key` that are open (not shut), and of those
 * the ones still receiving their request. Lock held. */
static int live_of(const sv_conns *t, const sv_net_key *key, int receiving_only)
{
    int n = 0;
    for (size_t i = 0; i < t->n; i++)
        n += !t->v[i].shut && (!receiving_only || t->v[i].receiving) && !memcmp(&t->v[i].key, key, sizeof *key);
    return n;
}

/* The oldest open connection still receiving, of the network `key` (NULL:
 * of any), or NULL. Lock held. */
static entry *oldest_receiving(sv_conns *t, const sv_net_key *key)
{
    entry *oldest = NULL;
    for (size_t i = 0; i < t->n; i++) {
        entry *e = &t->v[i];
        if (!e->shut && e->receiving && e->fd >= 0 && (!key || !memcmp(&e->key, key, sizeof *key)) &&
            (!oldest || e->deadline < oldest->deadline))
            oldest = e;
    }
    return oldest;
}

static void make_room(entry *e)
{
    shutdown(e->fd, SHUT_RDWR);
    e->shut = 1;
}

int sv_conns_admit(sv_conns *t, const struct sockaddr *addr, int cap, int per_net)
{
    sv_net_key key;
    sv_net_key_of(addr, &key);
    pthread_mutex_lock(&t->lock);
    /* Shut connections close within moments, but a flood must not pile
     * them up: past twice the cap, nothing more is taken. */
    int ok = t->n < 2 * (size_t)cap;
    /* At its network's share, the network's own oldest connection still
     * receiving gives its place: its idle keep-alive connections must not
     * lock its new ones out. With none, the new one is answered 429. */
    entry *own = ok && per_net > 0 && live_of(t, &key, 0) >= per_net ? oldest_receiving(t, &key) : NULL;
    if (own)
        make_room(own);
    int live = 0;
    for (size_t i = 0; i < t->n; i++)
        live += !t->v[i].shut;
    if (ok && live >= cap) {
        const int mine = live_of(t, &key, 1);
        entry *victim = NULL;
        int most = 0;
        for (size_t i = 0; i < t->n; i++) { /* the network holding the most still receiving */
            entry *e = &t->v[i];
            const int n = !e->shut && e->receiving && e->fd >= 0 ? live_of(t, &e->key, 1) : 0;
            if (n > most)
                victim = e, most = n;
        }
        ok = victim && most >= mine + 2;
        if (ok)
            make_room(oldest_receiving(t, &victim->key));
    }
    pthread_mutex_unlock(&t->lock);
    return ok;
}

/* A connection that cannot be watched (no duplicate descriptor, no room in
 * the table) is shut at once rather than left without its deadline. */
void sv_conns_opened(sv_conns *t, const void *connection, int fd, const struct sockaddr *addr)
{
    entry e = {connection, fd >= 0 ? dup(fd) : -1, {{0}}, now_s() + t->timeout, 1, 0, 0};
    sv_net_key_of(addr, &e.key);
    pthread_mutex_lock(&t->lock);
    e.rank = live_of(t, &e.key, 0) + 1;
    if (e.fd >= 0 && t->n == t->cap) {
        size_t cap = t->cap ? 2 * t->cap : 64;
        entry *v = realloc(t->v, cap * sizeof *v);
        if (v)
            t->v = v, t->cap = cap;
    }
    if (e.fd < 0 || t->n == t->cap) {
        pthread_mutex_unlock(&t->lock);
        if (fd >= 0)
            shutdown(fd, SHUT_RDWR);
        if (e.fd >= 0)
            close(e.fd);
        return;
    }
    t->v[t->n++] = e;
    pthread_mutex_unlock(&t->lock);
}

void sv_conns_closed(sv_conns *t, const void *connection)
{
    pthread_mutex_lock(&t->lock);
    entry *e = find(t, connection);
    if (e) {
        if (e->fd >= 0)
            close(e->fd);
        *e = t->v[--t->n];
    }
    pthread_mutex_unlock(&t->lock);
}

void sv_conns_received(sv_conns *t, const void *connection)
{
    pthread_mutex_lock(&t->lock);
    entry *e = find(t, connection);
    if (e)
        e->receiving = 0;
    pthread_mutex_unlock(&t->lock);
}

void sv_conns_answered(sv_conns *t, const void *connection)
{
    pthread_mutex_lock(&t->lock);
    entry *e = find(t, connection);
    if (e) {
        e->receiving = 1;
        e->deadline = now_s() + t->timeout;
    }
    pthread_mutex_unlock(&t->lock);
}

uint64_t sv_conns_expired(sv_conns *t)
{
    pthread_mutex_lock(&t->lock);
    const uint64_t n = t->expired;
    pthread_mutex_unlock(&t->lock);
    return n;
}

int sv_conns_rank(sv_conns *t, const void *connection)
{
    pthread_mutex_lock(&t->lock);
    const entry *e = find(t, connection);
    const int rank = e ? e->rank : 0;
    pthread_mutex_unlock(&t->lock);
    return rank;
}

void sv_conns_cut_all(sv_conns *t)
{
    pthread_mutex_lock(&t->lock);
    for (size_t i = 0; i < t->n; i++)
        if (t->v[i].fd >= 0)
            shutdown(t->v[i].fd, SHUT_RDWR);
    pthread_mutex_unlock(&t->lock);
}
