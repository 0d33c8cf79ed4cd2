/* Reading a memory-mapped file that another process may shrink meanwhile.
 *
 * A read of a mapped page that lies past the file's new end raises SIGBUS,
 * whose default action kills the process without a word. th_sigbus_guard_run()
 * runs a function that reads a mapping and turns such a fault into a FALSE
 * return instead: while any guarded call runs, a SIGBUS handler is installed
 * (the previous disposition is restored when the last one ends), and a fault
 * at an address inside the range the faulting thread declared jumps back to
 * that thread's recovery point. Any other SIGBUS (another address, another
 * thread, a kill -BUS) gets the previous disposition.
 *
 * The function is abandoned at the faulting read, so it must not hold locks
 * there; memory it allocated and had not yet handed over is lost, which a
 * read that fails anyway can afford. Safe to use from several threads at
 * once, each with its own range. */
#ifndef TH_SIGBUS_GUARD_H
#define TH_SIGBUS_GUARD_H

#include <glib.h>
#include <stddef.h>

typedef void (*th_guarded_fn)(void *arg);

/* Runs fn(arg), which may read [begin, begin + length). Returns TRUE when it
 * returned, FALSE when a read inside the range faulted. */
gboolean th_sigbus_guard_run(const void *begin, size_t length, th_guarded_fn fn, void *arg);

#endif
