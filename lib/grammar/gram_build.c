/*
 * gram_build.c — the grammar builder: named rules, interned charsets, the
 * checks of a finished grammar (undefined rules, the root, left recursion)
 * and its flat layout (gram_ir.h). Rules the parser writes out (repeat_3,
 * group_2) remember the user's rule they come from, which messages name.
 */
#include "lib/grammar/gram_ir.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/base/errors.h"
#include "lib/base/growable.h"

typedef struct brule {
    char *name;
    int defined;
    size_t def_offset, ref_offset;
    int referenced;
    uint32_t owner;        /* the rule whose text it comes from (itself unless generated) */
    uint32_t *el;          /* alternatives, each ended by END; the open one at the tail */
    size_t n, cap;
    size_t open;           /* where the open alternative starts */
} brule;

struct di_gram_builder {
    brule *rules;
    size_t n_rules, cap_rules;
    uint32_t *names;       /* open-addressing table of rule ids + 1 (0: empty) */
    size_t names_cap;
    uint32_t *ranges;      /* lo, hi pairs */
    size_t n_ranges, cap_ranges;
    di_charset *sets;
    size_t n_sets, cap_sets;
    uint32_t *set_table;   /* open-addressing table of set ids + 1 */
    size_t set_table_cap;
    size_t total_elems;
    uint32_t generated;
    uint32_t current;      /* the rule defined last: the owner of rules generated now */
    di_status status;
    char err[256];
};

static int fail(di_gram_builder *b, di_status st, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(di_gram_builder *b, di_status st, const char *fmt, ...)
{
    if (!b->status) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(b->err, sizeof b->err, fmt, ap);
        va_end(ap);
        b->status = st;
    }
    return 0;
}

static int oom(di_gram_builder *b)
{
    return fail(b, DI_ERR_OUT_OF_MEMORY, "out of memory building the grammar");
}

static uint64_t hash_bytes(const void *p, size_t n)
{
    const unsigned char *s = p;
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ s[i]) * 1099511628211ull;
    return h;
}

di_gram_builder *di_gram_build_new(void)
{
    di_gram_builder *b = calloc(1, sizeof *b);
    if (!b)
        return NULL;
    b->names_cap = 64;
    b->set_table_cap = 64;
    b->names = calloc(b->names_cap, sizeof *b->names);
    b->set_table = calloc(b->set_table_cap, sizeof *b->set_table);
    if (!b->names || !b->set_table) {
        di_gram_build_free(b);
        return NULL;
    }
    return b;
}

void di_gram_build_free(di_gram_builder *b)
{
    if (!b)
        return;
    for (size_t i = 0; i < b->n_rules; i++) {
        free(b->rules[i].name);
        free(b->rules[i].el);
    }
    free(b->rules);
    free(b->names);
    free(b->ranges);
    free(b->sets);
    free(b->set_table);
    free(b);
}

const char *di_gram_build_error(const di_gram_builder *b, di_status *status)
{
    if (status)
        *status = b->status ? b->status : DI_ERR_INTERNAL;
    return b->err;
}

/* ---- rules by name ---------------------------------------------------------- */

static int grow_names(di_gram_builder *b)
{
    size_t cap = b->names_cap * 2;
    uint32_t *t = calloc(cap, sizeof *t);
    if (!t)
        return 0;
    for (size_t r = 0; r < b->n_rules; r++) {
        size_t i = hash_bytes(b->rules[r].name, strlen(b->rules[r].name)) & (cap - 1);
        while (t[i])
            i = (i + 1) & (cap - 1);
        t[i] = (uint32_t)r + 1;
    }
    free(b->names);
    b->names = t;
    b->names_cap = cap;
    return 1;
}

static int64_t add_rule(di_gram_builder *b, const char *name, size_t len)
{
    if (b->n_rules >= DI_GRAM_MAX_RULES)
        return fail(b, DI_ERR_GRAMMAR, "the grammar has more than %u rules", DI_GRAM_MAX_RULES) - 1;
    if ((b->n_rules + 1) * 2 > b->names_cap && !grow_names(b))
        return oom(b) - 1;
    if (!DI_GROW(b->rules, b->n_rules, b->cap_rules, 1, 16))
        return oom(b) - 1;
    brule *r = &b->rules[b->n_rules];
    memset(r, 0, sizeof *r);
    if (!(r->name = malloc(len + 1)))
        return oom(b) - 1;
    memcpy(r->name, name, len);
    r->name[len] = '\0';
    r->owner = (uint32_t)b->n_rules;
    size_t i = hash_bytes(name, len) & (b->names_cap - 1);
    while (b->names[i])
        i = (i + 1) & (b->names_cap - 1);
    b->names[i] = (uint32_t)b->n_rules + 1;
    return (int64_t)b->n_rules++;
}

