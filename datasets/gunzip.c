#include "datasets/gunzip.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

// ---- Huffman decode tables ---------------------------------------------------
// DEFLATE sends Huffman codes most-significant bit first inside an LSB-first bit
// stream, so a table indexed by the next `primary` bits of the stream (with the
// codes stored bit-reversed) decodes one symbol per lookup. Codes longer than
// `primary` bits follow a link to a second-level table for their prefix; that
// keeps tables small enough to rebuild for every dynamic block.
//
// Entry layout: bits 0-3 code length (0 = no code ends here), bit 4 link flag,
// bits 8-11 index bits of the linked table, bits 16-31 symbol or table offset.
#define E_LEN(e) ((e) & 0xFu)
#define E_LINK 0x10u
#define E_SUBBITS(e) (((e) >> 8) & 0xFu)
#define E_VAL(e) ((e) >> 16)

#define MAX_CODE_LEN 15
#define LITLEN_PRIMARY 10
#define DIST_PRIMARY 8
#define PRECODE_PRIMARY 7
#define N_LITLEN_SYMS 288  // 286 usable; the fixed code also assigns 286 and 287
#define N_DIST_SYMS 32     // 30 usable; the fixed code also assigns 30 and 31
#define N_PRECODE_SYMS 19
// Each symbol longer than the primary width opens at most one linked table of at
// most 2^(15 - primary) entries, so these sizes hold any code the lengths allow.
#define TABLE_SIZE(primary, nsyms) ((1u << (primary)) + (nsyms) * (1u << (MAX_CODE_LEN - (primary))))
#define LITLEN_TABLE_SIZE TABLE_SIZE(LITLEN_PRIMARY, N_LITLEN_SYMS)
#define DIST_TABLE_SIZE TABLE_SIZE(DIST_PRIMARY, N_DIST_SYMS)
#define PRECODE_TABLE_SIZE (1u << PRECODE_PRIMARY)  // precode lengths are at most 7 bits

// The longest match plus the 8-byte overrun of the chunked match copy: reserving
// this much before each symbol keeps the hot loop free of per-byte checks.
#define MATCH_SLACK (258 + 8)
// Room the output buffer may take beyond GZ_MAX_OUTPUT, so that the slack above
// never turns a stream just under the cap into an error.
#define OUT_SLACK 512

typedef enum code_kind { CODE_KIND_PRECODE, CODE_KIND_LITLEN, CODE_KIND_DIST } code_kind_t;

static const uint16_t len_base[29] = {3,  4,  5,  6,  7,  8,  9,  10, 11,  13,  15,  17,  19,  23, 27,
                                      31, 35, 43, 51, 59, 67, 83, 99, 115, 131, 163, 195, 227, 258};
static const uint8_t len_extra[29] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0};
static const uint16_t dist_base[30] = {1,   2,   3,   4,   5,   7,    9,    13,   17,   25,   33,   49,   65,    97,    129,
                                       193, 257, 385, 513, 769, 1025, 1537, 2049, 3073, 4097, 6145, 8193, 12289, 16385, 24577};
static const uint8_t dist_extra[30] = {0, 0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13};
static const uint8_t precode_order[N_PRECODE_SYMS] = {16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15};

static unsigned reverse_bits(unsigned code, unsigned len) {
    unsigned r = 0;
    for (unsigned i = 0; i < len; i++, code >>= 1) r = (r << 1) | (code & 1u);
    return r;
}

