/* The page cipher VFS: see include/ferry_cipher.h and docs/encryption.md.
 *
 * Every file SQLite opens through the VFS is one of:
 *  - the database file: pages at (pgno-1)*page_size, each sealed on its own;
 *  - the WAL: a 32-byte header and, per frame, a 24-byte frame header (both plain: SQLite's
 *    checksums cover them) and a sealed page;
 *  - the rollback journal: headers at sector boundaries stay plain, page images are sealed.
 * Anything else (temporary databases, statement journals, sorter files, super-journals) is
 * refused: it would hold pages in the clear. Ferry keeps temporary data in memory
 * (temp_store=MEMORY), so SQLite never asks for such a file.
 *
 * A sealed page keeps its first page_size-28 bytes as AES-256-GCM ciphertext and its last 28
 * (the reserved bytes SQLite leaves alone) for the nonce and the tag. Decrypted pages are
 * handed back with their reserved bytes zeroed: SQLite's page cache then always holds zeros
 * there, so the WAL checksums SQLite computes over a page before it is written match the page
 * read back after a crash.
 *
 * Format version 2 (new files): page 1 of the database file begins with 16 plain bytes, "FRY",
 * the byte 2, and 12 random bytes: the file's salt. The file's page key is HKDF-SHA256 of the
 * host key's derived master key with that salt, so no two files share a page key. Each page's
 * associated data binds where it belongs: its page number in the database file; its frame
 * number, page number, commit size and the WAL's salts in the WAL (the salts of the WAL
 * header: a frame header's salts are zeros until its transaction commits when SQLite has
 * rewritten one of the transaction's frames in place); its offset and page number in the
 * journal. Bytes 16..23 of page 1 stay plain too (page size, reserved bytes), and are
 * authenticated with the salt.
 *
 * Format version 1 (files written before): one page key per host key, page 1 encrypted from
 * byte 0 but for bytes 16..23, and the associated data holds a page's offset only. Such files
 * are still read and written in version 1; ferry_db_change_key rewrites them in version 2.
 *
 * The keys live in the database file's handle; its WAL and journal handles use them (SQLite
 * gives a WAL or journal its database file's handle, sqlite3_database_file_object). */
#include "ferry_cipher.h"

#include <fcntl.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/kdf.h>
#include <openssl/params.h>
#include <openssl/rand.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NONCE_SIZE 12
#define TAG_SIZE 16
#define MAX_PAGE 65536
#define WAL_HEADER 32
#define FRAME_HEADER 24
#define SALT_SIZE 16
#define KEY_BYTES 32

enum { KIND_PLAIN = 0, KIND_DB = 'D', KIND_WAL = 'W', KIND_JOURNAL = 'J' };

struct fcipher_keys {
  uint8_t master[KEY_BYTES]; /* HKDF of the host key: the per-file keys derive from it */
  uint8_t v1[KEY_BYTES];     /* the page key of every version 1 file of this host key */
};

struct fcipher {
  sqlite3_vfs vfs;
  sqlite3_vfs *base;
  char name[64];
  fcipher_keys keys;
  atomic_int fail_kind;
  atomic_llong fail_offset;
  atomic_int fail_wal;
};

typedef struct cfile {
  sqlite3_file base;    /* pMethods: ours */
  fcipher *cipher;
  int kind;
  int page_size;        /* 0 until known */
  uint8_t *scratch;     /* FRAME_HEADER + MAX_PAGE bytes */
  struct cfile *db;     /* the database file's handle (this one for the database file) */
  /* The database file's handle only: */
  int version;          /* 0 until known, FCIPHER_FORMAT_V1 or FCIPHER_FORMAT_V2 */
  int salt_on_disk;     /* 0: a salt made for a new file, not written yet */
  uint8_t salt[SALT_SIZE];
  EVP_CIPHER_CTX *enc;  /* keyed with the file's page key */
  EVP_CIPHER_CTX *dec;
  /* The WAL's handle only: the frame header this handle wrote last, if its last write was
     one (SQLite writes a frame's header, then its page); the salts of the WAL header as last
     read (another connection may have restarted the log since). */
  sqlite3_int64 header_at;
  uint8_t header[FRAME_HEADER];
  int salts_known;
  uint8_t salts[8];
  sqlite3_file *real;   /* the base VFS's file, right after this struct */
} cfile;

static const uint8_t sqlite_magic[16] = "SQLite format 3";
static const uint8_t v2_marker[4] = {'F', 'R', 'Y', FCIPHER_FORMAT_V2};

void fcipher_wipe(void *p, size_t n) {
  if (p && n) OPENSSL_cleanse(p, n);
}

static int valid_page_size(int n) {
  return n >= 512 && n <= MAX_PAGE && (n & (n - 1)) == 0;
}

/* Page size from bytes 16..17 of a database header (1 means 65536); 0 if invalid. */
static int header_page_size(const uint8_t *h) {
  int n = (h[0] << 8) | h[1];
  if (n == 1) n = MAX_PAGE;
  return valid_page_size(n) ? n : 0;
}

static uint32_t get32(const uint8_t *p) {
  return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

static int put32(uint8_t *p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (24 - 8 * i));
  return 4;
}

static int put64(uint8_t *p, sqlite3_int64 v) {
  for (int i = 0; i < 8; i++) p[i] = (uint8_t)((uint64_t)v >> (56 - 8 * i));
  return 8;
}

static void record_failure(cfile *f, int kind, sqlite3_int64 offset) {
  atomic_store(&f->cipher->fail_offset, (long long)offset);
  atomic_store(&f->cipher->fail_wal, f->kind == KIND_WAL);
  atomic_store(&f->cipher->fail_kind, kind);
}

/* HKDF-SHA256 (RFC 5869) through OpenSSL's KDF: 32 bytes of output. */
static int hkdf(uint8_t out[KEY_BYTES], const uint8_t *ikm, size_t ikm_len, const uint8_t *salt, size_t salt_len,
                const char *info) {
  EVP_KDF *kdf = EVP_KDF_fetch(NULL, "HKDF", NULL);
  if (!kdf) return 0;
  EVP_KDF_CTX *ctx = EVP_KDF_CTX_new(kdf);
  EVP_KDF_free(kdf);
  if (!ctx) return 0;
  OSSL_PARAM params[5], *p = params;
  *p++ = OSSL_PARAM_construct_utf8_string(OSSL_KDF_PARAM_DIGEST, (char *)"SHA256", 0);
  *p++ = OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_KEY, (void *)ikm, ikm_len);
  if (salt_len) *p++ = OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_SALT, (void *)salt, salt_len);
  *p++ = OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_INFO, (void *)info, strlen(info));
  *p = OSSL_PARAM_construct_end();
  int ok = EVP_KDF_derive(ctx, out, KEY_BYTES, params) == 1;
  EVP_KDF_CTX_free(ctx);
  return ok;
}

