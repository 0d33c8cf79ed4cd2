/* SIGBUS recovery for reads of a mapped file: see sigbus_guard.h. */
#define _POSIX_C_SOURCE 200809L /* sigaction, siginfo_t, sigsetjmp */
#include "base/sigbus_guard.h"

#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>

/* One guarded call of one thread: where to jump back to, and the addresses
 * whose faults it answers for. */
typedef struct {
    sigjmp_buf recovery;
    uintptr_t begin;
    size_t length;
} guard_frame;

/* The calling thread's guarded call, NULL outside one. Thread-local storage
 * of the executable is reserved when the thread starts, and the guard writes
 * it before any fault can happen, so the handler's read allocates nothing. */
static _Thread_local guard_frame *volatile current_frame = NULL;

static GMutex install_lock;
static unsigned install_count = 0;       /* guarded calls running */
static struct sigaction previous_action; /* restored by the last one */

static void on_sigbus(int signum, siginfo_t *info, void *context)
{
    (void)signum;
    (void)context;
    guard_frame *frame = current_frame;
    /* si_code > 0: raised by the kernel for a faulting access, so si_addr
     * is the address (not a kill -BUS, whose si_code is <= 0). */
    if (frame != NULL && info != NULL && info->si_code > 0 &&
        (uintptr_t)info->si_addr - frame->begin < frame->length) {
        current_frame = NULL;
        siglongjmp(frame->recovery, 1);
    }
    /* Not a read this guard answers for: give the signal its previous
     * disposition. Returning re-executes the faulting access, which faults
     * again and is handled (by default: the process dies of SIGBUS). */
    sigaction(SIGBUS, &previous_action, NULL);
}

static void install_handler(void)
{
    g_mutex_lock(&install_lock);
    if (install_count++ == 0) {
        struct sigaction action;
        memset(&action, 0, sizeof action);
        action.sa_sigaction = on_sigbus;
        action.sa_flags = SA_SIGINFO;
        sigemptyset(&action.sa_mask);
        sigaction(SIGBUS, &action, &previous_action);
    }
    g_mutex_unlock(&install_lock);
}

static void remove_handler(void)
{
    g_mutex_lock(&install_lock);
    if (--install_count == 0)
        sigaction(SIGBUS, &previous_action, NULL);
    g_mutex_unlock(&install_lock);
}

gboolean th_sigbus_guard_run(const void *begin, size_t length, th_guarded_fn fn, void *arg)
{
    g_return_val_if_fail(fn != NULL, FALSE);
    guard_frame frame = {.begin = (uintptr_t)begin, .length = length};
    guard_frame *volatile outer = current_frame; /* a guarded call inside another */
    install_handler();
    gboolean completed = TRUE;
    /* savemask = 1: the jump out of the handler must unblock SIGBUS again. */
    if (sigsetjmp(frame.recovery, 1) == 0) {
        current_frame = &frame;
        fn(arg);
    } else {
        completed = FALSE;
    }
    current_frame = outer;
    remove_handler();
    return completed;
}
