#ifndef ASGD_NET_COMPRESS_H
#define ASGD_NET_COMPRESS_H
// Gradient compression: a float vector encoded into fewer bytes for the wire,
// and decoded back (docs/compression.md).
//
//   none      float32 as is
//   fp16      IEEE binary16, round to nearest even; |x| above 65504 saturates
//   qsgd:B    per bucket of COMPRESS_QSGD_BUCKET values one float32 scale (the
//             bucket's largest |x|) and B bits per value: a level in
//             -s..s (s = 2^(B-1) - 1) chosen by stochastic rounding, so that the
//             decoded value scale * level / s is x in expectation (unbiased)
//   topk:F    the ceil(F n) values of largest magnitude, as (index, value) pairs
//   randk:F   ceil(F n) indices drawn uniformly without replacement, values
//             multiplied by n / k: unbiased (under error feedback unscaled,
//             see compress_encode)
//
// An encoded vector starts with an 8-byte descriptor that names the encoding
// and its parameters, so a receiver decodes it without being told how it was
// made, and refuses one it does not know (docs/protocol.md, payload kind
// ENCODED). The size of an encoding depends only on the method and n, so a
// sender can allocate the exact frame before encoding into it.
//
// Error feedback: with a residual e, the encoder sends the encoding of x + e
// and keeps in e what the receiver will not see (x + e - decoded), so that
// what is sent over many steps adds up to what should have been sent, less
// the last residual. Encoding and decoding allocate nothing: a compressor's
// scratch is sized once for the longest vector it will encode.
#include <stddef.h>
#include <stdint.h>

#include "kernels/foundation/rng.h"

typedef enum compress_kind {
    COMPRESS_KIND_NONE = 0,
    COMPRESS_KIND_FP16 = 1,
    COMPRESS_KIND_QSGD = 2,
    COMPRESS_KIND_TOPK = 3,
    COMPRESS_KIND_RANDK = 4,
    COMPRESS_KIND_COUNT_,
} compress_kind_t;

#define COMPRESS_DESCRIPTOR_BYTES 8u
#define COMPRESS_QSGD_BUCKET 512u
#define COMPRESS_QSGD_MIN_BITS 2u
#define COMPRESS_QSGD_MAX_BITS 8u
#define COMPRESS_FP16_MAX 65504.0f

typedef struct compress_spec {
    compress_kind_t kind;
    unsigned bits;  // qsgd: 2..8
    uint32_t bucket;  // qsgd: values per scale
    double fraction;  // topk, randk: in (0, 1]
} compress_spec_t;

// "none", "fp16", "qsgd:BITS" (or "qsgd:BITS:BUCKET"), "topk:FRACTION",
// "randk:FRACTION". Returns 0, or -1 with err saying what is wrong.
int compress_spec_parse(const char *text, compress_spec_t *out, char *err, size_t err_len);
// The spec as compress_spec_parse reads it back, e.g. "qsgd:4".
void compress_spec_format(const compress_spec_t *s, char *out, size_t out_len);
const char *compress_kind_name(compress_kind_t k);
// Whether decode(encode(x)) can differ from x (every method but none).
int compress_is_lossy(const compress_spec_t *s);

// topk/randk: the number of pairs sent for n values, ceil(fraction n) in [1, n]
// (0 when n is 0); n for the other methods.
size_t compress_values_sent(const compress_spec_t *s, size_t n);
// Exact bytes of an encoding of n values, descriptor included.
size_t compress_encoded_bytes(const compress_spec_t *s, size_t n);
// The most bytes any valid encoding of n values takes (top-k or rand-k at
// fraction 1: an index and a value each): what a receiver may have to take.
size_t compress_max_encoded_bytes(size_t n);

// A caller-allocated error-feedback residual over n values, all zero at first.
typedef struct ef_residual {
    float *e;  // (n)
    size_t n;
} ef_residual_t;
int ef_residual_init(ef_residual_t *r, size_t n, char *err, size_t err_len);
void ef_residual_free(ef_residual_t *r);
double ef_residual_norm(const ef_residual_t *r);  // Euclidean

typedef struct compressor compressor_t;

// A compressor for vectors of up to max_n values. The stochastic methods draw
// from the stream (seed, stream) of kernels/foundation/rng.h: the same seed, stream and
// inputs give the same encodings. Returns NULL with err filled.
compressor_t *compressor_new(const compress_spec_t *s, size_t max_n, uint64_t seed, uint64_t stream, char *err,
                             size_t err_len);
void compressor_destroy(compressor_t **c);
const compress_spec_t *compressor_spec(const compressor_t *c);

// Encodes x[0..n) into out, which must hold compress_encoded_bytes(spec, n)
// bytes. residual (may be NULL: no error feedback) is a slice of n values: the
// vector encoded is x + residual, and residual becomes x + residual - sent.
// sent (may be NULL) receives the values the receiver will decode. With a
// residual, randk sends its values unscaled: error feedback needs an encoding
// that never sends more than the vector holds, or the residual grows. x, sent
// and residual may not overlap out. Returns 0, or -1 with err filled (n above
// max_n, out too small, or a value of x that is not finite: NaN or infinity
// cannot be quantised and would poison every receiver's sum).
int compress_encode(compressor_t *c, const float *x, size_t n, float *residual, float *sent, uint8_t *out,
                    size_t out_len, char *err, size_t err_len);

// Checks that in[0..len) is a well-formed encoding of exactly n values:
// a known encoding with valid parameters, the exact size, indices ascending
// and below n, quantisation codes in range, zero padding, finite values.
// Returns 0, or -1 with err naming what is wrong.
int compress_check(const uint8_t *in, size_t len, size_t n, char *err, size_t err_len);
// The encoding an encoded vector names (its descriptor's first byte), or -1
// when len is too short to have one. Unknown codes are returned as they are.
int compress_encoded_kind(const uint8_t *in, size_t len);

// Decodes (out = values) or decodes and adds (out += values) an encoding of n
// values, after compress_check; out is untouched when it fails. Returns 0 or -1.
int compress_decode(const uint8_t *in, size_t len, size_t n, float *out, char *err, size_t err_len);
int compress_decode_add(const uint8_t *in, size_t len, size_t n, float *out, char *err, size_t err_len);

// The fp16 encoding of x[0..n) into out (compress_encoded_bytes of fp16 and n
// bytes): compress_encode for fp16 without a compressor, residual or checks
// of finiteness (infinities and NaN travel as such, and the receiver refuses them).
void compress_encode_fp16(const float *x, size_t n, uint8_t *out);

// Rounds x[0..n) in place to the float32 values fp16 represents (saturating at
// COMPRESS_FP16_MAX), i.e. what an fp16 encode-decode round trip returns.
void compress_round_fp16(float *x, size_t n);

// Whether fp16 conversions run on the CPU's F16C instructions (else the scalar
// reference below), and that reference for a whole vector: the halves into out
// and their values into q (either may be NULL). Both give the same bits.
int compress_fp16_hardware(void);
void compress_fp16_reference(const float *x, size_t n, uint8_t *out, float *q);

// binary16 <-> float32 for one value (round to nearest even; saturating).
uint16_t compress_f32_to_f16(float f);
float compress_f16_to_f32(uint16_t h);

#endif
