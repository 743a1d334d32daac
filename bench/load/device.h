/*
 * device.h — one simulated device: a user's login and a synced database of Items.
 *
 * A device logs in (its own login, even when another device of the same process logs in the
 * same user), opens its own synced file and subscribes to the user's Items
 * (`ownerId == "<user id>"`, the only Items the app's rules let the user read). Every device
 * has its own WebSocket connection: the Apps of the load tool do not multiplex sessions, so
 * the server sees exactly what it would from separate phones.
 */
#ifndef LOAD_DEVICE_H
#define LOAD_DEVICE_H

#include <stddef.h>
#include <stdint.h>

#include "ferry.h"
#include "item.h"
#include "latch.h"

/* How devices log in: set once by main before any device starts. */
struct device_auth {
  int password;          /* 0: a custom JWT (the default, see jwt.h); 1: email/password, registered first */
  const char *jwt_key;   /* the app's jwtSigningKey */
  const char *audience;  /* the custom-token provider's audience ("item-app") */
};
extern struct device_auth device_auth;

struct device {
  ferry_app_t *app; /* lent: Apps outlive their devices */
  char subject[48]; /* the user: the JWT's sub, or <subject>@load.example */
  char path[512];   /* the synced file */
  ferry_user_t *user;
  const char *user_id; /* lent by user */
  ferry_sync_session_t *session;
  ferry_db_t *db;
  struct item_keys keys;
  uint64_t login_start_us, login_end_us, subscribed_us;
  struct latch *subscribed; /* counted down when the subscription completes or fails */
};

/* An App on url with its user cache in dir (created), sessions not multiplexed, its sync
 * errors counted (sync_errors_seen and friends) and the first few printed. NULL on failure (printed). */
ferry_app_t *load_app_new(const char *url, const char *dir);
/* Sync errors the error handlers saw, all Apps together: those that stopped a session or
 * reverted writes, the transient ones (the server asked the device to try again), and the
 * compensating writes. */
long sync_errors_seen(void);
long transient_errors_seen(void);
long compensating_writes_seen(void);

void device_init(struct device *d, ferry_app_t *app, const char *subject, const char *path);
/* Blocking; 0 or -1 (printed). */
int device_log_in(struct device *d);
int device_open(struct device *d);
/* Commits the subscription and returns; d->subscribed is counted down on completion. */
int device_subscribe(struct device *d, struct latch *subscribed);
void device_close(struct device *d);

/* Logs in, opens and subscribes n devices, `parallel` at a time, and waits until every
 * subscription is complete (or deadline_us). Records SAMPLE_LOGIN and SAMPLE_CONNECT.
 * Returns the number of devices that failed or were late (0: all connected). */
long devices_connect(struct device **devices, size_t n, int parallel, uint64_t deadline_us);

#endif
