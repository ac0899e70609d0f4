/*
 * serve_allow.c — which clients may talk to the server (a CIDR allowlist,
 * IPv4 and IPv6) and the constant-time comparison of API keys.
 */
#include <arpa/inet.h>
#include <stdlib.h>
#include <string.h>

#include "serve/serve.h"

static int parse_one(const char *item, sv_cidr *out, char *err, size_t err_size)
{
    char addr[INET6_ADDRSTRLEN + 8];
    const char *slash = strchr(item, '/');
    size_t alen = slash ? (size_t)(slash - item) : strlen(item);
    if (alen == 0 || alen >= sizeof addr) {
        snprintf(err, err_size, "'%s' is not an address or CIDR network", item);
        return -1;
    }
    memcpy(addr, item, alen);
    addr[alen] = '\0';
    memset(out, 0, sizeof *out);
    int max_bits;
    if (inet_pton(AF_INET, addr, out->addr) == 1) {
        out->family = AF_INET;
        max_bits = 32;
    } else if (inet_pton(AF_INET6, addr, out->addr) == 1) {
        out->family = AF_INET6;
        max_bits = 128;
    } else {
        snprintf(err, err_size, "'%s' is not an IPv4 or IPv6 address", addr);
        return -1;
    }
    out->prefix = max_bits;
    if (slash) {
        char *end;
        long bits = strtol(slash + 1, &end, 10);
        if (slash[1] == '\0' || *end != '\0' || bits < 0 || bits > max_bits) {
            snprintf(err, err_size, "'%s': the prefix length must be 0..%d", item, max_bits);
            return -1;
        }
        out->prefix = (int)bits;
    }
    return 0;
}

int sv_allow_parse(const char *text, sv_allowlist *out, char *err, size_t err_size)
{
    out->nets = NULL;
    out->n = 0;
    char *copy = strdup(text);
    if (!copy) {
        snprintf(err, err_size, "out of memory");
        return -1;
    }
    int rc = 0;
    char *save = NULL;
    for (char *item = strtok_r(copy, ", \t", &save); item; item = strtok_r(NULL, ", \t", &save)) {
        sv_cidr *grown = realloc(out->nets, (size_t)(out->n + 1) * sizeof *grown);
        if (!grown) {
            snprintf(err, err_size, "out of memory");
            rc = -1;
            break;
        }
        out->nets = grown;
        if ((rc = parse_one(item, &out->nets[out->n], err, err_size)))
            break;
        out->n++;
    }
    if (!rc && out->n == 0) {
        snprintf(err, err_size, "the allowlist is empty");
        rc = -1;
    }
    free(copy);
    if (rc)
        sv_allow_free(out);
    return rc;
}

void sv_allow_free(sv_allowlist *a)
{
    free(a->nets);
    a->nets = NULL;
    a->n = 0;
}

static int prefix_equal(const unsigned char *a, const unsigned char *b, int bits)
{
    int bytes = bits / 8, rest = bits % 8;
    if (memcmp(a, b, (size_t)bytes))
        return 0;
    if (rest == 0)
        return 1;
    unsigned char mask = (unsigned char)(0xffu << (8 - rest));
    return (a[bytes] & mask) == (b[bytes] & mask);
}

int sv_addr_bytes(const struct sockaddr *addr, unsigned char bytes[16])
{
    if (!addr)
        return 0;
    if (addr->sa_family == AF_INET) {
        memcpy(bytes, &((const struct sockaddr_in *)addr)->sin_addr, 4);
        return AF_INET;
    }
    if (addr->sa_family != AF_INET6)
        return 0;
    const struct in6_addr *a6 = &((const struct sockaddr_in6 *)addr)->sin6_addr;
    if (IN6_IS_ADDR_V4MAPPED(a6)) { /* ::ffff:a.b.c.d on a dual-stack socket */
        memcpy(bytes, a6->s6_addr + 12, 4);
        return AF_INET;
    }
    memcpy(bytes, a6->s6_addr, 16);
    return AF_INET6;
}

int sv_allow_match(const sv_allowlist *a, const struct sockaddr *addr)
{
    unsigned char bytes[16];
    const int family = sv_addr_bytes(addr, bytes);
    for (int i = 0; family && i < a->n; i++)
        if (a->nets[i].family == family && prefix_equal(a->nets[i].addr, bytes, a->nets[i].prefix))
            return 1;
    return 0;
}

int sv_bytes_equal_ct(const void *a, const void *b, size_t n)
{
    const volatile unsigned char *x = a, *y = b;
    unsigned char diff = 0;
    for (size_t i = 0; i < n; i++)
        diff |= (unsigned char)(x[i] ^ y[i]);
    return diff == 0;
}
