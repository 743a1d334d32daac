/*
 * test_multiprocess.c — one sync agent per file, and several processes writing one file.
 *
 * Children are forked and then exec this same program in a child role (argv[1]), so that a
 * child never inherits Ferry's in-process state (its registry of open stores, its loop
 * thread) from the parent: a forked copy would otherwise believe it is the same process.
 *
 *  - the parent opens a file with synced=true (the sync agent); a child asking for
 *    synced=true too gets FERRY_ERR_MULTIPLE_SYNC_AGENTS with a message, and exits normally;
 *    a child opening it without synced=true reads and writes it (SPEC F-MULTIPROC: the agent
 *    uploads its commits; test_multiproc_sync covers that against a server);
 *  - after the parent closes it, a child can take the role; while a child holds it, the
 *    parent gets the error for a synced=true open and opens it otherwise; when the holder is
 *    killed with SIGKILL, the role is free again;
 *  - the synced mark stays in the file;
 *  - processes writing a non-synced file one after another and at the same time: every
 *    commit is seen and counted, history and data agree;
 *  - another process's write lock held past 10 seconds gives FERRY_ERR_BUSY.
 */
#include "check.h"
#include "child_process.h"

#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>

static ferry_schema_t *make_schema(void) {
  static const ferry_property_info_t counter[] = {
      {"_id", FERRY_TYPE_INT, FERRY_PROPERTY_PRIMARY_KEY, NULL},
      {"value", FERRY_TYPE_INT, 0, NULL},
      {"writer", FERRY_TYPE_STRING, 0, NULL},
  };
  ferry_class_info_t classes[] = {{"Counter", counter, 3, 0}};
  ferry_schema_t *s = NULL;
  CHECK_OK(ferry_schema_new(&s, classes, 1));
  return s;
}

/* ---- child roles ------------------------------------------------------------------------- */

static int child_fail(const char *role, const char *what, int rc) {
  const ferry_error_t *e = ferry_error_last();
  fprintf(stderr, "child %s (pid %d): %s: %d (%s): %s\n", role, (int)getpid(), what, rc,
          ferry_strerror(rc), e && e->message ? e->message : "(no message)");
  return 1;
}

static int open_role(ferry_db_t **db, const char *path, bool synced, bool with_schema) {
  ferry_schema_t *schema = with_schema ? make_schema() : NULL;
  int rc = db_open_path(db, path, schema, FERRY_DELIVERY_LOOP, synced);
  ferry_schema_free(schema);
  return rc;
}

/* open-expect PATH SYNCED EXPECTED_CODE: opens and checks the result; on success reads and
   writes once, then closes. */
static int role_open_expect(char **argv) {
  const char *path = argv[2];
  bool synced = atoi(argv[3]) != 0;
  int expected = atoi(argv[4]);
  ferry_db_t *db = (ferry_db_t *)&db;
  int rc = open_role(&db, path, synced, true);
  if (rc != expected) return child_fail("open-expect", "open returned", rc);
  if (rc != FERRY_OK) {
    const ferry_error_t *e = ferry_error_last();
    if (e->code != rc || e->message == NULL || e->message[0] == '\0')
      return child_fail("open-expect", "no error message for", rc);
    if (db != (ferry_db_t *)&db) return child_fail("open-expect", "*out changed on failure", rc);
    printf("child got the expected error %d: %s\n", rc, e->message);
    return 0;
  }
  ferry_class_key_t c = 0;
  ferry_property_key_t value = 0;
  ferry_db_find_class(&c, db, "Counter");
  ferry_db_find_property(&value, db, c, "value");
  ferry_value_t key = v_int(1000000 + getpid()); /* one new object per child */
  ferry_property_value_t vals[] = {pv(0, key)};
  if ((rc = ferry_db_begin_write(db)) != FERRY_OK) return child_fail("open-expect", "begin", rc);
  if ((rc = ferry_object_upsert(db, c, vals, 1)) != FERRY_OK) return child_fail("open-expect", "upsert", rc);
  if ((rc = ferry_db_commit(db)) != FERRY_OK) return child_fail("open-expect", "commit", rc);
  /* a synced file's history is not verifiable (its downloads are not in it): refused, and fine */
  rc = ferry_db_verify_history(db);
  if (rc != FERRY_OK && rc != FERRY_ERR_INVALID_ARGUMENT) return child_fail("open-expect", "verify", rc);
  ferry_db_free(db);
  return 0;
}

