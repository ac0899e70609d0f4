#!/usr/bin/env python3
"""An independent reference for grammar-constrained decoding (docs/STRUCTURED.md).

Written from llama.cpp's GBNF description (grammars/README.md), not from the
library: a parser into an expression tree, the tree written out as plain BNF,
and an Earley recognizer over Unicode code points. It answers, for a text
already generated and a vocabulary of token texts, which tokens may come next:
a token is allowed when the text followed by the token's bytes is the start of
some sentence of the grammar; when those bytes end inside a UTF-8 character,
some well-formed completion of that character must be allowed (Unicode's
table 3-7 of well-formed byte sequences decides which completions exist),
and when the class expecting it was written negated ([^...]), none of the code
points the character's bits may begin (the bits followed by all zeros to all
ones, up to U+10FFFF) may be one it excludes: llama.cpp's rule for such a
token. A token whose text holds a NUL byte is never allowed (llama.cpp's
rule too).

    Grammar(text)                      parse (ValueError on a malformed text)
    g.allowed(prefix, pieces)          -> (set of token ids, complete)

pieces maps token ids to their bytes (the tokens with text).
"""

WORD = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_")
MAX_CP = 0x10FFFF


# ---- the text -------------------------------------------------------------------

class Parser:
    """GBNF text -> {rule name: expression}. Expressions are tuples:
    ('alt', [e...]), ('seq', [e...]), ('set', [(lo, hi)...], negated) with the
    ranges already complemented for [^...], ('ref', name), ('rep', e, lo, hi|None)."""

    def __init__(self, text):
        self.s = text
        self.i = 0
        self.rules = {}

    def error(self, what):
        line = self.s.count("\n", 0, self.i) + 1
        raise ValueError("line %d: %s" % (line, what))

    def peek(self):
        return self.s[self.i] if self.i < len(self.s) else ""

    def space(self, newlines):
        while self.i < len(self.s):
            c = self.s[self.i]
            if c in " \t" or (newlines and c in "\r\n"):
                self.i += 1
            elif c == "#":
                while self.i < len(self.s) and self.s[self.i] not in "\r\n":
                    self.i += 1
            else:
                return

    def name(self):
        j = self.i
        while self.i < len(self.s) and self.s[self.i] in WORD:
            self.i += 1
        if j == self.i:
            self.error("a name expected")
        return self.s[j:self.i]

    def char(self):
        c = self.peek()
        if c == "":
            self.error("end of text")
        if c != "\\":
            self.i += 1
            return ord(c)
        e = self.s[self.i + 1: self.i + 2]
        self.i += 2
        simple = {"n": 10, "r": 13, "t": 9, "\\": 92, '"': 34, "[": 91, "]": 93}
        if e in simple:
            return simple[e]
        width = {"x": 2, "u": 4, "U": 8}.get(e)
        if width is None:
            self.error("escape \\" + e)
        digits = self.s[self.i: self.i + width]
        if len(digits) != width or any(d not in "0123456789abcdefABCDEF" for d in digits):
            self.error("hex escape")
        self.i += width
        return int(digits, 16)

    def item(self):
        c = self.peek()
        if c == '"':
            self.i += 1
            chars = []
            while self.peek() != '"':
                if self.peek() in ("", "\n"):
                    self.error("open literal")
                chars.append(self.char())
            self.i += 1
            return ("seq", [("set", [(x, x)], False) for x in chars])
        if c == "[":
            self.i += 1
            neg = self.peek() == "^"
            if neg:
                self.i += 1
            ranges = []
            first = True
            while first or self.peek() != "]":
                first = False
                if self.peek() == "":
                    self.error("open class")
                lo = self.char()
                hi = lo
                if self.peek() == "-" and self.s[self.i + 1: self.i + 2] not in ("]", ""):
                    self.i += 1
                    hi = self.char()
                ranges.append((lo, hi))
            self.i += 1
            if neg:
                ranges = complement(ranges)
            return ("set", ranges, neg)
        if c == ".":
            self.i += 1
            return ("set", [(0, MAX_CP)], False)
        if c == "(":
            self.i += 1
            self.space(True)
            e = self.alternatives(True)
            if self.peek() != ")":
                self.error("open group")
            self.i += 1
            return e
        if c in WORD:
            return ("ref", self.name())
        return None

    def repetition(self, e):
        c = self.peek()
        if c == "*":
            self.i += 1
            return ("rep", e, 0, None)
        if c == "+":
            self.i += 1
            return ("rep", e, 1, None)
        if c == "?":
            self.i += 1
            return ("rep", e, 0, 1)
        if c == "{":
            j = self.s.index("}", self.i)
            inner = self.s[self.i + 1: j].replace(" ", "")
            self.i = j + 1
            if "," not in inner:
                return ("rep", e, int(inner), int(inner))
            a, b = inner.split(",")
            return ("rep", e, int(a or 0), int(b) if b else None)
        return e

    def sequence(self, nested):
        parts = []
        while True:
            e = self.item()
            if e is None:
                return ("seq", parts)
            parts.append(self.repetition(e))
            self.space(nested)

    def alternatives(self, nested):
        alts = [self.sequence(nested)]
        while self.peek() == "|":
            self.i += 1
            self.space(True)
            alts.append(self.sequence(nested))
        return ("alt", alts)

    def parse(self):
        self.space(True)
        while self.i < len(self.s):
            n = self.name()
            self.space(False)
            if not self.s.startswith("::=", self.i):
                self.error("::= expected")
            self.i += 3
            self.space(True)
            if n in self.rules:
                self.error("rule defined twice")
            self.rules[n] = self.alternatives(False)
            if self.peek() not in ("", "\n", "\r"):
                self.error("junk after the rule")
            self.space(True)
        if "root" not in self.rules:
            self.error("no root")
        return self.rules


