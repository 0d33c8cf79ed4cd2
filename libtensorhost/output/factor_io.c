/* Factor files as text and .npy. The text of a large factor (16 bytes a
 * value: a 25M x 32 factor is 13 GB) is formatted in blocks of rows by
 * worker threads, one per online processor, into a ring of buffers, while
 * the calling thread writes the finished blocks in order to the atomic
 * file: memory stays at a few MB per thread whatever the factor's size, and
 * the bytes never depend on the thread count or the block size. */
#include "output/factor_io.h"

#include <errno.h>
#include <gio/gio.h>
#include <stdio.h>
#include <string.h>

#include "base/decimal.h"
#include "base/atomic_file.h"
#include "base/cancel.h"
#include "base/message_text.h"
#include "output/npy_io.h"
#include "base/output_set.h"
#include "base/number_format.h"
#include "base/progress.h"

/* Text of one block: large enough that handing it over costs nothing next
 * to formatting it (a few ms of work), small enough that the ring stays
 * small. */
#define BLOCK_BYTES ((size_t)4 << 20)
/* A thread formats 120-200 MB/s of text, so 16 already outrun the disk;
 * more would only grow the ring. */
#define MAX_TEXT_THREADS TH_WRITE_MATRIX_MAX_THREADS
/* Ring slots per formatting thread: one being filled, one waiting to be
 * written. */
#define SLOTS_PER_THREAD 2u
/* A write shorter than this shows no progress line. */
#define PROGRESS_AFTER_US ((gint64)500000)

/* th_write_matrix_set_parallelism(); 0: the defaults. */
static uint32_t forced_threads = 0;
static uint64_t forced_block_rows = 0;

void th_write_matrix_set_parallelism(uint32_t threads, uint64_t block_rows)
{
    forced_threads = MIN(threads, MAX_TEXT_THREADS);
    forced_block_rows = block_rows;
}

/* One buffer of the ring. Block b goes into slot b % nslots, once block
 * b - nslots has been written out of it. */
typedef struct text_slot {
    char *bytes;
    size_t length;
    uint64_t block; /* the block it holds when `full` */
    gboolean full;
} text_slot;

typedef struct text_writer {
    const double *data;
    uint64_t rows, block_rows, nblocks;
    uint32_t cols;
    size_t slot_bytes;
    text_slot *slots;
    uint32_t nslots;

    GMutex lock; /* guards everything below */
    GCond changed;
    uint64_t next_block; /* the next block a worker takes */
    uint64_t written;    /* blocks written out, in order */
    gboolean stop;       /* the write failed or was aborted: workers end */
} text_writer;

static uint64_t block_first_row(const text_writer *w, uint64_t block)
{
    return block * w->block_rows;
}

static uint64_t block_row_count(const text_writer *w, uint64_t block)
{
    return MIN(w->block_rows, w->rows - block_first_row(w, block));
}

static void format_block(text_writer *w, text_slot *slot, uint64_t block)
{
    slot->length = th_format_matrix_rows(slot->bytes, w->slot_bytes, w->data,
                                         block_first_row(w, block), block_row_count(w, block),
                                         w->cols);
    g_assert(slot->length > 0); /* the slot was sized for the block's worst case */
    slot->block = block;
}

/* A formatting thread: takes the next block, waits for its slot to be
 * written out, fills it. */
static gpointer format_blocks_thread(gpointer data)
{
    text_writer *w = data;
    g_mutex_lock(&w->lock);
    while (!w->stop && w->next_block < w->nblocks) {
        const uint64_t block = w->next_block++;
        text_slot *slot = &w->slots[block % w->nslots];
        while (!w->stop && block >= w->written + w->nslots)
            g_cond_wait(&w->changed, &w->lock);
        if (w->stop)
            break;
        g_mutex_unlock(&w->lock);
        format_block(w, slot, block);
        g_mutex_lock(&w->lock);
        slot->full = TRUE;
        g_cond_broadcast(&w->changed);
    }
    g_mutex_unlock(&w->lock);
    return NULL;
}

/* Block `block`'s text, formatted: by the workers, or here without any. */
static text_slot *finished_block(text_writer *w, uint64_t block, gboolean have_workers)
{
    text_slot *slot = &w->slots[block % w->nslots];
    if (!have_workers) {
        format_block(w, slot, block);
        return slot;
    }
    g_mutex_lock(&w->lock);
    while (!(slot->full && slot->block == block))
        g_cond_wait(&w->changed, &w->lock);
    g_mutex_unlock(&w->lock);
    return slot;
}