/* Keys the database file's cipher contexts for its version and salt. */
static int key_file(cfile *d) {
  uint8_t k[KEY_BYTES];
  const uint8_t *key = d->cipher->keys.v1;
  if (d->version == FCIPHER_FORMAT_V2) {
    if (!hkdf(k, d->cipher->keys.master, KEY_BYTES, d->salt, SALT_SIZE, "ferry page key v2")) return SQLITE_IOERR;
    key = k;
  }
  int ok = EVP_EncryptInit_ex(d->enc, NULL, NULL, key, NULL) == 1 && EVP_DecryptInit_ex(d->dec, NULL, NULL, key, NULL) == 1;
  fcipher_wipe(k, sizeof(k));
  return ok ? SQLITE_OK : SQLITE_IOERR;
}

/* Takes the version and salt from bytes 0..15 of page 1 as found on disk. */
static int adopt_header(cfile *d, const uint8_t *h) {
  int version = memcmp(h, v2_marker, sizeof(v2_marker)) == 0 ? FCIPHER_FORMAT_V2 : FCIPHER_FORMAT_V1;
  if (d->version == version && d->salt_on_disk &&
      (version == FCIPHER_FORMAT_V1 || memcmp(d->salt, h, SALT_SIZE) == 0))
    return SQLITE_OK;
  d->version = version;
  memcpy(d->salt, h, SALT_SIZE);
  d->salt_on_disk = 1;
  return key_file(d);
}

/* Makes sure the database file's keys are known: from page 1 on disk, or, for a new file, a
   new salt (which another connection's page 1, once written, replaces). */
static int load_keys(cfile *d) {
  if (d->version && d->salt_on_disk) return SQLITE_OK;
  uint8_t h[SALT_SIZE];
  int rc = d->real->pMethods->xRead(d->real, h, SALT_SIZE, 0);
  if (rc == SQLITE_IOERR_SHORT_READ) {
    if (d->version) return SQLITE_OK;
    memcpy(d->salt, v2_marker, sizeof(v2_marker));
    if (RAND_bytes(d->salt + sizeof(v2_marker), SALT_SIZE - (int)sizeof(v2_marker)) != 1) return SQLITE_IOERR;
    d->version = FCIPHER_FORMAT_V2;
    return key_file(d);
  }
  if (rc != SQLITE_OK) return rc;
  return adopt_header(d, h);
}

/* Encrypts page `in` (size bytes) into `out` with the database file's key; bytes clear_from ..
   clear_to stay in the clear (they are in the associated data). */
static int seal(cfile *d, uint8_t *out, const uint8_t *in, int size, const uint8_t *aad, int aad_len,
                int clear_from, int clear_to) {
  int usable = size - FCIPHER_RESERVE;
  uint8_t *nonce = out + usable, *tag = out + usable + NONCE_SIZE;
  int len = 0;
  EVP_CIPHER_CTX *c = d->enc;
  if (RAND_bytes(nonce, NONCE_SIZE) != 1) return SQLITE_IOERR_WRITE;
  if (EVP_EncryptInit_ex(c, NULL, NULL, NULL, nonce) != 1) return SQLITE_IOERR_WRITE;
  if (EVP_EncryptUpdate(c, NULL, &len, aad, aad_len) != 1) return SQLITE_IOERR_WRITE;
  /* GCM is a stream: the parts before and after the clear bytes are one message. */
  if (clear_from > 0 && EVP_EncryptUpdate(c, out, &len, in, clear_from) != 1) return SQLITE_IOERR_WRITE;
  memcpy(out + clear_from, in + clear_from, (size_t)(clear_to - clear_from));
  if (EVP_EncryptUpdate(c, out + clear_to, &len, in + clear_to, usable - clear_to) != 1) return SQLITE_IOERR_WRITE;
  if (EVP_EncryptFinal_ex(c, out + usable, &len) != 1) return SQLITE_IOERR_WRITE;
  if (EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_GET_TAG, TAG_SIZE, tag) != 1) return SQLITE_IOERR_WRITE;
  return SQLITE_OK;
}

/* Decrypts and verifies sealed page `in` into `out` (which may be `in`); 1 when authentic, with
   the reserved bytes of `out` zeroed. `out` holds no plaintext when it is not. */
static int unseal(cfile *d, uint8_t *out, const uint8_t *in, int size, const uint8_t *aad, int aad_len,
                  int clear_from, int clear_to) {
  int usable = size - FCIPHER_RESERVE;
  uint8_t nonce[NONCE_SIZE], tag[TAG_SIZE];
  int len = 0, ok = 1;
  EVP_CIPHER_CTX *c = d->dec;
  memcpy(nonce, in + usable, NONCE_SIZE);
  memcpy(tag, in + usable + NONCE_SIZE, TAG_SIZE);
  ok = ok && EVP_DecryptInit_ex(c, NULL, NULL, NULL, nonce) == 1;
  ok = ok && EVP_DecryptUpdate(c, NULL, &len, aad, aad_len) == 1;
  if (clear_from > 0) ok = ok && EVP_DecryptUpdate(c, out, &len, in, clear_from) == 1;
  if (out != in) memcpy(out + clear_from, in + clear_from, (size_t)(clear_to - clear_from));
  ok = ok && EVP_DecryptUpdate(c, out + clear_to, &len, in + clear_to, usable - clear_to) == 1;
  ok = ok && EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_SET_TAG, TAG_SIZE, tag) == 1;
  ok = ok && EVP_DecryptFinal_ex(c, out + usable, &len) == 1;
  memset(out + usable, 0, FCIPHER_RESERVE);
  if (!ok) memset(out, 0, (size_t)size); /* never hand out unauthenticated plaintext */
  return ok;
}

