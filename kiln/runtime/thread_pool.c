/* kiln's thread pool for the parallel loops of generated kernels (kiln.runtime.thread_pool; see the module
 * doc of kiln.runtime.thread_policy and docs/architecture.md, "Parallel loops").
 *
 * A generated kernel outlines the body of each parallel loop into `int32_t body(begin, end, closure)` and calls
 * the launch function the loader stored in its `__kiln_parallel_launch` pointer: kiln_pool_launch below.
 *
 * One job runs at a time. The calling thread publishes it, wakes the workers that sleep, and then claims
 * chunks itself like any worker. Chunks are claimed through one 64-bit atomic ticket (generation << 32 |
 * next chunk index), so a worker that wakes up late finds either no chunk left or a newer generation and
 * claims nothing. When no chunk is left the caller waits only for the chunks already claimed: it never
 * waits for a worker that has not woken up (OpenMP's closing barrier does). Chunk sizes shrink like
 * OpenMP's guided schedule: each is the work left / (guided * threads), at least one iteration (guided:
 * KILN_POOL_GUIDED, default 2).
 *
 * Idle workers spin for `spin_ns` (KILN_POOL_SPIN_US, default 50 us), then sleep on a futex. The caller,
 * once no chunk is left, spins for the chunks still running as long at most, then sleeps on a futex too
 * (the worker that finishes the last chunk wakes it): a worker preempted in the middle of its chunk by
 * another process then finds the caller's core idle, and the kernel's idle balancing moves it there at
 * once, where a caller that spun or sched_yield()ed kept that core busy and the job waited for the
 * worker's own core (a scheduler slice, milliseconds).
 * While a launch asks for as many threads as the process has CPUs (the pool spans the machine it may use), the
 * workers are kept off the CPU the caller ran on when they were placed (the reserved CPU): each worker may run
 * on every other CPU of the process's mask, and the kernel places it there. Left free, Linux wakes a sleeping
 * worker on the CPU of the thread that woke it (the caller), and in a VM the idle CPU pulls one of them away
 * only at its next tick (4 ms at HZ=250): until then the two time-share one CPU while the other idles. On a
 * 2-core Zen 5 VM a quarter of mobilenet_v2's calls after a pause took 4.5-6.5 ms instead of 1.8 that way (both
 * threads' run-queue waits showed it; session 13). The caller, the user's thread, is never bound: a launch
 * that finds it on a CPU a participating worker may use moves it once to the reserved CPU (sched_setaffinity to
 * its mask without the workers' CPUs, which migrates it at once, then its mask back as it was). Workers beyond
 * the mask's other CPUs stay unbound. A launch asking for fewer threads than the process has CPUs leaves (or
 * makes) every worker unbound: its process shares the machine with others, and a CPU picked blindly may be
 * another process's. Pinning each worker to one CPU of its own (session 13's rule, as TVM binds) measured
 * worse on a 16-core Intel Emerald Rapids VM: resnet18 at 16 threads 6.4-6.5 ms median bound, 5.5-5.7 unbound; four
 * processes of 4 threads 8.7-17.6 bound, 10.1-12.0 unbound (session 14). KILN_POOL_BIND=0 (or TVM's
 * TVM_BIND_THREADS=0) leaves the workers unbound always.
 * A launch while the pool is busy (a second Python thread, or a kernel called from inside a parallel body)
 * runs its loop serially on the calling thread. After fork() the child has no workers: they are created
 * again by its first launch.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

typedef int32_t (*KilnParallelBody)(int64_t begin, int64_t end, void* closure);

#define KILN_POOL_MAX_THREADS 256
#define KILN_POOL_MAX_CHUNKS 512
#define KILN_POOL_GUIDED 2
#define KILN_POOL_CLOSED 0xFFFFFFFFu

typedef struct {
  /* the job: written by the launching thread before the ticket publishes it */
  KilnParallelBody body;
  void* closure;
  int32_t num_chunks;
  int32_t threads;                       /* workers with id < threads take part */
  int64_t bounds[KILN_POOL_MAX_CHUNKS + 1];
  /* claimed chunks: generation << 32 | next chunk index (KILN_POOL_CLOSED: between jobs) */
  uint64_t ticket __attribute__((aligned(64)));
  int32_t done __attribute__((aligned(64)));      /* chunks finished (the futex a waiting caller sleeps on) */
  int32_t failed;                                  /* a body returned non-zero */
  int32_t caller_sleeps;                           /* the caller sleeps on `done` until the last chunk ends */
  int32_t wake_word __attribute__((aligned(64)));  /* futex the sleeping workers wait on */
  int32_t sleepers;
  int32_t busy;                                    /* a launch is running */
  int32_t workers;                                 /* worker threads started (ids 1..workers) */
  int32_t stop;
  int64_t spin_ns;
  int32_t guided;                                  /* chunk = work left / (guided * threads) */
  int32_t bind;                                    /* workers may be kept off the caller's CPU (KILN_POOL_BIND) */
  int32_t bound;                                   /* they are now (kiln_pool_grow) */
  int32_t ncpus;                                   /* CPUs of the process's mask, when last read */
  cpu_set_t worker_set;                            /* where a kept-off worker may run: the mask but the reserved CPU */
  int8_t kept_off[KILN_POOL_MAX_THREADS];          /* worker k runs within worker_set */
  pthread_t worker_thread[KILN_POOL_MAX_THREADS];  /* worker k's thread (workers never exit) */
  /* counters read by kiln_pool_stats */
  int64_t jobs, serial_jobs, chunks_by_caller, chunks_by_workers, wakeups, caller_waits, caller_moves;
} KilnPool;