static int64_t find_rule(const di_gram_builder *b, const char *name, size_t len)
{
    size_t i = hash_bytes(name, len) & (b->names_cap - 1);
    for (; b->names[i]; i = (i + 1) & (b->names_cap - 1)) {
        const brule *r = &b->rules[b->names[i] - 1];
        if (strlen(r->name) == len && memcmp(r->name, name, len) == 0)
            return b->names[i] - 1;
    }
    return -1;
}

int64_t di_gram_build_rule(di_gram_builder *b, const char *name, size_t len, size_t offset)
{
    int64_t r = find_rule(b, name, len);
    if (r < 0 && (r = add_rule(b, name, len)) < 0)
        return -1;
    if (!b->rules[r].referenced) {
        b->rules[r].referenced = 1;
        b->rules[r].ref_offset = offset;
    }
    return r;
}

int64_t di_gram_build_new_rule(di_gram_builder *b, const char *base, size_t offset)
{
    char name[96];
    for (;;) { /* a name no rule has (a grammar may name its own rules base_N) */
        snprintf(name, sizeof name, "%.64s_%u", base, ++b->generated);
        if (find_rule(b, name, strlen(name)) < 0)
            break;
    }
    int64_t r = add_rule(b, name, strlen(name));
    if (r >= 0) {
        b->rules[r].defined = b->rules[r].referenced = 1;
        b->rules[r].def_offset = b->rules[r].ref_offset = offset;
        if (b->n_rules > 1)
            b->rules[r].owner = b->current;
    }
    return r;
}

int di_gram_build_define(di_gram_builder *b, uint32_t r, size_t offset)
{
    if (b->rules[r].defined)
        return 0;
    b->rules[r].defined = 1;
    b->rules[r].def_offset = offset;
    b->current = r;
    return 1;
}

/* ---- elements ----------------------------------------------------------------- */

int di_gram_build_elem(di_gram_builder *b, uint32_t r, uint32_t elem)
{
    if (b->total_elems >= DI_GRAM_MAX_ELEMS)
        return fail(b, DI_ERR_GRAMMAR, "the grammar has more than %u elements once its repetitions are "
                    "written out", DI_GRAM_MAX_ELEMS);
    brule *x = &b->rules[r];
    if (!DI_GROW(x->el, x->n, x->cap, 1, 8))
        return oom(b);
    x->el[x->n++] = elem;
    b->total_elems++;
    return 1;
}

int di_gram_build_ref(di_gram_builder *b, uint32_t r, uint32_t ref)
{
    return di_gram_build_elem(b, r, DI_GRAM_MAKE(DI_GRAM_RULE, ref));
}

int di_gram_build_end_alt(di_gram_builder *b, uint32_t r)
{
    if (!di_gram_build_elem(b, r, DI_GRAM_MAKE(DI_GRAM_END, 0)))
        return 0;
    b->rules[r].open = b->rules[r].n;
    return 1;
}

uint32_t di_gram_build_alt_len(const di_gram_builder *b, uint32_t r)
{
    return (uint32_t)(b->rules[r].n - b->rules[r].open);
}

uint32_t di_gram_build_pop(di_gram_builder *b, uint32_t r)
{
    brule *x = &b->rules[r];
    b->total_elems--;
    return x->el[--x->n];
}

int di_gram_build_wrap(di_gram_builder *b, uint32_t r, uint32_t from)
{
    if (di_gram_build_alt_len(b, r) == from + 1)
        return 1;
    int64_t g = di_gram_build_new_rule(b, b->rules[r].name, b->rules[r].def_offset);
    if (g < 0)
        return 0;
    brule *x = &b->rules[r]; /* after the new rule: the array may have moved */
    const size_t start = x->open + from;
    for (size_t i = start; i < x->n; i++)
        if (!di_gram_build_elem(b, (uint32_t)g, b->rules[r].el[i]))
            return 0;
    x = &b->rules[r];
    b->total_elems -= x->n - start;
    x->n = start;
    return di_gram_build_end_alt(b, (uint32_t)g) && di_gram_build_ref(b, r, (uint32_t)g);
}

