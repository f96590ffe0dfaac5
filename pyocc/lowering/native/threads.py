"""A model's worker threads, written as LLVM IR: the native parallel-for.

A model compiled with `threads > 1` (pyocc.lowering.convert_dnn_to_llvm's
`to_llvmlite(threads=N)`) gets, per function NAME:

    int32_t NAME_set_threads(int32_t n);  // exported: threads from now on
                                          // (0, or 1 for n < 1)
    void    NAME_threads_start(void);     // internal: called first by NAME_init
    void    NAME_threads_stop(void);      // internal: called first by NAME_destroy
    void    NAME_parallel_for(void (*body)(i8 **, i64, i64), i8 **buffers, i64 count,
                              i64 chunks_per_thread);
    int64_t NAME_threads_team(void);      // internal: the threads running now (1 when
                                          // the pool is stopped)

`NAME_threads_start` starts `threads - 1` pthreads that wait for jobs (the
calling thread is the last worker) and, when the model calls
the BLAS, sets OpenBLAS to one thread (`scipy_openblas_set_num_threads`):
the workers split each large sgemm between them, one part per thread
(pyocc.lowering.native.dense_ir), each calling the BLAS on its own thread.
OpenBLAS's own threads spin while they wait for work, which made ResNet-50
5 to 23 times slower on a loaded machine (docs/performance.md).
`NAME_parallel_for` cuts [0, count) into chunks (`chunks_per_thread` per
thread, at least one iteration each: pyocc.lowering.native.loops'
CHUNKS_PER_THREAD), publishes the job, wakes the
workers that sleep and claims chunks itself; every thread claims the next
chunk with an atomic compare-and-swap on a word tagged with the job's
number (so a worker that comes after its job is over claims nothing) until
none is left, and the caller waits for the last chunk. A
worker that has lost its core on a loaded machine thus holds up only the
chunk it has claimed, not a fixed share of the range.

Waiting: a worker between jobs and the caller waiting for the last chunk
spin first, polling the word they wait on with x86's `pause` for at most
SPIN_TICKS of the cycle counter (about 50 us), then yield their core
(sched_yield) YIELDS times, and only then sleep on a condition variable:
waking a sleeping thread cost 10 to 50 us per parallel-for on this
project's machines (bench/parallel_for.py), and models run hundreds to
thousands of parallel-fors per inference, mostly back to back. The wait is
bounded, so an idle model burns no CPU and a loaded machine gets the core
back. The job's fields are published as a sequence lock's writer does (the
sequence word is odd while they change, 2 * job after), so a spinning
worker reads them without the mutex; the caller takes the mutex to
broadcast only when a worker has counted itself a sleeper, and the thread
that finishes the last chunk only when the caller sleeps (both counters
and the words they guard are sequentially consistent, so no wake-up is
lost). No allocation, no
Python, and each element is computed by exactly the code that computes it
serially, so results do not depend on the thread count or on who ran which
chunk. `NAME_threads_stop` wakes the workers (spinning or asleep) to exit and joins them. A
`NAME_set_threads` between NAME_init and NAME_destroy restarts the pool
with the new count, also from one thread to more; a pthread that cannot be
created leaves the pool with the threads it has.

The pthread objects are opaque to LLVM: each lives in a 128-byte, 64-byte
aligned slot, more than any libc's `pthread_mutex_t`/`pthread_cond_t`
(glibc 40/48, musl 40/48, macOS 64/48 bytes), set up by `pthread_*_init`.
"""

from __future__ import annotations

import platform
from collections.abc import Callable

import llvmlite.ir as ir

from pyocc.lowering.limits import MAX_THREADS
from pyocc.lowering.llvm_math import declared_function
from pyocc.lowering.native.loops import BODY_TYPE, I32, I64, PARALLEL_FOR_TYPE, PTR

