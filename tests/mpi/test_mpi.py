#!/usr/bin/env python3
"""Runs of several processes (mpirun), as a user launches them: the same
fits as one process, one clear error for what cannot run, and every process
stopped, nothing written, when one fails or dies. (srun itself needs a
Slurm: tools/slurm-check.sh.)

Usage: test_mpi.py TENSORHOST SOURCE_DIR FIXTURE_DIR WORK_DIR MPIRUN [MPIEXEC_MPICH]
MPIRUN is Open MPI's; MPIEXEC_MPICH, when given, runs the fits under MPICH too.
TH_DIST_DEAL_CHECK in the environment names the dist_deal_check program
(tests/mpi/dist_deal_check.c; ctest sets it): the deal of every mode's
nonzeros to the processes, checked on each tensor. Standard library only."""
import json
import os
import shutil
import signal
import subprocess
import sys
import time

TENSORHOST, SOURCE, FIXTURES, WORK, MPIRUN = (os.path.abspath(a) if i < 4 else a
                                             for i, a in enumerate(sys.argv[1:6]))
MPICH = sys.argv[6] if len(sys.argv) > 6 and sys.argv[6] else None

ENV = dict(os.environ)
# Open MPI refuses root without these (CI containers run as root), and a
# machine of two cores takes three processes only when oversubscribed.
ENV.update({
    "OMPI_ALLOW_RUN_AS_ROOT": "1",
    "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
    "OMPI_MCA_rmaps_base_oversubscribe": "1",
    "TENSORHOST_PLUGIN_PATH": FIXTURES,
})
# Under the sanitizer build, Open MPI's runtime leaves blocks allocated at
# exit from code LeakSanitizer cannot name (so no suppression matches):
# its processes run with AddressSanitizer's other checks but no leak check.
# MPICH's runs keep it.
OPEN_MPI_ENV = dict(ENV, ASAN_OPTIONS=":".join(
    filter(None, [os.environ.get("ASAN_OPTIONS", ""), "detect_leaks=0"])))
failures = []


def check(condition, what):
    if not condition:
        failures.append(what)
        print("FAIL:", what, flush=True)


def run(args, processes=None, launcher=None, timeout=240, env=None):
    command = [TENSORHOST] + args
    if processes:
        command = [launcher or MPIRUN, "-np", str(processes)] + command
    if env is None:
        env = OPEN_MPI_ENV if processes and launcher in (None, MPIRUN) else ENV
    return subprocess.run(command, cwd=WORK, env=env, capture_output=True, text=True,
                          timeout=timeout)


def write_config(name, tensor, rank=4, iters=25, tolerance=0.0, plugin="cpu-reference",
                 extra=""):
    path = os.path.join(WORK, name + ".toml")
    with open(path, "w") as f:
        f.write(f"""[tensor]
path = "{tensor}"
[cpd]
rank = {rank}
max_iters = {iters}
tolerance = {tolerance}
seed = 11
{extra}
[backend]
plugin = "{plugin}"
[output]
dir = "out-{name}"
""")
    return path


def report(out):
    with open(os.path.join(WORK, out, "report.json")) as f:
        return json.load(f)


def error_lines(stderr):
    return [line for line in stderr.splitlines() if line.startswith("tensorhost: error:")]


def fit_of(config, out, processes=None, launcher=None, sets=(), env=None):
    args = ["--config", config, "--set", f"output.dir={out}"]
    for s in sets:
        args += ["--set", s]
    r = run(args, processes, launcher, env=env)
    check(r.returncode == 0, f"{out}: exit {r.returncode}: {r.stderr[-2000:]}")
    if r.returncode != 0:
        return None, None
    rep = report(out)
    return rep["cpd"]["final_fit"], rep


os.makedirs(WORK, exist_ok=True)
tensors = {}
for name, source in (("uber", "data/uber-2014-sample.tns.gz"),
                     ("aminoacid", "data/aminoacid.sptensor.txt")):
    target = os.path.join(WORK, name + ".tnsb")
    r = run(["convert", os.path.join(SOURCE, source), target])
    check(r.returncode == 0, f"convert {source}: {r.stderr}")
    tensors[name] = target