/* ---- charsets ------------------------------------------------------------------ */

static int cmp_range(const void *a, const void *b)
{
    const uint32_t *x = a, *y = b;
    return x[0] < y[0] ? -1 : x[0] > y[0];
}

/* Sorted, merged ranges of `in` (n pairs), complemented over
 * [0, DI_GRAM_MAX_CODEPOINT] when negated, into out (room for n + 1 pairs);
 * returns the count. */
static size_t normalize(const uint32_t *in, size_t n, int negated, uint32_t *out, uint32_t *tmp)
{
    memcpy(tmp, in, n * 2 * sizeof *tmp);
    qsort(tmp, n, 2 * sizeof *tmp, cmp_range);
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (m > 0 && tmp[2 * i] <= out[2 * m - 1] + 1) {
            if (tmp[2 * i + 1] > out[2 * m - 1])
                out[2 * m - 1] = tmp[2 * i + 1];
        } else {
            out[2 * m] = tmp[2 * i];
            out[2 * m + 1] = tmp[2 * i + 1];
            m++;
        }
    }
    if (!negated)
        return m;
    size_t k = 0;
    uint32_t next = 0; /* first code point not yet covered */
    memcpy(tmp, out, m * 2 * sizeof *tmp);
    for (size_t i = 0; i < m; i++) {
        if (tmp[2 * i] > next) {
            out[2 * k] = next;
            out[2 * k + 1] = tmp[2 * i] - 1;
            k++;
        }
        next = tmp[2 * i + 1] + 1;
    }
    if (next <= DI_GRAM_MAX_CODEPOINT) {
        out[2 * k] = next;
        out[2 * k + 1] = DI_GRAM_MAX_CODEPOINT;
        k++;
    }
    return k;
}

/* The ranges of set c; NULL for an empty set, whose builder may have no
 * ranges array yet (an offset from a null pointer is undefined even when 0). */
static const uint32_t *set_ranges(const uint32_t *ranges, const di_charset *c)
{
    return c->n ? ranges + 2 * c->first : NULL;
}

static int same_set(const di_gram_builder *b, uint32_t id, const uint32_t *r, size_t n, int negated)
{
    const di_charset *c = &b->sets[id];
    return c->n == n && c->negated == (uint32_t)negated &&
           (n == 0 || memcmp(set_ranges(b->ranges, c), r, n * 2 * sizeof *r) == 0);
}

static uint64_t set_hash(const uint32_t *r, size_t n, int negated)
{
    return hash_bytes(r, n * 2 * sizeof *r) ^ (uint64_t)negated;
}

static int grow_set_table(di_gram_builder *b)
{
    size_t cap = b->set_table_cap * 2;
    uint32_t *t = calloc(cap, sizeof *t);
    if (!t)
        return 0;
    for (size_t s = 0; s < b->n_sets; s++) {
        const di_charset *c = &b->sets[s];
        size_t i = set_hash(set_ranges(b->ranges, c), c->n, (int)c->negated) & (cap - 1);
        while (t[i])
            i = (i + 1) & (cap - 1);
        t[i] = (uint32_t)s + 1;
    }
    free(b->set_table);
    b->set_table = t;
    b->set_table_cap = cap;
    return 1;
}

/* The id of the set of the n normalized ranges r (written negated or not),
 * added when new; -1 on failure. */
