/*
 * test_multiproc_sync.c — SPEC F-MULTIPROC against a real ferry-server: three processes open
 * one synced file with ferry_sync_open. The first is its sync agent; the other two open in
 * standby (no error): they read and write the file, and the agent uploads their commits.
 *
 *  - phase 1: each process writes COUNT items (one per transaction); every process's query
 *    observer sees all 3 * COUNT items (the others' writes reach it through the file);
 *  - the agent is killed with SIGKILL;
 *  - phase 2: the two others write COUNT items more each; one of them takes the role over
 *    and uploads everything not yet acknowledged, the dead agent's writes included; both
 *    observers see all 5 * COUNT items;
 *  - the oracle: a fourth device of the same user, on a file of its own, downloads exactly the
 *    5 * COUNT items the hosts committed, each once, with the names they wrote.
 *
 * Children are forked and exec this program in a child role (argv[1]) so that none inherits
 * Ferry's in-process state. They talk to the parent over pipes ("ready", "written", "seen").
 * Exits 77 (CTest: skipped) when the server binary does not exist.
 */
#include "check.h"
#include "child_process.h"
#include "sync_server.h"
#include "sync_waiters.h"

#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>

#define COUNT 40

/* ---- a child: one process with the shared file open -------------------------------------- */

struct seen {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  ferry_db_t *db;
  int count;
  int calls;
};

static void on_items_changed(void *userdata, const ferry_change_set_t *changes) {
  (void)changes;
  struct seen *s = userdata;
  size_t n = count_items(s->db);
  pthread_mutex_lock(&s->mu);
  s->count = (int)n;
  s->calls++;
  pthread_cond_broadcast(&s->cv);
  pthread_mutex_unlock(&s->mu);
}

/* Waits up to WAIT_SECONDS for the observer to have reported at least `n` items. */
static bool seen_wait(struct seen *s, int n) {
  struct timespec d = deadline_in(WAIT_SECONDS);
  pthread_mutex_lock(&s->mu);
  int rc = 0;
  while (s->count < n && rc != ETIMEDOUT) rc = pthread_cond_timedwait(&s->cv, &s->mu, &d);
  bool ok = s->count >= n;
  pthread_mutex_unlock(&s->mu);
  return ok;
}

static void say(const char *word) {
  printf("%s\n", word);
  fflush(stdout);
}

static bool hear(void) {
  char line[16];
  return fgets(line, sizeof line, stdin) != NULL;
}

static void write_items(ferry_db_t *db, const char *owner, const char *who, int from, int to) {
  for (int i = from; i < to; i++) {
    char name[64];
    snprintf(name, sizeof name, "%s-%d", who, i);
    CHECK_OK(ferry_db_begin_write(db));
    ferry_property_value_t vals[] = {pv(P_ID, new_oid()), pv(P_OWNER, v_str(owner)), pv(P_NAME, v_str(name)),
                                     pv(P_COMPLEXITY, v_int(1))};
    CHECK_OK(ferry_object_create(db, 0, vals, 4));
    CHECK_OK(ferry_db_commit(db));
  }
}

/* process NAME FIRST PHASES: FIRST "1" subscribes (it starts first: the agent); PHASES "2"
 * writes a second batch after the parent's second "go". */