VOID = ir.VoidType()
#: bytes reserved for one pthread mutex or condition variable
SYNC_SLOT = 128
#: OpenBLAS's thread count setter in scipy-openblas32
BLAS_SET_THREADS = "scipy_openblas_set_num_threads"
#: the pthread functions the pool calls, with their LLVM signatures
PTHREAD_FUNCTIONS: dict[str, ir.FunctionType] = {
    "pthread_create": ir.FunctionType(I32, [PTR, PTR, PTR, PTR]),
    "pthread_join": ir.FunctionType(I32, [I64, PTR]),
    "pthread_mutex_init": ir.FunctionType(I32, [PTR, PTR]),
    "pthread_mutex_destroy": ir.FunctionType(I32, [PTR]),
    "pthread_mutex_lock": ir.FunctionType(I32, [PTR]),
    "pthread_mutex_unlock": ir.FunctionType(I32, [PTR]),
    "pthread_cond_init": ir.FunctionType(I32, [PTR, PTR]),
    "pthread_cond_destroy": ir.FunctionType(I32, [PTR]),
    "pthread_cond_wait": ir.FunctionType(I32, [PTR, PTR]),
    "pthread_cond_broadcast": ir.FunctionType(I32, [PTR]),
    "pthread_cond_signal": ir.FunctionType(I32, [PTR]),
    "sched_yield": ir.FunctionType(I32, []),
}
#: how long a waiting thread spins before it yields, in cycle-counter ticks
#: (x86's time-stamp counter: 100,000 ticks are 50 us at 2 GHz); about what
#: one parallel-for's wake-up through the condition variable cost (bench/parallel_for.py)
SPIN_TICKS = 100_000
#: the most polls of one spin (the only bound where there is no cycle counter)
SPIN_LIMIT = 1 << 16
#: how many times a waiting thread yields its core (sched_yield) after spinning, before it sleeps
YIELDS = 4
#: machines whose spin loops use x86's `pause` and time-stamp counter
X86_MACHINES = frozenset({"x86_64", "amd64", "i386", "i686"})


#: `i64 NAME_threads_team()`: how many threads run NAME's parallel-fors now (the caller and its workers)
TEAM_TYPE = ir.FunctionType(I64, [])


def parallel_for_symbol(name: str) -> str:
    """The parallel-for of model function `name`."""
    return f"{name}_parallel_for"


def team_symbol(name: str) -> str:
    """The function that says how many threads model function `name` runs on now."""
    return f"{name}_threads_team"


def _call_body(b: ir.IRBuilder, body: ir.Value, args: list[ir.Value]) -> None:
    """Call the loop body behind pointer `body`. llvmlite's call() reads the
    signature from a typed pointer, and bitcast() drops a ptr -> ptr cast:
    insert the cast by hand (as convert_dnn_to_llvm's indirect calls do)."""
    typed = ir.instructions.CastInstr(b.block, "bitcast", body, ir.PointerType(BODY_TYPE))
    b._insert(typed)
    b.call(typed, args)


def _store_atomic(b: ir.IRBuilder, value: ir.Value, ptr: ir.Value, ordering: str, align: int) -> None:
    """An atomic store; llvmlite's store_atomic() wants a typed pointer,
    which a global holding a `ptr` is not."""
    b._insert(ir.instructions.StoreAtomicInstr(b.block, value, ptr, ordering, align))


def _notify(b: ir.IRBuilder, pthread: dict[str, ir.Function], mutex: ir.Value, how: str, condition: ir.Value) -> None:
    """Under `mutex`, wake the waiters of `condition` (`how`: "signal" one, "broadcast" all)."""
    b.call(pthread["pthread_mutex_lock"], [mutex])
    b.call(pthread[f"pthread_cond_{how}"], [condition])
    b.call(pthread["pthread_mutex_unlock"], [mutex])


def _global(module: ir.Module, name: str, typ: ir.Type, initial: ir.Constant, align: int = 8) -> ir.GlobalVariable:
    variable = ir.GlobalVariable(module, typ, name)
    variable.linkage = "internal"
    variable.initializer = initial
    variable.align = align
    return variable


