/* A callback may free its own token and its database handle: the loop thread that runs it
   then stops by itself. Runs under valgrind too (no invalid access, no leak). */
#define _POSIX_C_SOURCE 200809L
#include <ferry.h>
#include <stdlib.h>
#include <time.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
static ferry_db_t *db; static ferry_notification_token_t *tok;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER; static pthread_cond_t cv = PTHREAD_COND_INITIALIZER; static int done = 0;
static void cb(void *ud, const ferry_change_set_t *cs) { (void)ud; (void)cs;
  ferry_notification_token_free(tok); ferry_db_free(db);   /* free everything from inside the callback */
  pthread_mutex_lock(&mu); done = 1; pthread_cond_signal(&cv); pthread_mutex_unlock(&mu); }
static void ufree(void *ud) { (void)ud; }
int main(void) {
  ferry_property_info_t props[] = {{"_id", FERRY_TYPE_INT, FERRY_PROPERTY_PRIMARY_KEY, NULL}};
  ferry_class_info_t cls = {"T", props, 1, 0}; ferry_schema_t *s; ferry_schema_new(&s, &cls, 1);
  ferry_db_options_t o; ferry_db_options_init(&o, 1); o.in_memory_identifier = "freecb"; o.schema = s;
  if (ferry_db_open(&db, &o)) { printf("open: %s\n", ferry_error_last()->message); return 1; }
  ferry_schema_free(s);
  if (ferry_db_observe_query(&tok, db, 0, "TRUEPREDICATE", NULL, 0, cb, NULL, ufree)) return 1;
  ferry_db_begin_write(db);
  ferry_property_value_t v = {0, {.type = FERRY_TYPE_INT, .u.i = 1}};
  ferry_object_create(db, 0, &v, 1);
  ferry_db_commit(db);
  struct timespec ts; clock_gettime(CLOCK_REALTIME, &ts); ts.tv_sec += 10;
  pthread_mutex_lock(&mu); while (!done) if (pthread_cond_timedwait(&cv, &mu, &ts)) break; pthread_mutex_unlock(&mu);
  printf(done ? "freed inside callback: ok\n" : "timeout\n");
  return done ? 0 : 1;
}
