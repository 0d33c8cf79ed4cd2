/* The collectives of multi-device runs (kernels/comm.cuh), linked directly
 * against th_kernels. The refusals (device lists, a missing NCCL) need no
 * device and run everywhere; the exchanges need one: G ranks on one device
 * through device copies, NCCL with one rank on one device (the library's
 * binding), and NCCL across devices where the host has two or more. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <vector>

extern "C" {
#include <cmocka.h>
}

#include "comm.cuh"

namespace {

int device_count()
{
    int n = 0;
    return cudaGetDeviceCount(&n) == cudaSuccess ? n : 0;
}

void expect_refusal(const std::vector<int> &devices, int force_nccl, thg_status status,
                    const char *fragment)
{
    char err[512] = "";
    thg_comm *c = nullptr;
    assert_int_equal(thg_comm_create(devices.data(), (uint32_t)devices.size(), force_nccl, &c,
                                     err, sizeof err),
                     status);
    assert_null(c);
    if (!strstr(err, fragment))
        fail_msg("message \"%s\" lacks \"%s\"", err, fragment);
}

void test_refusals(void **)
{
    expect_refusal({0, 0, 1}, 0, THG_ERR_UNSUPPORTED, "3 ranks on 2 devices");
    expect_refusal({0, -1}, 0, THG_ERR_INVALID, "device -1");
    expect_refusal({0, 0}, 1, THG_ERR_UNSUPPORTED, "NCCL takes one rank per device");
    std::vector<int> many(THG_MAX_COMM_RANKS + 1, 0);
    expect_refusal(many, 0, THG_ERR_INVALID, "1 to 64");
    /* A missing NCCL is said before any device is touched (a build without
     * nccl.h says so instead of naming the library). */
    setenv("TH_NCCL_LIBRARY", "/nonexistent/libnccl.so.2", 1);
    expect_refusal({0, 1}, 0, THG_ERR_UNSUPPORTED, "2 devices need NCCL");
#ifdef THG_HAVE_NCCL
    expect_refusal({0, 1}, 0, THG_ERR_UNSUPPORTED,
                   "2 devices need NCCL, loaded at run time from /nonexistent/libnccl.so.2, "
                   "which did not load");
#endif
    unsetenv("TH_NCCL_LIBRARY");
}

/* Every rank's handle of one registration (collective: one group). */
void register_all(thg_comm *c, const std::vector<void *> &bufs, size_t bytes,
                  std::vector<void *> &handles)
{
    char err[512] = "";
    handles.assign(bufs.size(), nullptr);
    assert_int_equal(thg_comm_begin(c, err, sizeof err), THG_OK);
    for (uint32_t r = 0; r < bufs.size(); ++r)
        if (thg_comm_register(c, r, bufs[r], bytes, &handles[r], err, sizeof err) != THG_OK)
            fail_msg("register rank %u: %s", r, err);
    if (thg_comm_end(c, err, sizeof err) != THG_OK)
        fail_msg("registration: %s", err);
}

void deregister_all(thg_comm *c, const std::vector<void *> &handles)
{
    char err[512] = "";
    assert_int_equal(thg_comm_begin(c, err, sizeof err), THG_OK);
    for (uint32_t r = 0; r < handles.size(); ++r)
        if (thg_comm_deregister(c, r, handles[r], err, sizeof err) != THG_OK)
            fail_msg("deregister rank %u: %s", r, err);
    if (thg_comm_end(c, err, sizeof err) != THG_OK)
        fail_msg("deregistration: %s", err);
}

/* Every exchange of one communicator, checked on the host: an all-gather
 * of uneven blocks (one empty, one of an odd size) and a sum whose terms
 * are exact. `registered`: the all-gather's buffers come from the
 * communicator and are registered with it, so that between NCCL's
 * devices it takes the direct exchange where the build and the library
 * allow (the description says which), the point-to-point path otherwise;
 * it runs three times, each block's bytes changed between runs (each run
 * must overwrite the last), the later runs with the options the sweep
 * gives (no entry barrier: the last run's collective came after every
 * read; a span to stamp, which only the direct exchange fills). `scale`
 * multiplies the blocks' sizes (300: past the direct exchange's 1 MiB,
 * where it launches a block per SM). */