/* Version 1's associated data: version, file kind, offset, and for page 1 of the database its
   plain bytes 16..23. */
static int aad_v1(uint8_t *aad, int kind, sqlite3_int64 offset, const uint8_t *plain_header) {
  int n = 0;
  aad[n++] = FCIPHER_FORMAT_V1;
  aad[n++] = (uint8_t)kind;
  n += put64(aad + n, offset);
  if (plain_header) {
    memcpy(aad + n, plain_header, 8);
    n += 8;
  }
  return n;
}

/* The associated data and clear bytes of database page `pgno` (`page` as sealed, for page 1's
   plain bytes). */
static int db_aad(cfile *d, uint8_t *aad, uint32_t pgno, sqlite3_int64 offset, const uint8_t *page, int *from, int *to) {
  *from = *to = 0;
  if (d->version == FCIPHER_FORMAT_V1) {
    if (pgno == 1) *from = 16, *to = 24;
    return aad_v1(aad, KIND_DB, offset, pgno == 1 ? page + 16 : NULL);
  }
  int n = 0;
  aad[n++] = FCIPHER_FORMAT_V2;
  aad[n++] = KIND_DB;
  n += put32(aad + n, pgno);
  if (pgno == 1) {
    memcpy(aad + n, page, 24); /* the salt and bytes 16..23 */
    n += 24;
    *to = 24;
  }
  return n;
}

/* The frame number (from 1) of the WAL page at `offset`. */
static uint32_t frame_number(const cfile *f, sqlite3_int64 offset) {
  return (uint32_t)((offset - WAL_HEADER - FRAME_HEADER) / (FRAME_HEADER + f->page_size) + 1);
}

/* A WAL page's associated data: in version 2, its frame number, its page number and commit
   size (the first 8 bytes of its frame header), and the salts of the WAL header, which a frame
   must carry to be part of the log. */
static int wal_aad(cfile *f, uint8_t *aad, sqlite3_int64 offset, const uint8_t *header) {
  if (f->db->version == FCIPHER_FORMAT_V1) return aad_v1(aad, KIND_WAL, offset, NULL);
  int n = 0;
  aad[n++] = FCIPHER_FORMAT_V2;
  aad[n++] = KIND_WAL;
  n += put32(aad + n, frame_number(f, offset));
  memcpy(aad + n, header, 8);
  memcpy(aad + n + 8, f->salts, 8);
  return n + 16;
}

/* Reads the salts of the WAL header (bytes 16..23) into f->salts. */
static int read_salts(cfile *f) {
  int rc = f->real->pMethods->xRead(f->real, f->salts, 8, 16);
  f->salts_known = rc == SQLITE_OK;
  return rc == SQLITE_IOERR_SHORT_READ ? SQLITE_IOERR_READ : rc;
}

/* A journal page image's associated data: in version 2, its offset and its page number (the
   4 bytes before it). */
static int journal_aad(cfile *f, uint8_t *aad, sqlite3_int64 offset, const uint8_t *pgno) {
  if (f->db->version == FCIPHER_FORMAT_V1) return aad_v1(aad, KIND_JOURNAL, offset, NULL);
  int n = 0;
  aad[n++] = FCIPHER_FORMAT_V2;
  aad[n++] = KIND_JOURNAL;
  n += put64(aad + n, offset);
  memcpy(aad + n, pgno, 4);
  return n + 4;
}

/* Opens database page `page` (size bytes at `offset`, read from disk) in place. */
static int open_db_page(cfile *f, uint8_t *page, int size, sqlite3_int64 offset) {
  uint32_t pgno = (uint32_t)(offset / size + 1);
  uint8_t aad[64];
  int from, to;
  if (pgno == 1) {
    if (memcmp(page, sqlite_magic, 16) == 0) {
      record_failure(f, FCIPHER_FAIL_NOT_ENCRYPTED, offset);
      return FCIPHER_IOERR_AUTH;
    }
    if (page[20] != FCIPHER_RESERVE) {
      record_failure(f, FCIPHER_FAIL_FORMAT, offset);
      return FCIPHER_IOERR_AUTH;
    }
    int rc = adopt_header(f, page);
    if (rc != SQLITE_OK) return rc;
  } else {
    int rc = load_keys(f);
    if (rc != SQLITE_OK) return rc;
  }
  int aad_len = db_aad(f, aad, pgno, offset, page, &from, &to);
  if (pgno == 1 && f->version == FCIPHER_FORMAT_V2) {
    /* A version 1 page 1 begins with 16 bytes of ciphertext, which may (once in 2^32) begin
       with the version 2 marker: a page 1 that fails as version 2 is tried as version 1. */
    uint8_t *plain = sqlite3_malloc(size);
    if (!plain) return SQLITE_NOMEM;
    int ok = unseal(f, plain, page, size, aad, aad_len, from, to);
    if (ok) memcpy(page, plain, (size_t)size);
    fcipher_wipe(plain, (size_t)size);
    sqlite3_free(plain);
    if (ok) {
      memcpy(page, sqlite_magic, 16);
      return SQLITE_OK;
    }
    f->version = FCIPHER_FORMAT_V1;
    if (key_file(f) != SQLITE_OK) return SQLITE_IOERR;
    aad_len = db_aad(f, aad, pgno, offset, page, &from, &to);
    if (unseal(f, page, page, size, aad, aad_len, from, to)) return SQLITE_OK;
    f->salt_on_disk = 0; /* reloaded from disk at the next read */
    f->version = 0;
    record_failure(f, FCIPHER_FAIL_AUTH, offset);
    return FCIPHER_IOERR_AUTH;
  }
  if (!unseal(f, page, page, size, aad, aad_len, from, to)) {
    record_failure(f, FCIPHER_FAIL_AUTH, offset);
    return FCIPHER_IOERR_AUTH;
  }
  return SQLITE_OK;
}

static int all_zero(const uint8_t *p, int n) {
  for (int i = 0; i < n; i++)
    if (p[i]) return 0;
  return 1;
}