static KilnPool kiln_pool;
static pthread_mutex_t kiln_pool_start_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t kiln_pool_once = PTHREAD_ONCE_INIT;
static __thread int kiln_pool_inside = 0;  /* this thread is running a chunk or a launch */

static inline void kiln_cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

static inline int64_t kiln_now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static void kiln_futex_wait(int32_t* addr, int32_t expected) {
  syscall(SYS_futex, addr, FUTEX_WAIT_PRIVATE, expected, NULL, NULL, 0);
}

static void kiln_futex_wake(int32_t* addr, int32_t count) {
  syscall(SYS_futex, addr, FUTEX_WAKE_PRIVATE, count, NULL, NULL, 0);
}

/* Claim and run chunks of generation `gen` until none is left. Returns the chunks run. */
static int64_t kiln_pool_work(uint32_t gen, int32_t num_chunks) {
  int64_t ran = 0;
  uint64_t t = __atomic_load_n(&kiln_pool.ticket, __ATOMIC_ACQUIRE);
  for (;;) {
    uint32_t idx = (uint32_t)t;
    if ((uint32_t)(t >> 32) != gen || idx >= (uint32_t)num_chunks) return ran;
    if (!__atomic_compare_exchange_n(&kiln_pool.ticket, &t, t + 1, 1, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
      continue;
    /* the chunk is ours, so job `gen` cannot end before it is done: its fields are stable */
    if (kiln_pool.body(kiln_pool.bounds[idx], kiln_pool.bounds[idx + 1], kiln_pool.closure) != 0)
      __atomic_store_n(&kiln_pool.failed, 1, __ATOMIC_RELAXED);
    int32_t finished = __atomic_add_fetch(&kiln_pool.done, 1, __ATOMIC_SEQ_CST);
    if (finished == num_chunks && __atomic_load_n(&kiln_pool.caller_sleeps, __ATOMIC_SEQ_CST))
      kiln_futex_wake(&kiln_pool.done, 1);
    ++ran;
    t = __atomic_load_n(&kiln_pool.ticket, __ATOMIC_ACQUIRE);
  }
}

static void* kiln_pool_worker(void* arg) {
  int32_t id = (int32_t)(intptr_t)arg;
  uint32_t seen = (uint32_t)(__atomic_load_n(&kiln_pool.ticket, __ATOMIC_ACQUIRE) >> 32);
  kiln_pool_inside = 1;
  for (;;) {
    /* wait for a new generation: spin, then sleep */
    int64_t deadline = kiln_now_ns() + __atomic_load_n(&kiln_pool.spin_ns, __ATOMIC_RELAXED);
    uint64_t t;
    int spins = 0;
    for (;;) {
      t = __atomic_load_n(&kiln_pool.ticket, __ATOMIC_ACQUIRE);
      if ((uint32_t)(t >> 32) != seen && (uint32_t)t != KILN_POOL_CLOSED) break;
      if (__atomic_load_n(&kiln_pool.stop, __ATOMIC_RELAXED)) return NULL;
      if (++spins < 64 || kiln_now_ns() < deadline) {
        kiln_cpu_relax();
        if (spins >= 64) spins = 0;
        continue;
      }
      __atomic_add_fetch(&kiln_pool.sleepers, 1, __ATOMIC_SEQ_CST);
      int32_t w = __atomic_load_n(&kiln_pool.wake_word, __ATOMIC_SEQ_CST);
      t = __atomic_load_n(&kiln_pool.ticket, __ATOMIC_SEQ_CST);
      if (((uint32_t)(t >> 32) == seen || (uint32_t)t == KILN_POOL_CLOSED) &&
          !__atomic_load_n(&kiln_pool.stop, __ATOMIC_RELAXED))
        kiln_futex_wait(&kiln_pool.wake_word, w);
      __atomic_sub_fetch(&kiln_pool.sleepers, 1, __ATOMIC_SEQ_CST);
      __atomic_add_fetch(&kiln_pool.wakeups, 1, __ATOMIC_RELAXED);
      deadline = kiln_now_ns() + __atomic_load_n(&kiln_pool.spin_ns, __ATOMIC_RELAXED);
      spins = 0;
    }
    seen = (uint32_t)(t >> 32);
    /* fields read here may belong to a newer job; the ticket's generation check in kiln_pool_work
     * then refuses every claim, so they are never used */
    int32_t threads = __atomic_load_n(&kiln_pool.threads, __ATOMIC_ACQUIRE);
    int32_t num_chunks = __atomic_load_n(&kiln_pool.num_chunks, __ATOMIC_ACQUIRE);
    if (id < threads) {
      int64_t ran = kiln_pool_work(seen, num_chunks);
      __atomic_add_fetch(&kiln_pool.chunks_by_workers, ran, __ATOMIC_RELAXED);
    }
  }
}

/* The thread count of a launch that asks for the default (threads <= 0; a standalone executable, whose
 * __kiln_num_threads no loader sets): KILN_NUM_THREADS, else TVM_NUM_THREADS, else 0 (the usable CPUs). */
static int32_t kiln_pool_default_threads = 0;

static int32_t kiln_pool_env_threads(void) {
  const char* names[2] = {"KILN_NUM_THREADS", "TVM_NUM_THREADS"};
  for (int i = 0; i < 2; ++i) {
    const char* text = getenv(names[i]);
    if (text && *text) {
      char* end;
      long v = strtol(text, &end, 10);
      if (*end == 0 && v > 0) return v > KILN_POOL_MAX_THREADS ? KILN_POOL_MAX_THREADS : (int32_t)v;
    }
  }
  return 0;
}

static int64_t kiln_pool_env_spin_ns(void) {
  const char* text = getenv("KILN_POOL_SPIN_US");
  if (text && *text) {
    char* end;
    long v = strtol(text, &end, 10);
    if (*end == 0 && v >= 0) return (int64_t)v * 1000;
  }
  return 50 * 1000;
}

static int32_t kiln_pool_env_guided(void) {
  const char* text = getenv("KILN_POOL_GUIDED");
  if (text && *text) {
    char* end;
    long v = strtol(text, &end, 10);
    if (*end == 0 && v >= 1 && v <= 64) return (int32_t)v;
  }
  return KILN_POOL_GUIDED;
}

static int32_t kiln_pool_env_bind(void) {
  const char* names[2] = {"KILN_POOL_BIND", "TVM_BIND_THREADS"};
  for (int i = 0; i < 2; ++i) {
    const char* text = getenv(names[i]);
    if (text && *text) return !(text[0] == '0' && text[1] == 0);
  }
  return 1;
}

static void kiln_pool_after_fork_child(void) {
  /* the workers did not survive fork(): forget them, and any job the parent was running */
  pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
  kiln_pool_start_lock = fresh;
  kiln_pool.workers = 0;
  kiln_pool.busy = 0;
  kiln_pool.sleepers = 0;
  kiln_pool.caller_sleeps = 0;
  kiln_pool.stop = 0;
  kiln_pool.bound = 0;
  for (int32_t i = 0; i < KILN_POOL_MAX_THREADS; ++i) kiln_pool.kept_off[i] = 0;
  kiln_pool.ticket = ((kiln_pool.ticket >> 32) + 1) << 32 | KILN_POOL_CLOSED;
  kiln_pool_inside = 0;
}

static void kiln_pool_init_once(void) {
  kiln_pool.ticket = KILN_POOL_CLOSED;
  kiln_pool.spin_ns = kiln_pool_env_spin_ns();
  kiln_pool.guided = kiln_pool_env_guided();
  kiln_pool.bind = kiln_pool_env_bind();
  cpu_set_t mask;
  kiln_pool.ncpus = sched_getaffinity(0, sizeof(mask), &mask) == 0 ? CPU_COUNT(&mask) : 1;
  kiln_pool_default_threads = kiln_pool_env_threads();
  pthread_atfork(NULL, NULL, kiln_pool_after_fork_child);
}

/* Worker k may run within worker_set (keep) or on the whole `mask`; records what took effect. */
static void kiln_pool_pin(int32_t k, int keep, const cpu_set_t* mask) {
  const cpu_set_t* set = keep ? &kiln_pool.worker_set : mask;
  int ok = pthread_setaffinity_np(kiln_pool.worker_thread[k], sizeof(cpu_set_t), set) == 0;
  kiln_pool.kept_off[k] = keep && ok;
}

/* Start workers until there are `want` of them, kept off the caller's CPU when `span` (the launch asks for a
 * thread per CPU of the process, see the comment at the top), else unbound; workers started earlier are kept
 * off or freed to match. Returns how many workers there are. */
static int32_t kiln_pool_grow(int32_t want, int32_t span) {
  if (want > KILN_POOL_MAX_THREADS - 1) want = KILN_POOL_MAX_THREADS - 1;
  if (__atomic_load_n(&kiln_pool.workers, __ATOMIC_ACQUIRE) >= want &&
      __atomic_load_n(&kiln_pool.bound, __ATOMIC_ACQUIRE) == span)
    return kiln_pool.workers;
  pthread_mutex_lock(&kiln_pool_start_lock);
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);  /* workers take no signals: Python's go to its main thread */
  cpu_set_t mask;
  int have_mask = sched_getaffinity(0, sizeof(mask), &mask) == 0;
  if (have_mask) kiln_pool.ncpus = CPU_COUNT(&mask);
  if (span != kiln_pool.bound && have_mask) {
    /* turned on (reserve the CPU the caller runs on now) or off: re-pin the workers started so far */
    int32_t here = sched_getcpu();
    CPU_ZERO(&kiln_pool.worker_set);
    CPU_OR(&kiln_pool.worker_set, &kiln_pool.worker_set, &mask);
    if (here >= 0) CPU_CLR(here, &kiln_pool.worker_set);
    for (int32_t k = 1; k <= kiln_pool.workers; ++k)
      kiln_pool_pin(k, span && here >= 0 && k < kiln_pool.ncpus, &mask);
    __atomic_store_n(&kiln_pool.bound, span, __ATOMIC_RELEASE);
  } else if (span != kiln_pool.bound) {
    /* no mask to place them by: leave them where they are, and stop asking on every launch */
    __atomic_store_n(&kiln_pool.bound, 0, __ATOMIC_RELEASE);
    kiln_pool.bind = 0;
  }
  while (kiln_pool.workers < want) {
    pthread_t th;
    pthread_attr_t attr;
    int32_t id = kiln_pool.workers + 1;
    /* kept off while there are other CPUs for it (ids below the CPU count); the rest run anywhere */
    int keep = kiln_pool.bound && id < kiln_pool.ncpus && CPU_COUNT(&kiln_pool.worker_set) > 0;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    if (keep && pthread_attr_setaffinity_np(&attr, sizeof(cpu_set_t), &kiln_pool.worker_set) != 0) keep = 0;
    int rc = pthread_create(&th, &attr, kiln_pool_worker, (void*)(intptr_t)id);
    if (rc != 0 && keep) {  /* a cpuset may refuse the mask: start it unbound */
      keep = 0;
      pthread_attr_destroy(&attr);
      pthread_attr_init(&attr);
      pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
      rc = pthread_create(&th, &attr, kiln_pool_worker, (void*)(intptr_t)id);
    }
    pthread_attr_destroy(&attr);
    if (rc != 0) break;
    kiln_pool.kept_off[id] = (int8_t)keep;
    kiln_pool.worker_thread[id] = th;
    char name[16];
    snprintf(name, sizeof(name), "kiln-pool-%u", (unsigned)id & 0xFFFu);  /* ids stay below 256 */
    pthread_setname_np(th, name);  /* shows in top -H, ps -L, /proc/<pid>/task/<tid>/comm */
    __atomic_add_fetch(&kiln_pool.workers, 1, __ATOMIC_RELEASE);
  }
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  pthread_mutex_unlock(&kiln_pool_start_lock);
  return kiln_pool.workers;
}

static void kiln_pool_wait_done(int32_t n);

/* The caller of a launch on a CPU a participating worker may run on would time-share it with that worker: move
 * it to the reserved CPU (see the comment at the top). Its affinity mask is left as it was. */
static void kiln_pool_leave_worker_cpu(int32_t threads) {
  int32_t here = sched_getcpu();
  if (here < 0 || !CPU_ISSET(here, &kiln_pool.worker_set)) return;
  int stacked = 0;
  for (int32_t k = 1; k < threads && !stacked; ++k) stacked = kiln_pool.kept_off[k];
  if (!stacked) return;
  cpu_set_t mask, away;
  if (sched_getaffinity(0, sizeof(mask), &mask) != 0) return;
  CPU_ZERO(&away);
  CPU_OR(&away, &away, &mask);
  for (int32_t c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &kiln_pool.worker_set)) CPU_CLR(c, &away);
  if (CPU_COUNT(&away) == 0) return;
  if (sched_setaffinity(0, sizeof(away), &away) != 0) return;
  sched_setaffinity(0, sizeof(mask), &mask);
  __atomic_add_fetch(&kiln_pool.caller_moves, 1, __ATOMIC_RELAXED);  /* kiln_pool_stats reads it from any thread */
}

