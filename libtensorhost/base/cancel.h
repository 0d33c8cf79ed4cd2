/* Stopping a run on request: SIGINT or SIGTERM (as a batch scheduler sends
 * it), or a caller (tests, a library user's callback).
 *
 * The first request is acknowledged on stderr with what will happen
 * ("stopping after this iteration (Ctrl-C again to abort)") and sets a flag
 * that every long phase checks:
 *   - th_cancel_requested(): checked at natural boundaries (between CP-ALS
 *     iterations, between chunks of a tensor read). Stopping there loses
 *     nothing.
 *   - th_cancel_stop_now(): checked inside long loops (an MTTKRP, a plugin
 *     call through th_host_services.is_cancelled). It turns true one
 *     TH_CANCEL_GRACE_SECONDS after the request, so a short iteration still
 *     ends normally while a long one is cut within about a second.
 * A second signal aborts: by default the process dies of it (the default
 * action, so the shell sees 128 + the signal). Inside a section that must
 * not be cut (th_cancel_defer_abort(TRUE): writing the outputs) it sets
 * th_cancel_abort_requested() instead, and the writer cleans up and stops.
 *
 * The flag is process-wide: one run at a time per process. */
#ifndef TH_CANCEL_H
#define TH_CANCEL_H

#include <glib.h>

/* How long after a request th_cancel_stop_now() turns true. */
#define TH_CANCEL_GRACE_SECONDS 1.0

/* Installs the SIGINT/SIGTERM handlers (idempotent). */
void th_cancel_install_handlers(void);

/* What the acknowledgement says will happen, e.g. "after this iteration":
 * "tensorhost: interrupt received: stopping after this iteration (Ctrl-C
 * again to abort)". A string with static storage; NULL restores the
 * default ("now"). */
void th_cancel_set_activity(const char *what);

/* TRUE: a signal is acted on without the acknowledgement on stderr (the
 * processes of a distributed run other than rank 0, which speaks for
 * them all). */
void th_cancel_set_quiet(gboolean on);

gboolean th_cancel_requested(void);
/* The request is older than TH_CANCEL_GRACE_SECONDS. */
gboolean th_cancel_stop_now(void);
/* The signal that asked (SIGINT, SIGTERM), or 0 for th_cancel_request(). */
int th_cancel_signal(void);
/* Exit status of a run that stopped on request: 128 + the signal (130 for
 * SIGINT, 143 for SIGTERM), 130 for a request without a signal. */
int th_cancel_exit_status(void);

/* While `defer` is TRUE a second signal sets th_cancel_abort_requested()
 * instead of killing the process (a third still kills). */
void th_cancel_defer_abort(gboolean defer);
gboolean th_cancel_abort_requested(void);

/* Asks for a stop as a signal would, without one (tests, callbacks); the
 * grace period starts now. */
void th_cancel_request(void);
/* Clears every flag (tests; a library starting a new run). */
void th_cancel_reset(void);

#endif