static void release_block(text_writer *w, text_slot *slot, uint64_t block)
{
    g_mutex_lock(&w->lock);
    slot->full = FALSE;
    w->written = block + 1;
    g_cond_broadcast(&w->changed);
    g_mutex_unlock(&w->lock);
}

static void stop_workers(text_writer *w)
{
    g_mutex_lock(&w->lock);
    w->stop = TRUE;
    g_cond_broadcast(&w->changed);
    g_mutex_unlock(&w->lock);
}

static uint32_t choose_text_threads(uint64_t nblocks)
{
    const uint64_t wanted =
        forced_threads ? forced_threads : MIN((guint)g_get_num_processors(), MAX_TEXT_THREADS);
    return (uint32_t)MAX(MIN(wanted, nblocks), 1u);
}

static void show_write_progress(const char *path, uint64_t rows_done, uint64_t rows,
                                uint64_t bytes_done)
{
    g_autofree char *name = g_path_get_basename(path);
    th_progress_show(FALSE, "writing %s: %.0f MB (%.0f%% of %" G_GUINT64_FORMAT " rows)", name,
                     (double)bytes_done / 1e6, 100.0 * (double)rows_done / (double)rows, rows);
}

/* Writes the blocks in order as they are finished; FALSE with `error` set
 * when a write fails or an abort is requested. */
static gboolean write_blocks(text_writer *w, FILE *out, const char *path, gboolean have_workers,
                             GError **error)
{
    const gint64 start = g_get_monotonic_time();
    uint64_t bytes_done = 0;
    for (uint64_t block = 0; block < w->nblocks; ++block) {
        /* A second Ctrl-C while outputs are written (cancel.h): the first
         * only asks to stop after them, so it is not checked here. */
        if (th_cancel_abort_requested()) {
            g_set_error(error, G_IO_ERROR, G_IO_ERROR_CANCELLED,
                        "%s: writing aborted after %" G_GUINT64_FORMAT " of %" G_GUINT64_FORMAT
                        " rows; the file was not replaced",
                        path, block_first_row(w, block), w->rows);
            return FALSE;
        }
        text_slot *slot = finished_block(w, block, have_workers);
        errno = 0;
        if (fwrite(slot->bytes, 1, slot->length, out) != slot->length) {
            const int saved = errno ? errno : EIO;
            g_set_error(error, G_FILE_ERROR, g_file_error_from_errno(saved),
                        "%s: cannot write: %s", path, g_strerror(saved));
            return FALSE;
        }
        bytes_done += slot->length;
        release_block(w, slot, block);
        if (g_get_monotonic_time() - start >= PROGRESS_AFTER_US)
            show_write_progress(path, block_first_row(w, block) + block_row_count(w, block),
                                w->rows, bytes_done);
    }
    return TRUE;
}

th_atomic_file *th_write_matrix_staged(const char *path, const double *data, uint64_t rows,
                                       uint32_t cols, GError **error)
{
    const size_t row_bytes = th_format_rows_bound(1, cols);
    const uint64_t block_rows = forced_block_rows ? forced_block_rows
                                                  : MAX(BLOCK_BYTES / row_bytes, (size_t)1);
    text_writer w = {
        .data = data,
        .rows = rows,
        .block_rows = block_rows,
        .nblocks = (rows + block_rows - 1) / block_rows,
        .cols = cols,
        .slot_bytes = th_format_rows_bound(MIN(block_rows, MAX(rows, 1u)), cols),
    };
    const uint32_t nthreads = choose_text_threads(w.nblocks);
    /* One thread formats and writes in turn: a worker would only add
     * hand-overs. */
    const uint32_t nworkers = nthreads > 1 ? nthreads : 0;
    w.nslots = nworkers ? SLOTS_PER_THREAD * nworkers : 1;
    th_atomic_file *file = th_atomic_file_open(path, error);
    if (!file)
        return NULL;
    w.slots = g_new0(text_slot, w.nslots);
    for (uint32_t s = 0; s < w.nslots; ++s)
        w.slots[s].bytes = g_malloc(w.slot_bytes);
    g_mutex_init(&w.lock);
    g_cond_init(&w.changed);

    GThread **workers = g_new0(GThread *, MAX(nworkers, 1u));
    uint32_t started = 0;
    for (uint32_t k = 0; k < nworkers; ++k) {
        workers[k] = g_thread_try_new("th-format", format_blocks_thread, &w, NULL);
        if (workers[k])
            ++started;
    }
    gboolean ok = write_blocks(&w, th_atomic_file_stream(file), path, started > 0, error);
    stop_workers(&w);
    for (uint32_t k = 0; k < nworkers; ++k)
        if (workers[k])
            g_thread_join(workers[k]);
    g_free(workers);
    th_progress_clear(); /* a no-op unless the write was long enough to show it */

    g_cond_clear(&w.changed);
    g_mutex_clear(&w.lock);
    for (uint32_t s = 0; s < w.nslots; ++s)
        g_free(w.slots[s].bytes);
    g_free(w.slots);
    if (!ok) {
        th_atomic_file_abort(file);
        return NULL;
    }
    return th_atomic_file_finish(file, error) ? file : NULL;
}