static int32_t kiln_pool_serial(KilnParallelBody body, void* closure, int64_t extent) {
  __atomic_add_fetch(&kiln_pool.serial_jobs, 1, __ATOMIC_RELAXED);
  return body(0, extent, closure) != 0 ? -1 : 0;
}

/* The launch function: run body over [0, extent) on `threads` threads (<= 0: KILN_NUM_THREADS /
 * TVM_NUM_THREADS, else the CPUs this process may use),
 * the caller included. Returns 0, or -1 when a body returned non-zero. */
int32_t kiln_pool_launch(KilnParallelBody body, void* closure, int64_t extent, int32_t threads) {
  pthread_once(&kiln_pool_once, kiln_pool_init_once);
  if (extent <= 0) return 0;
  if (threads <= 0) threads = kiln_pool_default_threads;
  if (threads <= 0) {
    cpu_set_t set;
    threads = sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set) : 1;
  }
  if (threads > KILN_POOL_MAX_THREADS) threads = KILN_POOL_MAX_THREADS;
  /* bound workers only while the launch asks for every CPU the process has (before the extent caps it) */
  int32_t span = kiln_pool.bind && threads >= __atomic_load_n(&kiln_pool.ncpus, __ATOMIC_RELAXED);
  if (threads > extent) threads = (int32_t)extent;
  if (threads <= 1 || kiln_pool_inside) return kiln_pool_serial(body, closure, extent);
  int32_t expected = 0;
  if (!__atomic_compare_exchange_n(&kiln_pool.busy, &expected, 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
    return kiln_pool_serial(body, closure, extent);  /* another thread's job is running */
  int32_t workers = kiln_pool_grow(threads - 1, span);
  if (workers < threads - 1) threads = workers + 1;
  if (threads <= 1) {
    __atomic_store_n(&kiln_pool.busy, 0, __ATOMIC_RELEASE);
    return kiln_pool_serial(body, closure, extent);
  }
  kiln_pool_inside = 1;
  if (kiln_pool.bound) kiln_pool_leave_worker_cpu(threads);
  /* guided chunks: the work left / (guided * threads), at least 1 iteration */
  int32_t n = 0;
  int64_t pos = 0;
  int64_t parts = (int64_t)kiln_pool.guided * threads;
  while (pos < extent && n < KILN_POOL_MAX_CHUNKS - 1) {
    int64_t left = extent - pos;
    int64_t size = (left + parts - 1) / parts;
    kiln_pool.bounds[n++] = pos;
    pos += size;
  }
  if (pos < extent) kiln_pool.bounds[n++] = pos;
  kiln_pool.bounds[n] = extent;
  kiln_pool.body = body;
  kiln_pool.closure = closure;
  kiln_pool.failed = 0;
  __atomic_store_n(&kiln_pool.done, 0, __ATOMIC_RELAXED);
  __atomic_store_n(&kiln_pool.num_chunks, n, __ATOMIC_RELAXED);
  __atomic_store_n(&kiln_pool.threads, threads, __ATOMIC_RELAXED);
  uint32_t gen = (uint32_t)(__atomic_load_n(&kiln_pool.ticket, __ATOMIC_RELAXED) >> 32) + 1;
  if (gen == 0) gen = 1;
  __atomic_store_n(&kiln_pool.ticket, (uint64_t)gen << 32, __ATOMIC_SEQ_CST);  /* publish */
  __atomic_add_fetch(&kiln_pool.wake_word, 1, __ATOMIC_SEQ_CST);
  if (__atomic_load_n(&kiln_pool.sleepers, __ATOMIC_SEQ_CST) > 0)
    kiln_futex_wake(&kiln_pool.wake_word, threads - 1);
  int64_t mine = kiln_pool_work(gen, n);
  /* every chunk is claimed: wait for the ones other threads are running (see the comment at the top) */
  kiln_pool_wait_done(n);
  __atomic_store_n(&kiln_pool.ticket, (uint64_t)gen << 32 | KILN_POOL_CLOSED, __ATOMIC_RELEASE);
  int32_t failed = kiln_pool.failed;
  __atomic_add_fetch(&kiln_pool.jobs, 1, __ATOMIC_RELAXED);
  __atomic_add_fetch(&kiln_pool.chunks_by_caller, mine, __ATOMIC_RELAXED);
  kiln_pool_inside = 0;
  __atomic_store_n(&kiln_pool.busy, 0, __ATOMIC_RELEASE);
  return failed ? -1 : 0;
}

/* The caller's wait for the `n` chunks of its job to finish: spin while that is short, then sleep on the
 * `done` futex until the worker that finishes the last chunk wakes it. */
static void kiln_pool_wait_done(int32_t n) {
  if (__atomic_load_n(&kiln_pool.done, __ATOMIC_ACQUIRE) >= n) return;
  int64_t deadline = kiln_now_ns() + __atomic_load_n(&kiln_pool.spin_ns, __ATOMIC_RELAXED);
  int spins = 0;
  for (;;) {
    int32_t d = __atomic_load_n(&kiln_pool.done, __ATOMIC_ACQUIRE);
    if (d >= n) return;
    if (++spins < 64 || kiln_now_ns() < deadline) {
      kiln_cpu_relax();
      if (spins >= 64) spins = 0;
      continue;
    }
    /* announce the sleep, then re-read: the finishing worker either sees caller_sleeps or we see its count */
    __atomic_store_n(&kiln_pool.caller_sleeps, 1, __ATOMIC_SEQ_CST);
    d = __atomic_load_n(&kiln_pool.done, __ATOMIC_SEQ_CST);
    if (d < n) {
      __atomic_add_fetch(&kiln_pool.caller_waits, 1, __ATOMIC_RELAXED);
      kiln_futex_wait(&kiln_pool.done, d);  /* returns at once when `done` moved past d */
    }
    __atomic_store_n(&kiln_pool.caller_sleeps, 0, __ATOMIC_SEQ_CST);
    spins = 0;
    deadline = 0;  /* spun once already: from now on sleep until woken */
  }
}

/* Spin time of idle workers before they sleep, in microseconds (< 0: leave unchanged). Returns the old one. */
int64_t kiln_pool_set_spin_us(int64_t us) {
  pthread_once(&kiln_pool_once, kiln_pool_init_once);
  int64_t old = __atomic_load_n(&kiln_pool.spin_ns, __ATOMIC_RELAXED) / 1000;
  if (us >= 0) __atomic_store_n(&kiln_pool.spin_ns, us * 1000, __ATOMIC_RELAXED);
  return old;
}

/* Counters, at most n of them (the caller's buffer length; more may be added later, and an older caller's
 * smaller buffer must not be overrun): workers, jobs, serial jobs, chunks run by callers, by workers, worker
 * wake-ups from sleep, spin microseconds, caller sleeps waiting for a worker's chunk, callers moved off a
 * worker's CPU. Returns how many the
 * pool keeps. */
int32_t kiln_pool_stats(int64_t* out, int32_t n) {
  pthread_once(&kiln_pool_once, kiln_pool_init_once);
  const int64_t all[] = {
      __atomic_load_n(&kiln_pool.workers, __ATOMIC_RELAXED),
      __atomic_load_n(&kiln_pool.jobs, __ATOMIC_RELAXED),
      __atomic_load_n(&kiln_pool.serial_jobs, __ATOMIC_RELAXED),
      __atomic_load_n(&kiln_pool.chunks_by_caller, __ATOMIC_RELAXED),
      __atomic_load_n(&kiln_pool.chunks_by_workers, __ATOMIC_RELAXED),
      __atomic_load_n(&kiln_pool.wakeups, __ATOMIC_RELAXED),
      __atomic_load_n(&kiln_pool.spin_ns, __ATOMIC_RELAXED) / 1000,
      __atomic_load_n(&kiln_pool.caller_waits, __ATOMIC_RELAXED),
      __atomic_load_n(&kiln_pool.caller_moves, __ATOMIC_RELAXED)};
  const int32_t count = (int32_t)(sizeof(all) / sizeof(all[0]));
  for (int32_t i = 0; i < n && i < count; ++i) out[i] = all[i];
  return count;
}

#ifdef KILN_POOL_WIRE_LAUNCH
/* Built this way (kiln.target.compiler.thread_pool_link_objects) the pool is linked into a standalone executable
 * or an exported library beside the kernels: this strong definition overrides the kernels' weak null
 * __kiln_parallel_launch, so parallel loops run on this pool from start-up with no loader involved. A Python
 * loader that already has a process-wide pool points the library's pointer at that one instead. */
typedef int32_t (*KilnParallelLaunchFn)(KilnParallelBody body, void* closure, int64_t extent, int32_t threads);
KilnParallelLaunchFn __kiln_parallel_launch = kiln_pool_launch;
#endif
