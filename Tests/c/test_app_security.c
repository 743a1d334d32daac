/*
 * test_app_security.c — the zero value of ferry_app_options_t is the safe one (issue 22).
 *
 *  - Plain http to another machine: ferry_app_new refuses an http:// base URL whose host is not
 *    loopback (FERRY_ERR_INVALID_ARGUMENT, the message names allow_insecure_http) unless the
 *    host sets allow_insecure_http; loopback hosts (localhost, 127.0.0.0/8, ::1) and https
 *    need no opt-in. No network: the App is only created.
 *  - Certificates: against ferry-server serving https with a self-signed certificate made here
 *    (openssl req), an App whose options a host filled with zeroes (the version, the required
 *    strings and the timeouts ferry_app_new refuses at zero: nothing else) cannot log in, and
 *    the failure names the certificate; the same struct with insecure_skip_verify logs in, and
 *    so does one that trusts the certificate through ca_file. A host built against version 3
 *    that set verify_peer (now `reserved`) to false verifies all the same.
 *
 * The certificate part exits 77 (CTest: skipped) without a server binary or the openssl
 * command; the URL part runs first, always.
 */
#include "check.h"
#include "sync_server.h"
#include "sync_waiters.h"

#include <sys/stat.h>

/* Options as a host that zero-fills its struct writes them: what ferry_app_new requires and
 * refuses at zero, nothing more. */
static ferry_app_options_t zero_filled(uint32_t version, const char *url, const char *dir) {
  ferry_app_options_t o;
  memset(&o, 0, sizeof o);
  o.version = version;
  o.app_id = APP_ID;
  o.base_url = url;
  o.base_directory = dir;
  o.request_timeout_ms = 20000;
  o.log_level = FERRY_LOG_OFF;
  if (version >= 2) {
    o.read_timeout_ms = 120000;
    o.ping_interval_ms = 60000;
    o.reconnect_delay_min_ms = 1000;
    o.reconnect_delay_max_ms = 16000;
  }
  return o;
}

static const char *fresh_dir(const char *name) {
  const char *dir = test_path(name);
  CHECKF(mkdir(dir, 0700) == 0, "mkdir %s: %s", dir, strerror(errno));
  return dir;
}

static void test_plain_http_needs_an_opt_in(void) {
  const char *dir = fresh_dir("http-app");
  const char *const refused[] = {"http://example.com", "http://example.com:9090/", "http://10.0.0.7:9090",
                                 "http://192.168.1.20", "http://[2001:db8::1]:80", "http://128.0.0.1",
                                 "http://localhost.example.com", "http://[::2]", "http://127.0.0.1.example.com"};
  for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
    ferry_app_options_t o = zero_filled(FERRY_APP_OPTIONS_VERSION, refused[i], dir);
    ferry_app_t *app = NULL;
    int rc = ferry_app_new(&app, &o);
    CHECKF(rc == FERRY_ERR_INVALID_ARGUMENT, "ferry_app_new(%s) without allow_insecure_http returned %d (%s)", refused[i],
           rc, ferry_strerror(rc));
    CHECK_LAST_ERROR(FERRY_ERR_INVALID_ARGUMENT);
    CHECKF(strstr(ferry_error_last()->message, "allow_insecure_http") != NULL,
           "the refusal of %s should name the opt-in: \"%s\"", refused[i], ferry_error_last()->message);
    CHECK(app == NULL);
    /* the explicit opt-in */
    o.allow_insecure_http = true;
    CHECK_OK(ferry_app_new(&app, &o));
    CHECK(app != NULL);
    ferry_app_free(app);
  }
  /* Options from ferry_app_options_init refuse it too. */
  {
    ferry_app_options_t o;
    CHECK_OK(ferry_app_options_init(&o, FERRY_APP_OPTIONS_VERSION));
    CHECK(!o.allow_insecure_http && !o.insecure_skip_verify);
    o.app_id = APP_ID;
    o.base_url = "http://example.com";
    o.base_directory = dir;
    ferry_app_t *app = NULL;
    CHECK_ERR(ferry_app_new(&app, &o), FERRY_ERR_INVALID_ARGUMENT);
  }
  /* A host built against versions 1 to 3 has no opt-in: refused. */
  for (uint32_t v = 1; v < 4; v++) {
    ferry_app_options_t o = zero_filled(v, "http://example.com", dir);
    ferry_app_t *app = NULL;
    CHECK_ERR(ferry_app_new(&app, &o), FERRY_ERR_INVALID_ARGUMENT);
  }
  /* Loopback and https need no opt-in (creating the App contacts nobody). */
  const char *const accepted[] = {"http://localhost:9", "http://LOCALHOST:9", "http://127.0.0.1:9", "http://127.1.2.3:9",
                                  "http://[::1]:9", "http://[0:0:0:0:0:0:0:1]:9", "http://[::ffff:127.0.0.1]:9",
                                  "https://example.com", "https://10.0.0.7:9443"};
  for (size_t i = 0; i < sizeof accepted / sizeof accepted[0]; i++) {
    ferry_app_options_t o = zero_filled(FERRY_APP_OPTIONS_VERSION, accepted[i], dir);
    ferry_app_t *app = NULL;
    int rc = ferry_app_new(&app, &o);
    CHECKF(rc == FERRY_OK, "ferry_app_new(%s) returned %d (%s): %s", accepted[i], rc, ferry_strerror(rc),
           ferry_error_last()->message);
    ferry_app_free(app);
  }
}