static int64_t intern_set(di_gram_builder *b, const uint32_t *r, size_t n, int negated)
{
    const uint64_t h = set_hash(r, n, negated);
    size_t i = h & (b->set_table_cap - 1);
    for (; b->set_table[i]; i = (i + 1) & (b->set_table_cap - 1))
        if (same_set(b, b->set_table[i] - 1, r, n, negated))
            return b->set_table[i] - 1;
    if ((b->n_sets + 1) * 2 > b->set_table_cap) {
        if (!grow_set_table(b))
            return oom(b) - 1;
        return intern_set(b, r, n, negated);
    }
    if (!DI_GROW(b->sets, b->n_sets, b->cap_sets, 1, 16) ||
        !DI_GROW(b->ranges, b->n_ranges, b->cap_ranges, 2 * n, 64))
        return oom(b) - 1;
    di_charset *c = &b->sets[b->n_sets];
    memset(c, 0, sizeof *c);
    c->first = (uint32_t)(b->n_ranges / 2);
    c->n = (uint32_t)n;
    c->negated = (uint32_t)negated;
    if (n) /* an empty set may have no ranges array yet, nor r */
        memcpy(b->ranges + b->n_ranges, r, n * 2 * sizeof *r);
    b->n_ranges += 2 * n;
    for (size_t k = 0; k < n; k++)
        for (uint32_t cp = r[2 * k]; cp <= r[2 * k + 1] && cp < 128; cp++)
            c->ascii[cp / 32] |= 1u << (cp % 32);
    b->set_table[i] = (uint32_t)b->n_sets + 1;
    return (int64_t)b->n_sets++;
}

int di_gram_build_chars(di_gram_builder *b, uint32_t r, const uint32_t *ranges, size_t n, int negated)
{
    uint32_t small[2 * 18], small_tmp[2 * 18];
    uint32_t *out = small, *tmp = small_tmp;
    if (n + 1 > 16) {
        out = malloc((n + 1) * 2 * sizeof *out);
        tmp = malloc((n + 1) * 2 * sizeof *tmp);
        if (!out || !tmp) {
            free(out == small ? NULL : out);
            free(tmp == small_tmp ? NULL : tmp);
            return oom(b);
        }
    }
    const size_t m = normalize(ranges, n, negated, out, tmp);
    const int64_t id = intern_set(b, out, m, negated != 0);
    if (out != small) {
        free(out);
        free(tmp);
    }
    return id >= 0 && di_gram_build_elem(b, r, DI_GRAM_MAKE(DI_GRAM_CHARS, id));
}

/* ---- checks ---------------------------------------------------------------------- */

/* Rules that can derive the empty text: the fixed point of "some alternative
 * holds only references to such rules". */
static void find_nullable(const di_gram_builder *b, unsigned char *nullable)
{
    for (int changed = 1; changed;) {
        changed = 0;
        for (size_t r = 0; r < b->n_rules; r++) {
            if (nullable[r])
                continue;
            const brule *x = &b->rules[r];
            int all = 1; /* the alternative read so far is nullable */
            for (size_t i = 0; i < x->n; i++) {
                const uint32_t e = x->el[i];
                if (DI_GRAM_KIND(e) == DI_GRAM_END) {
                    if (all) {
                        nullable[r] = 1;
                        changed = 1;
                        break;
                    }
                    all = 1;
                } else if (DI_GRAM_KIND(e) == DI_GRAM_CHARS || !nullable[DI_GRAM_VALUE(e)]) {
                    all = 0;
                }
            }
        }
    }
}

/* The left edges r -> s: rule s can begin a text of rule r (a reference
 * preceded in its alternative only by nullable references). Edges of rule
 * r are edge[first[r] .. first[r + 1]); kind[i] says where the reference
 * stands: EDGE_INNER before other elements, EDGE_TAIL last in its
 * alternative after a nullable prefix, EDGE_UNIT alone in its alternative. */
enum { EDGE_INNER = 0, EDGE_TAIL = 1, EDGE_UNIT = 2 };

typedef struct left_edges {
    uint32_t *first;
    uint32_t *edge;
    unsigned char *kind;
    size_t n, cap;
} left_edges;

