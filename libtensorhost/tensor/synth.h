/* Synthetic sparse tensors with Zipf-skewed indices, for benchmarks.
 *
 * Each mode draws its index independently: with exponent a, P(rank r) is
 * proportional to 1/r^a (r = 1..dim), and ranks map to indices through a
 * random permutation of the mode, so the popular indices are scattered, not
 * 0, 1, 2, ...; a = 0 is uniform. Coordinates drawn twice are merged. To reach
 * the target nnz anyway, the generator draws the shortfall again in further
 * rounds (each round only adds coordinates not seen before) until the target
 * is met or max_rounds have run; a very dense target may end a little short,
 * never above. Values are uniform on the grid {1e-6, 2e-6, ..., 1}, i.e. in
 * (0, 1], with at most six decimals so the text form is short and exact.
 *
 * Deterministic: the same parameters give the same tensor on any machine and
 * any number of threads (each block of draws has its own counter-derived
 * xoshiro256** stream). */
#ifndef TH_SYNTH_H
#define TH_SYNTH_H

#include <glib.h>
#include "tensor/sptensor.h"

#define TH_SYNTH_ERROR (th_synth_error_quark())
GQuark th_synth_error_quark(void);

typedef enum {
    TH_SYNTH_ERROR_INVALID, /* parameters out of range */
    TH_SYNTH_ERROR_MEMORY,  /* the host has not the memory for the tensor */
} th_synth_error;

#define TH_SYNTH_DEFAULT_ROUNDS 64u

typedef struct th_synth_params {
    uint32_t nmodes;             /* 2 .. TH_MAX_MODES */
    th_index dims[TH_MAX_MODES]; /* each >= 1 */
    uint64_t nnz;                /* target number of distinct nonzeros, <= prod(dims) */
    double skew[TH_MAX_MODES];   /* Zipf exponent per mode, >= 0 (0 = uniform) */
    uint64_t seed;
    uint32_t max_rounds; /* top-up rounds after the first draw; 0 = TH_SYNTH_DEFAULT_ROUNDS */
} th_synth_params;

/* FROSTT shapes and nonzero counts, with per-mode Zipf exponents that give
 * the long modes hot indices, as skewed real tensors have. */
#define TH_SYNTH_PRESET_MAX_MODES 8u
typedef struct th_synth_preset {
    const char *name;
    uint32_t nmodes;
    th_index dims[TH_SYNTH_PRESET_MAX_MODES];
    uint64_t nnz;
    double skew[TH_SYNTH_PRESET_MAX_MODES];
} th_synth_preset;

extern const th_synth_preset th_synth_presets[];
extern const size_t th_synth_preset_count;

/* NULL if no preset has that name. */
const th_synth_preset *th_synth_find_preset(const char *name);

/* Fills `params` from a preset (max_rounds default). */
void th_synth_params_from_preset(th_synth_params *params, const th_synth_preset *preset,
                                 uint64_t seed);

/* What a synthetic tensor's label starts with; th_synth_describe follows. */
#define TH_SYNTH_LABEL_PREFIX "synthetic tensor: "

/* Generates the tensor: sorted, no duplicate coordinates, dims as given,
 * labelled TH_SYNTH_LABEL_PREFIX + th_synth_describe(params), which the
 * writers carry into the files (a binary file's note, a text file's
 * header);
 * first asks the host for the memory of its arrays at least
 * (th_sptensor_host_has_room; the generation's peak is about twice that),
 * TH_SYNTH_ERROR_MEMORY when it has not.
 * lines_read is the number of coordinates drawn and duplicates_merged the
 * draws that repeated one (so nnz = lines_read - duplicates_merged). */
th_sptensor *th_synth_generate(const th_synth_params *params, GError **error);

/* The segments the generator's merges are cut into, spread over OpenMP's
 * threads: 0 (the default) is OpenMP's thread count, up to 64; any other
 * count for tests. The tensor is the same for any number. */
void th_synth_set_merge_segments(uint32_t segments);

/* "tensorhost-synth dims=AxB... nnz=N skew=a,b,... seed=S", the label that
 * marks a file or a figure as synthetic. */
char *th_synth_describe(const th_synth_params *params);

#endif