# 0. Every mode's nonzeros dealt to the processes by the devices' plan
# (libtensorhost/dist/dist_deal.h): one process, two, three and four (each
# share's first and last rows split with its neighbours), and MPICH.
DEAL_CHECK = os.environ.get("TH_DIST_DEAL_CHECK")
check(DEAL_CHECK is not None and os.access(DEAL_CHECK, os.X_OK),
      "TH_DIST_DEAL_CHECK does not name the dist_deal_check program")
if DEAL_CHECK:
    for name, path in tensors.items():
        # (processes, launcher, bytes a round: the exchange cut into many,
        # or into rounds larger than most pairs' blocks, whose packed
        # buffers are then the blocks' size; threads a process: the
        # packing and unpacking split over them)
        runs = [(None, None, None, None), (2, None, None, None), (3, None, None, None),
                (4, None, None, None), (3, None, "1000", None), (4, None, "300000", None),
                (2, None, None, "3"), (3, None, None, "2")]
        if MPICH:
            runs.append((3, MPICH, None, None))
        for processes, launcher, piece, threads in runs:
            command = [DEAL_CHECK, path]
            if processes:
                command = [launcher or MPIRUN, "-np", str(processes)] + command
            env = OPEN_MPI_ENV if processes and launcher is None else ENV
            if piece:
                env = dict(env, TH_DIST_TEST_EXCHANGE_PIECE=piece)
                command[3:3] = ["-x", "TH_DIST_TEST_EXCHANGE_PIECE"]
            if threads:
                env = dict(env, OMP_NUM_THREADS=threads)
                command[3:3] = ["-x", "OMP_NUM_THREADS"]
            r = subprocess.run(command, cwd=WORK, env=env, capture_output=True, text=True,
                               timeout=240)
            check(r.returncode == 0 and
                  f"over {processes or 1} processes" in r.stdout,
                  f"dist_deal_check {name} on {processes or 1} processes "
                  f"({launcher or 'Open MPI'}, rounds of {piece or 'any'} bytes, "
                  f"{threads or 'default'} threads): "
                  f"{(r.stdout + r.stderr)[-1500:]}")