def _poll(b: ir.IRBuilder, ready: Callable[[ir.IRBuilder], ir.Value], on_ready: ir.Block, give_up: ir.Block,
          step: Callable[[ir.IRBuilder], None], limit: int, ticks: int, clock: ir.Function | None) -> None:
    """Emit a bounded wait at `b`: test `ready(b)` (which must emit no
    blocks), branch to `on_ready` once it holds, else run `step(b)` and test
    again, at most `limit` times and, with `ticks` and a `clock`, for at most
    that many of the clock's ticks; then branch to `give_up` (at once, with
    `limit` 0, after one test)."""
    if limit <= 0:
        b.cbranch(ready(b), on_ready, give_up)
        return
    function = b.function
    before = b.block
    started = b.call(clock, []) if ticks and clock is not None else None
    poll = function.append_basic_block("poll")
    again = function.append_basic_block("poll.again")
    b.branch(poll)
    b.position_at_end(poll)
    polls = b.phi(I64)
    polls.add_incoming(I64(0), before)
    b.cbranch(ready(b), on_ready, again)
    b.position_at_end(again)
    step(b)
    following = b.add(polls, I64(1))
    polls.add_incoming(following, b.block)
    more = b.icmp_unsigned("<", following, I64(limit))
    if started is not None:
        more = b.and_(more, b.icmp_unsigned("<", b.sub(b.call(clock, []), started), I64(ticks)))
    b.cbranch(more, poll, give_up)