void exercise(const std::vector<int> &devices, int force_nccl, thg_comm_kind kind,
              bool registered = false, uint64_t scale = 1)
{
    const uint32_t G = (uint32_t)devices.size();
    char err[512] = "";
    thg_comm *c = nullptr;
    if (thg_comm_create(devices.data(), G, force_nccl, &c, err, sizeof err) != THG_OK)
        fail_msg("create: %s", err);
    assert_int_equal(thg_comm_get_kind(c), kind);
    printf("%s%s\n", thg_comm_describe(c), registered ? " (registered buffers)" : "");
    if (thg_comm_is_direct(c) && !strstr(thg_comm_describe(c), "direct exchange"))
        fail_msg("a direct communicator described as \"%s\"", thg_comm_describe(c));

    std::vector<uint64_t> offsets(G + 1, 0);
    static const uint64_t sizes[4] = {1000, 0, 37, 4096};
    for (uint32_t q = 0; q < G; ++q)
        offsets[q + 1] = offsets[q] + sizes[q % 4] * scale;
    const uint64_t bytes = offsets[G];
    /* What each buffer is allocated: NCCL's point-to-point kernels read
     * whole words past a block's unaligned end (comm.cuh). */
    const uint64_t allocated = (bytes + 15) / 16 * 16 + (bytes == 0 ? 16 : 0);
    const size_t count = 1000;
    std::vector<void *> gathered(G);
    std::vector<double *> sums(G);
    std::vector<cudaStream_t> streams(G);
    std::vector<unsigned long long *> spans(G);
    /* Run `round`'s bytes of rank q's block. */
    auto expected = [&](uint32_t q, uint64_t b, int round) {
        return (unsigned char)(q * 31 + b % 251 + (uint64_t)round * 7);
    };
    auto owner = [&](uint64_t b) {
        uint32_t q = 0;
        while (b >= offsets[q + 1])
            ++q;
        return q;
    };
    for (uint32_t r = 0; r < G; ++r) {
        assert_int_equal(cudaSetDevice(devices[r]), cudaSuccess);
        assert_int_equal(cudaStreamCreateWithFlags(&streams[r], cudaStreamNonBlocking),
                         cudaSuccess);
        if (registered) {
            if (thg_comm_alloc(c, r, allocated, &gathered[r], err, sizeof err) !=
                THG_OK)
                fail_msg("alloc rank %u: %s", r, err);
        } else {
            assert_int_equal(cudaMalloc(&gathered[r], allocated), cudaSuccess);
        }
        /* Every block garbage at first. */
        assert_int_equal(cudaMemset(gathered[r], 0xee, allocated), cudaSuccess);
        assert_int_equal(cudaMalloc(&sums[r], sizeof(double) * count), cudaSuccess);
        assert_int_equal(cudaMalloc(&spans[r], 2 * sizeof(unsigned long long)), cudaSuccess);
        std::vector<double> terms(count);
        for (size_t k = 0; k < count; ++k)
            terms[k] = (double)(r * 1000 + k);
        assert_int_equal(cudaMemcpy(sums[r], terms.data(), sizeof(double) * count,
                                    cudaMemcpyHostToDevice),
                         cudaSuccess);
    }
    std::vector<void *> handles(G, nullptr);
    if (registered)
        register_all(c, gathered, allocated, handles);
    const int rounds = registered ? 3 : 1;
    for (int round = 0; round < rounds; ++round) {
        /* Each rank's own block this round's; the others as the last round left them. */
        for (uint32_t r = 0; r < G; ++r) {
            std::vector<unsigned char> mine(offsets[r + 1] - offsets[r]);
            for (uint64_t b = offsets[r]; b < offsets[r + 1]; ++b)
                mine[b - offsets[r]] = expected(r, b, round);
            assert_int_equal(cudaSetDevice(devices[r]), cudaSuccess);
            assert_int_equal(cudaMemcpy((char *)gathered[r] + offsets[r], mine.data(),
                                        mine.size(), cudaMemcpyHostToDevice),
                             cudaSuccess);
            assert_int_equal(cudaMemset(spans[r], 0, 2 * sizeof(unsigned long long)),
                             cudaSuccess);
        }
        const bool with_options = round > 0;
        if (thg_comm_begin(c, err, sizeof err) != THG_OK)
            fail_msg("begin: %s", err);
        for (uint32_t r = 0; r < G; ++r) {
            const thg_gather part = {gathered[r], offsets.data()};
            const thg_gather_rank_options options = {1, spans[r]};
            if (thg_comm_all_gatherv_many(c, r, &part, 1, with_options ? &options : nullptr,
                                          streams[r], err, sizeof err) != THG_OK)
                fail_msg("part of rank %u: %s", r, err);
        }
        if (thg_comm_end(c, err, sizeof err) != THG_OK)
            fail_msg("end: %s", err);
        for (uint32_t r = 0; r < G; ++r) {
            assert_int_equal(cudaSetDevice(devices[r]), cudaSuccess);
            assert_int_equal(cudaStreamSynchronize(streams[r]), cudaSuccess);
            unsigned long long span[2] = {0, 0};
            assert_int_equal(cudaMemcpy(span, spans[r], sizeof span, cudaMemcpyDeviceToHost),
                             cudaSuccess);
            if (with_options && thg_comm_is_direct(c)) {
                if (span[0] == 0 || span[1] == 0 || span[1] < ~span[0])
                    fail_msg("round %d, rank %u: span [~%llu, %llu] not stamped", round, r,
                             span[0], span[1]);
            } else if (span[0] != 0 || span[1] != 0) {
                fail_msg("round %d, rank %u: a span stamped by an exchange that does not "
                         "stamp",
                         round, r);
            }
            std::vector<unsigned char> got(bytes);
            assert_int_equal(cudaMemcpy(got.data(), gathered[r], bytes, cudaMemcpyDeviceToHost),
                             cudaSuccess);
            for (uint64_t b = 0; b < bytes; ++b)
                if (got[b] != expected(owner(b), b, round))
                    fail_msg("round %d, rank %u byte %llu: %u, expected %u", round, r,
                             (unsigned long long)b, got[b], expected(owner(b), b, round));
        }
    }
    if (thg_comm_begin(c, err, sizeof err) != THG_OK)
        fail_msg("begin: %s", err);
    for (uint32_t r = 0; r < G; ++r)
        if (thg_comm_all_reduce_sum(c, r, sums[r], count, streams[r], err, sizeof err) != THG_OK)
            fail_msg("part of rank %u: %s", r, err);
    if (thg_comm_end(c, err, sizeof err) != THG_OK)
        fail_msg("end: %s", err);
    if (registered)
        deregister_all(c, handles);
    for (uint32_t r = 0; r < G; ++r) {
        assert_int_equal(cudaSetDevice(devices[r]), cudaSuccess);
        assert_int_equal(cudaStreamSynchronize(streams[r]), cudaSuccess);
        std::vector<double> sum(count);
        assert_int_equal(cudaMemcpy(sum.data(), sums[r], sizeof(double) * count,
                                    cudaMemcpyDeviceToHost),
                         cudaSuccess);
        for (size_t k = 0; k < count; ++k) {
            const double want = 1000.0 * G * (G - 1) / 2 + (double)G * k;
            if (sum[k] != want)
                fail_msg("rank %u sum %zu: %g, expected %g", r, k, sum[k], want);
        }
        if (registered)
            thg_comm_free(c, r, gathered[r]);
        else
            cudaFree(gathered[r]);
        cudaFree(sums[r]);
        cudaFree(spans[r]);
        cudaStreamDestroy(streams[r]);
    }
    /* A group missing a rank's part is an error, and leaves the
     * communicator usable. */
    if (G > 1) {
        assert_int_equal(thg_comm_begin(c, err, sizeof err), THG_OK);
        assert_int_equal(thg_comm_all_reduce_sum(c, 0, nullptr, 0, nullptr, err, sizeof err),
                         THG_OK);
        assert_int_equal(thg_comm_end(c, err, sizeof err), THG_ERR_STATE);
        assert_non_null(strstr(err, "with 1 of"));
        assert_int_equal(thg_comm_begin(c, err, sizeof err), THG_OK);
        assert_int_equal(thg_comm_end(c, err, sizeof err), THG_OK);
    }
    thg_comm_destroy(c);
}

