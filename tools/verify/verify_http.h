/*
 * verify_http.h — the HTTP client of verify --url (libcurl): a GET or a
 * JSON POST to the server, the answer parsed as JSON.
 */
#ifndef DETINFER_VERIFY_HTTP_H
#define DETINFER_VERIFY_HTTP_H

#include <stddef.h>

#include <jansson.h>

typedef struct vf_http {
    const char *url; /* http(s)://HOST:PORT; each request's path is appended */
    const char *key; /* sent as 'Authorization: Bearer KEY'; NULL sends none */
    long timeout;    /* seconds, per request */
} vf_http;

/* Once per process, around every use (curl_global_init and _cleanup). */
void vf_http_global_init(void);
void vf_http_global_cleanup(void);

/* GET path (post NULL) or POST the JSON text post; the parsed body of an
 * HTTP 200 answer, or NULL with err set (the server's error message for
 * another status). *status is the HTTP status, 0 when there was none. */
json_t *vf_http_json(const vf_http *h, const char *path, const char *post, long *status, char *err,
                     size_t err_size);

/* The first line of the file at path (an API key), or NULL when it cannot be read. */
char *vf_http_read_key(const char *path);

#endif /* DETINFER_VERIFY_HTTP_H */