/* hold PATH SYNCED: opens, says "ready" on stdout, waits for a line (or EOF) on stdin. */
static int role_hold(char **argv) {
  ferry_db_t *db = NULL;
  int rc = open_role(&db, argv[2], atoi(argv[3]) != 0, false);
  if (rc != FERRY_OK) return child_fail("hold", "open", rc);
  printf("ready\n");
  fflush(stdout);
  char line[16];
  (void)!fgets(line, sizeof line, stdin);
  ferry_db_free(db);
  return 0;
}

/* hold-write PATH: opens, begins a write, says "ready", waits for a line, writes and commits. */
static int role_hold_write(char **argv) {
  ferry_db_t *db = NULL;
  int rc = open_role(&db, argv[2], false, false);
  if (rc != FERRY_OK) return child_fail("hold-write", "open", rc);
  ferry_class_key_t c = 0;
  ferry_db_find_class(&c, db, "Counter");
  if ((rc = ferry_db_begin_write(db)) != FERRY_OK) return child_fail("hold-write", "begin", rc);
  printf("ready\n");
  fflush(stdout);
  char line[16];
  (void)!fgets(line, sizeof line, stdin);
  ferry_property_value_t vals[] = {pv(0, v_int(777)), pv(2, v_str("held"))};
  if ((rc = ferry_object_create(db, c, vals, 2)) != FERRY_OK) return child_fail("hold-write", "create", rc);
  if ((rc = ferry_db_commit(db)) != FERRY_OK) return child_fail("hold-write", "commit", rc);
  ferry_db_free(db);
  return 0;
}

/* write PATH ID: creates object ID (writer = "child"). */
static int role_write(char **argv) {
  ferry_db_t *db = NULL;
  int rc = open_role(&db, argv[2], false, false);
  if (rc != FERRY_OK) return child_fail("write", "open", rc);
  ferry_class_key_t c = 0;
  ferry_db_find_class(&c, db, "Counter");
  ferry_property_value_t vals[] = {pv(0, v_int(atoll(argv[3]))), pv(2, v_str("child"))};
  if ((rc = ferry_db_begin_write(db)) != FERRY_OK) return child_fail("write", "begin", rc);
  if ((rc = ferry_object_create(db, c, vals, 2)) != FERRY_OK) return child_fail("write", "create", rc);
  if ((rc = ferry_db_commit(db)) != FERRY_OK) return child_fail("write", "commit", rc);
  ferry_db_free(db);
  return 0;
}

/* counter PATH N: N transactions, each adding 1 to object 1's value. */
static int counter_loop(ferry_db_t *db, int n, const char *role) {
  ferry_class_key_t c = 0;
  ferry_db_find_class(&c, db, "Counter");
  ferry_value_t key = v_int(1);
  for (int i = 0; i < n; i++) {
    int rc;
    if ((rc = ferry_db_begin_write(db)) != FERRY_OK) return child_fail(role, "begin", rc);
    if ((rc = ferry_object_add_int(db, c, &key, 1, 1)) != FERRY_OK) return child_fail(role, "add", rc);
    if ((rc = ferry_db_commit(db)) != FERRY_OK) return child_fail(role, "commit", rc);
  }
  return 0;
}

static int role_counter(char **argv) {
  ferry_db_t *db = NULL;
  int rc = open_role(&db, argv[2], false, false);
  if (rc != FERRY_OK) return child_fail("counter", "open", rc);
  rc = counter_loop(db, atoi(argv[3]), "counter");
  ferry_db_free(db);
  return rc;
}

