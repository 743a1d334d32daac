/* The page cipher VFS: see include/ferry_cipher.h and docs/encryption.md.
 *
 * Every file SQLite opens through the VFS is one of:
 *  - the database file: pages at (pgno-1)*page_size, each sealed on its own;
 *  - the WAL: a 32-byte header and, per frame, a 24-byte frame header (both plain: SQLite's
 *    checksums cover them) and a sealed page;
 *  - the rollback journal: headers at sector boundaries stay plain, page images are sealed;
 *  - anything else (temporary files): passed through. Ferry sets temp_store=MEMORY on every
 *    encrypted connection, so no page content goes to such files.
 * A sealed page keeps its first page_size-28 bytes as AES-256-GCM ciphertext and its last 28
 * (the reserved bytes SQLite leaves alone) for the nonce and the tag. Page 1 of the database
 * file keeps bytes 16..23 (page size, format versions, reserved-byte count, payload fractions)
 * in the clear, authenticated as associated data, so the page size can be read before anything
 * is decrypted. Decrypted pages are handed back with their reserved bytes zeroed: SQLite's page
 * cache then always holds zeros there, so the WAL checksums SQLite computes over a page before
 * it is written match the page read back after a crash. */
#include "ferry_cipher.h"

#include <fcntl.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
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
#define FORMAT_VERSION 1

enum { KIND_PLAIN = 0, KIND_DB = 'D', KIND_WAL = 'W', KIND_JOURNAL = 'J' };

struct fcipher {
  sqlite3_vfs vfs;
  sqlite3_vfs *base;
  char name[64];
  uint8_t key[32];
  atomic_int fail_kind;
  atomic_llong fail_offset;
  atomic_int fail_wal;
};

typedef struct cfile {
  sqlite3_file base;    /* pMethods: ours */
  fcipher *cipher;
  int kind;
  int page_size;        /* 0 until known */
  uint8_t *scratch;     /* MAX_PAGE bytes */
  EVP_CIPHER_CTX *enc;
  EVP_CIPHER_CTX *dec;
  sqlite3_file *real;   /* the base VFS's file, right after this struct */
} cfile;

static const uint8_t sqlite_magic[16] = "SQLite format 3";

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

static void record_failure(cfile *f, int kind, sqlite3_int64 offset) {
  atomic_store(&f->cipher->fail_offset, (long long)offset);
  atomic_store(&f->cipher->fail_wal, f->kind == KIND_WAL);
  atomic_store(&f->cipher->fail_kind, kind);
}

/* The associated data of a page: format version, file kind, offset, and for page 1 of the
   database its plain bytes 16..23. */
static int page_aad(uint8_t *aad, int kind, sqlite3_int64 offset, const uint8_t *plain_header) {
  int n = 0;
  aad[n++] = FORMAT_VERSION;
  aad[n++] = (uint8_t)kind;
  for (int i = 7; i >= 0; i--) aad[n++] = (uint8_t)((uint64_t)offset >> (8 * i));
  if (plain_header) {
    memcpy(aad + n, plain_header, 8);
    n += 8;
  }
  return n;
}

/* Encrypts page `in` (size bytes, at `offset` of a file of `kind`) into `out`. */
static int seal(cfile *f, uint8_t *out, const uint8_t *in, int size, sqlite3_int64 offset) {
  int usable = size - FCIPHER_RESERVE;
  int page1 = f->kind == KIND_DB && offset == 0;
  uint8_t *nonce = out + usable, *tag = out + usable + NONCE_SIZE;
  uint8_t aad[18];
  int aad_len = page_aad(aad, f->kind, offset, page1 ? in + 16 : NULL);
  int len = 0;
  if (RAND_bytes(nonce, NONCE_SIZE) != 1) return SQLITE_IOERR_WRITE;
  if (EVP_EncryptInit_ex(f->enc, NULL, NULL, NULL, nonce) != 1) return SQLITE_IOERR_WRITE;
  if (EVP_EncryptUpdate(f->enc, NULL, &len, aad, aad_len) != 1) return SQLITE_IOERR_WRITE;
  if (page1) {
    /* Bytes 0..15, then 24..usable: GCM is a stream, so the two parts are one message. */
    if (EVP_EncryptUpdate(f->enc, out, &len, in, 16) != 1) return SQLITE_IOERR_WRITE;
    memcpy(out + 16, in + 16, 8);
    if (EVP_EncryptUpdate(f->enc, out + 24, &len, in + 24, usable - 24) != 1) return SQLITE_IOERR_WRITE;
  } else {
    if (EVP_EncryptUpdate(f->enc, out, &len, in, usable) != 1) return SQLITE_IOERR_WRITE;
  }
  if (EVP_EncryptFinal_ex(f->enc, out + usable, &len) != 1) return SQLITE_IOERR_WRITE;
  if (EVP_CIPHER_CTX_ctrl(f->enc, EVP_CTRL_GCM_GET_TAG, TAG_SIZE, tag) != 1) return SQLITE_IOERR_WRITE;
  return SQLITE_OK;
}