# 1. The same fit from one process and from two and three, on least
# squares, with nonnegative factors, and stopping by tolerance.
cases = [
    ("uber", "uber", ""),
    ("aminoacid", "aminoacid", ""),
    ("uber-nonneg", "uber", 'constraints = "nonneg"'),
    ("aminoacid-tol", "aminoacid", ""),
]
for case, tensor, extra in cases:
    tolerance = 1e-7 if case.endswith("-tol") else 0.0
    config = write_config(case, tensors[tensor], iters=200 if tolerance else 25,
                          tolerance=tolerance, extra=extra)
    one, one_report = fit_of(config, f"out-{case}-1")
    one_host, _ = fit_of(config, f"out-{case}-1h", sets=["cpd.update=host"])
    if one is None or one_host is None:
        continue
    check(abs(one - one_host) < 1e-10, f"{case}: one process, auto {one!r} vs host {one_host!r}")
    # The processes' owned rows gathered (forced here; the rule is checked
    # below).
    owned_env = dict(OPEN_MPI_ENV, TH_HOST_OWNED_ROWS="1")
    for processes in (2, 3):
        fit, rep = fit_of(config, f"out-{case}-{processes}", processes, env=owned_env)
        if fit is None:
            continue
        check(abs(fit - one) < 1e-10,
              f"{case}: {processes} processes fit {fit!r}, one process {one!r}")
        check(len(rep["cpd"]["iterations"]) == len(one_report["cpd"]["iterations"]),
              f"{case}: {processes} processes ran {len(rep['cpd']['iterations'])} iterations, "
              f"one process {len(one_report['cpd']['iterations'])}")
        check(rep["cpd"]["update_path"] == "host", f"{case}: update path {rep['cpd']['update_path']}")
        procs = rep.get("processes", {})
        ranks = procs.get("ranks", [])
        check(procs.get("count") == processes and len(ranks) == processes,
              f"{case}: report.json processes {procs}")
        check(sum(r["nnz"] for r in ranks) == one_report["tensor"]["nnz"],
              f"{case}: the shares' nonzeros {[r['nnz'] for r in ranks]} do not add up to "
              f"{one_report['tensor']['nnz']}")
        check([r["rank"] for r in ranks] == list(range(processes)), f"{case}: ranks {ranks}")
        # cpu-reference builds each mode from its own nonzeros (ABI 1.10),
        # so each mode's exchange gathers the processes' owned rows: a
        # process sends about its 1/P of each result (plus the deal at
        # load and the scalars), where the sums sent every result whole.
        check(procs.get("exchange") == "owned_rows", f"{case}: exchange {procs.get('exchange')}")
        dims = one_report["tensor"]["dims"]
        whole = 8 * 4 * sum(dims) * len(rep["cpd"]["iterations"])  # rank 4
        deal = one_report["tensor"]["nnz"] * (4 * len(dims) + 8) * (len(dims) - 1)
        sent = sum(r["collective_bytes"] for r in ranks)
        check(sent < 0.75 * processes * whole + deal + 100000,
              f"{case}: the processes sent {sent} bytes together; summing whole results "
              f"would send {processes * whole}, the deal at most {deal}")
        # Without GPUs (the driver lists none) no process is given any.
        if not os.path.isdir("/proc/driver/nvidia/gpus"):
            check(all(r["gpus"] == "" for r in ranks), f"{case}: GPUs given: {ranks}")
        check(rep["tensor"]["nnz"] == one_report["tensor"]["nnz"] and
              rep["tensor"]["empty_slices"] == one_report["tensor"]["empty_slices"] and
              abs(rep["tensor"]["norm"] / one_report["tensor"]["norm"] - 1) < 1e-10,
              f"{case}: the whole tensor's facts differ: {rep['tensor']} vs {one_report['tensor']}")
        for k, (a, b) in enumerate(zip(rep["cpd"]["lambda"], one_report["cpd"]["lambda"])):
            check(abs(a - b) <= 1e-8 * abs(b), f"{case}: lambda[{k}] {a!r} vs {b!r}")
    # Without TH_HOST_OWNED_ROWS the host deals when the iterations would
    # save the deal's bytes (README, "Several processes"): rank 4, max_iters
    # of the config.
    fit, rep = fit_of(config, f"out-{case}-auto", 2)
    if fit is not None:
        dims, nnz = one_report["tensor"]["dims"], one_report["tensor"]["nnz"]
        saved = (200 if tolerance else 25) * 8 * 4 * sum(dims)
        dealt = nnz * (4 * len(dims) + 8) * (len(dims) - 1) / 2
        want = "owned_rows" if saved >= dealt else "host_sums"
        check(rep["processes"]["exchange"] == want,
              f"{case}: exchange {rep['processes']['exchange']}, the rule says {want} "
              f"({saved} bytes saved against {dealt} dealt)")
        check(abs(fit - one) < 1e-10, f"{case}: 2 processes' fit {fit!r} (auto) vs {one!r}")
    if case == "uber":
        # TH_HOST_OWNED_ROWS=0: the sums of whole results, the same fit.
        out = f"out-{case}-sums"
        r = run(["--config", config, "--set", f"output.dir={out}"], 2,
                env=dict(OPEN_MPI_ENV, TH_HOST_OWNED_ROWS="0"))
        check(r.returncode == 0, f"{out}: exit {r.returncode}: {r.stderr[-2000:]}")
        if r.returncode == 0:
            rep = report(out)
            check(rep["processes"]["exchange"] == "host_sums",
                  f"{case}: TH_HOST_OWNED_ROWS=0 gave exchange {rep['processes']['exchange']}")
            check(abs(rep["cpd"]["final_fit"] - one) < 1e-10,
                  f"{case}: the sums' fit {rep['cpd']['final_fit']!r}, one process {one!r}")
    if MPICH and case == "uber":
        fit, _ = fit_of(config, f"out-{case}-mpich", 2, MPICH)
        if fit is not None:
            check(abs(fit - one) < 1e-10, f"{case}: MPICH's 2 processes fit {fit!r} vs {one!r}")