/* ---- the parent's helpers ------------------------------------------------------------------ */

static struct child spawn(const char *role, const char *a, const char *b, const char *c, bool pipes) {
  const char *args[] = {role, a, b, c, NULL};
  return child_spawn(args, pipes);
}

/* Waits up to 60 s for the child to print "ready". */
static void wait_ready(struct child *ch) {
  struct pollfd p = {.fd = ch->from, .events = POLLIN};
  int rc;
  do rc = poll(&p, 1, 60000);
  while (rc < 0 && errno == EINTR);
  CHECKF(rc == 1, "child %d did not get ready in 60 s", (int)ch->pid);
  char buf[16] = {0};
  ssize_t n = read(ch->from, buf, sizeof buf - 1);
  CHECKF(n > 0 && strncmp(buf, "ready", 5) == 0, "child %d said \"%s\" instead of ready (did it fail?)",
         (int)ch->pid, buf);
}

static void *release_later(void *arg) {
  struct timespec d = {0, 300 * 1000 * 1000};
  nanosleep(&d, NULL);
  release(arg);
  return NULL;
}

static const char *code_str(int code) {
  static char buf[8][16];
  static int next = 0;
  char *b = buf[next++ % 8];
  snprintf(b, 16, "%d", code);
  return b;
}

static size_t count_objects(ferry_db_t *db) {
  ferry_class_key_t c = CLASS_KEY(db, "Counter");
  ferry_results_t *r = NULL;
  size_t n = 0;
  CHECK_OK(ferry_db_query(&r, db, c, "TRUEPREDICATE", NULL, 0));
  CHECK_OK(ferry_results_count(&n, r));
  ferry_results_free(r);
  return n;
}

/* ---- one sync agent per file ---------------------------------------------------------------- */

