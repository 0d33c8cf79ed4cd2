/* The files of one run's outputs, swapped into their folder as a unit, so
 * that a folder holds one run's outputs or the previous run's, never a mix.
 *
 * Every file is first written whole beside its destination, as a finished
 * atomic file (atomic_file.h: a temporary, flushed to disk). Only when all
 * are written does th_output_set_install swap them in:
 *   1. the previous index (report.json: the file that says which files are
 *      its run's) is removed first;
 *   2. the files a run of this kind writes (`owned`) that this run does not
 *      write are removed: the previous run's mode4.mat beside a 3-mode run,
 *      its .npy files beside a text-only run;
 *   3. this run's files are renamed into place, its index last;
 *   4. the folder is flushed to disk.
 * A stop or an error before the swap leaves the previous outputs untouched
 * and no temporary file. The swap is a few renames, checked by nothing that
 * a stop request sets; a crash inside it leaves the folder without an
 * index, so that no file of it looks current. It holds an exclusive lock
 * (flock) on the folder, so two runs that share a folder swap one after the
 * other, and the last one's outputs are what it holds.
 *
 * One set belongs to one thread. */
#ifndef TH_OUTPUT_SET_H
#define TH_OUTPUT_SET_H

#include <glib.h>

#include "base/atomic_file.h"

typedef struct th_output_set th_output_set;

/* A set for the existing folder `dir`: `owned` is a regular expression
 * (GRegex, anchored by the caller) matching the names of every file a run
 * of this kind may write, `index_name` the name of its index (one of
 * them). */
th_output_set *th_output_set_new(const char *dir, const char *owned, const char *index_name);
/* Removes the temporary files of whatever was not installed. NULL is
 * accepted. */
void th_output_set_free(th_output_set *set);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(th_output_set, th_output_set_free)

/* The path of file `name` in the set's folder (free it with g_free). */
char *th_output_set_path(const th_output_set *set, const char *name);

/* Takes `finished` (th_atomic_file_finish succeeded on it), a file of the
 * set's folder whose name `owned` matches. */
void th_output_set_add(th_output_set *set, th_atomic_file *finished);

/* Opens the next file of the set, `name`, for writing: th_atomic_file_open
 * of its path. Finish it and hand it to th_output_set_add. */
th_atomic_file *th_output_set_open(const th_output_set *set, const char *name, GError **error);

/* Finishes `file` (th_atomic_file_finish: on failure it is removed) and
 * adds it to the set. */
gboolean th_output_set_finish_and_add(th_output_set *set, th_atomic_file *file, GError **error);

/* The next file of the set, `name`, holding `length` bytes of `text`
 * whole, added to the set. */
gboolean th_output_set_add_text(th_output_set *set, const char *name, const char *text,
                                gsize length, GError **error);

/* Swaps the set in (above). `removed`, when not NULL, receives the names
 * of the previous run's files that were removed because this run does not
 * write them (a new array; empty when none). On failure the error names
 * the file, and says whether the folder was left without an index. */
gboolean th_output_set_install(th_output_set *set, GPtrArray **removed, GError **error);

/* Says which of the previous run's files an install removed (an INFO line;
 * nothing when none). NULL is accepted. */
void th_output_set_log_removed(const GPtrArray *removed);

#endif