/* Learns the page size of the database file or the WAL from its plain header on disk. */
static int learn_page_size(cfile *f) {
  if (f->page_size) return SQLITE_OK;
  uint8_t h[WAL_HEADER];
  if (f->kind == KIND_DB) {
    int rc = f->real->pMethods->xRead(f->real, h, 2, 16);
    if (rc == SQLITE_IOERR_SHORT_READ) return SQLITE_OK; /* new or empty: still unknown */
    if (rc != SQLITE_OK) return rc;
    f->page_size = header_page_size(h);
  } else if (f->kind == KIND_WAL) {
    int rc = f->real->pMethods->xRead(f->real, h, WAL_HEADER, 0);
    if (rc == SQLITE_IOERR_SHORT_READ) return SQLITE_OK;
    if (rc != SQLITE_OK) return rc;
    uint32_t n = get32(h + 8);
    f->page_size = valid_page_size((int)n) ? (int)n : 0;
  }
  return SQLITE_OK;
}

/* The span of the file around pos: a page (sealed) or a plain header. */
static void span_at(const cfile *f, sqlite3_int64 pos, sqlite3_int64 *start, int *len, int *sealed) {
  int ps = f->page_size;
  if (f->kind == KIND_DB) {
    *start = pos - pos % ps;
    *len = ps;
    *sealed = 1;
    return;
  }
  if (pos < WAL_HEADER) {
    *start = 0;
    *len = WAL_HEADER;
    *sealed = 0;
    return;
  }
  sqlite3_int64 frame = FRAME_HEADER + ps;
  sqlite3_int64 rel = (pos - WAL_HEADER) % frame;
  sqlite3_int64 frame_start = pos - rel;
  if (rel < FRAME_HEADER) {
    *start = frame_start;
    *len = FRAME_HEADER;
    *sealed = 0;
  } else {
    *start = frame_start + FRAME_HEADER;
    *len = ps;
    *sealed = 1;
  }
}

/* Whether a WAL frame that failed authentication while SQLite recovers the log was tampered
   with rather than torn by a crash: it has the WAL's salts and a later transaction follows its
   own. Ferry's files run with synchronous=FULL, so a transaction's frames are on disk before
   the next transaction writes any; only frames of the last transaction can be torn. */
static int later_transaction_follows(cfile *f, sqlite3_int64 frame_start) {
  uint8_t wal_header[WAL_HEADER], h[FRAME_HEADER];
  sqlite3_int64 size = 0;
  if (f->real->pMethods->xRead(f->real, wal_header, WAL_HEADER, 0) != SQLITE_OK) return 0;
  if (f->real->pMethods->xFileSize(f->real, &size) != SQLITE_OK) return 0;
  int committed = 0;
  for (sqlite3_int64 pos = frame_start; pos + FRAME_HEADER <= size; pos += FRAME_HEADER + f->page_size) {
    if (f->real->pMethods->xRead(f->real, h, FRAME_HEADER, pos) != SQLITE_OK) return 0;
    if (memcmp(h + 8, wal_header + 16, 8) != 0) return 0; /* not of this log */
    if (committed) return 1;
    if (get32(h + 4) != 0) committed = 1;
  }
  return 0;
}

static int x_close(sqlite3_file *file) {
  cfile *f = (cfile *)file;
  int rc = f->real->pMethods ? f->real->pMethods->xClose(f->real) : SQLITE_OK;
  if (f->scratch) {
    fcipher_wipe(f->scratch, FRAME_HEADER + MAX_PAGE);
    sqlite3_free(f->scratch);
  }
  EVP_CIPHER_CTX_free(f->enc); /* frees the key schedule, wiped */
  EVP_CIPHER_CTX_free(f->dec);
  fcipher_wipe(f->salt, sizeof(f->salt));
  f->scratch = NULL;
  f->enc = f->dec = NULL;
  return rc;
}

/* Opens the WAL page at `offset` (its frame header at offset-24): reads header and page
   together into the scratch buffer. Returns SQLITE_OK, SQLITE_IOERR_SHORT_READ when the page
   is past the end of the file (the page reads as zeros), or an error. */
static int read_wal_page(cfile *f, sqlite3_int64 offset, int recovering) {
  int len = f->page_size;
  uint8_t *header = f->scratch, *page = f->scratch + FRAME_HEADER;
  int rc = f->real->pMethods->xRead(f->real, f->scratch, FRAME_HEADER + len, offset - FRAME_HEADER);
  if (rc == SQLITE_IOERR_SHORT_READ && all_zero(page, len)) return rc;
  if (rc != SQLITE_OK && rc != SQLITE_IOERR_SHORT_READ) return rc;
  rc = load_keys(f->db);
  if (rc == SQLITE_OK && !f->salts_known) rc = read_salts(f);
  if (rc != SQLITE_OK) return rc;
  uint8_t aad[64], salts[8];
  int aad_len = wal_aad(f, aad, offset, header);
  if (unseal(f->db, page, page, len, aad, aad_len, 0, 0)) return SQLITE_OK;
  /* Another connection may have restarted the log with new salts since they were read. */
  memcpy(salts, f->salts, 8);
  if (f->db->version == FCIPHER_FORMAT_V2 && read_salts(f) == SQLITE_OK && memcmp(salts, f->salts, 8) != 0 &&
      f->real->pMethods->xRead(f->real, f->scratch, FRAME_HEADER + len, offset - FRAME_HEADER) == SQLITE_OK) {
    aad_len = wal_aad(f, aad, offset, header);
    if (unseal(f->db, page, page, len, aad, aad_len, 0, 0)) return SQLITE_OK;
  }
  /* A frame that does not authenticate while SQLite recovers the log ends the log there (it
     reads as zeros, so its checksum fails), the way a torn write at a crash would; unless a
     later transaction follows it, which a crash cannot leave. */
  if (recovering && !later_transaction_follows(f, offset - FRAME_HEADER)) return SQLITE_OK;
  record_failure(f, FCIPHER_FAIL_AUTH, offset);
  return FCIPHER_IOERR_AUTH;
}

/* Reads of the database file and the WAL go page by page: a part of a page (SQLite reads the
   first 100 bytes of the header alone) is served from the whole page, decrypted. */