static void test_sync_agent(const ferry_schema_t *schema) {
  const char *path = test_path("synced.ferry");
  const char *msa = code_str(FERRY_ERR_MULTIPLE_SYNC_AGENTS);
  const char *ok = code_str(FERRY_OK);

  ferry_db_t *db = NULL;
  CHECK_OK(db_open_path(&db, path, schema, FERRY_DELIVERY_LOOP, true));
  ferry_class_key_t c = CLASS_KEY(db, "Counter");
  CHECK_OK(ferry_db_begin_write(db));
  CHECK_OK(ferry_object_create(db, c, (ferry_property_value_t[]){pv(0, v_int(1))}, 1));
  CHECK_OK(ferry_db_commit(db));

  /* a second handle in this process shares the agent role */
  ferry_db_t *same = NULL;
  CHECK_OK(db_open_path(&same, path, NULL, FERRY_DELIVERY_LOOP, true));
  ferry_db_free(same);

  /* another process asking to be the agent gets the error; one that only reads and writes
     the file opens it (and adds an object) */
  CHECK_CHILD_EXIT(spawn("open-expect", path, "1", msa, false), 0);
  CHECK_CHILD_EXIT(spawn("open-expect", path, "0", ok, false), 0);
  /* the parent is unharmed and the file is intact */
  CHECK_OK(ferry_db_begin_write(db));
  CHECK_OK(ferry_object_create(db, c, (ferry_property_value_t[]){pv(0, v_int(2))}, 1));
  CHECK_OK(ferry_db_commit(db));
  /* (history verification is for local databases: a synced one is refused) */
  CHECK_ERR(ferry_db_verify_history(db), FERRY_ERR_INVALID_ARGUMENT);
  uint64_t history = 0;
  CHECK_OK(ferry_db_history_count(&history, db));
  CHECK_EQ_INT(history, 3);
  CHECK_EQ_INT(count_objects(db), 3);

  /* closing (not yet freeing) the handle gives the role up */
  CHECK_OK(ferry_db_close(db));
  CHECK_CHILD_EXIT(spawn("open-expect", path, "1", ok, false), 0);
  ferry_db_free(db);
  CHECK_CHILD_EXIT(spawn("open-expect", path, "1", ok, false), 0);

  /* a child holds the role: now this process is the second one */
  struct child holder = spawn("hold", path, "1", "", true);
  wait_ready(&holder);
  db = (ferry_db_t *)&db;
  CHECK_ERR(db_open_path(&db, path, NULL, FERRY_DELIVERY_LOOP, true), FERRY_ERR_MULTIPLE_SYNC_AGENTS);
  CHECK(db == (ferry_db_t *)&db);
  CHECK_OK(db_open_path(&db, path, schema, FERRY_DELIVERY_POLL, false));
  ferry_db_free(db);
  release(&holder);
  CHECK_CHILD_EXIT(holder, 0);
  CHECK_OK(db_open_path(&db, path, NULL, FERRY_DELIVERY_LOOP, true));
  CHECK_EQ_INT(count_objects(db), 5); /* the three children that opened added one each */
  CHECK_OK(ferry_db_history_count(&history, db));
  CHECK_EQ_INT(history, 5);
  ferry_db_free(db);

  /* a holder killed with SIGKILL does not keep the role */
  holder = spawn("hold", path, "1", "", true);
  wait_ready(&holder);
  CHECK_ERR(db_open_path(&db, path, NULL, FERRY_DELIVERY_LOOP, true), FERRY_ERR_MULTIPLE_SYNC_AGENTS);
  CHECK(kill(holder.pid, SIGKILL) == 0);
  CHECK_CHILD_EXIT(holder, 1000 + SIGKILL);
  CHECK_OK(db_open_path(&db, path, NULL, FERRY_DELIVERY_LOOP, true));
  CHECK_EQ_INT(count_objects(db), 5);

  /* the mark stays in the file: opened without synced=true, its commits still go into the
     history for the agent to upload, and another process may then take the role */
  ferry_db_free(db);
  CHECK_OK(db_open_path(&db, path, NULL, FERRY_DELIVERY_LOOP, false));
  CHECK_CHILD_EXIT(spawn("open-expect", path, "1", ok, false), 0);
  CHECK_OK(ferry_db_history_count(&history, db));
  CHECK_EQ_INT(history, 6);
  ferry_db_free(db);

  /* a file that is not synced can be open in several processes at once */
  const char *plain = test_path("plain-shared.ferry");
  CHECK_OK(db_open_path(&db, plain, schema, FERRY_DELIVERY_LOOP, false));
  CHECK_CHILD_EXIT(spawn("open-expect", plain, "0", ok, false), 0);
  /* (marking a file synced while another process has it open is not specified by the
     header, so it is not tested) */
  ferry_db_free(db);
}

/* ---- several processes writing one file -------------------------------------------------- */

