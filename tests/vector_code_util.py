"""Shared by the tests that check generated vector code: gcc's assembly of kiln's C for a named target (the flags
kiln itself compiles that target with), a vectorized integer cast kernel with its numpy check, and an x86 reduction
kernel built for a named target."""
from __future__ import annotations

import subprocess

import numpy as np

import kiln
from kiln import te, topi
from kiln.target.compiler import DEFAULT_CFLAGS, GCC_WORKAROUND_CFLAGS
from kiln.target.flags import target_cflags


def target_asm(src: str, target: str) -> str:
    """gcc's assembly of the C source ``src`` compiled as kiln compiles for ``target`` (compiled, never run)."""
    return subprocess.run(["gcc", *DEFAULT_CFLAGS, *GCC_WORKAROUND_CFLAGS, *target_cflags(kiln.target.Target(target)),
                           "-S", "-x", "c", "-", "-o", "-"],
                          input=src, capture_output=True, text=True, check=True).stdout


def build_reduce(fn, shape, target: str):
    """``fn`` (a topi reduction of one float32 input of ``shape``) under the x86 reduce schedule, built for
    ``target``: the built function, the output tensor and the lowered TIR's text."""
    X = te.placeholder(shape, name="x")
    with kiln.target.Target(target):
        out = fn(X)
        s = topi.x86.schedule_reduce([out])
        text = str(kiln.lower(s, [X, out], simple_mode=True))
        f = kiln.build(s, [X, out], target=target)
    return f, out, text


def vector_cast_func(src: str, dst: str, lanes: int, target: str, n: int | None = None):
    """``b[i] = a[i].astype(dst)`` over ``n`` (default 3 vectors) elements, vectorized ``lanes`` wide."""
    n = n or 3 * lanes
    a = te.placeholder((n,), src, name="a")
    b = te.compute((n,), lambda i: a[i].astype(dst), name="b")
    s = te.create_schedule(b.op)
    _, inner = s[b].split(b.op.axis[0], factor=lanes)
    s[b].vectorize(inner)
    return kiln.build(s, [a, b], target, name="cast_kernel")


def check_cast(f, src: str, dst: str, n: int, seed: int) -> None:
    """Run cast kernel ``f`` on random ``src`` values (both extremes included) against numpy's ``astype``."""
    info = np.iinfo(src)
    x = np.random.default_rng(seed).integers(info.min, info.max + 1, n).astype(src)
    x[:2] = [info.min, info.max]
    out = kiln.nd.array(np.zeros(n, dst))
    f(kiln.nd.array(x), out)
    np.testing.assert_array_equal(out.numpy(), x.astype(dst))


def build_injective(shape, dtype: str, target: str, make):
    """``make(a)`` of a placeholder ``a`` scheduled by the x86 injective schedule and built for ``target``;
    returns (the function, the output shape)."""
    from kiln import topi
    with kiln.target.Target(target):
        a = te.placeholder(shape, dtype, name="a")
        out = make(a)
        s = topi.x86.schedule_injective([out])
        return kiln.build(s, [a, out], target), [int(d) for d in out.shape]


def random_array(shape, dtype: str, seed: int) -> np.ndarray:
    """Random values over a float dtype's normal range (x8) or an integer dtype's whole range."""
    rng = np.random.default_rng(seed)
    if dtype.startswith("float"):
        return (rng.standard_normal(shape) * 8).astype(dtype)
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max + 1, shape).astype(dtype)


def c_loop(src: str, head: str, with_line_before: bool = False) -> str:
    """The C text of the first loop of ``src`` whose header starts with ``head``, through its closing brace (with
    the line before the header when ``with_line_before``: a ``#pragma`` there)."""
    start = src.index(head)
    depth, i = 0, src.index("{", start)
    for j in range(i, len(src)):
        depth += {"{": 1, "}": -1}.get(src[j], 0)
        if depth == 0:
            first = src.rindex("\n", 0, src.rindex("\n", 0, start)) if with_line_before else start
            return src[first:j + 1]
    raise AssertionError("unterminated loop")
