#define _POSIX_C_SOURCE 200809L /* sigaction, clock_gettime */
#include "base/cancel.h"

#include <signal.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Everything the handler touches is a sig_atomic_t or written before the
 * handler can read it. */
static volatile sig_atomic_t requests = 0;      /* signals (or calls) seen */
static volatile sig_atomic_t first_signal = 0;  /* signal number of the first */
static volatile sig_atomic_t abort_deferred = 0;
static volatile sig_atomic_t abort_requested = 0;
static volatile sig_atomic_t request_sec = 0;   /* CLOCK_MONOTONIC of the first */
static volatile sig_atomic_t request_msec = 0;
static const char *volatile activity = NULL;

static gboolean handlers_installed = FALSE;

static void record_request_time(void)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now); /* async-signal-safe */
    request_sec = (sig_atomic_t)now.tv_sec;
    request_msec = (sig_atomic_t)(now.tv_nsec / 1000000);
}

static void write_text(const char *text) { (void)!write(STDERR_FILENO, text, strlen(text)); }

/* On a terminal a message starts on a line of its own: the shell's "^C"
 * echo or a progress line (progress.h) may stand where the cursor is. A
 * batch log gets no blank lines. Decided when the handlers are installed. */
static volatile sig_atomic_t stderr_is_terminal = 0;

static void start_line(void)
{
    if (stderr_is_terminal)
        write_text("\n");
}

/* Set: the acknowledgements are not written (cancel.h). */
static volatile sig_atomic_t quiet = 0;

void th_cancel_set_quiet(gboolean on) { quiet = on ? 1 : 0; }

static void acknowledge(int signum)
{
    if (quiet)
        return;
    const char *what = activity ? activity : "now";
    start_line();
    write_text(signum == SIGTERM ? "tensorhost: SIGTERM received: stopping "
                                 : "tensorhost: interrupt received: stopping ");
    write_text(what);
    write_text(signum == SIGTERM ? " (send it again to abort)\n" : " (Ctrl-C again to abort)\n");
}

static void on_signal(int signum)
{
    const int seen = requests;
    requests = seen + 1;
    if (seen == 0) {
        first_signal = signum;
        record_request_time();
        acknowledge(signum);
        return;
    }
    if (abort_deferred && !abort_requested) {
        abort_requested = 1;
        if (quiet)
            return;
        start_line();
        write_text("tensorhost: aborting the write; the previous outputs are kept\n");
        return;
    }
    /* Abort: die of the signal, so the parent sees how the process ended. */
    signal(signum, SIG_DFL);
    raise(signum);
}

void th_cancel_install_handlers(void)
{
    if (handlers_installed)
        return;
    stderr_is_terminal = isatty(STDERR_FILENO) ? 1 : 0;
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_handler = on_signal;
    /* A stop is a flag read between steps: the calls it lands in (a
     * library's read or write, in any thread) go on as if it had not come. */
    action.sa_flags = SA_RESTART;
    sigemptyset(&action.sa_mask);
    sigaddset(&action.sa_mask, SIGINT);
    sigaddset(&action.sa_mask, SIGTERM);
    sigaction(SIGINT, &action, NULL);
    sigaction(SIGTERM, &action, NULL);
    handlers_installed = TRUE;
}

void th_cancel_set_activity(const char *what) { activity = what; }

gboolean th_cancel_requested(void) { return requests != 0; }

gboolean th_cancel_stop_now(void)
{
    if (requests == 0)
        return FALSE;
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    const double elapsed = (double)(now.tv_sec - request_sec) +
                           ((double)(now.tv_nsec / 1000000) - (double)request_msec) / 1e3;
    return elapsed >= TH_CANCEL_GRACE_SECONDS;
}

int th_cancel_signal(void) { return first_signal; }

int th_cancel_exit_status(void) { return 128 + (first_signal ? first_signal : SIGINT); }

void th_cancel_defer_abort(gboolean defer) { abort_deferred = defer ? 1 : 0; }

gboolean th_cancel_abort_requested(void) { return abort_requested != 0; }

void th_cancel_request(void)
{
    if (requests == 0)
        record_request_time();
    requests = requests + 1;
}

void th_cancel_reset(void)
{
    requests = 0;
    first_signal = 0;
    abort_requested = 0;
    abort_deferred = 0;
    activity = NULL;
}