# Processes on one host share its cores, unless OMP_NUM_THREADS says how
# many threads each takes.
config = write_config("threads", tensors["aminoacid"], iters=3)
r = run(["--config", config], 2)
check(r.returncode == 0 and "OpenMP thread" in r.stdout + r.stderr,
      f"two processes did not say their share of the cores: {(r.stdout + r.stderr)[-1500:]}")
r = run(["--config", config], 2, env=dict(OPEN_MPI_ENV, OMP_NUM_THREADS="1"))
check(r.returncode == 0 and "OpenMP thread" not in r.stdout + r.stderr,
      "with OMP_NUM_THREADS set the processes still took a share of the cores")

config = write_config("errors", tensors["uber"])
# One nonzero: a share for one process only.
tiny = os.path.join(WORK, "tiny.tnsb")
with open(os.path.join(WORK, "tiny.tns"), "w") as f:
    f.write("1 1 1 2.5\n")
r = run(["convert", os.path.join(WORK, "tiny.tns"), tiny])
check(r.returncode == 0, f"convert tiny.tns: {r.stderr}")

# 2. What a run of several processes cannot do: one error, said once.
for what, sets, expected in (
        ("a text tensor", [f"tensor.path={os.path.join(SOURCE, 'data/aminoacid.sptensor.txt')}"],
         "tensorhost convert"),
        ("an unknown key", ["cpd.rnk=3"], "unknown key 'cpd.rnk'"),
        ("the sweep path", ["cpd.update=sweep"], "use \"auto\" or \"host\""),
        ("the Poisson model", ["cpd.model=poisson"], "runs in one process"),
        ("a missing tensor", ["tensor.path=missing.tnsb"], "missing.tnsb"),
        ("fewer nonzeros than processes", [f"tensor.path={tiny}"], "run at most 1")):
    args = ["--config", config, "--set", "output.dir=out-refused"]
    for s in sets:
        args += ["--set", s]
    r = run(args, 2)
    lines = error_lines(r.stderr)
    check(r.returncode != 0 and len(lines) == 1 and expected in lines[0],
          f"{what}: exit {r.returncode}, error lines {lines} (expected one with {expected!r})")
check(not os.path.exists(os.path.join(WORK, "out-refused")), "a refused run left its folder")

# srun's tasks with no process-management interface (srun --mpi=none):
# what Slurm leaves in their environment, without srun. Each task stops
# before MPI, task 0 saying why and the others nothing.
slurm_env = {k: v for k, v in ENV.items()
             if not k.startswith(("OMPI_", "PMI_", "PMIX_", "SLURM_"))}
slurm_env.update({"SLURM_STEP_NUM_TASKS": "2", "SLURM_JOB_ID": "1"})
for task in (0, 1):
    r = run(["--config", config, "--set", "output.dir=out-srun"],
            env=dict(slurm_env, SLURM_PROCID=str(task)))
    lines = error_lines(r.stderr)
    expected = ["srun --mpi=pmix"] if task == 0 else []
    check(r.returncode == 1 and len(lines) == len(expected) and
          all(e in line for e, line in zip(expected, lines)),
          f"srun task {task} without PMI: exit {r.returncode}, error lines {lines}")
check(not os.path.exists(os.path.join(WORK, "out-srun")), "an srun task without PMI wrote")

# 3. One process fails alone (a simulated device failure): every process
# ends, the one error names the rank, nothing is written.
failing = write_config("failing", tensors["uber"], plugin="fixture_good")
env = dict(OPEN_MPI_ENV, TH_FIXTURE_FAIL_RANK="1")
r = run(["--config", failing], 2, env=env)
lines = error_lines(r.stderr)
check(r.returncode != 0 and len(lines) == 1 and "rank 1 of 2 processes" in lines[0] and
      "simulated device failure" in lines[0],
      f"one failing rank: exit {r.returncode}, error lines {lines}")
check(not os.path.exists(os.path.join(WORK, "out-failing")), "a failed run wrote its outputs")


