/* Writes a small SQLite file encrypted by the version 1 VFS (key: 64 bytes of 0x42). */
#include "ferry_cipher.h"
#include <stdio.h>
#include <string.h>
#include <unistd.h>
int main(int argc, char **argv) {
  const char *path = argv[1];
  unlink(path);
  uint8_t key[64]; memset(key, 0x42, 64); fcipher *c;
  if (fcipher_create(&c, key)) return 1;
  char uri[512]; snprintf(uri, sizeof uri, "file:%s?vfs=%s", path, fcipher_vfs_name(c));
  sqlite3 *db;
  if (sqlite3_open_v2(uri, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_URI, NULL)) return 1;
  fcipher_reserve(db);
  char *err = NULL;
  int rc = sqlite3_exec(db, "PRAGMA journal_mode=WAL; PRAGMA temp_store=MEMORY; CREATE TABLE t(x TEXT); INSERT INTO t VALUES('plaintext-marker-7f3a-cache')", 0, 0, &err);
  if (rc) { printf("%s\n", err); return 1; }
  sqlite3_close(db);
  fcipher_destroy(c);
  return 0;
}