void test_exchanges(void **)
{
    const int n = device_count();
    if (n == 0) {
        printf("no CUDA device: the exchanges are not run\n");
        skip();
    }
    exercise({0}, 0, THG_COMM_SINGLE);
    exercise({0, 0, 0, 0}, 0, THG_COMM_DEVICE_COPIES);
    exercise({0, 0, 0, 0, 0}, 0, THG_COMM_DEVICE_COPIES);
    exercise({0, 0, 0}, 0, THG_COMM_DEVICE_COPIES, true);
    exercise({0}, 1, THG_COMM_NCCL);
    exercise({0}, 1, THG_COMM_NCCL, true);
    if (n >= 2) {
        exercise({0, 1}, 0, THG_COMM_NCCL);
        exercise({0, 1}, 0, THG_COMM_NCCL, true);
        exercise({0, 1}, 0, THG_COMM_NCCL, true, 300);
    } else {
        printf("one device: NCCL across devices is not run\n");
    }
    if (n >= 4) {
        exercise({0, 1, 2, 3}, 0, THG_COMM_NCCL);
        exercise({0, 1, 2, 3}, 0, THG_COMM_NCCL, true);
        exercise({0, 1, 2, 3}, 0, THG_COMM_NCCL, true, 300);
    }
}

} // namespace

int main(void)
{
    /* TH_GPU_TEST_FILTER, as the other GPU test programs take it
     * (tools/gpu-check.sh runs each test as a process of its own); their
     * th_gpu_test_apply_filter is not linked here, where th_kernels alone
     * is, without the plugin loader gpu_test_support.c brings. */
    const char *pattern = getenv("TH_GPU_TEST_FILTER");
    if (pattern && *pattern)
        cmocka_set_test_filter(pattern);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_exchanges),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