// Returns NULL when the lengths form a usable prefix code, else what is wrong with them.
static const char *build_table(uint32_t *table, unsigned table_size, unsigned primary, const uint8_t *lens, unsigned nsyms,
                               code_kind_t kind) {
    unsigned count[MAX_CODE_LEN + 1] = {0};
    for (unsigned s = 0; s < nsyms; s++) count[lens[s]]++;
    count[0] = 0;
    int left = 1;
    unsigned max_len = 0;
    for (unsigned len = 1; len <= MAX_CODE_LEN; len++) {
        left = 2 * left - (int)count[len];
        if (left < 0) return "over-subscribed (more codes than the lengths allow)";
        if (count[len]) max_len = len;
    }
    // Like zlib, accept an incomplete code only in the degenerate one-symbol case
    // that encoders emit for a block using a single distance; anything else would
    // leave holes that a corrupt stream could land in.
    if (left > 0 && max_len > 0 && (kind == CODE_KIND_PRECODE || max_len != 1))
        return "incomplete (the lengths leave unused codes)";

    unsigned next_code[MAX_CODE_LEN + 1];
    unsigned code = 0;
    for (unsigned len = 1; len <= MAX_CODE_LEN; len++) {
        code = (code + count[len - 1]) << 1;
        next_code[len] = code;
    }
    unsigned rev[N_LITLEN_SYMS];
    uint8_t link_len[1u << LITLEN_PRIMARY] = {0};  // longest code under each primary prefix
    const unsigned primary_size = 1u << primary, mask = primary_size - 1;
    for (unsigned s = 0; s < nsyms; s++) {
        if (!lens[s]) continue;
        rev[s] = reverse_bits(next_code[lens[s]]++, lens[s]);
        if (lens[s] > primary && lens[s] > link_len[rev[s] & mask]) link_len[rev[s] & mask] = lens[s];
    }
    memset(table, 0, primary_size * sizeof *table);
    unsigned used = primary_size;
    for (unsigned p = 0; p < primary_size; p++) {
        if (!link_len[p]) continue;
        unsigned bits = link_len[p] - primary;
        if (used + (1u << bits) > table_size) return "too large for the decode table";
        table[p] = (used << 16) | (bits << 8) | E_LINK;
        memset(table + used, 0, ((size_t)1 << bits) * sizeof *table);
        used += 1u << bits;
    }
    for (unsigned s = 0; s < nsyms; s++) {
        unsigned len = lens[s];
        if (!len) continue;
        uint32_t entry = ((uint32_t)s << 16) | len;
        if (len <= primary) {
            for (unsigned i = rev[s]; i < primary_size; i += 1u << len) table[i] = entry;
        } else {
            uint32_t link = table[rev[s] & mask];
            uint32_t *sub = table + E_VAL(link);
            for (unsigned i = rev[s] >> primary; i < (1u << E_SUBBITS(link)); i += 1u << (len - primary)) sub[i] = entry;
        }
    }
    return NULL;
}

// ---- bit reader ----------------------------------------------------------------
typedef struct bitreader {
    const uint8_t *in;
    size_t len;
    size_t pos;    // next byte to load into buf
    uint64_t buf;  // unconsumed bits, next bit lowest; bits above cnt are zero or copies of in[pos..]
    unsigned cnt;  // valid bits in buf, at most 63
} bitreader_t;

static inline uint64_t load_le64(const uint8_t *p) {
    return (uint64_t)p[0] | (uint64_t)p[1] << 8 | (uint64_t)p[2] << 16 | (uint64_t)p[3] << 24 | (uint64_t)p[4] << 32 |
           (uint64_t)p[5] << 40 | (uint64_t)p[6] << 48 | (uint64_t)p[7] << 56;
}

static inline uint32_t load_le32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

// Tops buf up to at least 56 bits unless the input runs out first.
static inline void br_refill(bitreader_t *br) {
    if (br->len - br->pos >= 8) {
        // One unaligned load instead of a byte loop; the bits of the partly
        // loaded last byte are loaded again, identically, by the next refill.
        br->buf |= load_le64(br->in + br->pos) << br->cnt;
        br->pos += (63 - br->cnt) >> 3;
        br->cnt |= 56;
    } else {
        while (br->cnt < 56 && br->pos < br->len) {
            br->buf |= (uint64_t)br->in[br->pos++] << br->cnt;
            br->cnt += 8;
        }
    }
}

// Offset of the byte holding the next unread bit, for error messages.
static inline size_t br_offset(const bitreader_t *br) { return br->pos - br->cnt / 8; }

static inline uint32_t br_lookup(const bitreader_t *br, const uint32_t *table, unsigned primary) {
    uint32_t e = table[br->buf & ((1u << primary) - 1)];
    if (e & E_LINK) e = table[E_VAL(e) + ((br->buf >> primary) & ((1u << E_SUBBITS(e)) - 1))];
    return e;
}

static inline void br_drop(bitreader_t *br, unsigned n) {
    br->buf >>= n;
    br->cnt -= n;
}

static inline uint32_t br_peek(const bitreader_t *br, unsigned n) { return (uint32_t)(br->buf & ((1ull << n) - 1)); }