static int role_process(char **argv) {
  const char *who = argv[2];
  bool first = strcmp(argv[3], "1") == 0;
  bool second_batch = strcmp(argv[4], "2") == 0;
  const char *url = getenv("FERRY_MP_URL"), *dir = getenv("FERRY_MP_DIR"), *path = getenv("FERRY_MP_PATH");
  const char *email = getenv("FERRY_MP_EMAIL");
  CHECK(url && dir && path && email);
  make_item_schema();

  char app_dir[700];
  snprintf(app_dir, sizeof app_dir, "%s/app-%s", dir, who);
  CHECKF(mkdir(app_dir, 0700) == 0, "mkdir %s: %s", app_dir, strerror(errno));
  ferry_app_t *app = app_on(app_dir, url);
  ferry_credentials_t c = email_credentials(email, "multi-process");
  ferry_user_t *user = NULL;
  CHECK_OUTCOME_OK(log_in(app, &c, &user), "log in");
  const char *user_id = NULL;
  CHECK_OK(ferry_user_id(&user_id, user));

  ferry_sync_options_t so = sync_options(path);
  ferry_sync_session_t *session = NULL;
  ferry_db_t *db = NULL;
  CHECK_OK(ferry_sync_open(&session, &db, user, &so));
  if (first) {
    /* Subscriptions are the agent's to change: its session sends them to the server. */
    char query[200];
    snprintf(query, sizeof query, "ownerId == '%s'", user_id);
    CHECK_OUTCOME_OK(add_subscription(session, "mine", query, NULL), "subscribe");
  }

  struct seen seen = {.db = db};
  pthread_mutex_init(&seen.mu, NULL);
  cond_init_monotonic(&seen.cv);
  ferry_notification_token_t *token = NULL;
  CHECK_OK(ferry_db_observe_query(&token, db, 0, "TRUEPREDICATE", NULL, 0, on_items_changed, &seen, NULL));
  say("ready");

  /* phase 1 */
  if (!hear()) return check_done(who);
  write_items(db, user_id, who, 0, COUNT);
  say("written");
  CHECKF(seen_wait(&seen, 3 * COUNT), "%s: the observer saw %d of %d items", who, seen.count, 3 * COUNT);
  say("seen");

  /* phase 2 (the agent is killed before it) */
  if (!hear()) return check_done(who);
  if (second_batch) write_items(db, user_id, who, COUNT, 2 * COUNT);
  say("written");
  CHECKF(seen_wait(&seen, 5 * COUNT), "%s: the observer saw %d of %d items", who, seen.count, 5 * COUNT);
  say("seen");

  (void)hear();
  ferry_notification_token_free(token);
  ferry_sync_session_free(session);
  ferry_db_free(db);
  ferry_user_free(user);
  ferry_app_free(app);
  pthread_mutex_destroy(&seen.mu);
  pthread_cond_destroy(&seen.cv);
  return check_done(who);
}

/* ---- the parent ---------------------------------------------------------------------------- */

static struct child spawn(const char *who, const char *first, const char *phases) {
  const char *args[] = {"process", who, first, phases, NULL};
  return child_spawn(args, true);
}

/* Waits up to 120 s for the child to print `word`. */
static void expect_word(struct child *ch, const char *word) {
  char buf[32] = {0};
  size_t used = 0;
  while (used < strlen(word) + 1) {
    struct pollfd p = {.fd = ch->from, .events = POLLIN};
    int rc;
    do rc = poll(&p, 1, 120000);
    while (rc < 0 && errno == EINTR);
    CHECKF(rc == 1, "child %d did not say %s in 120 s", (int)ch->pid, word);
    ssize_t n = read(ch->from, buf + used, 1);
    CHECKF(n == 1, "child %d ended before saying %s (it said \"%s\")", (int)ch->pid, word, buf);
    used++;
  }
  CHECKF(strncmp(buf, word, strlen(word)) == 0 && buf[strlen(word)] == '\n', "child %d said \"%s\", expected %s",
         (int)ch->pid, buf, word);
}


/* The oracle: a fresh device of the same user downloads what the server has. Returns the
 * number of items once it reaches `expected` (or what it had after 120 s). */
static size_t server_items(const char *dir, const char *email, int expected, char names[][64]) {
  char app_dir[700];
  snprintf(app_dir, sizeof app_dir, "%s/oracle", dir);
  CHECK(mkdir(app_dir, 0700) == 0);
  ferry_app_t *app = app_on(app_dir, base_url);
  ferry_credentials_t c = email_credentials(email, "multi-process");
  ferry_user_t *user = NULL;
  CHECK_OUTCOME_OK(log_in(app, &c, &user), "oracle log in");
  const char *user_id = NULL;
  CHECK_OK(ferry_user_id(&user_id, user));
  char path[760];
  snprintf(path, sizeof path, "%s/oracle.ferry", app_dir);
  ferry_sync_options_t so = sync_options(path);
  ferry_sync_session_t *session = NULL;
  ferry_db_t *db = NULL;
  CHECK_OK(ferry_sync_open(&session, &db, user, &so));
  char query[200];
  snprintf(query, sizeof query, "ownerId == '%s'", user_id);
  CHECK_OUTCOME_OK(add_subscription(session, "mine", query, NULL), "oracle subscribe");
  double deadline = now_s() + 120;
  size_t n = count_items(db);
  while ((int)n < expected && now_s() < deadline) {
    CHECK_OUTCOME_OK(wait_download(session), "oracle download");
    n = count_items(db);
    if ((int)n < expected) {
      struct timespec pause = {0, 100 * 1000 * 1000};
      nanosleep(&pause, NULL); /* the agent is still uploading: ask the server again */
    }
  }
  ferry_results_t *r = NULL;
  CHECK_OK(ferry_db_query(&r, db, 0, "TRUEPREDICATE", NULL, 0));
  size_t count = 0;
  CHECK_OK(ferry_results_count(&count, r));
  for (size_t i = 0; i < count && (int)i < expected; i++) {
    ferry_object_t *o = NULL;
    CHECK_OK(ferry_results_get(&o, r, i));
    ferry_value_t name;
    CHECK_OK(ferry_object_get_value(&name, o, P_NAME));
    CHECK_EQ_INT(name.type, FERRY_TYPE_STRING);
    snprintf(names[i], 64, "%.*s", (int)name.u.string.size, name.u.string.data);
    ferry_object_free(o);
  }
  ferry_results_free(r);
  ferry_sync_session_free(session);
  ferry_db_free(db);
  ferry_user_free(user);
  ferry_app_free(app);
  return count;
}