gboolean th_write_matrix(const char *path, const double *data, uint64_t rows, uint32_t cols,
                         GError **error)
{
    th_atomic_file *file = th_write_matrix_staged(path, data, rows, cols, error);
    return file && th_atomic_file_commit(file, error);
}

/* Whitespace between values; '\n' ends a row. */
static gboolean is_separator(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f';
}

static gboolean ends_field(const char *at, const char *end)
{
    return at == end || *at == '\n' || is_separator(*at);
}

double *th_read_matrix(const char *path, uint64_t *rows, uint32_t *cols, GError **error)
{
    g_autofree char *text = NULL;
    gsize length = 0;
    if (!g_file_get_contents(path, &text, &length, error))
        return NULL;
    /* A value takes about 16 bytes in the files th_write_matrix writes. */
    g_autoptr(GArray) values = g_array_sized_new(FALSE, FALSE, sizeof(double), length / 16 + 1);
    const char *at = text;
    const char *const end = text + length;
    uint64_t nrows = 0, line = 1;
    uint32_t ncols = 0;
    while (at < end) {
        uint32_t count = 0;
        for (;;) {
            while (at < end && is_separator(*at))
                ++at;
            if (at == end || *at == '\n')
                break;
            double v;
            /* Every value th_write_matrix writes from 1e-14 to 1e31 in
             * magnitude takes the fast path. */
            const char *stop = th_decimal_parse_fast(at, end, &v);
            if (stop && !ends_field(stop, end))
                stop = NULL;
            if (stop == NULL) {
                /* g_file_get_contents ends the text with a NUL, so the
                 * parse stops at `end` at the latest. */
                char *slow_stop = NULL;
                v = g_ascii_strtod(at, &slow_stop);
                stop = slow_stop;
            }
            if (stop == at || !ends_field(stop, end)) {
                const char *field_end = at;
                while (field_end < end && *field_end && !ends_field(field_end, end))
                    ++field_end;
                g_set_error(error, G_FILE_ERROR, G_FILE_ERROR_INVAL,
                            "%s:%" G_GUINT64_FORMAT ": expected a number, found '%.*s'", path,
                            line, (int)(field_end - at), at);
                return NULL;
            }
            g_array_append_val(values, v);
            ++count;
            at = stop;
        }
        if (count > 0) {
            if (nrows > 0 && count != ncols) {
                g_set_error(error, G_FILE_ERROR, G_FILE_ERROR_INVAL,
                            "%s:%" G_GUINT64_FORMAT ": expected %u %s, found %u", path, line,
                            ncols, th_plural(ncols, "column", "columns"), count);
                return NULL;
            }
            ncols = count;
            ++nrows;
        }
        if (at < end)
            ++at; /* the '\n' */
        ++line;
    }
    *rows = nrows;
    *cols = ncols;
    return (double *)g_array_free(g_steal_pointer(&values), FALSE);
}

unsigned th_factor_format_from_name(const char *name)
{
    if (name == NULL || strcmp(name, "text") == 0) /* NULL: a config not from the loader */
        return TH_FACTORS_TEXT;
    if (g_strcmp0(name, "npy") == 0)
        return TH_FACTORS_NPY;
    if (g_strcmp0(name, "both") == 0)
        return TH_FACTORS_TEXT | TH_FACTORS_NPY;
    return 0;
}