/* Decrypts a page in place; on success its reserved bytes are zeroed. */
static int open_page(cfile *f, uint8_t *page, int size, sqlite3_int64 offset) {
  int usable = size - FCIPHER_RESERVE;
  int page1 = f->kind == KIND_DB && offset == 0;
  uint8_t nonce[NONCE_SIZE], tag[TAG_SIZE], aad[18];
  int len = 0, ok = 1;
  if (page1 && memcmp(page, sqlite_magic, 16) == 0) {
    record_failure(f, FCIPHER_FAIL_NOT_ENCRYPTED, offset);
    return FCIPHER_IOERR_AUTH;
  }
  if (page1 && page[20] != FCIPHER_RESERVE) {
    record_failure(f, FCIPHER_FAIL_FORMAT, offset);
    return FCIPHER_IOERR_AUTH;
  }
  memcpy(nonce, page + usable, NONCE_SIZE);
  memcpy(tag, page + usable + NONCE_SIZE, TAG_SIZE);
  int aad_len = page_aad(aad, f->kind, offset, page1 ? page + 16 : NULL);
  ok = ok && EVP_DecryptInit_ex(f->dec, NULL, NULL, NULL, nonce) == 1;
  ok = ok && EVP_DecryptUpdate(f->dec, NULL, &len, aad, aad_len) == 1;
  if (page1) {
    ok = ok && EVP_DecryptUpdate(f->dec, page, &len, page, 16) == 1;
    ok = ok && EVP_DecryptUpdate(f->dec, page + 24, &len, page + 24, usable - 24) == 1;
  } else {
    ok = ok && EVP_DecryptUpdate(f->dec, page, &len, page, usable) == 1;
  }
  ok = ok && EVP_CIPHER_CTX_ctrl(f->dec, EVP_CTRL_GCM_SET_TAG, TAG_SIZE, tag) == 1;
  ok = ok && EVP_DecryptFinal_ex(f->dec, page + usable, &len) == 1;
  memset(page + usable, 0, FCIPHER_RESERVE);
  if (!ok) {
    /* Never hand out unauthenticated plaintext. */
    memset(page, 0, (size_t)size);
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
    uint32_t n = ((uint32_t)h[8] << 24) | ((uint32_t)h[9] << 16) | ((uint32_t)h[10] << 8) | h[11];
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

static int x_close(sqlite3_file *file) {
  cfile *f = (cfile *)file;
  int rc = f->real->pMethods ? f->real->pMethods->xClose(f->real) : SQLITE_OK;
  if (f->scratch) {
    fcipher_wipe(f->scratch, MAX_PAGE);
    sqlite3_free(f->scratch);
  }
  EVP_CIPHER_CTX_free(f->enc);
  EVP_CIPHER_CTX_free(f->dec);
  f->scratch = NULL;
  f->enc = f->dec = NULL;
  return rc;
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
  /* A WAL read of a whole frame is SQLite recovering the log: a frame that does not
     authenticate ends the log there (it reads as zeros, so its checksum fails), the way a torn
     write at a crash would. */
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
    } else {
      rc = f->real->pMethods->xRead(f->real, f->scratch, len, start);
      if (rc == SQLITE_IOERR_SHORT_READ && all_zero(f->scratch, len)) {
        memset(dst, 0, (size_t)take); /* past the end of the file */
        result = rc;
      } else if (rc != SQLITE_OK && rc != SQLITE_IOERR_SHORT_READ) {
        return rc;
      } else {
        rc = open_page(f, f->scratch, len, start);
        if (rc != SQLITE_OK) {
          if (!recovering) return rc;
          atomic_store(&f->cipher->fail_kind, FCIPHER_FAIL_NONE);
          memset(f->scratch, 0, (size_t)len);
        }
        memcpy(dst, f->scratch + (pos - start), (size_t)take);
      }
    }
    pos += take;
  }
  return result;
}

