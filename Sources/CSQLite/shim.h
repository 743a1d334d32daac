#include <sqlite3.h>

/* sqlite3_config is variadic, which Swift cannot call. Turning off memory statistics removes a
   global mutex from every SQLite allocation; it only works before SQLite is initialised in the
   process, and is harmless (SQLITE_MISUSE) after. */
static inline int ferry_sqlite_disable_memstatus(void) {
  return sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
}
