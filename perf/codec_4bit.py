#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
# Which 4-bit code loses less: the signed integer code of ftcc's int4 (-7..7 times the block's
# maximum / 7) or E3M0 (a sign and a power of two, 2^-6..2^0 of the block's maximum, or 0), on
# blocks of 256 values drawn from a normal, a Laplace and a heavy-tailed Student t(3)
# distribution. Needs numpy (Debian: python3-numpy). Prints the RMS error over the RMS value and
# the largest error over the block's maximum.
import numpy as np
rng=np.random.default_rng(1)
def blocks(x,B=256): return x.reshape(-1,B)
def int4(x):
    b=blocks(x); m=np.abs(b).max(1,keepdims=True); s=m/7
    q=np.clip(np.rint(b/s),-7,7); return (q*s).ravel()
def e3m0(x):
    b=blocks(x); m=np.abs(b).max(1,keepdims=True)
    levels=np.concatenate([[0],2.0**np.arange(-6,1)])*1.0  # 0 and 2^-6..2^0 of the block max
    a=np.abs(b)/m
    idx=np.abs(a[...,None]-levels).argmin(-1)   # nearest level
    return (np.sign(b)*levels[idx]*m).ravel()
for name,x in [('gaussian',rng.standard_normal(1<<20)),('laplace',rng.laplace(size=1<<20)),('student-t3',rng.standard_t(3,size=1<<20))]:
    x=x.astype(np.float32)
    for f in (int4,e3m0):
        e=f(x)-x
        print(f"{name:10s} {f.__name__:5s} rms err / rms {np.sqrt((e**2).mean()/(x**2).mean()):.4f}  max err/blockmax {np.max(np.abs(e).reshape(-1,256).max(1)/np.abs(x).reshape(-1,256).max(1)):.4f}")
