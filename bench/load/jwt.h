/*
 * jwt.h — HS256 tokens for the custom-token provider (FERRY_CREDENTIALS_JWT).
 *
 * The load tool logs its thousands of users in the way a host with its own identity provider
 * does: it signs a JWT naming the user (`sub`) with the app's shared secret (the server's
 * `jwtSigningKey`). An email/password login costs the server one scrypt hash (tens of
 * milliseconds, on one or two threads): 10,000 devices would spend minutes hashing
 * passwords, which measures the password hashing pool, not sync.
 */
#ifndef LOAD_JWT_H
#define LOAD_JWT_H

#include <stddef.h>

/* Writes a compact JWT `header.payload.signature` into out (NUL-terminated) for the subject
 * `subject` and the audience `audience`, valid for a day, signed with HMAC-SHA256 under key.
 * Returns 0, or -1 when out (size bytes) is too small. */
int jwt_sign_hs256(char *out, size_t size, const char *subject, const char *audience, const char *key);

#endif