// ---- inflater --------------------------------------------------------------------
typedef struct inflater {
    bitreader_t br;
    uint8_t *out;         // (out_cap) inflated bytes of all members so far
    size_t out_len, out_cap;
    size_t member_start;  // matches may not reach before the current member's output
    const char *name;
    char *err;
    size_t err_len;
    uint32_t litlen[LITLEN_TABLE_SIZE];
    uint32_t dist[DIST_TABLE_SIZE];
    uint32_t precode[PRECODE_TABLE_SIZE];
    uint32_t crc_table[8][256];  // slice-by-8, so the CRC pass costs little next to inflating
} inflater_t;

__attribute__((format(printf, 3, 4))) static int fail_at(inflater_t *z, size_t offset, const char *fmt, ...) {
    if (!z->err || !z->err_len) return -1;
    char what[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    snprintf(z->err, z->err_len, "%s: at compressed byte offset %zu: %s", z->name, offset, what);
    return -1;
}

static int fail_truncated(inflater_t *z, const bitreader_t *br) {
    return fail_at(z, br_offset(br), "truncated input: the deflate stream ends inside a block (%zu bytes in all)", br->len);
}

// Reads n <= 16 bits outside the hot loop.
static int read_bits(inflater_t *z, unsigned n, unsigned *v) {
    bitreader_t *br = &z->br;
    if (br->cnt < n) br_refill(br);
    if (br->cnt < n) return fail_truncated(z, br);
    *v = br_peek(br, n);
    br_drop(br, n);
    return 0;
}

// A lookup that found no code is either corrupt data or the zero bits past the end of a truncated input.
static int fail_code(inflater_t *z, const bitreader_t *br, unsigned len, const char *which) {
    if (len > br->cnt || (br->pos == br->len && br->cnt < MAX_CODE_LEN)) return fail_truncated(z, br);
    return fail_at(z, br_offset(br), "invalid %s Huffman code (the bits match no symbol of the block's code)", which);
}

static int reserve(inflater_t *z, size_t need, size_t at) {
    if (z->out_cap - z->out_len >= need) return 0;
    if (z->out_len > GZ_MAX_OUTPUT || need > GZ_MAX_OUTPUT + OUT_SLACK - z->out_len)
        return fail_at(z, at, "inflated output exceeds the %zu-byte cap", (size_t)GZ_MAX_OUTPUT);
    size_t cap = 2 * z->out_cap;  // doubling keeps the copies of realloc linear overall
    if (cap < z->out_len + need) cap = z->out_len + need;
    if (cap < 65536) cap = 65536;
    if (cap > GZ_MAX_OUTPUT + OUT_SLACK) cap = GZ_MAX_OUTPUT + OUT_SLACK;
    uint8_t *p = realloc(z->out, cap);
    if (!p) return fail_at(z, at, "growing the output buffer to %zu bytes: %s", cap, strerror(errno));
    z->out = p;
    z->out_cap = cap;
    return 0;
}

static uint32_t crc32_update(const inflater_t *z, uint32_t crc, const uint8_t *p, size_t n) {
    const uint32_t(*t)[256] = z->crc_table;
    crc = ~crc;
    for (; n >= 8; p += 8, n -= 8) {
        uint32_t a = crc ^ load_le32(p), b = load_le32(p + 4);
        crc = t[7][a & 0xFF] ^ t[6][(a >> 8) & 0xFF] ^ t[5][(a >> 16) & 0xFF] ^ t[4][a >> 24] ^ t[3][b & 0xFF] ^
              t[2][(b >> 8) & 0xFF] ^ t[1][(b >> 16) & 0xFF] ^ t[0][b >> 24];
    }
    while (n--) crc = t[0][(crc ^ *p++) & 0xFF] ^ (crc >> 8);
    return ~crc;
}

static void crc32_init(inflater_t *z) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1u)));
        z->crc_table[0][i] = c;
    }
    for (int k = 1; k < 8; k++)
        for (int i = 0; i < 256; i++)
            z->crc_table[k][i] = (z->crc_table[k - 1][i] >> 8) ^ z->crc_table[0][z->crc_table[k - 1][i] & 0xFF];
}

static inline void copy_match(uint8_t *dst, size_t distance, unsigned length) {
    const uint8_t *src = dst - distance;
    if (distance >= 8) {
        // 8-byte chunks may write up to 7 bytes past the match (MATCH_SLACK has
        // room); with distance >= 8 every chunk reads only bytes already written.
        uint8_t *end = dst + length;
        do {
            memcpy(dst, src, 8);
            dst += 8;
            src += 8;
        } while (dst < end);
    } else if (distance == 1) {
        memset(dst, *src, length);
    } else {
        for (unsigned i = 0; i < length; i++) dst[i] = src[i];
    }
}

