"""Small builders for hand-written PrimFuncs used by the TIR tests."""
from kiln import tir


def make_func(buffers, body, scalars=(), name="main"):
    params, bmap = [], {}
    for b in buffers:
        p = tir.Var(b.name, "handle")
        params.append(p)
        bmap[p] = b
    params += list(scalars)
    return tir.PrimFunc(params, body, buffer_map=bmap,
                        attrs={"global_symbol": name, "tir.noalias": True})


def loop(var, extent, body, kind=tir.ForKind.SERIAL, mn=0):
    return tir.For(var, mn, extent, kind, body)