static int x_read(sqlite3_file *file, void *buf, int amount, sqlite3_int64 offset) {
  cfile *f = (cfile *)file;
  if (amount < 0 || offset < 0) return SQLITE_IOERR_READ;
  switch (f->kind) {
  case KIND_DB:
  case KIND_WAL:
    return read_paged(f, buf, amount, offset);
  case KIND_JOURNAL: {
    /* Journal headers sit at sector boundaries; a page image is read whole, 4 bytes after its
       page number. */
    int rc = f->real->pMethods->xRead(f->real, buf, amount, offset);
    if (amount < 512 || amount > MAX_PAGE || offset % 512 == 0) return rc;
    if (rc == SQLITE_IOERR_SHORT_READ && all_zero(buf, amount)) return rc;
    if (rc != SQLITE_OK && rc != SQLITE_IOERR_SHORT_READ) return rc;
    return open_page(f, buf, amount, offset);
  }
  default:
    return f->real->pMethods->xRead(f->real, buf, amount, offset);
  }
}

static int write_page(cfile *f, const uint8_t *page, int size, sqlite3_int64 offset) {
  /* SQLite's pages hold zeros in the reserved bytes (pages read here come back so, new pages
     start zeroed): anything else there is data of a file made without the reserved bytes,
     which sealing would overwrite. */
  if (!all_zero(page + size - FCIPHER_RESERVE, FCIPHER_RESERVE)) return SQLITE_IOERR_WRITE;
  int rc = seal(f, f->scratch, page, size, offset);
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
      rc = write_page(f, in + done, ps, offset + done);
      if (rc != SQLITE_OK) return rc;
    }
    return SQLITE_OK;
  }
  if (f->kind == KIND_WAL) {
    if (offset == 0 && amount >= 12) {
      uint32_t n = ((uint32_t)in[8] << 24) | ((uint32_t)in[9] << 16) | ((uint32_t)in[10] << 8) | in[11];
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
      if (sealed) {
        if (pos != start || take != len) return SQLITE_IOERR_WRITE; /* half a page */
        rc = write_page(f, in + (pos - offset), len, pos);
      } else {
        rc = f->real->pMethods->xWrite(f->real, in + (pos - offset), take, pos);
      }
      if (rc != SQLITE_OK) return rc;
      pos += take;
    }
    return SQLITE_OK;
  }
  if (f->kind == KIND_JOURNAL && amount >= 512 && amount <= MAX_PAGE && offset % 512 != 0)
    return write_page(f, in, amount, offset);
  return f->real->pMethods->xWrite(f->real, buf, amount, offset);
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

static int new_context(EVP_CIPHER_CTX **out, const uint8_t *key, int encrypt) {
  EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new();
  if (!ctx) return SQLITE_NOMEM;
  int ok = encrypt ? EVP_EncryptInit_ex(ctx, EVP_aes_256_gcm(), NULL, key, NULL)
                   : EVP_DecryptInit_ex(ctx, EVP_aes_256_gcm(), NULL, key, NULL);
  ok = ok && EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_IVLEN, NONCE_SIZE, NULL) == 1;
  if (!ok) {
    EVP_CIPHER_CTX_free(ctx);
    return SQLITE_CANTOPEN;
  }
  *out = ctx;
  return SQLITE_OK;
}