// The hot loop keeps the reader and output cursor in locals: stores through
// uint8_t * may alias anything, which would otherwise force every field of z
// back to memory after each output byte.
static int huffman_block(inflater_t *z) {
    bitreader_t br = z->br;
    uint8_t *out = z->out;
    size_t out_len = z->out_len, out_cap = z->out_cap;
    const size_t start = z->member_start;
    const uint32_t *litlen = z->litlen, *dist = z->dist;
    for (;;) {
        if (out_cap - out_len < MATCH_SLACK) {
            z->out_len = out_len;
            if (reserve(z, MATCH_SLACK, br_offset(&br)) != 0) return -1;
            out = z->out;
            out_cap = z->out_cap;
        }
        // 56 bits cover the longest length/distance pair (15 + 5 + 15 + 13 bits).
        if (br.cnt < 48) br_refill(&br);
        uint32_t e = br_lookup(&br, litlen, LITLEN_PRIMARY);
        unsigned n = E_LEN(e);
        if (n == 0 || n > br.cnt) return fail_code(z, &br, n, "literal/length");
        br_drop(&br, n);
        unsigned sym = E_VAL(e);
        if (sym < 256) {
            out[out_len++] = (uint8_t)sym;
            continue;
        }
        if (sym == 256) break;
        sym -= 257;
        if (sym >= 29) return fail_at(z, br_offset(&br), "invalid length symbol %u (only 257..285 are defined)", sym + 257);
        n = len_extra[sym];
        if (n > br.cnt) return fail_truncated(z, &br);
        unsigned length = len_base[sym] + br_peek(&br, n);
        br_drop(&br, n);

        e = br_lookup(&br, dist, DIST_PRIMARY);
        n = E_LEN(e);
        if (n == 0 || n > br.cnt) return fail_code(z, &br, n, "distance");
        br_drop(&br, n);
        sym = E_VAL(e);
        if (sym >= 30) return fail_at(z, br_offset(&br), "invalid distance symbol %u (only 0..29 are defined)", sym);
        n = dist_extra[sym];
        if (n > br.cnt) return fail_truncated(z, &br);
        size_t distance = dist_base[sym] + br_peek(&br, n);
        br_drop(&br, n);
        if (distance > out_len - start)
            return fail_at(z, br_offset(&br), "match distance %zu reaches before the start of the member (%zu bytes inflated so far)",
                           distance, out_len - start);
        copy_match(out + out_len, distance, length);
        out_len += length;
    }
    z->br = br;
    z->out_len = out_len;
    return 0;
}

static int stored_block(inflater_t *z) {
    bitreader_t *br = &z->br;
    // Stored data starts at the next byte boundary; give back the whole bytes
    // already loaded and copy straight from the input.
    br_drop(br, br->cnt & 7u);
    br->pos -= br->cnt / 8;
    br->buf = 0;
    br->cnt = 0;
    const uint8_t *p = br->in + br->pos;
    if (br->len - br->pos < 4)
        return fail_at(z, br->pos, "truncated input: stored block header needs 4 bytes, %zu remain", br->len - br->pos);
    unsigned len = p[0] | (unsigned)p[1] << 8, nlen = p[2] | (unsigned)p[3] << 8;
    if (len != (~nlen & 0xFFFFu))
        return fail_at(z, br->pos, "stored block LEN 0x%04x does not match NLEN 0x%04x (expected its one's complement)", len, nlen);
    br->pos += 4;
    if (br->len - br->pos < len)
        return fail_at(z, br->pos, "truncated input: stored block of %u bytes, only %zu remain", len, br->len - br->pos);
    if (reserve(z, len, br->pos) != 0) return -1;
    memcpy(z->out + z->out_len, br->in + br->pos, len);
    z->out_len += len;
    br->pos += len;
    return 0;
}