# 3b. The host's process services (ABI 1.8), as a backend meets the other
# processes in create(): rank 0's bytes reach every process and the maxima
# are the ranks' (the fixture fails create() on any process where they are
# not); the host still sums a backend's MTTKRPs that does not (process_sums
# 0), so the fit is one process's. A process failing create() after the
# same collectives ends every process with one error, no hang.
services = write_config("services", tensors["uber"], plugin="fixture_processes", iters=5)
one_services, _ = fit_of(services, "out-services-1")
for processes in (2, 3):
    fit, rep = fit_of(services, f"out-services-{processes}", processes)
    if fit is None:
        continue
    details = rep["backend"].get("details", "")
    check(f"processes={processes} rank=0 broadcast=ok max={processes - 1}" in details,
          f"process services over {processes} processes: details {details!r}")
    check(one_services is not None and abs(fit - one_services) < 1e-10,
          f"fixture_processes: {processes} processes fit {fit!r}, one {one_services!r}")
    check(rep["cpd"]["update_path"] == "host",
          f"fixture_processes: update path {rep['cpd']['update_path']!r}, expected host")
# A backend that sums its MTTKRPs over the processes itself (here by
# gathering the whole tensor in load_tensor()): the host must sum nothing,
# or the results would be 2 or 3 times the tensor's and the fit another.
for processes in (2, 3):
    env = dict(OPEN_MPI_ENV, TH_FIXTURE_PROCESS_SUMS="1")
    r = run(["--config", services, "--set", f"output.dir=out-sums-{processes}"], processes,
            env=env)
    check(r.returncode == 0, f"process_sums over {processes}: exit {r.returncode}: "
          f"{r.stderr[-2000:]}")
    if r.returncode == 0:
        rep = report(f"out-sums-{processes}")
        check("process_sums" in rep["backend"].get("details", ""),
              f"process_sums over {processes}: details {rep['backend'].get('details')!r}")
        fit = rep["cpd"]["final_fit"]
        check(one_services is not None and abs(fit - one_services) < 1e-10,
              f"process_sums over {processes}: fit {fit!r}, one process {one_services!r}")
# A backend that sums itself and takes each mode's own nonzeros (as the GPU
# plugins do): where the host deals, it gets them, gathers nothing itself,
# and names the exchange backend_owned_rows; where it does not, the plain
# share and backend_sums.
for processes, owned in ((2, "1"), (3, "1"), (2, "0")):
    env = dict(OPEN_MPI_ENV, TH_FIXTURE_PROCESS_SUMS="dealt", TH_HOST_OWNED_ROWS=owned)
    out = f"out-dealt-sums-{processes}-{owned}"
    r = run(["--config", services, "--set", f"output.dir={out}"], processes, env=env)
    check(r.returncode == 0, f"dealt process_sums over {processes}: exit {r.returncode}: "
          f"{r.stderr[-2000:]}")
    if r.returncode == 0:
        rep = report(out)
        details = rep["backend"].get("details", "")
        check(("dealt" in details) == (owned == "1"),
              f"dealt process_sums over {processes}, TH_HOST_OWNED_ROWS={owned}: "
              f"details {details!r}")
        want = "backend_owned_rows" if owned == "1" else "backend_sums"
        check(rep["processes"]["exchange"] == want,
              f"dealt process_sums over {processes}: exchange "
              f"{rep['processes']['exchange']!r}, expected {want}")
        fit = rep["cpd"]["final_fit"]
        check(one_services is not None and abs(fit - one_services) < 1e-10,
              f"dealt process_sums over {processes}: fit {fit!r}, one process {one_services!r}")
# Left to the rule, such a backend keeps its sums where every process is
# on one host (its devices' links outpace the host's deal), even where the
# host's bytes would call for the deal (as they do for cpu-reference on
# this tensor and iterations, case aminoacid-tol above).
long_services = write_config("services-long", tensors["aminoacid"], plugin="fixture_processes",
                             iters=200)
r = run(["--config", long_services, "--set", "output.dir=out-dealt-rule"], 2,
        env=dict(OPEN_MPI_ENV, TH_FIXTURE_PROCESS_SUMS="dealt"))
check(r.returncode == 0, f"dealt process_sums by the rule: exit {r.returncode}: "
      f"{r.stderr[-2000:]}")