static int v_open(sqlite3_vfs *vfs, const char *name, sqlite3_file *file, int flags, int *out_flags) {
  fcipher *c = vfs->pAppData;
  cfile *f = (cfile *)file;
  memset(f, 0, sizeof(*f));
  f->cipher = c;
  f->real = (sqlite3_file *)(f + 1);
  if (flags & SQLITE_OPEN_MAIN_DB) f->kind = KIND_DB;
  else if (flags & SQLITE_OPEN_WAL) f->kind = KIND_WAL;
  else if (flags & SQLITE_OPEN_MAIN_JOURNAL) f->kind = KIND_JOURNAL;
  else f->kind = KIND_PLAIN;
  int rc = SQLITE_OK;
  if (f->kind != KIND_PLAIN) {
    f->scratch = sqlite3_malloc(MAX_PAGE);
    if (!f->scratch) return SQLITE_NOMEM;
    rc = new_context(&f->enc, c->key, 1);
    if (rc == SQLITE_OK) rc = new_context(&f->dec, c->key, 0);
    if (rc != SQLITE_OK) {
      x_close(file);
      return rc;
    }
  }
  rc = c->base->xOpen(c->base, name, f->real, flags, out_flags);
  if (rc != SQLITE_OK || !f->real->pMethods) {
    x_close(file); /* closes the base file too if its open left it half open */
    f->base.pMethods = NULL;
    return rc != SQLITE_OK ? rc : SQLITE_CANTOPEN;
  }
  f->base.pMethods = f->real->pMethods->iVersion >= 2 ? &methods_v2 : &methods_v1;
  return SQLITE_OK;
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

static int derive_key(uint8_t out[32], const uint8_t *key) {
  static const char label[] = "ferry page key v1";
  size_t len = 0;
  unsigned char *r = EVP_Q_mac(NULL, "HMAC", NULL, "SHA256", NULL, key, FCIPHER_KEY_SIZE,
                               (const unsigned char *)label, sizeof(label) - 1, out, 32, &len);
  return r && len == 32;
}

int fcipher_create(fcipher **out, const uint8_t *key) {
  static atomic_llong counter;
  if (!out || !key) return SQLITE_MISUSE;
  *out = NULL;
  int rc = sqlite3_initialize();
  if (rc != SQLITE_OK) return rc;
  sqlite3_vfs *base = sqlite3_vfs_find(NULL);
  if (!base) return SQLITE_ERROR;
  fcipher *c = sqlite3_malloc(sizeof(*c));
  if (!c) return SQLITE_NOMEM;
  memset(c, 0, sizeof(*c));
  if (!derive_key(c->key, key)) {
    sqlite3_free(c);
    return SQLITE_ERROR;
  }
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
    fcipher_wipe(c->key, sizeof(c->key));
    sqlite3_free(c);
    return rc;
  }
  *out = c;
  return SQLITE_OK;
}

void fcipher_destroy(fcipher *c) {
  if (!c) return;
  sqlite3_vfs_unregister(&c->vfs);
  fcipher_wipe(c->key, sizeof(c->key));
  sqlite3_free(c);
}

const char *fcipher_vfs_name(const fcipher *c) { return c ? c->name : ""; }

int fcipher_same_key(const fcipher *c, const uint8_t *key) {
  uint8_t other[32];
  if (!c || !key || !derive_key(other, key)) return 0;
  int same = CRYPTO_memcmp(other, c->key, sizeof(other)) == 0;
  fcipher_wipe(other, sizeof(other));
  return same;
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

int fcipher_probe(const char *path) {
  if (!path) return FCIPHER_PROBE_EMPTY;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return FCIPHER_PROBE_EMPTY;
  uint8_t h[24];
  ssize_t n = pread(fd, h, sizeof(h), 0);
  close(fd);
  if (n < (ssize_t)sizeof(h)) return FCIPHER_PROBE_EMPTY;
  if (memcmp(h, sqlite_magic, 16) == 0) return FCIPHER_PROBE_PLAIN;
  if (header_page_size(h + 16) && h[20] == FCIPHER_RESERVE) return FCIPHER_PROBE_ENCRYPTED;
  return FCIPHER_PROBE_OTHER;
}