/* An App on these options logs in anonymously; the completion's outcome (the user freed). */
static struct outcome log_in_with(const ferry_app_options_t *o) {
  ferry_app_t *app = NULL;
  CHECK_OK(ferry_app_new(&app, o));
  ferry_user_t *user = NULL;
  struct outcome out = log_in(app, &anonymous, &user);
  ferry_user_free(user);
  ferry_app_free(app);
  return out;
}

static void check_certificate_refused(struct outcome out, const char *what) {
  CHECKF(out.code == FERRY_ERR_NETWORK || out.code == FERRY_ERR_IO,
         "%s: a login to a server with a self-signed certificate returned %d (%s) \"%s\", expected a certificate error",
         what, out.code, ferry_strerror(out.code), out.message);
  CHECKF(strstr(out.message, "certificate") != NULL, "%s: the failure should name the certificate: \"%s\"", what,
         out.message);
}

static void test_zero_filled_options_verify_certificates(void) {
  char url[64];
  snprintf(url, sizeof url, "%s", base_url);
  CHECKF(strncmp(url, "https://", 8) == 0, "the server should serve https: %s", url);

  ferry_app_options_t o = zero_filled(FERRY_APP_OPTIONS_VERSION, url, fresh_dir("tls-zero"));
  check_certificate_refused(log_in_with(&o), "zero-filled options");

  /* A host of version 3 whose verify_peer (now reserved) is false, as zero-filling left it
   * or as it set it: certificates are verified all the same. */
  ferry_app_options_t v3 = zero_filled(3, url, fresh_dir("tls-v3"));
  v3.reserved = false;
  check_certificate_refused(log_in_with(&v3), "a version-3 host with verify_peer false");

  /* The explicit opt-out. */
  ferry_app_options_t skip = zero_filled(FERRY_APP_OPTIONS_VERSION, url, fresh_dir("tls-skip"));
  skip.insecure_skip_verify = true;
  CHECK_OUTCOME_OK(log_in_with(&skip), "insecure_skip_verify");

  /* Trusting the certificate is the way that does not skip anything. */
  ferry_app_options_t trust = zero_filled(FERRY_APP_OPTIONS_VERSION, url, fresh_dir("tls-trust"));
  trust.ca_file = server_tls_certificate;
  CHECK_OUTCOME_OK(log_in_with(&trust), "ca_file naming the certificate");
}

int main(void) {
  test_plain_http_needs_an_opt_in();

  static char certificate[700], key[700], command[2200];
  snprintf(certificate, sizeof certificate, "%s", test_path("cert.pem"));
  snprintf(key, sizeof key, "%s", test_path("key.pem"));
  snprintf(command, sizeof command,
           "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout '%s' -out '%s' -days 1 "
           "-subj /CN=localhost -addext subjectAltName=DNS:localhost,IP:127.0.0.1 >/dev/null 2>&1",
           key, certificate);
  if (system(command) != 0) {
    printf("test_app_security: certificate checks SKIPPED: openssl req failed (is the openssl command installed?)\n");
    return check_done("test_app_security") != 0 ? 1 : 77;
  }
  server_tls_certificate = certificate;
  server_tls_key = key;
  if (!server_start()) {
    printf("test_app_security: certificate checks SKIPPED: %s\n", server_skip_reason);
    return check_done("test_app_security") != 0 ? 1 : 77;
  }
  printf("test_app_security: ferry-server at %s\n", base_url);
  fflush(stdout);
  test_zero_filled_options_verify_certificates();
  server_stop();
  return check_done("test_app_security");
}
