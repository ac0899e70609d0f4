/*
 * verify_http.c — the HTTP client of verify --url: one libcurl
 * request per call, its body collected and parsed by jansson.
 */
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "verify/verify_http.h"

typedef struct body {
    char *p;
    size_t len;
} body;

static size_t collect(char *data, size_t size, size_t n, void *userp)
{
    body *b = userp;
    size_t add = size * n;
    char *p = realloc(b->p, b->len + add + 1);
    if (!p)
        return 0;
    memcpy(p + b->len, data, add);
    b->p = p;
    b->len += add;
    b->p[b->len] = '\0';
    return add;
}

void vf_http_global_init(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
}

void vf_http_global_cleanup(void)
{
    curl_global_cleanup();
}

json_t *vf_http_json(const vf_http *h, const char *path, const char *post, long *status, char *err,
                     size_t err_size)
{
    CURL *c = curl_easy_init();
    if (!c) {
        snprintf(err, err_size, "libcurl cannot start");
        return NULL;
    }
    char url[1024], auth[4200];
    snprintf(url, sizeof url, "%s%s", h->url, path);
    struct curl_slist *headers = curl_slist_append(NULL, "Content-Type: application/json");
    if (h->key) {
        snprintf(auth, sizeof auth, "Authorization: Bearer %s", h->key);
        headers = curl_slist_append(headers, auth);
    }
    body b = {0};
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, collect);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, h->timeout);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    if (post)
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, post);
    CURLcode rc = curl_easy_perform(c);
    *status = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, status);
    curl_slist_free_all(headers);
    curl_easy_cleanup(c);
    json_t *root = NULL;
    if (rc != CURLE_OK) {
        snprintf(err, err_size, "%s: %s", path, curl_easy_strerror(rc));
    } else {
        json_error_t je;
        /* generated text may hold a NUL byte (\u0000): the server keeps its length */
        root = json_loadb(b.p ? b.p : "", b.len, JSON_ALLOW_NUL, &je);
        if (!root)
            snprintf(err, err_size, "%s: HTTP %ld, the body is not JSON: %s", path, *status, je.text);
        else if (*status != 200) {
            const char *msg = json_string_value(json_object_get(json_object_get(root, "error"), "message"));
            snprintf(err, err_size, "%s: HTTP %ld: %s", path, *status, msg ? msg : "(no message)");
            json_decref(root);
            root = NULL;
        }
    }
    free(b.p);
    return root;
}

char *vf_http_read_key(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return NULL;
    char line[4096];
    if (!fgets(line, sizeof line, f))
        line[0] = '\0';
    fclose(f);
    line[strcspn(line, "\r\n")] = '\0';
    return strdup(line);
}
