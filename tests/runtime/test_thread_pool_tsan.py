"""kiln's thread pool (kiln/runtime/thread_pool.c) under gcc's ThreadSanitizer: a thread reading kiln_pool_stats
while another launches jobs (and is moved off a bound worker's CPU) must be free of data races. The launcher's
counters (jobs, chunks run by the caller, caller moves) were plain read-modify-writes while kiln_pool_stats read
them from any thread (TSan reported two races). Skipped where gcc cannot build and run a -fsanitize=thread
program (no libtsan, or a kernel whose address layout TSan refuses)."""
import os
import shutil
import subprocess

import pytest

from kiln.runtime.thread_pool import SOURCE_PATH

HARNESS = r"""
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
int32_t kiln_pool_launch(int32_t (*)(int64_t, int64_t, void*), void*, int64_t, int32_t);
int32_t kiln_pool_stats(int64_t*, int32_t);
static int32_t body(int64_t b, int64_t e, void* c) { (void)b; (void)e; (void)c; return 0; }
static volatile int64_t sink;
static void* reader(void* a) {
  (void)a;
  int64_t st[16];
  for (int i = 0; i < 20000; ++i) { kiln_pool_stats(st, 16); sink += st[1] + st[3] + st[8]; }
  return NULL;
}
int main(void) {
  pthread_t t;
  pthread_create(&t, NULL, reader, NULL);
  cpu_set_t full, one;
  sched_getaffinity(0, sizeof(full), &full);
  int64_t st[16] = {0};
  for (int i = 0; i < 1000; ++i) {
    if (i % 10 == 5 && CPU_COUNT(&full) > 1) {  /* put the caller on the other CPU, the bound worker's */
      int here = sched_getcpu();
      for (int c = 0; c < CPU_SETSIZE; ++c)
        if (CPU_ISSET(c, &full) && c != here) { CPU_ZERO(&one); CPU_SET(c, &one); break; }
      sched_setaffinity(0, sizeof(one), &one);
      sched_setaffinity(0, sizeof(full), &full);
    }
    if (kiln_pool_launch(body, NULL, 64, 2) != 0) return 2;
  }
  pthread_join(t, NULL);
  kiln_pool_stats(st, 16);
  printf("jobs %lld moves %lld\n", (long long)st[1], (long long)st[8]);
  return 0;
}
"""


def test_pool_counters_are_race_free_under_tsan(tmp_path):
    cc = shutil.which("gcc")
    if cc is None:
        pytest.skip("no gcc")
    harness = tmp_path / "harness.c"
    harness.write_text(HARNESS)
    exe = tmp_path / "harness"
    build = subprocess.run([cc, "-g", "-O1", "-fsanitize=thread", SOURCE_PATH, str(harness), "-o", str(exe),
                            "-lpthread"], capture_output=True, text=True)
    if build.returncode != 0:
        pytest.skip(f"gcc cannot build with -fsanitize=thread: {build.stderr[-300:]}")
    env = dict(os.environ, TSAN_OPTIONS="halt_on_error=0 exitcode=66")
    for name in ("KILN_POOL_BIND", "TVM_BIND_THREADS"):
        env.pop(name, None)
    run = subprocess.run([str(exe)], capture_output=True, text=True, env=env, timeout=300)
    if "FATAL: ThreadSanitizer" in run.stderr:
        pytest.skip(f"ThreadSanitizer cannot run here: {run.stderr[-300:]}")
    assert "WARNING: ThreadSanitizer" not in run.stderr, run.stderr[-4000:]
    assert run.returncode == 0, run.stderr[-2000:]
    assert "jobs 1000" in run.stdout, run.stdout
