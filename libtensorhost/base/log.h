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
/* Non-zero: once a stop is requested (th_cancel_requested), lines for the
 * console's stdout (TH_LOG_INFO) are dropped; a sink still gets them.
 * For a process of several under mpirun: the launcher forwards a stop and
 * then, waiting to kill the job, no longer reads the processes' output,
 * so a line could block a process before it reaches the agreement to
 * stop, and the job would end with nothing written. */
void th_log_hold_console_on_stop(int on);
void th_log(int32_t level, const char *format, ...) __attribute__((format(printf, 2, 3)));

/* Where lines go instead of the console: `fn` gets every line, at every
 * level (the console's level does not apply), one at a time, with the
 * control characters escaped and no "tensorhost: warning: " decoration
 * (plugins' lines keep their "[plugin] " prefix). NULL: the console again.
 * Once this returns, the previous sink is not running and is not called
 * again. Any thread; `fn` may call this. */
typedef void (*th_log_sink_fn)(int32_t level, const char *line, void *user_data);
void th_log_set_sink(th_log_sink_fn fn, void *user_data);

/* The services a plugin gets: log() prints through th_log with a
 * "[plugin] " prefix; is_cancelled() is th_cancel_stop_now(); the
 * processes' of a run of one (th_dist_host_services sets a run of
 * several's). */
th_host_services th_host_services_make(void);

#endif