static int read_paged(cfile *f, uint8_t *out, int amount, sqlite3_int64 offset) {
  int rc = learn_page_size(f);
  if (rc != SQLITE_OK) return rc;
  if (!f->page_size) {
    /* Nothing readable yet (an empty file, or a WAL without a header): whatever is there is
       not a page, and SQLite treats a short read as zeros. */
    rc = f->real->pMethods->xRead(f->real, out, amount, offset);
    if (rc == SQLITE_OK && f->kind == KIND_DB && amount > 0) {
      record_failure(f, FCIPHER_FAIL_FORMAT, 0);
      return FCIPHER_IOERR_AUTH;
    }
    return rc;
  }
  int result = SQLITE_OK;
  sqlite3_int64 pos = offset, end = offset + amount;
  /* A WAL read of a whole frame is SQLite recovering the log (or rewriting the checksums of
     frames it wrote). */
  int recovering = f->kind == KIND_WAL && offset >= WAL_HEADER &&
                   (offset - WAL_HEADER) % (FRAME_HEADER + f->page_size) == 0 &&
                   amount == FRAME_HEADER + f->page_size;
  while (pos < end) {
    sqlite3_int64 start;
    int len, sealed;
    span_at(f, pos, &start, &len, &sealed);
    int take = (int)((start + len < end ? start + len : end) - pos);
    uint8_t *dst = out + (pos - offset);
    if (!sealed) {
      rc = f->real->pMethods->xRead(f->real, dst, take, pos);
      if (rc == SQLITE_IOERR_SHORT_READ) result = rc;
      else if (rc != SQLITE_OK) return rc;
    } else if (f->kind == KIND_WAL) {
      rc = read_wal_page(f, start, recovering);
      if (rc == SQLITE_IOERR_SHORT_READ) {
        memset(dst, 0, (size_t)take); /* past the end of the file */
        result = rc;
      } else if (rc != SQLITE_OK) {
        return rc;
      } else {
        memcpy(dst, f->scratch + FRAME_HEADER + (pos - start), (size_t)take);
      }
    } else {
      rc = f->real->pMethods->xRead(f->real, f->scratch, len, start);
      if (rc == SQLITE_IOERR_SHORT_READ && all_zero(f->scratch, len)) {
        memset(dst, 0, (size_t)take); /* past the end of the file */
        result = rc;
      } else if (rc != SQLITE_OK && rc != SQLITE_IOERR_SHORT_READ) {
        return rc;
      } else {
        rc = open_db_page(f, f->scratch, len, start);
        if (rc != SQLITE_OK) return rc;
        memcpy(dst, f->scratch + (pos - start), (size_t)take);
      }
    }
    pos += take;
  }
  return result;
}

/* A journal page image (the 4 bytes before it are its page number). */
static int read_journal_page(cfile *f, uint8_t *buf, int amount, sqlite3_int64 offset) {
  int rc = f->real->pMethods->xRead(f->real, buf, amount, offset);
  if (rc == SQLITE_IOERR_SHORT_READ && all_zero(buf, amount)) return rc;
  if (rc != SQLITE_OK && rc != SQLITE_IOERR_SHORT_READ) return rc;
  uint8_t pgno[4], aad[64];
  rc = f->real->pMethods->xRead(f->real, pgno, 4, offset - 4);
  if (rc != SQLITE_OK) return rc == SQLITE_IOERR_SHORT_READ ? SQLITE_IOERR_READ : rc;
  rc = load_keys(f->db);
  if (rc != SQLITE_OK) return rc;
  int aad_len = journal_aad(f, aad, offset, pgno);
  if (unseal(f->db, buf, buf, amount, aad, aad_len, 0, 0)) return SQLITE_OK;
  record_failure(f, FCIPHER_FAIL_AUTH, offset);
  return FCIPHER_IOERR_AUTH;
}

static int x_read(sqlite3_file *file, void *buf, int amount, sqlite3_int64 offset) {
  cfile *f = (cfile *)file;
  if (amount < 0 || offset < 0) return SQLITE_IOERR_READ;
  switch (f->kind) {
  case KIND_DB:
  case KIND_WAL:
    return read_paged(f, buf, amount, offset);
  case KIND_JOURNAL:
    /* Journal headers sit at sector boundaries; a page image is read whole, 4 bytes after its
       page number. */
    if (amount < 512 || amount > MAX_PAGE || offset % 512 == 0)
      return f->real->pMethods->xRead(f->real, buf, amount, offset);
    return read_journal_page(f, buf, amount, offset);
  default:
    return SQLITE_IOERR_READ;
  }
}

/* SQLite's pages hold zeros in the reserved bytes (pages read here come back so, new pages
   start zeroed): anything else there is data of a file made without the reserved bytes, which
   sealing would overwrite. */
static int sealable(const uint8_t *page, int size) {
  return all_zero(page + size - FCIPHER_RESERVE, FCIPHER_RESERVE);
}

static int write_db_page(cfile *f, const uint8_t *page, int size, sqlite3_int64 offset) {
  if (!sealable(page, size)) return SQLITE_IOERR_WRITE;
  int rc = load_keys(f);
  if (rc != SQLITE_OK) return rc;
  uint32_t pgno = (uint32_t)(offset / size + 1);
  uint8_t aad[64];
  int from, to, aad_len;
  if (pgno == 1 && f->version == FCIPHER_FORMAT_V2) {
    /* Bytes 0..15 are SQLite's magic string, which the salt replaces on disk. */
    if (memcmp(page, sqlite_magic, 16) != 0) return SQLITE_IOERR_WRITE;
    memcpy(f->scratch, f->salt, SALT_SIZE);
    memcpy(f->scratch + 16, page + 16, 8);
    aad_len = db_aad(f, aad, pgno, offset, f->scratch, &from, &to);
    rc = seal(f, f->scratch, page, size, aad, aad_len, from, to);
    if (rc == SQLITE_OK) memcpy(f->scratch, f->salt, SALT_SIZE);
  } else {
    aad_len = db_aad(f, aad, pgno, offset, page, &from, &to);
    rc = seal(f, f->scratch, page, size, aad, aad_len, from, to);
  }
  if (rc != SQLITE_OK) return rc;
  rc = f->real->pMethods->xWrite(f->real, f->scratch, size, offset);
  if (rc == SQLITE_OK && pgno == 1) f->salt_on_disk = 1;
  return rc;
}

