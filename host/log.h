/* Host logging and cancellation: the th_host_services the host hands plugins,
 * and the levels of the command line (--quiet, -v). */
#ifndef TH_LOG_H
#define TH_LOG_H

#include <stdint.h>
#include <tensorhost/plugin.h>

/* TH_LOG_* from plugin.h. Messages above the level are dropped. Default INFO. */
void th_log_set_level(int32_t level);
int32_t th_log_get_level(void);
void th_log(int32_t level, const char *format, ...) __attribute__((format(printf, 2, 3)));

/* Installs SIGINT/SIGTERM handlers that set the cancellation flag (a second
 * Ctrl-C restores the default action, so it kills). */
void th_cancel_install_handlers(void);
int th_cancel_requested(void);
void th_cancel_request(void); /* for tests */
void th_cancel_reset(void);   /* for tests */

/* The services structure whose log/is_cancelled call the functions above;
 * `plugin_id` prefixes plugin log lines. The returned struct is static. */
th_host_services th_host_services_make(void);

#endif