static int compare_names(const void *a, const void *b) { return strcmp(a, b); }

static void test_three_processes_and_a_killed_agent(void) {
  const char *dir = test_path("multiproc");
  CHECK(mkdir(dir, 0700) == 0);
  char path[700], email[128];
  snprintf(path, sizeof path, "%s/shared.ferry", dir);
  random_email(email, sizeof email, "multiproc");
  {
    char reg_dir[700];
    snprintf(reg_dir, sizeof reg_dir, "%s/register", dir);
    CHECK(mkdir(reg_dir, 0700) == 0);
    ferry_app_t *app = app_on(reg_dir, base_url);
    CHECK_OUTCOME_OK(register_email(app, email, "multi-process"), "register");
    ferry_app_free(app);
  }
  setenv("FERRY_MP_URL", base_url, 1);
  setenv("FERRY_MP_DIR", dir, 1);
  setenv("FERRY_MP_PATH", path, 1);
  setenv("FERRY_MP_EMAIL", email, 1);

  /* the agent first, then the two that open in standby */
  struct child a = spawn("a", "1", "1");
  expect_word(&a, "ready");
  struct child b = spawn("b", "0", "2");
  struct child c = spawn("c", "0", "2");
  expect_word(&b, "ready");
  expect_word(&c, "ready");

  struct child *all[] = {&a, &b, &c};
  for (int i = 0; i < 3; i++) release(all[i]);
  for (int i = 0; i < 3; i++) expect_word(all[i], "written");
  for (int i = 0; i < 3; i++) expect_word(all[i], "seen");

  CHECK(kill(a.pid, SIGKILL) == 0);
  CHECK_EQ_INT(wait_child(&a), 1000 + SIGKILL);

  release(&b);
  release(&c);
  expect_word(&b, "written");
  expect_word(&c, "written");
  expect_word(&b, "seen");
  expect_word(&c, "seen");

  enum { TOTAL = 5 * COUNT };
  static char names[TOTAL][64];
  size_t n = server_items(dir, email, TOTAL, names);
  CHECKF(n == TOTAL, "the server has %zu items, the hosts committed %d", n, TOTAL);
  if (n == TOTAL) {
    static char expected[TOTAL][64];
    int k = 0;
    for (int i = 0; i < COUNT; i++) snprintf(expected[k++], 64, "a-%d", i);
    for (int i = 0; i < 2 * COUNT; i++) snprintf(expected[k++], 64, "b-%d", i);
    for (int i = 0; i < 2 * COUNT; i++) snprintf(expected[k++], 64, "c-%d", i);
    qsort(expected, TOTAL, 64, compare_names);
    qsort(names, TOTAL, 64, compare_names);
    for (int i = 0; i < TOTAL; i++) CHECKF(strcmp(names[i], expected[i]) == 0, "item %d: %s, expected %s", i, names[i], expected[i]);
  }

  release(&b);
  release(&c);
  CHECK_EQ_INT(wait_child(&b), 0);
  CHECK_EQ_INT(wait_child(&c), 0);
}

int main(int argc, char **argv) {
  if (argc >= 5 && strcmp(argv[1], "process") == 0) return role_process(argv);
  child_find_self(argv[0]);
  signal(SIGPIPE, SIG_IGN);
  if (!server_start()) {
    printf("test_multiproc_sync: SKIPPED: %s\n", server_skip_reason);
    return 77;
  }
  make_item_schema();
  test_three_processes_and_a_killed_agent();
  ferry_schema_free(item_schema);
  server_stop();
  return check_done("test_multiproc_sync");
}
