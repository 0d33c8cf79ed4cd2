#define _POSIX_C_SOURCE 200809L /* O_CLOEXEC */

#include "base/atomic_file.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include <glib/gstdio.h>

struct th_atomic_file {
    char *path;
    char *temp_path;
    FILE *stream;
};

static th_atomic_file_open_hook open_hook = NULL;
static void *open_hook_data = NULL;

void th_atomic_file_set_open_hook(th_atomic_file_open_hook hook, void *user_data)
{
    open_hook = hook;
    open_hook_data = user_data;
}

th_atomic_file *th_atomic_file_open(const char *path, GError **error)
{
    if (open_hook)
        open_hook(path, open_hook_data);
    g_autofree char *template = g_strconcat(path, ".tmp-XXXXXX", NULL);
    /* 0666 as open() and fopen() create files: the umask decides the mode. */
    int fd = g_mkstemp_full(template, O_RDWR | O_CLOEXEC, 0666);
    if (fd < 0) {
        int saved = errno;
        g_set_error(error, G_FILE_ERROR, g_file_error_from_errno(saved),
                    "%s: cannot create a temporary file beside it: %s", path, g_strerror(saved));
        return NULL;
    }
    FILE *stream = fdopen(fd, "w");
    if (!stream) {
        int saved = errno;
        close(fd);
        g_unlink(template);
        g_set_error(error, G_FILE_ERROR, g_file_error_from_errno(saved), "%s: %s", path,
                    g_strerror(saved));
        return NULL;
    }
    th_atomic_file *file = g_new0(th_atomic_file, 1);
    file->path = g_strdup(path);
    file->temp_path = g_steal_pointer(&template);
    file->stream = stream;
    return file;
}

FILE *th_atomic_file_stream(th_atomic_file *file) { return file->stream; }

gboolean th_atomic_file_write_all(th_atomic_file *file, const void *data, gsize length,
                                  GError **error)
{
    errno = 0;
    if (length == 0 || fwrite(data, 1, length, file->stream) == length)
        return TRUE;
    const int saved = errno ? errno : EIO;
    g_set_error(error, G_FILE_ERROR, g_file_error_from_errno(saved), "%s: cannot write: %s",
                file->path, g_strerror(saved));
    th_atomic_file_abort(file);
    return FALSE;
}

static void atomic_file_free(th_atomic_file *file)
{
    g_free(file->path);
    g_free(file->temp_path);
    g_free(file);
}

/* fflush and fsync: 0, or the errno of the first that failed. */
static int flush_to_disk(th_atomic_file *file)
{
    if (fflush(file->stream) != 0 || ferror(file->stream))
        return errno ? errno : EIO;
    return fsync(fileno(file->stream)) != 0 ? errno : 0;
}

gboolean th_atomic_file_sync(th_atomic_file *file, GError **error)
{
    const int failed_errno = flush_to_disk(file);
    if (!failed_errno)
        return TRUE;
    g_set_error(error, G_FILE_ERROR, g_file_error_from_errno(failed_errno),
                "%s: cannot write: %s", file->path, g_strerror(failed_errno));
    return FALSE;
}

int th_atomic_file_probe_folder(const char *dir)
{
    g_autofree char *probe = g_build_filename(dir, ".tensorhost-write-test-XXXXXX", NULL);
    const int fd = g_mkstemp(probe);
    if (fd < 0)
        return errno;
    close(fd);
    g_unlink(probe);
    return 0;
}

gboolean th_atomic_file_check_target(const char *path, GError **error)
{
    if (g_file_test(path, G_FILE_TEST_IS_DIR)) {
        g_set_error(error, G_FILE_ERROR, G_FILE_ERROR_ISDIR,
                    "%s is a folder; name the file to write", path);
        return FALSE;
    }
    g_autofree char *dir = g_path_get_dirname(path);
    const int failed = th_atomic_file_probe_folder(dir);
    if (!failed)
        return TRUE;
    g_set_error(error, G_FILE_ERROR, g_file_error_from_errno(failed),
                "%s: cannot write into %s: %s", path, dir, g_strerror(failed));
    return FALSE;
}

