"""Where a stack run's transfer time goes: a cost model per engine fitted on this machine,
and the same request lists priced at the field's costs (a projection, labelled as one).

The model is ``time = a + b * posted + bytes / c`` per request: ``a`` a fixed cost (ms),
``b`` a cost per posted descriptor (us), ``c`` a bandwidth (GB/s). :func:`fit` takes its
points from every line of a run, plugin off and on (:func:`points`: one a request where
the stack counts each request's posted descriptors, else one a line from its means),
and solves it by least squares; its ``fit_err`` is the residuals' root mean square over
the mean time. A coefficient the points cannot resolve (a negative ``b``, a bandwidth
term at or below zero) is reported as such (``b_us=nan``, ``c_gbps=inf``), never clipped
into a figure.

:func:`projection` prices a line's requests (their mean posted descriptors and bytes) at
:data:`FIELD`'s costs: one posted descriptor about 0.5 us over RDMA, about 3.4 us over
cuda_ipc (vLLM PR 55841: posting 79.6 ms for 23,252 descriptors), 50 GB/s a NIC and
400 GB/s NVLink. It says what the measured counts mean on GPUs and NICs; it is not a
measurement.
"""

from __future__ import annotations

import math
from typing import Dict, Iterable, List, Sequence, Tuple

import numpy as np

#: The field's costs a projection prices at: (us per posted descriptor, GB/s).
FIELD = {"rdma_nic": (0.5, 50.0), "cuda_ipc_nvlink": (3.4, 400.0)}

Point = Tuple[float, float, float]  # (posted, bytes, ms) of one request


def points(results: Iterable) -> List[Point]:
    """The fit's points from ``lab.stack_common.WayResult`` s: a request each where
    ``per_posted`` and ``per_bytes`` pair with ``xfer_ms``, else the line's means."""
    out: List[Point] = []
    for r in results:
        n = len(r.xfer_ms)
        if n and len(r.per_posted) == n and len(r.per_bytes) == n:
            out.extend(zip(map(float, r.per_posted), map(float, r.per_bytes), map(float, r.xfer_ms)))
        elif n and r.requests:
            out.append((r.posted / r.requests, r.bytes_checked / r.requests, float(np.mean(r.xfer_ms))))
    return out


def fit(pts: Sequence[Point]) -> Dict[str, float]:
    """``a_ms``, ``b_us``, ``c_gbps``, ``fit_err`` (a share) and ``points`` of the least
    squares fit of ``pts``; nan where there are fewer points than coefficients."""
    nan = float("nan")
    if len(pts) < 3:
        return dict(points=len(pts), a_ms=nan, b_us=nan, c_gbps=nan, fit_err=nan)
    p = np.asarray(pts, dtype=np.float64)
    x = np.column_stack([np.ones(len(p)), p[:, 0], p[:, 1]])
    coef, *_ = np.linalg.lstsq(x, p[:, 2], rcond=None)
    resid = p[:, 2] - x @ coef
    mean = float(np.mean(p[:, 2]))
    err = float(np.sqrt(np.mean(resid ** 2)) / mean) if mean > 0 else nan
    a, b, per_byte = (float(v) for v in coef)
    # ms per byte -> GB/s: 1e-9 GB a byte over 1e-3 s a ms.
    c = 1e-6 / per_byte if per_byte > 0 else math.inf
    return dict(points=len(pts), a_ms=a, b_us=b * 1e3 if b >= 0 else nan, c_gbps=c, fit_err=err)


def projection(r) -> Dict[str, float]:
    """A line's mean request priced at each of :data:`FIELD`'s costs, in ms."""
    if not r.requests:
        return {f"{k}_ms": float("nan") for k in FIELD}
    posted, size = r.posted / r.requests, r.bytes_checked / r.requests
    return {f"{k}_ms": posted * us * 1e-3 + size / (gbps * 1e6) for k, (us, gbps) in FIELD.items()}


def _value(v: object) -> str:
    return f"{v:.4g}" if isinstance(v, float) else str(v)


def model_line(stack: str, connector: str, results: Iterable) -> str:
    """The ``stack-e2e-model`` line: the fit over ``results`` (every line of one engine)."""
    f = fit(points(results))
    return f"stack-e2e-model stack={stack} connector={connector} " + " ".join(
        f"{k}={_value(v)}" for k, v in f.items())


def projection_line(stack: str, connector: str, plugin: str, r) -> str:
    """The ``stack-e2e-projection`` line of one way (``kind=projection``: not measured)."""
    fields = dict(stack=stack, connector=connector, plugin=plugin, model=r.model,
                  block_tokens=r.block_tokens, kind="projection",
                  posted_per_request=r.posted / r.requests if r.requests else float("nan"),
                  **projection(r))
    return "stack-e2e-projection " + " ".join(f"{k}={_value(v)}" for k, v in fields.items())