def complement(ranges):
    out, nxt = [], 0
    for lo, hi in sorted(ranges):
        if lo > nxt:
            out.append((nxt, lo - 1))
        nxt = max(nxt, hi + 1)
    if nxt <= MAX_CP:
        out.append((nxt, MAX_CP))
    return out


def in_set(ranges, cp):
    return any(lo <= cp <= hi for lo, hi in ranges)


def meets(ranges, lo, hi):
    return any(a <= hi and lo <= b for a, b in ranges)


def holds(ranges, lo, hi):
    """Every code point of [lo, hi] is in the ranges."""
    nxt = lo
    for a, b in sorted(ranges):
        if a <= nxt <= b:
            nxt = b + 1
    return nxt > hi


# ---- plain BNF and Earley ---------------------------------------------------------

class Grammar:
    def __init__(self, text):
        rules = Parser(text).parse()
        self.prods = []          # (lhs, [symbols]); a symbol is ('N', name) or ('T', ranges)
        self.fresh = 0
        for name, e in rules.items():
            for body in self.bodies(e):
                self.prods.append((name, body))
        self.by_lhs = {}
        for k, (lhs, _) in enumerate(self.prods):
            self.by_lhs.setdefault(lhs, []).append(k)
        for lhs, body in self.prods:
            for sym in body:
                if sym[0] == "N" and sym[1] not in self.by_lhs:
                    raise ValueError("undefined rule " + sym[1])
        self.nullable = set()
        changed = True
        while changed:
            changed = False
            for lhs, body in self.prods:
                if lhs not in self.nullable and all(s[0] == "N" and s[1] in self.nullable for s in body):
                    self.nullable.add(lhs)
                    changed = True

    def new_name(self):
        self.fresh += 1
        return "  %d" % self.fresh  # a space: no rule of the text can have this name

    def bodies(self, e):
        """The productions' bodies of expression e as a list of alternatives."""
        kind = e[0]
        if kind == "alt":
            return [b for a in e[1] for b in self.bodies(a)]
        if kind == "seq":
            out = [[]]
            for part in e[1]:
                out = [o + [self.symbol(part)] for o in out]
            return out
        return [[self.symbol(e)]]

    def symbol(self, e):
        kind = e[0]
        if kind == "set":
            return ("T", tuple(e[1]), e[2])
        if kind == "ref":
            return ("N", e[1])
        name = self.new_name()
        if kind == "rep":
            _, x, lo, hi = e
            unit = self.symbol(x)
            body = [unit] * lo
            if hi is None:
                star = self.new_name()
                self.prods.append((star, [unit, ("N", star)]))
                self.prods.append((star, []))
                body.append(("N", star))
            else:
                for _ in range(hi - lo):  # each optional unit is its own rule
                    opt = self.new_name()
                    self.prods.append((opt, [unit]))
                    self.prods.append((opt, []))
                    body.append(("N", opt))
            self.prods.append((name, body))
            return ("N", name)
        for b in self.bodies(e):
            self.prods.append((name, b))
        return ("N", name)

    # Earley sets: frozensets of (production, dot, origin); a chart is a list of them.
    def closure(self, chart, items):
        k = len(chart)
        todo = list(items)
        done = set()
        while todo:
            it = todo.pop()
            if it in done:
                continue
            done.add(it)
            p, dot, origin = it
            body = self.prods[p][1]
            if dot < len(body):
                sym = body[dot]
                if sym[0] == "N":
                    for q in self.by_lhs[sym[1]]:
                        todo.append((q, 0, k))
                    if sym[1] in self.nullable:
                        todo.append((p, dot + 1, origin))
            else:
                lhs = self.prods[p][0]
                src = chart[origin] if origin < k else done
                for (q, d, o) in list(src):
                    b = self.prods[q][1]
                    if d < len(b) and b[d] == ("N", lhs):
                        todo.append((q, d + 1, o))
        return frozenset(done)

    def start(self):
        return [self.closure([], [(q, 0, 0) for q in self.by_lhs["root"]])]

    def scan(self, chart, cp):
        """The chart after code point cp, or None when the grammar refuses it."""
        moved = []
        for (p, dot, origin) in chart[-1]:
            body = self.prods[p][1]
            if dot < len(body) and body[dot][0] == "T" and in_set(body[dot][1], cp):
                moved.append((p, dot + 1, origin))
        if not moved:
            return None
        return chart + [self.closure(chart, moved)]

    def expected(self, chart):
        """The terminals expected next: (ranges, written negated)."""
        for (p, dot, _) in chart[-1]:
            body = self.prods[p][1]
            if dot < len(body) and body[dot][0] == "T":
                yield body[dot][1], body[dot][2]

    def complete(self, chart):
        return any(self.prods[p][0] == "root" and dot == len(self.prods[p][1]) and origin == 0
                   for (p, dot, origin) in chart[-1])

    # ---- tokens ------------------------------------------------------------------

    def allowed(self, prefix, pieces):
        """(ids of the pieces allowed after text `prefix`, whether prefix is complete)."""
        chart = self.start()
        for ch in prefix:
            chart = self.scan(chart, ord(ch))
            if chart is None:
                raise ValueError("the prefix %r is not in the grammar" % prefix)
        trie = {}
        for tid, data in pieces.items():
            if b"\0" in data:
                continue
            node = trie
            for b in data:
                node = node.setdefault(b, {})
            node.setdefault(None, []).append(tid)
        out = set()
        self.walk(trie, chart, b"", out)
        return out, self.complete(chart)

    def walk(self, node, chart, pending, out):
        """pending: bytes of a character not complete yet."""
        if pending and not self.partial_ok(chart, pending, False):
            return
        if not pending or self.partial_ok(chart, pending, True):
            out.update(node.get(None, []))
        for b, child in node.items():
            if b is None:
                continue
            data = pending + bytes([b])
            status = utf8_status(data)
            if status == "bad":
                continue
            if status == "partial":
                self.walk(child, chart, data, out)
                continue
            nxt = self.scan(chart, ord(data.decode("utf-8")))
            if nxt is not None:
                self.walk(child, nxt, b"", out)

    def partial_ok(self, chart, pending, at_end):
        """Some expected class holds a well-formed completion of the pending
        bytes; at the token's end, one written negated must also hold every
        code point of their raw range."""
        lo, hi = completions(pending)
        raw_lo, raw_hi = raw_range(pending)
        return any(meets(r, lo, hi) and (not at_end or not neg or holds(r, raw_lo, min(raw_hi, MAX_CP)))
                   for r, neg in self.expected(chart))


