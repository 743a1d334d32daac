/* Page encryption for Ferry's database files: an SQLite VFS shim over the default VFS that
 * encrypts and authenticates every page of the database file, its WAL and its rollback journal
 * with AES-256-GCM (OpenSSL's EVP API), under a key of each file's own (HKDF-SHA256 of the host
 * key with a random salt stored in the file). The on-disk format is docs/encryption.md.
 *
 * Written in C, not Swift, because it is a table of C callbacks that SQLite calls on every page
 * read and write: in C the struct layouts SQLite expects are plain, and nothing in it can trap.
 * Internal to libferry.so: the names start with fcipher_, not ferry_, so the version script
 * keeps them out of the exported API. */
#ifndef FERRY_CIPHER_H
#define FERRY_CIPHER_H

#include <sqlite3.h>
#include <stddef.h>
#include <stdint.h>

#define FCIPHER_KEY_SIZE 64
/* Bytes reserved at the end of every page: a 12-byte nonce, then a 16-byte GCM tag. */
#define FCIPHER_RESERVE 28

/* The on-disk format versions (docs/encryption.md): new files are written in version 2;
 * version 1 files are still read and written as they are. */
enum { FCIPHER_FORMAT_V1 = 1, FCIPHER_FORMAT_V2 = 2 };

/* Why the last page read failed (fcipher_take_failure). */
enum {
  FCIPHER_FAIL_NONE = 0,
  FCIPHER_FAIL_AUTH = 1,          /* a page's tag did not verify: wrong key, or a changed page */
  FCIPHER_FAIL_NOT_ENCRYPTED = 2, /* page 1 is a plain SQLite page */
  FCIPHER_FAIL_FORMAT = 3,        /* the header is not that of an encrypted Ferry file */
  FCIPHER_FAIL_TEMPORARY = 4      /* SQLite asked for a temporary file, which would be plain */
};

/* What fcipher_probe finds at the start of a file. */
enum {
  FCIPHER_PROBE_EMPTY = 0,        /* missing, empty, or shorter than a header */
  FCIPHER_PROBE_PLAIN = 1,        /* an unencrypted SQLite file */
  FCIPHER_PROBE_ENCRYPTED = 2,    /* a valid page size and 28 reserved bytes, no SQLite magic */
  FCIPHER_PROBE_OTHER = 3
};

/* SQLITE_IOERR_AUTH, as a constant Swift can import. */
enum { FCIPHER_IOERR_AUTH = SQLITE_IOERR_AUTH };

typedef struct fcipher fcipher;
/* What is kept of a 64-byte host key: the master key the per-file keys derive from, and the
 * page key of version 1 files. The host key itself is not kept. */
typedef struct fcipher_keys fcipher_keys;

/* Derives the keys of a 64-byte host key (read during the call only). SQLITE_OK or an error. */
int fcipher_keys_derive(fcipher_keys **out, const uint8_t *key);
/* Wipes and frees; NULL is a no-op. */
void fcipher_keys_free(fcipher_keys *keys);

/* Registers a VFS of its own (never the default) with a copy of the keys, whose name
 * fcipher_vfs_name gives. Returns SQLITE_OK or an SQLite error code. */
int fcipher_create(fcipher **out, const fcipher_keys *keys);
/* Unregisters the VFS and wipes the keys. Every connection that used it must be closed. NULL is
 * a no-op. */
void fcipher_destroy(fcipher *c);
const char *fcipher_vfs_name(const fcipher *c);
/* 1 when keys were derived from the same host key as c's, in constant time. */
int fcipher_same_keys(const fcipher *c, const fcipher_keys *keys);
/* The last page failure of a file of this VFS, and clears it: FCIPHER_FAIL_*, with the byte
 * offset of the page and whether it was in the WAL (1) or the database file (0). */
int fcipher_take_failure(fcipher *c, int64_t *offset, int *in_wal);
/* Makes a new database of this connection reserve FCIPHER_RESERVE bytes per page (before
 * anything is written to it). */
int fcipher_reserve(sqlite3 *db);
/* Looks at the first bytes of a file without SQLite: FCIPHER_PROBE_*. */
int fcipher_probe(const char *path);
/* fcipher_probe, and for an encrypted file its format version (FCIPHER_FORMAT_*; else 0). */
int fcipher_probe_format(const char *path, int *version);
/* Overwrites n bytes with zeros in a way the compiler keeps. */
void fcipher_wipe(void *p, size_t n);

#endif
