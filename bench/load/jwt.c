/*
 * jwt.c — SHA-256 (FIPS 180-4), HMAC (RFC 2104), base64url and an HS256 JWT, with libc only:
 * the load tool links nothing but libferry.
 */
#define _GNU_SOURCE 1 /* POSIX clocks and threads under -std=c11 */
#include "jwt.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

struct sha256 {
  uint32_t h[8];
  uint8_t block[64];
  size_t used;     /* bytes in block */
  uint64_t length; /* bytes hashed so far */
};

static const uint32_t K[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

static uint32_t rotr(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

static void sha256_compress(struct sha256 *s) {
  uint32_t w[64];
  for (int i = 0; i < 16; i++)
    w[i] = (uint32_t)s->block[4 * i] << 24 | (uint32_t)s->block[4 * i + 1] << 16 | (uint32_t)s->block[4 * i + 2] << 8 |
           s->block[4 * i + 3];
  for (int i = 16; i < 64; i++) {
    uint32_t s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
    uint32_t s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
    w[i] = w[i - 16] + s0 + w[i - 7] + s1;
  }
  uint32_t a = s->h[0], b = s->h[1], c = s->h[2], d = s->h[3], e = s->h[4], f = s->h[5], g = s->h[6], h = s->h[7];
  for (int i = 0; i < 64; i++) {
    uint32_t t1 = h + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + K[i] + w[i];
    uint32_t t2 = (rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
    h = g, g = f, f = e, e = d + t1, d = c, c = b, b = a, a = t1 + t2;
  }
  s->h[0] += a, s->h[1] += b, s->h[2] += c, s->h[3] += d, s->h[4] += e, s->h[5] += f, s->h[6] += g, s->h[7] += h;
}

static void sha256_init(struct sha256 *s) {
  static const uint32_t iv[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
  memcpy(s->h, iv, sizeof iv);
  s->used = 0;
  s->length = 0;
}

static void sha256_update(struct sha256 *s, const void *data, size_t n) {
  const uint8_t *p = data;
  s->length += n;
  while (n > 0) {
    size_t take = 64 - s->used < n ? 64 - s->used : n;
    memcpy(s->block + s->used, p, take);
    s->used += take, p += take, n -= take;
    if (s->used == 64) {
      sha256_compress(s);
      s->used = 0;
    }
  }
}

static void sha256_final(struct sha256 *s, uint8_t out[32]) {
  uint64_t bits = s->length * 8;
  uint8_t pad = 0x80, zero = 0, len[8];
  sha256_update(s, &pad, 1);
  while (s->used != 56) sha256_update(s, &zero, 1);
  for (int i = 0; i < 8; i++) len[i] = (uint8_t)(bits >> (56 - 8 * i));
  sha256_update(s, len, 8);
  for (int i = 0; i < 8; i++)
    out[4 * i] = (uint8_t)(s->h[i] >> 24), out[4 * i + 1] = (uint8_t)(s->h[i] >> 16), out[4 * i + 2] = (uint8_t)(s->h[i] >> 8),
               out[4 * i + 3] = (uint8_t)s->h[i];
}

static void hmac_sha256(uint8_t out[32], const char *key, const char *message, size_t message_size) {
  uint8_t k[64] = {0}, pad[64];
  size_t key_size = strlen(key);
  struct sha256 s;
  if (key_size > 64) {
    sha256_init(&s);
    sha256_update(&s, key, key_size);
    sha256_final(&s, k);
  } else {
    memcpy(k, key, key_size);
  }
  uint8_t inner[32];
  for (int i = 0; i < 64; i++) pad[i] = k[i] ^ 0x36;
  sha256_init(&s);
  sha256_update(&s, pad, 64);
  sha256_update(&s, message, message_size);
  sha256_final(&s, inner);
  for (int i = 0; i < 64; i++) pad[i] = k[i] ^ 0x5c;
  sha256_init(&s);
  sha256_update(&s, pad, 64);
  sha256_update(&s, inner, 32);
  sha256_final(&s, out);
}

/* Appends base64url (no padding) of data to out at *at; -1 when it does not fit. */
static int base64url(char *out, size_t size, size_t *at, const uint8_t *data, size_t n) {
  static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  if (*at + (n + 2) / 3 * 4 + 1 > size) return -1;
  for (size_t i = 0; i < n; i += 3) {
    uint32_t v = (uint32_t)data[i] << 16 | (i + 1 < n ? (uint32_t)data[i + 1] << 8 : 0) | (i + 2 < n ? data[i + 2] : 0);
    out[(*at)++] = alphabet[v >> 18 & 63];
    out[(*at)++] = alphabet[v >> 12 & 63];
    if (i + 1 < n) out[(*at)++] = alphabet[v >> 6 & 63];
    if (i + 2 < n) out[(*at)++] = alphabet[v & 63];
  }
  out[*at] = '\0';
  return 0;
}

int jwt_sign_hs256(char *out, size_t size, const char *subject, const char *audience, const char *key) {
  static const char header[] = "{\"alg\":\"HS256\",\"typ\":\"JWT\"}";
  char payload[512];
  int n = snprintf(payload, sizeof payload, "{\"sub\":\"%s\",\"aud\":\"%s\",\"exp\":%lld}", subject, audience,
                   (long long)time(NULL) + 86400);
  if (n < 0 || (size_t)n >= sizeof payload) return -1;
  size_t at = 0;
  if (base64url(out, size, &at, (const uint8_t *)header, sizeof header - 1) < 0) return -1;
  if (at + 1 >= size) return -1;
  out[at++] = '.';
  if (base64url(out, size, &at, (const uint8_t *)payload, (size_t)n) < 0) return -1;
  uint8_t mac[32];
  hmac_sha256(mac, key, out, at);
  if (at + 1 >= size) return -1;
  out[at++] = '.';
  return base64url(out, size, &at, mac, sizeof mac);
}
