#define _DEFAULT_SOURCE /* flock, O_DIRECTORY */
#include "base/output_set.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include <glib/gstdio.h>

#include "base/log.h"

struct th_output_set {
    char *dir;
    GRegex *owned;
    char *index_name;
    GPtrArray *files; /* th_atomic_file *, finished; NULL once installed */
};

th_output_set *th_output_set_new(const char *dir, const char *owned, const char *index_name)
{
    th_output_set *set = g_new0(th_output_set, 1);
    set->dir = g_strdup(dir);
    set->owned = g_regex_new(owned, G_REGEX_OPTIMIZE, 0, NULL);
    g_assert(set->owned != NULL); /* the callers' patterns are constants */
    set->index_name = g_strdup(index_name);
    set->files = g_ptr_array_new();
    return set;
}

void th_output_set_free(th_output_set *set)
{
    if (!set)
        return;
    for (guint i = 0; i < set->files->len; ++i)
        th_atomic_file_abort(g_ptr_array_index(set->files, i));
    g_ptr_array_free(set->files, TRUE);
    g_regex_unref(set->owned);
    g_free(set->index_name);
    g_free(set->dir);
    g_free(set);
}

char *th_output_set_path(const th_output_set *set, const char *name)
{
    return g_build_filename(set->dir, name, NULL);
}

th_atomic_file *th_output_set_open(const th_output_set *set, const char *name, GError **error)
{
    g_autofree char *path = th_output_set_path(set, name);
    return th_atomic_file_open(path, error);
}

static char *file_name(const th_atomic_file *file)
{
    return g_path_get_basename(th_atomic_file_path(file));
}

void th_output_set_add(th_output_set *set, th_atomic_file *finished)
{
    g_autofree char *name = file_name(finished);
    g_return_if_fail(g_regex_match(set->owned, name, 0, NULL));
    g_ptr_array_add(set->files, finished);
}

gboolean th_output_set_finish_and_add(th_output_set *set, th_atomic_file *file, GError **error)
{
    if (!th_atomic_file_finish(file, error))
        return FALSE;
    th_output_set_add(set, file);
    return TRUE;
}

gboolean th_output_set_add_text(th_output_set *set, const char *name, const char *text,
                                gsize length, GError **error)
{
    th_atomic_file *file = th_output_set_open(set, name, error);
    return file && th_atomic_file_write_all(file, text, length, error) &&
           th_output_set_finish_and_add(set, file, error);
}

static gboolean set_writes(const th_output_set *set, const char *name)
{
    for (guint i = 0; i < set->files->len; ++i) {
        g_autofree char *own = file_name(g_ptr_array_index(set->files, i));
        if (strcmp(own, name) == 0)
            return TRUE;
    }
    return FALSE;
}

/* g_ptr_array_sort hands the comparison pointers to its elements. */
static gint compare_names(gconstpointer a, gconstpointer b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The names in the folder that a run of this kind writes but this one does
 * not (the index aside), sorted; NULL when the folder cannot be listed. */
static GPtrArray *previous_files_not_written(const th_output_set *set, GError **error)
{
    g_autoptr(GDir) dir = g_dir_open(set->dir, 0, error);
    if (!dir)
        return NULL;
    GPtrArray *stale = g_ptr_array_new_with_free_func(g_free);
    for (const char *name; (name = g_dir_read_name(dir)) != NULL;)
        if (strcmp(name, set->index_name) != 0 && g_regex_match(set->owned, name, 0, NULL) &&
            !set_writes(set, name))
            g_ptr_array_add(stale, g_strdup(name));
    g_ptr_array_sort(stale, compare_names);
    return stale;
}

static gboolean remove_file(const th_output_set *set, const char *name, const char *what,
                            GError **error)
{
    g_autofree char *path = th_output_set_path(set, name);
    if (g_unlink(path) == 0 || errno == ENOENT)
        return TRUE;
    const int saved = errno;
    g_set_error(error, G_FILE_ERROR, g_file_error_from_errno(saved), "%s: cannot remove %s: %s",
                path, what, g_strerror(saved));
    return FALSE;
}

/* Renames the set's files into place, the index last. */
static gboolean install_files(th_output_set *set, GError **error)
{
    for (int pass = 0; pass < 2; ++pass) {
        const gboolean index_pass = pass == 1;
        for (guint i = 0; i < set->files->len; ++i) {
            th_atomic_file *file = g_ptr_array_index(set->files, i);
            if (!file)
                continue;
            g_autofree char *name = file_name(file);
            if ((strcmp(name, set->index_name) == 0) != index_pass)
                continue;
            g_ptr_array_index(set->files, i) = NULL; /* freed by the install, either way */
            if (!th_atomic_file_install(file, error))
                return FALSE;
        }
    }
    return TRUE;
}

/* Holds the folder's lock (when the file system has locks) for the swap. */
static int lock_folder(const char *dir)
{
    const int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        while (flock(fd, LOCK_EX) != 0 && errno == EINTR) /* a stop request's signal */
            ;
    }
    return fd;
}

gboolean th_output_set_install(th_output_set *set, GPtrArray **removed, GError **error)
{
    const int dir_fd = lock_folder(set->dir);
    g_autoptr(GPtrArray) stale = previous_files_not_written(set, error);
    /* Nothing has changed until the previous index is gone. */
    gboolean ok = stale && remove_file(set, set->index_name, "the previous run's index", error);
    if (ok) {
        for (guint i = 0; ok && i < stale->len; ++i)
            ok = remove_file(set, g_ptr_array_index(stale, i), "a previous run's file", error);
        ok = ok && install_files(set, error);
        if (!ok)
            g_prefix_error(error, "the outputs are incomplete (no %s): ", set->index_name);
    }
    if (dir_fd >= 0) {
        if (ok)
            (void)fsync(dir_fd); /* the renames made durable; failing loses nothing written */
        close(dir_fd);           /* and the lock with it */
    }
    if (ok && removed)
        *removed = g_steal_pointer(&stale);
    return ok;
}

void th_output_set_log_removed(const GPtrArray *removed)
{
    if (!removed || removed->len == 0)
        return;
    g_autoptr(GString) names = g_string_new(NULL);
    for (guint i = 0; i < removed->len; ++i)
        g_string_append_printf(names, "%s%s", i ? ", " : "",
                               (const char *)g_ptr_array_index(removed, i));
    th_log(TH_LOG_INFO, "        removed the previous run's %s (not outputs of this run)",
           names->str);
}