static int write_wal_page(cfile *f, const uint8_t *page, int size, sqlite3_int64 offset) {
  if (!sealable(page, size)) return SQLITE_IOERR_WRITE;
  int rc = load_keys(f->db);
  if (rc == SQLITE_OK) rc = read_salts(f); /* another connection may have started this log */
  if (rc != SQLITE_OK) return rc;
  uint8_t header[FRAME_HEADER], aad[64];
  if (f->header_at == offset - FRAME_HEADER) {
    memcpy(header, f->header, FRAME_HEADER);
  } else {
    /* SQLite rewrites a page of its current transaction in place, after its header. */
    rc = f->real->pMethods->xRead(f->real, header, FRAME_HEADER, offset - FRAME_HEADER);
    if (rc != SQLITE_OK) return SQLITE_IOERR_WRITE;
  }
  int aad_len = wal_aad(f, aad, offset, header);
  rc = seal(f->db, f->scratch, page, size, aad, aad_len, 0, 0);
  if (rc != SQLITE_OK) return rc;
  return f->real->pMethods->xWrite(f->real, f->scratch, size, offset);
}

static int write_journal_page(cfile *f, const uint8_t *page, int size, sqlite3_int64 offset) {
  if (!sealable(page, size)) return SQLITE_IOERR_WRITE;
  int rc = load_keys(f->db);
  if (rc != SQLITE_OK) return rc;
  uint8_t pgno[4], aad[64];
  /* SQLite writes a page image's page number, then the image. */
  rc = f->real->pMethods->xRead(f->real, pgno, 4, offset - 4);
  if (rc != SQLITE_OK) return SQLITE_IOERR_WRITE;
  int aad_len = journal_aad(f, aad, offset, pgno);
  rc = seal(f->db, f->scratch, page, size, aad, aad_len, 0, 0);
  if (rc != SQLITE_OK) return rc;
  return f->real->pMethods->xWrite(f->real, f->scratch, size, offset);
}

static int x_write(sqlite3_file *file, const void *buf, int amount, sqlite3_int64 offset) {
  cfile *f = (cfile *)file;
  const uint8_t *in = buf;
  if (amount < 0 || offset < 0) return SQLITE_IOERR_WRITE;
  if (f->kind == KIND_DB) {
    if (offset == 0 && amount >= 24) {
      /* Page 1 says the page size and the reserved bytes: a page without room for the nonce
         and tag cannot be sealed. */
      int ps = header_page_size(in + 16);
      if (!ps || ps != amount || in[20] != FCIPHER_RESERVE) return SQLITE_IOERR_WRITE;
      f->page_size = ps;
    }
    int rc = learn_page_size(f);
    if (rc != SQLITE_OK) return rc;
    int ps = f->page_size;
    if (!ps || offset % ps || amount % ps) return SQLITE_IOERR_WRITE;
    for (int done = 0; done < amount; done += ps) {
      rc = write_db_page(f, in + done, ps, offset + done);
      if (rc != SQLITE_OK) return rc;
    }
    return SQLITE_OK;
  }
  if (f->kind == KIND_WAL) {
    if (offset == 0 && amount >= 12) {
      uint32_t n = get32(in + 8);
      if (!valid_page_size((int)n)) return SQLITE_IOERR_WRITE;
      f->page_size = (int)n;
    }
    int rc = learn_page_size(f);
    if (rc != SQLITE_OK) return rc;
    if (!f->page_size) return SQLITE_IOERR_WRITE;
    sqlite3_int64 pos = offset, end = offset + amount;
    while (pos < end) {
      sqlite3_int64 start;
      int len, sealed;
      span_at(f, pos, &start, &len, &sealed);
      int take = (int)((start + len < end ? start + len : end) - pos);
      const uint8_t *part = in + (pos - offset);
      if (sealed) {
        if (pos != start || take != len) return SQLITE_IOERR_WRITE; /* half a page */
        rc = write_wal_page(f, part, len, pos);
        f->header_at = -1;
      } else {
        rc = f->real->pMethods->xWrite(f->real, part, take, pos);
        int whole_header = start >= WAL_HEADER && pos == start && take == FRAME_HEADER;
        if (whole_header) memcpy(f->header, part, FRAME_HEADER);
        f->header_at = rc == SQLITE_OK && whole_header ? start : -1;
      }
      if (rc != SQLITE_OK) return rc;
      pos += take;
    }
    return SQLITE_OK;
  }
  if (f->kind == KIND_JOURNAL) {
    if (amount >= 512 && amount <= MAX_PAGE && offset % 512 != 0) return write_journal_page(f, in, amount, offset);
    return f->real->pMethods->xWrite(f->real, buf, amount, offset);
  }
  return SQLITE_IOERR_WRITE;
}

static int x_truncate(sqlite3_file *file, sqlite3_int64 size) {
  cfile *f = (cfile *)file;
  return f->real->pMethods->xTruncate(f->real, size);
}
static int x_sync(sqlite3_file *file, int flags) {
  cfile *f = (cfile *)file;
  return f->real->pMethods->xSync(f->real, flags);
}
static int x_file_size(sqlite3_file *file, sqlite3_int64 *size) {
  cfile *f = (cfile *)file;
  return f->real->pMethods->xFileSize(f->real, size);
}
static int x_lock(sqlite3_file *file, int level) {
  cfile *f = (cfile *)file;
  return f->real->pMethods->xLock(f->real, level);
}
static int x_unlock(sqlite3_file *file, int level) {
  cfile *f = (cfile *)file;
  return f->real->pMethods->xUnlock(f->real, level);
}
static int x_check_reserved(sqlite3_file *file, int *out) {
  cfile *f = (cfile *)file;
  return f->real->pMethods->xCheckReservedLock(f->real, out);
}
static int x_file_control(sqlite3_file *file, int op, void *arg) {
  cfile *f = (cfile *)file;
  if (op == SQLITE_FCNTL_VFSNAME) {
    /* SQLite frees the previous value; the default VFS appends its own name after ours. */
    int rc = f->real->pMethods->xFileControl(f->real, op, arg);
    char *inner = *(char **)arg;
    *(char **)arg = sqlite3_mprintf("ferry-cipher/%s", inner ? inner : "");
    sqlite3_free(inner);
    (void)rc;
    return SQLITE_OK;
  }
  return f->real->pMethods->xFileControl(f->real, op, arg);
}
static int x_sector_size(sqlite3_file *file) {
  cfile *f = (cfile *)file;
  return f->real->pMethods->xSectorSize(f->real);
}
static int x_device_characteristics(sqlite3_file *file) {
  cfile *f = (cfile *)file;
  return f->real->pMethods->xDeviceCharacteristics(f->real);
}
static int x_shm_map(sqlite3_file *file, int page, int size, int extend, void volatile **out) {
  cfile *f = (cfile *)file;
  return f->real->pMethods->xShmMap(f->real, page, size, extend, out);
}
static int x_shm_lock(sqlite3_file *file, int offset, int n, int flags) {
  cfile *f = (cfile *)file;
  return f->real->pMethods->xShmLock(f->real, offset, n, flags);
}
static void x_shm_barrier(sqlite3_file *file) {
  cfile *f = (cfile *)file;
  f->real->pMethods->xShmBarrier(f->real);
}
static int x_shm_unmap(sqlite3_file *file, int delete_flag) {
  cfile *f = (cfile *)file;
  return f->real->pMethods->xShmUnmap(f->real, delete_flag);
}