# ---- UTF-8 by Unicode's table 3-7 ---------------------------------------------------

def second_byte_range(lead):
    if 0xC2 <= lead <= 0xDF:
        return 2, 0x80, 0xBF
    if lead == 0xE0:
        return 3, 0xA0, 0xBF
    if 0xE1 <= lead <= 0xEC or 0xEE <= lead <= 0xEF:
        return 3, 0x80, 0xBF
    if lead == 0xED:
        return 3, 0x80, 0x9F
    if lead == 0xF0:
        return 4, 0x90, 0xBF
    if 0xF1 <= lead <= 0xF3:
        return 4, 0x80, 0xBF
    if lead == 0xF4:
        return 4, 0x80, 0x8F
    return None


def utf8_status(data):
    """'done' (one whole character), 'partial' (well-formed so far) or 'bad'."""
    if data[0] < 0x80:
        return "done" if len(data) == 1 else "bad"
    r = second_byte_range(data[0])
    if r is None:
        return "bad"
    n, lo2, hi2 = r
    for k, b in enumerate(data[1:], start=1):
        lo, hi = (lo2, hi2) if k == 1 else (0x80, 0xBF)
        if not lo <= b <= hi:
            return "bad"
    return "done" if len(data) == n else "partial"


def raw_range(data):
    """The code points whose bits begin with those of data, overlong or not:
    the payload bits followed by all zeros, and by all ones."""
    n = second_byte_range(data[0])[0]
    bits = data[0] & (0xFF >> (n + 1))
    for b in data[1:]:
        bits = (bits << 6) | (b & 0x3F)
    rest = 6 * (n - len(data))
    return bits << rest, (bits << rest) | ((1 << rest) - 1)


def completions(data):
    """The lowest and highest code point of a well-formed completion of data."""
    n, lo2, hi2 = second_byte_range(data[0])
    low, high = bytearray(data), bytearray(data)
    for k in range(len(data), n):
        low.append(lo2 if k == 1 else 0x80)
        high.append(hi2 if k == 1 else 0xBF)
    return ord(bytes(low).decode("utf-8")), ord(bytes(high).decode("utf-8"))