static int find_left_edges(const di_gram_builder *b, const unsigned char *nullable, left_edges *le)
{
    if (!(le->first = malloc((b->n_rules + 1) * sizeof *le->first)))
        return 0;
    for (size_t r = 0; r < b->n_rules; r++) {
        le->first[r] = (uint32_t)le->n;
        const brule *x = &b->rules[r];
        int open = 1;      /* the alternative's prefix so far is nullable */
        size_t begin = 0;  /* where the alternative starts */
        for (size_t i = 0; i < x->n; i++) {
            const uint32_t e = x->el[i];
            if (DI_GRAM_KIND(e) == DI_GRAM_END) {
                open = 1;
                begin = i + 1;
            } else if (!open) {
                continue;
            } else if (DI_GRAM_KIND(e) == DI_GRAM_CHARS) {
                open = 0;
            } else {
                size_t cap = le->cap;
                if (!DI_GROW(le->edge, le->n, le->cap, 1, 64))
                    return 0;
                if (le->cap != cap || !le->kind) {
                    unsigned char *k = realloc(le->kind, le->cap);
                    if (!k)
                        return 0;
                    le->kind = k;
                }
                const int last = DI_GRAM_KIND(x->el[i + 1]) == DI_GRAM_END;
                le->kind[le->n] = !last ? EDGE_INNER : i == begin ? EDGE_UNIT : EDGE_TAIL;
                le->edge[le->n++] = DI_GRAM_VALUE(e);
                open = nullable[DI_GRAM_VALUE(e)];
            }
        }
    }
    le->first[b->n_rules] = (uint32_t)le->n;
    return 1;
}

/* Strongly connected components of the left edges (those of kind `only`, or
 * all with -1) into comp[], by Tarjan's algorithm with explicit stacks (a
 * grammar may have many rules). work: 5 * n words. */
static void left_components(size_t n, const left_edges *le, int only, uint32_t *comp, uint32_t *work)
{
    uint32_t *index = work, *low = work + n, *stack = work + 2 * n, *path = work + 3 * n, *resume = work + 4 * n;
    const uint32_t NONE = UINT32_MAX;
    for (size_t r = 0; r < n; r++)
        index[r] = comp[r] = NONE;
    uint32_t next_index = 0, n_comp = 0;
    size_t sp = 0;
    for (size_t start = 0; start < n; start++) {
        if (index[start] != NONE)
            continue;
        size_t depth = 1;
        path[0] = (uint32_t)start;
        resume[0] = le->first[start];
        index[start] = low[start] = next_index++;
        stack[sp++] = (uint32_t)start;
        while (depth > 0) {
            const uint32_t r = path[depth - 1];
            if (resume[depth - 1] < le->first[r + 1]) {
                const uint32_t i = resume[depth - 1]++;
                if (only >= 0 && le->kind[i] != only)
                    continue;
                const uint32_t to = le->edge[i];
                if (index[to] == NONE) {
                    index[to] = low[to] = next_index++;
                    stack[sp++] = to;
                    path[depth] = to;
                    resume[depth] = le->first[to];
                    depth++;
                } else if (comp[to] == NONE && index[to] < low[r]) {
                    low[r] = index[to];
                }
                continue;
            }
            if (low[r] == index[r]) {
                uint32_t w;
                do {
                    w = stack[--sp];
                    comp[w] = n_comp;
                } while (w != r);
                n_comp++;
            }
            depth--;
            if (depth > 0 && low[r] < low[path[depth - 1]])
                low[path[depth - 1]] = low[r];
        }
    }
}

/* The user's rule a rule comes from: itself, or the rule whose text
 * generated it (repeat_3 of root ::= x* is root's). */
static const brule *user_rule(const di_gram_builder *b, uint32_t r)
{
    return &b->rules[b->rules[r].owner];
}

/* Writes the cycle r -> to -> ... -> r (edges inside component comp, found
 * by a breadth-first search from `to`) in the builder's error, by the user's
 * rule names, and names r's user rule and its place. */
static void report_cycle(di_gram_builder *b, const left_edges *le, const uint32_t *comp, uint32_t r, uint32_t to,
                         uint32_t *work, int64_t *err_offset)
{
    const size_t n = b->n_rules;
    uint32_t *from = work, *queue = work + n;
    for (size_t i = 0; i < n; i++)
        from[i] = UINT32_MAX;
    size_t head = 0, tail = 0;
    queue[tail++] = to;
    from[to] = to;
    while (head < tail && from[r] == UINT32_MAX) {
        const uint32_t u = queue[head++];
        for (uint32_t i = le->first[u]; i < le->first[u + 1]; i++) {
            const uint32_t v = le->edge[i];
            if (comp[v] == comp[r] && from[v] == UINT32_MAX) {
                from[v] = u;
                queue[tail++] = v;
            }
        }
    }
    /* the path to ... r, backwards from r; then written r -> to -> ... -> r */
    size_t len = 0;
    for (uint32_t u = r;; u = from[u]) {
        queue[len++] = u;
        if (u == to || from[u] == UINT32_MAX || len >= n)
            break;
    }
    char cycle[200];
    size_t used = (size_t)snprintf(cycle, sizeof cycle, "%.60s", user_rule(b, r)->name);
    const brule *prev = user_rule(b, r);
    size_t written = 0; /* steps written (the rules a rule generated are shown as it) */
    for (size_t k = len; k-- > 0 && used < sizeof cycle - 70;) {
        const brule *u = user_rule(b, queue[k]);
        if (u == prev && (k > 0 || written > 0))
            continue;
        used += (size_t)snprintf(cycle + used, sizeof cycle - used, " -> %.60s", u->name);
        prev = u;
        written++;
    }
    const brule *named = user_rule(b, r);
    fail(b, DI_ERR_GRAMMAR,
         "left recursion is not supported: rule %.60s can begin with itself (%s); write the repetition on "
         "the right, or with * or +",
         named->name, cycle);
    *err_offset = (int64_t)named->def_offset;
}