/* Version 2: shared memory for the WAL, but no xFetch, so SQLite never memory-maps a file
   and reads around the cipher. */
static const sqlite3_io_methods methods_v1 = {
    1, x_close, x_read, x_write, x_truncate, x_sync, x_file_size, x_lock, x_unlock,
    x_check_reserved, x_file_control, x_sector_size, x_device_characteristics,
    NULL, NULL, NULL, NULL, NULL, NULL};
static const sqlite3_io_methods methods_v2 = {
    2, x_close, x_read, x_write, x_truncate, x_sync, x_file_size, x_lock, x_unlock,
    x_check_reserved, x_file_control, x_sector_size, x_device_characteristics,
    x_shm_map, x_shm_lock, x_shm_barrier, x_shm_unmap, NULL, NULL};

static int new_context(EVP_CIPHER_CTX **out, int encrypt) {
  EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new();
  if (!ctx) return SQLITE_NOMEM;
  int ok = encrypt ? EVP_EncryptInit_ex(ctx, EVP_aes_256_gcm(), NULL, NULL, NULL)
                   : EVP_DecryptInit_ex(ctx, EVP_aes_256_gcm(), NULL, NULL, NULL);
  ok = ok && EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_IVLEN, NONCE_SIZE, NULL) == 1;
  if (!ok) {
    EVP_CIPHER_CTX_free(ctx);
    return SQLITE_CANTOPEN;
  }
  *out = ctx;
  return SQLITE_OK;
}

static int is_ours(const sqlite3_file *file);

static int v_open(sqlite3_vfs *vfs, const char *name, sqlite3_file *file, int flags, int *out_flags) {
  fcipher *c = vfs->pAppData;
  cfile *f = (cfile *)file;
  memset(f, 0, sizeof(*f));
  f->cipher = c;
  f->real = (sqlite3_file *)(f + 1);
  f->header_at = -1;
  if (flags & SQLITE_OPEN_MAIN_DB) f->kind = KIND_DB;
  else if (flags & SQLITE_OPEN_WAL) f->kind = KIND_WAL;
  else if (flags & SQLITE_OPEN_MAIN_JOURNAL) f->kind = KIND_JOURNAL;
  else {
    /* A temporary database, statement journal, sorter or super-journal file: SQLite would
       write pages there in the clear. */
    record_failure(f, FCIPHER_FAIL_TEMPORARY, 0);
    return SQLITE_CANTOPEN;
  }
  if (f->kind == KIND_DB) {
    f->db = f;
  } else {
    sqlite3_file *db = name ? sqlite3_database_file_object(name) : NULL;
    if (!db || !is_ours(db)) return SQLITE_CANTOPEN;
    f->db = (cfile *)db;
  }
  f->scratch = sqlite3_malloc(FRAME_HEADER + MAX_PAGE);
  if (!f->scratch) return SQLITE_NOMEM;
  int rc = SQLITE_OK;
  if (f->kind == KIND_DB) {
    rc = new_context(&f->enc, 1);
    if (rc == SQLITE_OK) rc = new_context(&f->dec, 0);
  }
  if (rc == SQLITE_OK) rc = c->base->xOpen(c->base, name, f->real, flags, out_flags);
  if (rc != SQLITE_OK || !f->real->pMethods) {
    x_close(file); /* closes the base file too if its open left it half open */
    f->base.pMethods = NULL;
    return rc != SQLITE_OK ? rc : SQLITE_CANTOPEN;
  }
  f->base.pMethods = f->real->pMethods->iVersion >= 2 ? &methods_v2 : &methods_v1;
  return SQLITE_OK;
}

static int is_ours(const sqlite3_file *file) {
  return file->pMethods == &methods_v1 || file->pMethods == &methods_v2;
}

/* The rest of the VFS is the base VFS's, called with the base VFS. */
static int v_delete(sqlite3_vfs *v, const char *n, int sync) {
  sqlite3_vfs *b = ((fcipher *)v->pAppData)->base;
  return b->xDelete(b, n, sync);
}
static int v_access(sqlite3_vfs *v, const char *n, int flags, int *out) {
  sqlite3_vfs *b = ((fcipher *)v->pAppData)->base;
  return b->xAccess(b, n, flags, out);
}
static int v_full_pathname(sqlite3_vfs *v, const char *n, int size, char *out) {
  sqlite3_vfs *b = ((fcipher *)v->pAppData)->base;
  return b->xFullPathname(b, n, size, out);
}
static void *v_dlopen(sqlite3_vfs *v, const char *n) {
  sqlite3_vfs *b = ((fcipher *)v->pAppData)->base;
  return b->xDlOpen(b, n);
}
static void v_dlerror(sqlite3_vfs *v, int n, char *out) {
  sqlite3_vfs *b = ((fcipher *)v->pAppData)->base;
  b->xDlError(b, n, out);
}
static void (*v_dlsym(sqlite3_vfs *v, void *h, const char *s))(void) {
  sqlite3_vfs *b = ((fcipher *)v->pAppData)->base;
  return b->xDlSym(b, h, s);
}
static void v_dlclose(sqlite3_vfs *v, void *h) {
  sqlite3_vfs *b = ((fcipher *)v->pAppData)->base;
  b->xDlClose(b, h);
}
static int v_randomness(sqlite3_vfs *v, int n, char *out) {
  sqlite3_vfs *b = ((fcipher *)v->pAppData)->base;
  return b->xRandomness(b, n, out);
}
static int v_sleep(sqlite3_vfs *v, int us) {
  sqlite3_vfs *b = ((fcipher *)v->pAppData)->base;
  return b->xSleep(b, us);
}
static int v_current_time(sqlite3_vfs *v, double *out) {
  sqlite3_vfs *b = ((fcipher *)v->pAppData)->base;
  return b->xCurrentTime(b, out);
}
static int v_last_error(sqlite3_vfs *v, int n, char *out) {
  sqlite3_vfs *b = ((fcipher *)v->pAppData)->base;
  return b->xGetLastError ? b->xGetLastError(b, n, out) : 0;
}
static int v_current_time64(sqlite3_vfs *v, sqlite3_int64 *out) {
  sqlite3_vfs *b = ((fcipher *)v->pAppData)->base;
  if (b->iVersion >= 2 && b->xCurrentTimeInt64) return b->xCurrentTimeInt64(b, out);
  double d = 0;
  int rc = b->xCurrentTime(b, &d);
  *out = (sqlite3_int64)(d * 86400000.0);
  return rc;
}