static int fixed_tables(inflater_t *z) {
    uint8_t lens[N_LITLEN_SYMS];
    memset(lens, 8, 144);
    memset(lens + 144, 9, 112);
    memset(lens + 256, 7, 24);
    memset(lens + 280, 8, 8);
    uint8_t dlens[N_DIST_SYMS];
    memset(dlens, 5, sizeof dlens);
    if (build_table(z->litlen, LITLEN_TABLE_SIZE, LITLEN_PRIMARY, lens, N_LITLEN_SYMS, CODE_KIND_LITLEN) ||
        build_table(z->dist, DIST_TABLE_SIZE, DIST_PRIMARY, dlens, N_DIST_SYMS, CODE_KIND_DIST))
        return fail_at(z, br_offset(&z->br), "internal error: the fixed Huffman code did not build");
    return 0;
}

static int dynamic_tables(inflater_t *z) {
    size_t at = br_offset(&z->br);
    unsigned hlit = 0, hdist = 0, hclen = 0;
    if (read_bits(z, 5, &hlit) || read_bits(z, 5, &hdist) || read_bits(z, 4, &hclen)) return -1;
    hlit += 257;
    hdist += 1;
    hclen += 4;
    if (hlit > 286) return fail_at(z, at, "dynamic block declares %u literal/length codes (HLIT; at most 286)", hlit);
    if (hdist > 30) return fail_at(z, at, "dynamic block declares %u distance codes (HDIST; at most 30)", hdist);

    uint8_t pre[N_PRECODE_SYMS] = {0};
    for (unsigned i = 0; i < hclen; i++) {
        unsigned v = 0;
        if (read_bits(z, 3, &v)) return -1;
        pre[precode_order[i]] = (uint8_t)v;
    }
    const char *why = build_table(z->precode, PRECODE_TABLE_SIZE, PRECODE_PRIMARY, pre, N_PRECODE_SYMS, CODE_KIND_PRECODE);
    if (why) return fail_at(z, at, "code-length code is %s", why);

    uint8_t lens[286 + 30];
    bitreader_t *br = &z->br;
    for (unsigned n = 0; n < hlit + hdist;) {
        if (br->cnt < MAX_CODE_LEN) br_refill(br);
        uint32_t e = br_lookup(br, z->precode, PRECODE_PRIMARY);
        unsigned len = E_LEN(e);
        if (len == 0 || len > br->cnt) return fail_code(z, br, len, "code-length");
        br_drop(br, len);
        unsigned sym = E_VAL(e), rep = 0, val = 0;
        if (sym < 16) {
            lens[n++] = (uint8_t)sym;
            continue;
        }
        if (sym == 16) {
            if (n == 0) return fail_at(z, br_offset(br), "code-length repeat (16) with no previous length to repeat");
            val = lens[n - 1];
            if (read_bits(z, 2, &rep)) return -1;
            rep += 3;
        } else if (sym == 17) {
            if (read_bits(z, 3, &rep)) return -1;
            rep += 3;
        } else {
            if (read_bits(z, 7, &rep)) return -1;
            rep += 11;
        }
        if (rep > hlit + hdist - n)
            return fail_at(z, br_offset(br), "code-length repeat of %u runs past the %u lengths declared (at length %u)", rep,
                           hlit + hdist, n);
        memset(lens + n, (int)val, rep);
        n += rep;
    }
    if (lens[256] == 0) return fail_at(z, at, "literal/length code has no end-of-block symbol (length of 256 is 0)");
    why = build_table(z->litlen, LITLEN_TABLE_SIZE, LITLEN_PRIMARY, lens, hlit, CODE_KIND_LITLEN);
    if (why) return fail_at(z, at, "literal/length code is %s", why);
    why = build_table(z->dist, DIST_TABLE_SIZE, DIST_PRIMARY, lens + hlit, hdist, CODE_KIND_DIST);
    if (why) return fail_at(z, at, "distance code is %s", why);
    return 0;
}

// Inflates one raw DEFLATE stream starting at z->br.pos; on return br.pos is the
// first byte after it.
static int inflate_stream(inflater_t *z) {
    bitreader_t *br = &z->br;
    unsigned header = 0;
    do {
        size_t at = br_offset(br);
        if (read_bits(z, 3, &header)) return -1;
        int rc;
        switch (header >> 1) {
        case 0: rc = stored_block(z); break;
        case 1: rc = (fixed_tables(z) != 0 || huffman_block(z) != 0) ? -1 : 0; break;
        case 2: rc = (dynamic_tables(z) != 0 || huffman_block(z) != 0) ? -1 : 0; break;
        default: return fail_at(z, at, "invalid block type 3 (reserved; expected 0 stored, 1 fixed or 2 dynamic Huffman)");
        }
        if (rc) return -1;
    } while (!(header & 1));
    br_drop(br, br->cnt & 7u);
    br->pos -= br->cnt / 8;
    br->buf = 0;
    br->cnt = 0;
    return 0;
}