/* Left recursion the matcher cannot run: a cycle of left edges through an
 * edge that is not last in its alternative (each turn would leave something
 * to match after it: the stack grows without end, `x ::= x "a"`), or a cycle
 * of references alone (`a ::= b`, `b ::= a`: llama.cpp refuses it too).
 * A cycle of tail references after nullable prefixes (`r ::= ([x]*) r | ""`,
 * what `([x]*)*` writes out) is run: the matcher's closure meets the same
 * position and parent again and stops, and the language is the grammar's. */
static int check_left_recursion(di_gram_builder *b, const unsigned char *nullable, int64_t *err_offset)
{
    const size_t n = b->n_rules;
    left_edges le = {0};
    uint32_t *comp = malloc((n + 1) * sizeof *comp);
    uint32_t *work = malloc((5 * n + 1) * sizeof *work);
    int ok = comp && work && find_left_edges(b, nullable, &le);
    if (!ok) {
        oom(b);
    } else {
        for (int pass = 0; pass < 2 && ok; pass++) {
            /* pass 0: every edge, a cycle through an inner one; pass 1: unit edges only */
            left_components(n, &le, pass == 0 ? -1 : EDGE_UNIT, comp, work);
            for (uint32_t r = 0; r < n && ok; r++)
                for (uint32_t i = le.first[r]; i < le.first[r + 1] && ok; i++)
                    if (le.kind[i] == (pass == 0 ? EDGE_INNER : EDGE_UNIT) && comp[le.edge[i]] == comp[r]) {
                        report_cycle(b, &le, comp, r, le.edge[i], work, err_offset);
                        ok = 0;
                    }
        }
    }
    free(le.first);
    free(le.edge);
    free(le.kind);
    free(comp);
    free(work);
    return ok;
}

/* ---- layout ------------------------------------------------------------------------ */

void di_gram_free(di_gram *g)
{
    if (!g)
        return;
    for (uint32_t r = 0; g->rule_names && r < g->n_rules; r++)
        free(g->rule_names[r]);
    free(g->rule_names);
    free(g->elems);
    free(g->alt_start);
    free(g->rule_alts);
    free(g->ranges);
    free(g->sets);
    free(g);
}

static di_status lay_out(di_gram_builder *b, di_gram **out)
{
    di_gram *g = calloc(1, sizeof *g);
    size_t n_alts = 0;
    for (size_t r = 0; r < b->n_rules; r++)
        for (size_t i = 0; i < b->rules[r].n; i++)
            n_alts += DI_GRAM_KIND(b->rules[r].el[i]) == DI_GRAM_END;
    if (!g || !(g->elems = malloc((b->total_elems + 1) * sizeof *g->elems)) ||
        !(g->alt_start = malloc((n_alts + 1) * sizeof *g->alt_start)) ||
        !(g->rule_alts = malloc((b->n_rules + 1) * sizeof *g->rule_alts)) ||
        !(g->rule_names = calloc(b->n_rules + 1, sizeof *g->rule_names))) {
        di_gram_free(g);
        return DI_ERR_OUT_OF_MEMORY;
    }
    g->n_rules = (uint32_t)b->n_rules;
    size_t e = 0, a = 0;
    for (size_t r = 0; r < b->n_rules; r++) {
        const brule *x = &b->rules[r];
        g->rule_alts[r] = (uint32_t)a;
        int at_start = 1;
        for (size_t i = 0; i < x->n; i++) {
            if (at_start)
                g->alt_start[a++] = (uint32_t)e;
            g->elems[e++] = x->el[i];
            at_start = DI_GRAM_KIND(x->el[i]) == DI_GRAM_END;
        }
        g->rule_names[r] = x->name;
    }
    g->rule_alts[b->n_rules] = (uint32_t)a;
    g->n_elems = (uint32_t)e;
    for (size_t r = 0; r < b->n_rules; r++)
        b->rules[r].name = NULL; /* owned by the grammar now */
    g->ranges = b->ranges;
    g->sets = b->sets;
    g->n_sets = (uint32_t)b->n_sets;
    b->ranges = NULL;
    b->sets = NULL;
    b->n_sets = b->n_ranges = 0;
    *out = g;
    return DI_OK;
}