/* File f of a result's outputs: modes 1..N, then lambda (a vector). */
typedef struct output_matrix {
    char *stem; /* "mode1", ..., "lambda" */
    const double *data;
    uint64_t rows;
    uint32_t cols; /* 0: a vector */
} output_matrix;

static output_matrix output_matrix_of(const th_cpd_result *result, uint32_t f)
{
    if (f == result->nmodes)
        return (output_matrix){g_strdup("lambda"), result->lambda, result->rank, 0};
    return (output_matrix){g_strdup_printf("mode%u", f + 1), result->factors[f], result->dims[f],
                           result->rank};
}

/* One .npy file of th_stage_cpd_factors, written on a thread of its own. */
typedef struct npy_job {
    char *path;
    output_matrix matrix;
    th_atomic_file *file; /* finished, once written */
    GError *error;
} npy_job;

static gpointer write_npy_job(gpointer data)
{
    npy_job *job = data;
    job->file = th_write_npy_staged(job->path, job->matrix.data, job->matrix.rows,
                                    job->matrix.cols, &job->error);
    return NULL;
}

static gboolean stage_text_factors(th_output_set *set, const th_cpd_result *result,
                                   GError **error)
{
    for (uint32_t f = 0; f < result->nmodes + 1; ++f) {
        output_matrix matrix = output_matrix_of(result, f);
        g_autofree char *name = g_strconcat(matrix.stem, ".mat", NULL);
        g_autofree char *path = th_output_set_path(set, name);
        g_free(matrix.stem);
        /* A vector is written as one column. */
        th_atomic_file *file =
            th_write_matrix_staged(path, matrix.data, matrix.rows, MAX(matrix.cols, 1u), error);
        if (!file)
            return FALSE;
        th_output_set_add(set, file);
    }
    return TRUE;
}

/* The .npy files are written side by side: each is one copy into the page
 * cache and a flush to disk (fsync), and several flushes keep the disk's
 * queue fuller than one. */
static gboolean stage_npy_factors(th_output_set *set, const th_cpd_result *result,
                                  GError **error)
{
    const uint32_t nfiles = result->nmodes + 1;
    npy_job *jobs = g_new0(npy_job, nfiles);
    GThread **threads = g_new0(GThread *, nfiles);
    for (uint32_t f = 0; f < nfiles; ++f) {
        jobs[f].matrix = output_matrix_of(result, f);
        g_autofree char *name = g_strconcat(jobs[f].matrix.stem, ".npy", NULL);
        jobs[f].path = th_output_set_path(set, name);
        threads[f] = g_thread_try_new("th-write-npy", write_npy_job, &jobs[f], NULL);
        if (!threads[f])
            write_npy_job(&jobs[f]); /* no thread to be had: write it here */
    }
    gboolean ok = TRUE;
    for (uint32_t f = 0; f < nfiles; ++f) {
        if (threads[f])
            g_thread_join(threads[f]);
        if (jobs[f].error && ok) { /* the first failure in file order */
            ok = FALSE;
            g_propagate_error(error, g_steal_pointer(&jobs[f].error));
        }
        g_clear_error(&jobs[f].error);
        if (jobs[f].file)
            th_output_set_add(set, jobs[f].file); /* removed with the set when !ok */
        g_free(jobs[f].path);
        g_free(jobs[f].matrix.stem);
    }
    g_free(jobs);
    g_free(threads);
    return ok;
}

gboolean th_stage_cpd_factors(th_output_set *set, const th_cpd_result *result, unsigned formats,
                              GError **error)
{
    if ((formats & TH_FACTORS_TEXT) && !stage_text_factors(set, result, error))
        return FALSE;
    return !(formats & TH_FACTORS_NPY) || stage_npy_factors(set, result, error);
}

gboolean th_write_cpd_factors(const char *dir, const th_cpd_result *result, unsigned formats,
                              GError **error)
{
    g_autoptr(th_output_set) set = th_output_set_new(dir, TH_RUN_OUTPUT_NAMES, TH_RUN_REPORT_NAME);
    return th_stage_cpd_factors(set, result, formats, error) &&
           th_output_set_install(set, NULL, error);
}
