/* Host logging: the levels of the command line (--quiet, -v), and the
 * th_host_services the host hands plugins (log lines, and is_cancelled from
 * cancel.h). */
#ifndef TH_LOG_H
#define TH_LOG_H

#include <stdint.h>
#include <tensorhost/plugin.h>

/* TH_LOG_* from plugin.h. Messages above the level are dropped. Default INFO. */
void th_log_set_level(int32_t level);
int32_t th_log_get_level(void);
void th_log(int32_t level, const char *format, ...) __attribute__((format(printf, 2, 3)));

/* The services a plugin gets: log() prints through th_log with a
 * "[plugin] " prefix; is_cancelled() is th_cancel_stop_now(). */
th_host_services th_host_services_make(void);

#endif