enum { FLG_FTEXT = 1, FLG_FHCRC = 2, FLG_FEXTRA = 4, FLG_FNAME = 8, FLG_FCOMMENT = 16 };

// Reads the gzip member at in[start..]; *next receives the offset just past it.
static int read_member(inflater_t *z, size_t start, size_t *next) {
    const uint8_t *in = z->br.in;
    const size_t len = z->br.len;
    size_t p = start;
    if (len - p < 10) return fail_at(z, p, "truncated gzip header: %zu bytes, expected at least 10", len - p);
    if (in[p] != 0x1F || in[p + 1] != 0x8B)
        return fail_at(z, p, "bad gzip magic %02x %02x (expected 1f 8b)", in[p], in[p + 1]);
    if (in[p + 2] != 8) return fail_at(z, p + 2, "compression method %u (expected 8 = deflate)", in[p + 2]);
    const unsigned flg = in[p + 3];
    if (flg & 0xE0u) return fail_at(z, p + 3, "reserved gzip header flag bits set (FLG 0x%02x)", flg);
    p += 10;
    if (flg & FLG_FEXTRA) {
        if (len - p < 2) return fail_at(z, p, "truncated gzip header: FEXTRA length missing");
        size_t xlen = in[p] | (size_t)in[p + 1] << 8;
        p += 2;
        if (len - p < xlen) return fail_at(z, p, "truncated gzip header: FEXTRA declares %zu bytes, %zu remain", xlen, len - p);
        p += xlen;
    }
    for (unsigned field = FLG_FNAME; field <= FLG_FCOMMENT; field <<= 1) {
        if (!(flg & field)) continue;
        const uint8_t *nul = memchr(in + p, 0, len - p);
        if (!nul) return fail_at(z, p, "truncated gzip header: %s has no terminating zero byte", field == FLG_FNAME ? "FNAME" : "FCOMMENT");
        p = (size_t)(nul - in) + 1;
    }
    if (flg & FLG_FHCRC) {
        if (len - p < 2) return fail_at(z, p, "truncated gzip header: FHCRC missing");
        unsigned stored = in[p] | (unsigned)in[p + 1] << 8;
        unsigned computed = crc32_update(z, 0, in + start, p - start) & 0xFFFFu;
        if (stored != computed) return fail_at(z, p, "gzip header CRC16 0x%04x does not match the header (computed 0x%04x)", stored, computed);
        p += 2;
    }

    z->br.pos = p;
    z->br.buf = 0;
    z->br.cnt = 0;
    z->member_start = z->out_len;
    if (inflate_stream(z) != 0) return -1;
    p = z->br.pos;
    if (z->out_len > GZ_MAX_OUTPUT) return fail_at(z, p, "inflated output exceeds the %zu-byte cap", (size_t)GZ_MAX_OUTPUT);
    if (len - p < 8) return fail_at(z, p, "truncated gzip trailer: %zu bytes, expected 8 (CRC-32 and ISIZE)", len - p);
    size_t produced = z->out_len - z->member_start;
    uint32_t crc = crc32_update(z, 0, z->out + z->member_start, produced), want_crc = load_le32(in + p);
    if (crc != want_crc) return fail_at(z, p, "CRC-32 mismatch: trailer says 0x%08x, inflated data gives 0x%08x", want_crc, crc);
    uint32_t isize = load_le32(in + p + 4);
    if (isize != (uint32_t)produced)
        return fail_at(z, p + 4, "ISIZE mismatch: trailer says %u bytes (mod 2^32), inflated %zu", isize, produced);
    *next = p + 8;
    return 0;
}