static int derive_v1(uint8_t out[KEY_BYTES], const uint8_t *key) {
  static const char label[] = "ferry page key v1";
  size_t len = 0;
  unsigned char *r = EVP_Q_mac(NULL, "HMAC", NULL, "SHA256", NULL, key, FCIPHER_KEY_SIZE,
                               (const unsigned char *)label, sizeof(label) - 1, out, KEY_BYTES, &len);
  return r && len == KEY_BYTES;
}

int fcipher_keys_derive(fcipher_keys **out, const uint8_t *key) {
  if (!out || !key) return SQLITE_MISUSE;
  *out = NULL;
  fcipher_keys *k = sqlite3_malloc(sizeof(*k));
  if (!k) return SQLITE_NOMEM;
  if (!hkdf(k->master, key, FCIPHER_KEY_SIZE, NULL, 0, "ferry master key v2") || !derive_v1(k->v1, key)) {
    fcipher_keys_free(k);
    return SQLITE_ERROR;
  }
  *out = k;
  return SQLITE_OK;
}

void fcipher_keys_free(fcipher_keys *k) {
  if (!k) return;
  fcipher_wipe(k, sizeof(*k));
  sqlite3_free(k);
}

int fcipher_create(fcipher **out, const fcipher_keys *keys) {
  static atomic_llong counter;
  if (!out || !keys) return SQLITE_MISUSE;
  *out = NULL;
  int rc = sqlite3_initialize();
  if (rc != SQLITE_OK) return rc;
  sqlite3_vfs *base = sqlite3_vfs_find(NULL);
  if (!base) return SQLITE_ERROR;
  fcipher *c = sqlite3_malloc(sizeof(*c));
  if (!c) return SQLITE_NOMEM;
  memset(c, 0, sizeof(*c));
  c->keys = *keys;
  c->base = base;
  snprintf(c->name, sizeof(c->name), "ferry-cipher-%lld", (long long)atomic_fetch_add(&counter, 1));
  c->vfs.iVersion = 2;
  c->vfs.szOsFile = (int)sizeof(cfile) + base->szOsFile;
  c->vfs.mxPathname = base->mxPathname;
  c->vfs.zName = c->name;
  c->vfs.pAppData = c;
  c->vfs.xOpen = v_open;
  c->vfs.xDelete = v_delete;
  c->vfs.xAccess = v_access;
  c->vfs.xFullPathname = v_full_pathname;
  c->vfs.xDlOpen = v_dlopen;
  c->vfs.xDlError = v_dlerror;
  c->vfs.xDlSym = v_dlsym;
  c->vfs.xDlClose = v_dlclose;
  c->vfs.xRandomness = v_randomness;
  c->vfs.xSleep = v_sleep;
  c->vfs.xCurrentTime = v_current_time;
  c->vfs.xGetLastError = v_last_error;
  c->vfs.xCurrentTimeInt64 = v_current_time64;
  rc = sqlite3_vfs_register(&c->vfs, 0);
  if (rc != SQLITE_OK) {
    fcipher_wipe(&c->keys, sizeof(c->keys));
    sqlite3_free(c);
    return rc;
  }
  *out = c;
  return SQLITE_OK;
}

void fcipher_destroy(fcipher *c) {
  if (!c) return;
  sqlite3_vfs_unregister(&c->vfs);
  fcipher_wipe(&c->keys, sizeof(c->keys));
  sqlite3_free(c);
}

const char *fcipher_vfs_name(const fcipher *c) { return c ? c->name : ""; }

int fcipher_same_keys(const fcipher *c, const fcipher_keys *keys) {
  if (!c || !keys) return 0;
  return CRYPTO_memcmp(c->keys.master, keys->master, KEY_BYTES) == 0;
}

int fcipher_take_failure(fcipher *c, int64_t *offset, int *in_wal) {
  if (!c) return FCIPHER_FAIL_NONE;
  int kind = atomic_exchange(&c->fail_kind, FCIPHER_FAIL_NONE);
  if (offset) *offset = atomic_load(&c->fail_offset);
  if (in_wal) *in_wal = atomic_load(&c->fail_wal);
  return kind;
}

int fcipher_reserve(sqlite3 *db) {
  int n = FCIPHER_RESERVE;
  return sqlite3_file_control(db, "main", SQLITE_FCNTL_RESERVE_BYTES, &n);
}

int fcipher_probe_format(const char *path, int *version) {
  if (version) *version = 0;
  if (!path) return FCIPHER_PROBE_EMPTY;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return FCIPHER_PROBE_EMPTY;
  uint8_t h[24];
  ssize_t n = pread(fd, h, sizeof(h), 0);
  close(fd);
  if (n < (ssize_t)sizeof(h)) return FCIPHER_PROBE_EMPTY;
  if (memcmp(h, sqlite_magic, 16) == 0) return FCIPHER_PROBE_PLAIN;
  if (header_page_size(h + 16) && h[20] == FCIPHER_RESERVE) {
    if (version) *version = memcmp(h, v2_marker, sizeof(v2_marker)) == 0 ? FCIPHER_FORMAT_V2 : FCIPHER_FORMAT_V1;
    return FCIPHER_PROBE_ENCRYPTED;
  }
  return FCIPHER_PROBE_OTHER;
}

int fcipher_probe(const char *path) { return fcipher_probe_format(path, NULL); }