gboolean th_atomic_file_check_not_replacing(const char *path, const char *input,
                                            const char *path_role, const char *input_role,
                                            const char *doing, GError **error)
{
    g_autofree char *canonical_path = g_canonicalize_filename(path, NULL);
    g_autofree char *canonical_input = g_canonicalize_filename(input, NULL);
    if (strcmp(canonical_path, canonical_input) == 0) {
        g_set_error(error, G_FILE_ERROR, G_FILE_ERROR_EXIST,
                    "%s %s is %s itself: %s would replace the input; name another file to "
                    "write",
                    path_role, path, input_role, doing);
        return FALSE;
    }
    GStatBuf path_st, input_st;
    if (g_stat(input, &input_st) != 0 || g_stat(path, &path_st) != 0 ||
        input_st.st_dev != path_st.st_dev || input_st.st_ino != path_st.st_ino)
        return TRUE;
    g_set_error(error, G_FILE_ERROR, G_FILE_ERROR_EXIST,
                "%s %s is the same file as %s %s (a link to it, or another path to it): %s "
                "would replace the input; name another file to write",
                path_role, path, input_role, input, doing);
    return FALSE;
}

void th_atomic_file_sync_folder(const char *path)
{
    g_autofree char *dir = g_path_get_dirname(path);
    const int dir_fd = open(dir, O_RDONLY | O_CLOEXEC);
    if (dir_fd >= 0) {
        (void)fsync(dir_fd);
        close(dir_fd);
    }
}

const char *th_atomic_file_path(const th_atomic_file *file) { return file->path; }

/* Removes the temporary file, sets `error` for `failed_errno` and frees
 * `file`: how every step after the writes fails. */
static gboolean fail_and_free(th_atomic_file *file, int failed_errno, GError **error)
{
    g_unlink(file->temp_path);
    g_set_error(error, G_FILE_ERROR, g_file_error_from_errno(failed_errno),
                "%s: cannot write: %s", file->path, g_strerror(failed_errno));
    atomic_file_free(file);
    return FALSE;
}

gboolean th_atomic_file_finish(th_atomic_file *file, GError **error)
{
    int failed_errno = flush_to_disk(file);
    if (fclose(file->stream) != 0 && !failed_errno)
        failed_errno = errno;
    file->stream = NULL;
    if (failed_errno)
        return fail_and_free(file, failed_errno, error);
    return TRUE;
}

gboolean th_atomic_file_install(th_atomic_file *file, GError **error)
{
    g_return_val_if_fail(file->stream == NULL, FALSE); /* finished first */
    if (g_rename(file->temp_path, file->path) != 0)
        return fail_and_free(file, errno, error);
    atomic_file_free(file);
    return TRUE;
}

gboolean th_atomic_file_commit(th_atomic_file *file, GError **error)
{
    g_autofree char *path = g_strdup(file->path);
    if ((file->stream && !th_atomic_file_finish(file, error)) ||
        !th_atomic_file_install(file, error))
        return FALSE;
    th_atomic_file_sync_folder(path);
    return TRUE;
}

void th_atomic_file_abort(th_atomic_file *file)
{
    if (!file)
        return;
    if (file->stream)
        fclose(file->stream);
    g_unlink(file->temp_path);
    atomic_file_free(file);
}

gboolean th_make_output_dir(const char *dir, GError **error)
{
    /* 0777 as mkdir(1) creates folders: the umask decides the mode. */
    if (g_mkdir_with_parents(dir, 0777) == 0)
        return TRUE;
    int saved = errno;
    g_set_error(error, G_FILE_ERROR, g_file_error_from_errno(saved),
                "%s: cannot create the output directory: %s", dir, g_strerror(saved));
    return FALSE;
}

gboolean th_atomic_write_string(const char *path, const char *contents, gsize length,
                                GError **error)
{
    th_atomic_file *file = th_atomic_file_open(path, error);
    return file && th_atomic_file_write_all(file, contents, length, error) &&
           th_atomic_file_commit(file, error);
}