if r.returncode == 0:
    rep = report("out-dealt-rule")
    dims, nnz = rep["tensor"]["dims"], rep["tensor"]["nnz"]
    check(200 * 8 * 4 * sum(dims) >= nnz * (4 * len(dims) + 8) * (len(dims) - 1) / 2,
          "services-long: the host's bytes would not deal, so the one-host rule goes untested")
    check(rep["processes"]["exchange"] == "backend_sums",
          f"dealt process_sums by the rule on one host: exchange {rep['processes']['exchange']}")
env = dict(OPEN_MPI_ENV, TH_FIXTURE_CREATE_FAIL_RANK="1")
r = run(["--config", services, "--set", "output.dir=out-services-failing"], 2, env=env,
        timeout=120)
lines = error_lines(r.stderr)
check(r.returncode != 0 and len(lines) == 1 and "simulated failure in create()" in lines[0],
      f"create() failing on rank 1: exit {r.returncode}, error lines {lines}")
check(not os.path.exists(os.path.join(WORK, "out-services-failing")),
      "a run whose create() failed wrote its outputs")


def ranks_of(marker):
    """The pids of the processes whose environment carries `marker`, by rank."""
    found = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                environ = f.read().split(b"\0")
        except OSError:
            continue
        if marker.encode() not in environ:
            continue
        for entry in environ:
            if entry.startswith(b"OMPI_COMM_WORLD_RANK="):
                found[int(entry.split(b"=")[1])] = int(pid)
    return found


def start_long_run(name, marker, env_extra=None):
    long_config = write_config(name, tensors["uber"], iters=10000000)
    env = dict(OPEN_MPI_ENV, TH_TEST_MARKER=marker.split("=")[1], **(env_extra or {}))
    process = subprocess.Popen([MPIRUN, "-np", "2", TENSORHOST, "--config", long_config],
                               cwd=WORK, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 60
    while time.time() < deadline and len(ranks_of(marker)) < 2:
        time.sleep(0.1)
    time.sleep(1.5)  # into the iterations
    return process


# 4. A process killed (the OOM killer, a node lost): the job ends, with no
# outputs.
marker = f"TH_TEST_MARKER=killed-{os.getpid()}"
process = start_long_run("killed", marker)
pids = ranks_of(marker)
check(1 in pids, f"no rank 1 found to kill: {pids}")
if 1 in pids:
    os.kill(pids[1], signal.SIGKILL)
try:
    _, stderr = process.communicate(timeout=120)
    check(process.returncode != 0, "a job with a killed process exited 0")
except subprocess.TimeoutExpired:
    process.kill()
    check(False, "a job with a killed process did not end")
check(not os.path.exists(os.path.join(WORK, "out-killed")), "a killed job wrote its outputs")

# 5. SIGTERM to mpirun (a scheduler's stop): every process stops after the
# same iteration, and rank 0 writes that model, as one process does.
marker = f"TH_TEST_MARKER=stopped-{os.getpid()}"
# After forwarding the signal, Open MPI 4's mpirun kills the processes still
# running a second later (odls_base_sigkill_timeout, default 1): a stop that
# finishes its iteration and writes the model on a busy machine can take
# longer, so the job is given time as README ("Several processes") advises
# (which mpirun also waits, twice, after processes that exit on the signal).
process = start_long_run("stopped", marker, {"OMPI_MCA_odls_base_sigkill_timeout": "5"})
process.send_signal(signal.SIGTERM)
try:
    _, stderr = process.communicate(timeout=120)
except subprocess.TimeoutExpired:
    process.kill()
    check(False, "a stopped job did not end")
else:
    path = os.path.join(WORK, "out-stopped", "report.json")
    check(os.path.exists(path), f"a stopped job wrote no report: {stderr[-2000:]}")
    if os.path.exists(path):
        rep = report("out-stopped")
        check(rep["status"] == "interrupted" and rep["processes"]["count"] == 2,
              f"a stopped job's report: status {rep['status']}")
    acknowledgements = [l for l in stderr.splitlines() if "SIGTERM received" in l]
    check(len(acknowledgements) == 1, f"the stop was acknowledged {len(acknowledgements)} times")

if failures:
    print(f"{len(failures)} checks failed")
    sys.exit(1)
print("all checks passed")