static void test_writers(const ferry_schema_t *schema) {
  const char *path = test_path("shared.ferry");
  ferry_db_t *db = NULL;
  CHECK_OK(db_open_path(&db, path, schema, FERRY_DELIVERY_LOOP, false));
  ferry_class_key_t c = CLASS_KEY(db, "Counter");
  CHECK_OK(ferry_db_begin_write(db));
  CHECK_OK(ferry_object_create(db, c, (ferry_property_value_t[]){pv(0, v_int(1)), pv(2, v_str("parent"))}, 2));
  CHECK_OK(ferry_db_commit(db));

  /* one after another, with the parent's handle open all along */
  CHECK_CHILD_EXIT(spawn("write", path, "2", "", false), 0);
  CHECK_STORED(db, c, v_int(2), 2, v_str("child")); /* seen by the open handle */
  CHECK_OK(ferry_db_begin_write(db));
  CHECK_OK(ferry_object_create(db, c, (ferry_property_value_t[]){pv(0, v_int(3)), pv(2, v_str("parent"))}, 2));
  CHECK_OK(ferry_db_commit(db));
  CHECK_CHILD_EXIT(spawn("write", path, "4", "", false), 0);
  CHECK_EQ_INT(count_objects(db), 4);
  uint64_t h = 0;
  CHECK_OK(ferry_db_history_count(&h, db));
  CHECK_EQ_INT(h, 4);
  CHECK_OK(ferry_db_verify_history(db));
  /* a child's primary key clash is reported to the child, not to us */
  CHECK_CHILD_EXIT(spawn("write", path, "4", "", false), 1);

  /* at the same time: two children and this process add to one counter */
  struct child a = spawn("counter", path, "100", "", false);
  struct child b = spawn("counter", path, "100", "", false);
  CHECK_EQ_INT(counter_loop(db, 100, "parent"), 0);
  CHECK_CHILD_EXIT(a, 0);
  CHECK_CHILD_EXIT(b, 0);
  CHECK_STORED(db, c, v_int(1), 1, v_int(300));
  CHECK_OK(ferry_db_history_count(&h, db));
  CHECK_EQ_INT(h, 4 + 300);
  CHECK_OK(ferry_db_verify_history(db));

  /* after the parent closes, a child writes; the parent reopens and sees it */
  ferry_db_free(db);
  CHECK_CHILD_EXIT(spawn("write", path, "5", "", false), 0);
  CHECK_OK(db_open_path(&db, path, NULL, FERRY_DELIVERY_LOOP, false));
  c = CLASS_KEY(db, "Counter");
  CHECK_EQ_INT(count_objects(db), 5);
  CHECK_STORED(db, c, v_int(5), 2, v_str("child"));
  CHECK_OK(ferry_db_verify_history(db));

  /* another process holds the write lock: we wait for it... */
  struct child holder = spawn("hold-write", path, "", "", true);
  wait_ready(&holder);
  pthread_t releaser;
  CHECK(pthread_create(&releaser, NULL, release_later, &holder) == 0);
  CHECK_OK(ferry_db_begin_write(db)); /* waits for the child's commit */
  CHECK(pthread_join(releaser, NULL) == 0);
  CHECK_STORED(db, c, v_int(777), 2, v_str("held"));
  CHECK_OK(ferry_db_cancel(db));
  CHECK_CHILD_EXIT(holder, 0);
  /* ...up to 10 seconds, then FERRY_ERR_BUSY */
  ferry_value_t k777 = v_int(777);
  CHECK_OK(ferry_db_begin_write(db));
  CHECK_OK(ferry_object_delete(db, c, &k777));
  CHECK_OK(ferry_db_commit(db));
  holder = spawn("hold-write", path, "", "", true);
  wait_ready(&holder);
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  CHECK_ERR(ferry_db_begin_write(db), FERRY_ERR_BUSY);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  double waited = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
  CHECKF(waited >= 9.5 && waited < 30, "FERRY_ERR_BUSY after %.1f s, expected about 10", waited);
  bool in_tx = true;
  CHECK_OK(ferry_db_is_in_transaction(&in_tx, db));
  CHECK(!in_tx);
  release(&holder);
  CHECK_CHILD_EXIT(holder, 0);
  CHECK_STORED(db, c, v_int(777), 2, v_str("held"));
  CHECK_OK(ferry_db_verify_history(db));
  ferry_db_free(db);
}

int main(int argc, char **argv) {
  if (argc >= 2) {
    if (strcmp(argv[1], "open-expect") == 0 && argc >= 5) return role_open_expect(argv);
    if (strcmp(argv[1], "hold") == 0 && argc >= 4) return role_hold(argv);
    if (strcmp(argv[1], "hold-write") == 0 && argc >= 3) return role_hold_write(argv);
    if (strcmp(argv[1], "write") == 0 && argc >= 4) return role_write(argv);
    if (strcmp(argv[1], "counter") == 0 && argc >= 4) return role_counter(argv);
    fprintf(stderr, "unknown role %s\n", argv[1]);
    return 2;
  }
  child_find_self(argv[0]);
  signal(SIGPIPE, SIG_IGN);
  ferry_schema_t *schema = make_schema();
  test_sync_agent(schema);
  test_writers(schema);
  ferry_schema_free(schema);
  return check_done("test_multiprocess");
}
