/* The tests' own references for the regularised and constrained factor
 * update, written from its definition with none of the host's or a
 * plugin's code: the HALS coordinate descent of plugin.h's
 * th_nonneg_update_io (step 2), and the small dense solve of the closed
 * forms it is checked against (a row's exact minimiser, the ridge's
 * system). The host's th_dense_hals and the plugins' als_update_nonneg are
 * checked against them. */
#ifndef TH_HALS_ORACLE_H
#define TH_HALS_ORACLE_H

#include <glib.h>
#include <stdint.h>

/* Solves the n x n row-major system s x = b in place (b becomes x, s is
 * overwritten) by Gaussian elimination with partial pivoting; FALSE, with
 * s and b part-way, when a pivot is below 1e-300 in magnitude (singular). */
gboolean th_test_solve_small(double *s, double *b, uint32_t n);

/* The coordinate descent on the rows x rank factor `a` (row-major) against
 * the MTTKRP result `m` and the rank x rank V, as plugin.h words it: a
 * column at a time over every row; per pass, for r = 0 .. rank-1 with
 * d = V(r,r) + ridge != 0, for every row
 *   n = M(i,r) - sum_q A(i,q) V(q,r) + V(r,r) A(i,r),
 *   A(i,r) <- max(0, n - l1) / d                  (nonneg)
 *   A(i,r) <- sign(n) max(0, |n| - l1) / d        (otherwise);
 * at most `sweeps` passes, stopping after the pass whose squared change is
 * at most tolerance times the first's. Returns the passes run. */
uint32_t th_test_hals_columns(const double *m, const double *v, uint64_t rows, uint32_t rank,
                              double ridge, double l1, gboolean nonneg, uint32_t sweeps,
                              double tolerance, double *a);

#endif
