/* Writing output files atomically: a temporary file in the same directory,
 * flushed and fsync'ed, then renamed over the destination, so a reader never
 * sees a half-written file, even after a crash or Ctrl-C mid-write. */
#ifndef TH_ATOMIC_FILE_H
#define TH_ATOMIC_FILE_H

#include <glib.h>
#include <stdio.h>

typedef struct th_atomic_file th_atomic_file;

/* Opens PATH.tmp-XXXXXX next to `path` for writing. */
th_atomic_file *th_atomic_file_open(const char *path, GError **error);
/* The stream to write to; valid until commit/abort. */
FILE *th_atomic_file_stream(th_atomic_file *file);
/* Writes `length` bytes of `data` to the stream; on failure sets `error`
 * (naming the destination) and aborts the file (th_atomic_file_abort). */
gboolean th_atomic_file_write_all(th_atomic_file *file, const void *data, gsize length,
                                  GError **error);
/* Flushes and fsyncs (the slow part of a commit), so that a caller may
 * still abort after it; the file stays open. */
gboolean th_atomic_file_sync(th_atomic_file *file, GError **error);
/* fsyncs the folder of `path`, so that a rename into it is durable;
 * failing there loses nothing written, so it is not an error. */
void th_atomic_file_sync_folder(const char *path);
/* Flushes, fsyncs, closes and renames into place (the rename made durable,
 * th_atomic_file_sync_folder); frees `file` in all cases.
 * On failure the temporary file is removed and nothing replaces `path`.
 * th_atomic_file_finish (unless done already), then th_atomic_file_install. */
gboolean th_atomic_file_commit(th_atomic_file *file, GError **error);

/* The first half of a commit, for files installed later as a set
 * (output_set.h): flushes, fsyncs and closes the temporary file, which
 * stays beside its destination, complete, until th_atomic_file_install or
 * th_atomic_file_abort. On failure the temporary file is removed and
 * `file` freed. */
gboolean th_atomic_file_finish(th_atomic_file *file, GError **error);
/* The second half: renames a finished file into place (not made durable:
 * th_atomic_file_sync_folder once for a set) and frees `file` in all
 * cases; on failure the temporary file is removed. */
gboolean th_atomic_file_install(th_atomic_file *file, GError **error);
/* The destination the file replaces; valid while `file` lives. */
const char *th_atomic_file_path(const th_atomic_file *file);
/* Removes the temporary file and frees `file`. Accepts NULL. */
void th_atomic_file_abort(th_atomic_file *file);

/* Creates the output folder `dir` and its parents if missing, with the
 * mode the umask leaves of 0777; the error names the folder. */
gboolean th_make_output_dir(const char *dir, GError **error);

/* Whether the existing folder `dir` takes a new file: one is created and
 * removed. 0, or the errno of the attempt. */
int th_atomic_file_probe_folder(const char *dir);

/* Whether a file can be written at `path`, asked before long work that
 * ends in writing it: its folder exists and takes a new file (one is
 * created and removed), and `path` is not a folder. The error names what
 * is wrong. */
gboolean th_atomic_file_check_target(const char *path, GError **error);

/* Whether writing `path` leaves the file `input` alone, asked by a command
 * that writes what it made of its input: FALSE, with an error, when `path`
 * is `input`'s path once "." and ".." are resolved, or, both existing, the
 * same file (device and inode) through another name: a hard or symbolic
 * link, another relative path. Writing it would replace the input with
 * what was made of it, which is never what such a command is for. The
 * message names both by their roles ("OUT", "IN") and says what `doing`
 * ("converting") would do. */
gboolean th_atomic_file_check_not_replacing(const char *path, const char *input,
                                            const char *path_role, const char *input_role,
                                            const char *doing, GError **error);

/* Tests: `hook` (NULL: none) is called with the destination's path at
 * the start of every th_atomic_file_open, on the opening thread (the .npy
 * outputs open theirs on threads of their own), so that a test can stop a
 * run at a chosen file of its outputs. Process-wide; set it while no file
 * is written. */
typedef void (*th_atomic_file_open_hook)(const char *path, void *user_data);
void th_atomic_file_set_open_hook(th_atomic_file_open_hook hook, void *user_data);

/* Whole contents in one go. */
gboolean th_atomic_write_string(const char *path, const char *contents, gsize length,
                                GError **error);

#endif