di_status di_gram_build_finish(di_gram_builder *b, di_gram **out, int64_t *err_offset, char *err,
                               size_t err_size)
{
    *out = NULL;
    *err_offset = -1;
    if (b->status)
        return di_error(err, err_size, b->status, "%s", b->err);
    /* undefined rules, in the order of their first reference */
    int64_t first = -1;
    for (size_t r = 0; r < b->n_rules; r++)
        if (!b->rules[r].defined && (first < 0 || b->rules[r].ref_offset < b->rules[first].ref_offset))
            first = (int64_t)r;
    if (first >= 0) {
        *err_offset = (int64_t)b->rules[first].ref_offset;
        return di_error(err, err_size, DI_ERR_GRAMMAR, "undefined rule %s", b->rules[first].name);
    }
    const int64_t root = find_rule(b, "root", 4);
    if (root < 0)
        return di_error(err, err_size, DI_ERR_GRAMMAR, "the grammar has no rule named root");
    for (size_t r = 0; r < b->n_rules; r++) /* an alternative left open: the parser's bug */
        if (b->rules[r].open != b->rules[r].n)
            return di_error(err, err_size, DI_ERR_INTERNAL, "rule %s has an unfinished alternative",
                            b->rules[r].name);
    unsigned char *nullable = calloc(b->n_rules, 1);
    if (!nullable)
        return di_error(err, err_size, DI_ERR_OUT_OF_MEMORY, "out of memory checking the grammar");
    find_nullable(b, nullable);
    const int ok = check_left_recursion(b, nullable, err_offset);
    free(nullable);
    if (!ok)
        return di_error(err, err_size, b->status, "%s", b->err);
    di_status st = lay_out(b, out);
    if (st)
        return di_error(err, err_size, st, "out of memory laying out the grammar");
    (*out)->root = (uint32_t)root;
    return DI_OK;
}

/* ---- charset queries ---------------------------------------------------------------- */

int di_gram_charset_has(const di_gram *g, uint32_t set, uint32_t c)
{
    const di_charset *s = &g->sets[set];
    if (c < 128)
        return (s->ascii[c / 32] >> (c % 32)) & 1;
    return di_gram_charset_meets(g, set, c, c);
}

/* The first range of `set` whose hi >= lo (its count when none), by binary search. */
static uint32_t first_range(const di_gram *g, const di_charset *s, uint32_t lo)
{
    const uint32_t *r = set_ranges(g->ranges, s);
    uint32_t a = 0, z = s->n;
    while (a < z) {
        const uint32_t m = a + (z - a) / 2;
        if (r[2 * m + 1] < lo)
            a = m + 1;
        else
            z = m;
    }
    return a;
}

int di_gram_charset_meets(const di_gram *g, uint32_t set, uint32_t lo, uint32_t hi)
{
    const di_charset *s = &g->sets[set];
    const uint32_t a = first_range(g, s, lo);
    return a < s->n && g->ranges[2 * (s->first + a)] <= hi;
}

int di_gram_charset_holds(const di_gram *g, uint32_t set, uint32_t lo, uint32_t hi)
{
    const di_charset *s = &g->sets[set];
    const uint32_t a = first_range(g, s, lo); /* the ranges are not adjacent: one must hold them all */
    return a < s->n && g->ranges[2 * (s->first + a)] <= lo && hi <= g->ranges[2 * (s->first + a) + 1];
}