def define_thread_pool(module: ir.Module, name: str, threads: int, uses_blas: bool) -> None:
    """Define NAME's pool functions (see the module docstring) in `module`,
    starting with `threads` threads, and call start/stop first thing in
    NAME_init/NAME_destroy (already in the module)."""
    if not 1 <= threads <= MAX_THREADS:
        raise ValueError(f"threads must be in 1..{MAX_THREADS}, got {threads}")
    pthread = {n: declared_function(module, n, t) for n, t in PTHREAD_FUNCTIONS.items()}
    if platform.machine().lower() in X86_MACHINES:  # spin politely, bounded by the time-stamp counter
        spin_hint: ir.Function | None = declared_function(module, "llvm.x86.sse2.pause", ir.FunctionType(VOID, []))
        clock: ir.Function | None = declared_function(module, "llvm.readcyclecounter", ir.FunctionType(I64, []))
    else:  # elsewhere the counter may trap in user space: polls bounded by SPIN_LIMIT alone
        spin_hint = clock = None
    zero32, zero64, null = I32(0), I64(0), ir.Constant(PTR, None)
    requested = _global(module, f"{name}_threads", I32, I32(threads))
    active = _global(module, f"{name}_threads_active", I32, I32(1))  # 1: no workers running
    live = _global(module, f"{name}_threads_live", I32, zero32)  # 1 from NAME_init to NAME_destroy
    workers_type = ir.ArrayType(I64, MAX_THREADS)
    workers = _global(module, f"{name}_workers", workers_type, ir.Constant(workers_type, None))
    sync_type = ir.ArrayType(ir.IntType(8), SYNC_SLOT)
    mutex = _global(module, f"{name}_mutex", sync_type, ir.Constant(sync_type, None), 64)
    work_ready = _global(module, f"{name}_work_ready", sync_type, ir.Constant(sync_type, None), 64)
    work_done = _global(module, f"{name}_work_done", sync_type, ir.Constant(sync_type, None), 64)
    job_body = _global(module, f"{name}_job_body", PTR, null)
    job_context = _global(module, f"{name}_job_context", PTR, null)
    job_count = _global(module, f"{name}_job_count", I64, zero64)
    job_chunk = _global(module, f"{name}_job_chunk", I64, zero64)
    job_chunks = _global(module, f"{name}_job_chunks", I64, zero64)
    # the job's sequence word: 2 * job when published, odd while its fields are written
    sequence = _global(module, f"{name}_sequence", I64, zero64, 64)
    sleepers = _global(module, f"{name}_sleepers", I32, zero32)  # workers asleep on work_ready
    caller_waiting = _global(module, f"{name}_caller_waiting", I32, zero32)  # the caller asleep on work_done
    # the next chunk to claim, tagged with its job: (job << 32) | index
    claim = _global(module, f"{name}_claim", I64, zero64, 64)
    finished = _global(module, f"{name}_finished", I64, zero64, 64)  # chunks of the job done
    stopping = _global(module, f"{name}_stopping", I32, zero32)

    # -- run_chunks: claim chunks of job `tag` until none is left ------------------
    run_chunks = ir.Function(module, ir.FunctionType(VOID, [I64, PTR, PTR, I64, I64, I64]), f"{name}_run_chunks")
    run_chunks.linkage = "internal"
    tag, body, context, count, chunk, chunks = run_chunks.args
    entry = run_chunks.append_basic_block("entry")
    again = run_chunks.append_basic_block("again")
    check = run_chunks.append_basic_block("check")
    take = run_chunks.append_basic_block("take")
    run = run_chunks.append_basic_block("run")
    last = run_chunks.append_basic_block("last")
    signal = run_chunks.append_basic_block("signal")
    out = run_chunks.append_basic_block("out")
    b = ir.IRBuilder(entry)
    b.branch(again)
    b.position_at_end(again)
    seen = b.load_atomic(claim, "acquire", 8, typ=I64)
    index = b.and_(seen, I64(0xFFFFFFFF))
    mine = b.icmp_unsigned("==", b.lshr(seen, I64(32)), b.and_(tag, I64(0xFFFFFFFF)))
    b.cbranch(b.and_(mine, b.icmp_unsigned("<", index, chunks)), take, out)
    b.position_at_end(take)
    swap = b.cmpxchg(claim, seen, b.add(seen, I64(1)), "acq_rel", "acquire")
    b.cbranch(b.extract_value(swap, 1), run, again)
    b.position_at_end(run)
    begin = b.mul(index, chunk)
    stop_at = b.add(begin, chunk)
    end = b.select(b.icmp_unsigned("<", stop_at, count), stop_at, count)
    _call_body(b, body, [context, begin, end])
    done_now = b.add(b.atomic_rmw("add", finished, I64(1), "seq_cst"), I64(1))
    b.cbranch(b.icmp_unsigned("==", done_now, chunks), last, check)
    b.position_at_end(last)  # the job's last chunk: wake its caller if it has gone to sleep
    asleep = b.icmp_unsigned("!=", b.load_atomic(caller_waiting, "seq_cst", 4, typ=I32), zero32)
    b.cbranch(asleep, signal, check)
    b.position_at_end(signal)
    _notify(b, pthread, mutex, "signal", work_done)
    b.branch(check)
    b.position_at_end(check)
    b.branch(again)
    b.position_at_end(out)
    b.ret_void()

    def pause(b: ir.IRBuilder) -> None:
        if spin_hint is not None:
            b.call(spin_hint, [])

    def give_way(b: ir.IRBuilder) -> None:
        b.call(pthread["sched_yield"], [])

    # -- the worker: wait for a new job (spin, yield, sleep), claim its chunks --------
    worker = ir.Function(module, ir.FunctionType(PTR, [PTR]), f"{name}_worker")
    worker.linkage = "internal"
    entry = worker.append_basic_block("entry")
    spin = worker.append_basic_block("spin")
    yielding = worker.append_basic_block("yielding")
    sleep = worker.append_basic_block("sleep")
    sleep_check = worker.append_basic_block("sleep_check")
    wait = worker.append_basic_block("wait")
    awake = worker.append_basic_block("awake")
    take = worker.append_basic_block("take")
    read = worker.append_basic_block("read")
    leave = worker.append_basic_block("leave")
    work = worker.append_basic_block("work")
    b = ir.IRBuilder(entry)
    seen_slot = b.alloca(I64)
    b.store(zero64, seen_slot)
    b.branch(spin)

    def news(b: ir.IRBuilder, ordering: str = "acquire") -> ir.Value:
        """A job this worker has not seen is published, or the pool stops."""
        word = b.load_atomic(sequence, ordering, 8, typ=I64)
        whole = b.icmp_unsigned("==", b.and_(word, I64(1)), zero64)
        fresh = b.and_(whole, b.icmp_unsigned("!=", b.lshr(word, I64(1)), b.load(seen_slot, typ=I64)))
        return b.or_(fresh, b.icmp_unsigned("!=", b.load_atomic(stopping, ordering, 4, typ=I32), zero32))

    b.position_at_end(spin)
    _poll(b, news, take, yielding, pause, SPIN_LIMIT, SPIN_TICKS if clock is not None else 0, clock)
    b.position_at_end(yielding)
    _poll(b, news, take, sleep, give_way, YIELDS, 0, None)
    b.position_at_end(sleep)  # count itself a sleeper before its last look (see parallel_for)
    b.call(pthread["pthread_mutex_lock"], [mutex])
    b.atomic_rmw("add", sleepers, I32(1), "seq_cst")
    b.branch(sleep_check)
    b.position_at_end(sleep_check)
    b.cbranch(news(b, "seq_cst"), awake, wait)
    b.position_at_end(wait)
    b.call(pthread["pthread_cond_wait"], [work_ready, mutex])
    b.branch(sleep_check)
    b.position_at_end(awake)
    b.atomic_rmw("sub", sleepers, I32(1), "seq_cst")
    b.call(pthread["pthread_mutex_unlock"], [mutex])
    b.branch(take)
    b.position_at_end(take)
    b.cbranch(b.icmp_unsigned("!=", b.load_atomic(stopping, "acquire", 4, typ=I32), zero32), leave, read)
    b.position_at_end(leave)
    b.ret(null)
    b.position_at_end(read)  # the job's fields, read as a sequence lock's reader does
    before = b.load_atomic(sequence, "acquire", 8, typ=I64)
    fields = [b.load_atomic(g, "monotonic", 8, typ=g.value_type)
              for g in (job_body, job_context, job_count, job_chunk, job_chunks)]
    b.fence("acquire")
    after = b.load_atomic(sequence, "monotonic", 8, typ=I64)
    job = b.lshr(before, I64(1))
    whole = b.icmp_unsigned("==", b.and_(before, I64(1)), zero64)
    unseen = b.icmp_unsigned("!=", job, b.load(seen_slot, typ=I64))
    b.cbranch(b.and_(b.and_(whole, unseen), b.icmp_unsigned("==", before, after)), work, spin)
    b.position_at_end(work)
    b.store(job, seen_slot)
    b.call(run_chunks, [job, *fields])
    b.branch(spin)

    # -- parallel_for: publish the job, claim chunks too, wait for the last ------------
    parallel = declared_function(module, parallel_for_symbol(name), PARALLEL_FOR_TYPE)
    parallel.linkage = "internal"
    body, context, count, per_thread = parallel.args
    entry = parallel.append_basic_block("entry")
    alone = parallel.append_basic_block("alone")
    shared = parallel.append_basic_block("shared")
    wake = parallel.append_basic_block("wake")
    claim_too = parallel.append_basic_block("claim_too")
    yielding = parallel.append_basic_block("yielding")
    block = parallel.append_basic_block("block")
    waiting = parallel.append_basic_block("waiting")
    sleep = parallel.append_basic_block("sleep")
    woken = parallel.append_basic_block("woken")
    done = parallel.append_basic_block("done")
    b = ir.IRBuilder(entry)
    team = b.load(active, typ=I32)
    b.cbranch(b.icmp_unsigned("<=", team, I32(1)), alone, shared)
    b.position_at_end(alone)
    _call_body(b, body, [context, zero64, count])
    b.ret_void()
    b.position_at_end(shared)
    # `per_thread` chunks per thread, rounded up (at least one iteration each)
    parts = b.mul(b.zext(team, I64), per_thread)
    chunk = b.udiv(b.add(count, b.sub(parts, I64(1))), parts)
    chunk = b.select(b.icmp_unsigned("<", chunk, I64(1)), I64(1), chunk)
    chunks = b.udiv(b.add(count, b.sub(chunk, I64(1))), chunk)
    # publish as a sequence lock's writer: odd while the fields change
    previous = b.load_atomic(sequence, "monotonic", 8, typ=I64)
    b.store_atomic(b.add(previous, I64(1)), sequence, "monotonic", 8)
    b.fence("release")
    for value, target in ((body, job_body), (context, job_context), (count, job_count), (chunk, job_chunk),
                          (chunks, job_chunks)):
        _store_atomic(b, value, target, "monotonic", 8)
    job = b.add(b.lshr(previous, I64(1)), I64(1))
    b.store_atomic(zero64, finished, "monotonic", 8)
    b.store_atomic(b.shl(b.and_(job, I64(0xFFFFFFFF)), I64(32)), claim, "monotonic", 8)
    b.store_atomic(b.add(previous, I64(2)), sequence, "seq_cst", 8)
    # a worker counts itself a sleeper, then looks at the sequence, then sleeps
    # (all sequentially consistent): one that this load misses sees the job
    anyone_asleep = b.icmp_unsigned("!=", b.load_atomic(sleepers, "seq_cst", 4, typ=I32), zero32)
    b.cbranch(anyone_asleep, wake, claim_too)
    b.position_at_end(wake)
    _notify(b, pthread, mutex, "broadcast", work_ready)
    b.branch(claim_too)
    b.position_at_end(claim_too)
    b.call(run_chunks, [job, body, context, count, chunk, chunks])

    def all_done(b: ir.IRBuilder, ordering: str = "acquire") -> ir.Value:
        return b.icmp_unsigned("==", b.load_atomic(finished, ordering, 8, typ=I64), chunks)

    _poll(b, all_done, done, yielding, pause, SPIN_LIMIT, SPIN_TICKS if clock is not None else 0, clock)
    b.position_at_end(yielding)
    _poll(b, all_done, done, block, give_way, YIELDS, 0, None)
    b.position_at_end(block)  # sleep until the last chunk's thread signals
    b.call(pthread["pthread_mutex_lock"], [mutex])
    b.store_atomic(I32(1), caller_waiting, "seq_cst", 4)
    b.branch(waiting)
    b.position_at_end(waiting)
    b.cbranch(all_done(b, "seq_cst"), woken, sleep)
    b.position_at_end(sleep)
    b.call(pthread["pthread_cond_wait"], [work_done, mutex])
    b.branch(waiting)
    b.position_at_end(woken)
    b.store_atomic(zero32, caller_waiting, "monotonic", 4)
    b.call(pthread["pthread_mutex_unlock"], [mutex])
    b.branch(done)
    b.position_at_end(done)
    b.ret_void()

    # -- team: the threads running now (a split BLAS call cuts one part per thread) ---
    team_fn = declared_function(module, team_symbol(name), TEAM_TYPE)
    team_fn.linkage = "internal"
    b = ir.IRBuilder(team_fn.append_basic_block("entry"))
    b.ret(b.zext(b.load(active, typ=I32), I64))

    # -- start: sync objects, the BLAS's threads, threads - 1 workers ---------------
    start = ir.Function(module, ir.FunctionType(VOID, []), f"{name}_threads_start")
    start.linkage = "internal"
    entry = start.append_basic_block("entry")
    b = ir.IRBuilder(entry)
    b.store(I32(1), live)
    wanted = b.load(requested, typ=I32)
    if uses_blas:  # the workers split the BLAS calls; each runs on its caller's thread
        blas_set = declared_function(module, BLAS_SET_THREADS, ir.FunctionType(VOID, [I32]))
        b.call(blas_set, [I32(1)])
    with b.if_then(b.icmp_unsigned(">", wanted, I32(1))):
        b.call(pthread["pthread_mutex_init"], [mutex, null])
        b.call(pthread["pthread_cond_init"], [work_ready, null])
        b.call(pthread["pthread_cond_init"], [work_done, null])
        b.store(zero32, stopping)
        b.store(zero64, sequence)
        b.store(zero32, sleepers)
        b.store(zero32, caller_waiting)
        # workers 1 .. wanted-1; `active` counts the caller and the workers created
        b.store(I32(1), active)
        create = b.append_basic_block("create")
        created = b.append_basic_block("created")
        after = b.append_basic_block("after")
        b.branch(create)
        b.position_at_end(create)
        worker_index = b.load(active, typ=I32)
        slot = b.gep(workers, [zero64, b.zext(worker_index, I64)], inbounds=True, source_etype=workers_type)
        status = b.call(pthread["pthread_create"], [slot, null, worker, b.inttoptr(b.zext(worker_index, I64), PTR)])
        b.cbranch(b.icmp_unsigned("==", status, zero32), created, after)
        b.position_at_end(created)
        following = b.add(worker_index, I32(1))
        b.store(following, active)
        b.cbranch(b.icmp_unsigned("<", following, wanted), create, after)
        b.position_at_end(after)
    b.ret_void()

    # -- stop: wake the workers to leave, join them --------------------------------
    stop_fn = ir.Function(module, ir.FunctionType(VOID, []), f"{name}_threads_stop")
    stop_fn.linkage = "internal"
    entry = stop_fn.append_basic_block("entry")
    b = ir.IRBuilder(entry)
    team = b.load(active, typ=I32)
    with b.if_then(b.icmp_unsigned(">", team, I32(1))):
        b.call(pthread["pthread_mutex_lock"], [mutex])
        b.store_atomic(I32(1), stopping, "seq_cst", 4)
        b.call(pthread["pthread_cond_broadcast"], [work_ready])
        b.call(pthread["pthread_mutex_unlock"], [mutex])
        before_join = b.block
        join = b.append_basic_block("join")
        joined = b.append_basic_block("joined")
        b.branch(join)
        b.position_at_end(join)
        join_index = b.phi(I32)
        join_index.add_incoming(I32(1), before_join)
        slot = b.gep(workers, [zero64, b.zext(join_index, I64)], inbounds=True, source_etype=workers_type)
        b.call(pthread["pthread_join"], [b.load(slot, typ=I64), null])
        following = b.add(join_index, I32(1))
        join_index.add_incoming(following, join)
        b.cbranch(b.icmp_unsigned("<", following, team), join, joined)
        b.position_at_end(joined)
        b.call(pthread["pthread_cond_destroy"], [work_done])
        b.call(pthread["pthread_cond_destroy"], [work_ready])
        b.call(pthread["pthread_mutex_destroy"], [mutex])
        b.store(I32(1), active)
    b.store(zero32, live)
    b.ret_void()

    # -- set_threads: exported; restarts a live pool (one thread counts: it may grow) --
    setter = ir.Function(module, ir.FunctionType(I32, [I32]), f"{name}_set_threads")
    entry = setter.append_basic_block("entry")
    bad = setter.append_basic_block("bad")
    good = setter.append_basic_block("good")
    b = ir.IRBuilder(entry)
    wanted = setter.args[0]
    b.cbranch(b.or_(b.icmp_signed("<", wanted, I32(1)), b.icmp_signed(">", wanted, I32(MAX_THREADS))), bad, good)
    b.position_at_end(bad)
    b.ret(I32(1))
    b.position_at_end(good)
    was_live = b.icmp_unsigned("==", b.load(live, typ=I32), I32(1))
    b.call(stop_fn, [])
    b.store(wanted, requested)
    with b.if_then(was_live):
        b.call(start, [])
    b.ret(zero32)

    # NAME_init starts the pool, NAME_destroy stops it
    for kind, callee in (("init", start), ("destroy", stop_fn)):
        function = module.get_global(f"{name}_{kind}")
        first = function.blocks[0]
        at_start = ir.IRBuilder(first)
        at_start.position_at_start(first)
        at_start.call(callee, [])