int gz_inflate_buffer(const uint8_t *in, size_t in_len, const char *name_for_errors, uint8_t **out, size_t *out_len, char *err,
                      size_t err_len) {
    *out = NULL;
    *out_len = 0;
    const char *name = name_for_errors ? name_for_errors : "(gzip buffer)";
    if (in_len < 2 || in[0] != 0x1F || in[1] != 0x8B) {
        snprintf(err, err_len, "%s: at compressed byte offset 0: not a gzip stream (expected magic 1f 8b)", name);
        return -1;
    }
    inflater_t *z = malloc(sizeof *z);
    if (!z) {
        snprintf(err, err_len, "%s: allocating the inflater (%zu bytes): %s", name, sizeof *z, strerror(errno));
        return -1;
    }
    z->br = (bitreader_t){.in = in, .len = in_len};
    z->out = NULL;
    z->out_len = z->out_cap = 0;
    z->member_start = 0;
    z->name = name;
    z->err = err;
    z->err_len = err_len;
    crc32_init(z);

    // The last member's ISIZE usually gives the exact size, saving the copies of
    // repeated doubling; it is only a hint, bounded by DEFLATE's best ratio (1032:1).
    size_t hint = in_len >= 18 ? load_le32(in + in_len - 4) : 0;
    if (hint / 1032 > in_len) hint = 0;
    int rc = reserve(z, hint + MATCH_SLACK, 0);
    if (rc != 0 && hint > 0) rc = reserve(z, MATCH_SLACK, 0);  // a wrong hint must not fail a good stream
    size_t p = 0;
    while (rc == 0 && p < in_len) {
        rc = read_member(z, p, &p);
        if (rc == 0 && p < in_len && !(in_len - p >= 2 && in[p] == 0x1F && in[p + 1] == 0x8B)) {
            // gzip itself ignores zero padding after the last member (tape blocks).
            size_t q = p;
            while (q < in_len && in[q] == 0) q++;
            if (q < in_len)
                rc = fail_at(z, q, "unexpected byte 0x%02x after the gzip member that ended at offset %zu (expected another member, 1f 8b)",
                             in[q], p);
            p = in_len;
        }
    }
    if (rc != 0) {
        free(z->out);
        free(z);
        return -1;
    }
    uint8_t *shrunk = realloc(z->out, z->out_len ? z->out_len : 1);
    *out = shrunk ? shrunk : z->out;
    *out_len = z->out_len;
    free(z);
    return 0;
}

// ---- files -------------------------------------------------------------------------
static int read_whole_file(const char *path, uint8_t **data, size_t *len, char *err, size_t err_len) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        snprintf(err, err_len, "%s: open: %s", path, strerror(errno));
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        snprintf(err, err_len, "%s: fstat: %s", path, strerror(errno));
        close(fd);
        return -1;
    }
    if (S_ISDIR(st.st_mode)) {
        snprintf(err, err_len, "%s: is a directory (expected a file)", path);
        close(fd);
        return -1;
    }
    // st_size sizes the buffer for regular files (+1 so that EOF needs no regrowth);
    // pipes report 0 and grow by doubling.
    size_t cap = S_ISREG(st.st_mode) && st.st_size > 0 && (uint64_t)st.st_size <= GZ_MAX_OUTPUT ? (size_t)st.st_size + 1 : 65536;
    uint8_t *buf = NULL;
    size_t n = 0;
    for (;;) {
        if (!buf || n == cap) {
            size_t want = buf ? 2 * cap : cap;
            uint8_t *bigger = realloc(buf, want);
            if (!bigger) {
                snprintf(err, err_len, "%s: allocating a %zu-byte read buffer: %s", path, want, strerror(errno));
                break;
            }
            buf = bigger;
            cap = want;
        }
        ssize_t r = read(fd, buf + n, cap - n);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            snprintf(err, err_len, "%s: read at byte offset %zu: %s", path, n, strerror(errno));
            break;
        }
        if (r == 0) {
            close(fd);
            *data = buf;
            *len = n;
            return 0;
        }
        n += (size_t)r;
        if (n > GZ_MAX_OUTPUT) {
            snprintf(err, err_len, "%s: file is larger than the %zu-byte cap", path, (size_t)GZ_MAX_OUTPUT);
            break;
        }
    }
    free(buf);
    close(fd);
    return -1;
}

int gz_read_file(const char *path, uint8_t **out, size_t *out_len, char *err, size_t err_len) {
    *out = NULL;
    *out_len = 0;
    uint8_t *raw;
    size_t n;
    if (read_whole_file(path, &raw, &n, err, err_len) != 0) return -1;
    if (n >= 2 && raw[0] == 0x1F && raw[1] == 0x8B) {
        int rc = gz_inflate_buffer(raw, n, path, out, out_len, err, err_len);
        free(raw);
        return rc;
    }
    *out = raw;
    *out_len = n;
    return 0;
}
