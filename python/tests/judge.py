"""FIA-SPEC 21.1 criterion A, as ../shared/cases/README.md states it, in numpy (float64)."""
import numpy as np

_TOL = {"F16": (2.5e-5, 0.005), "BF16": (1e-4, 2.0 ** -7), "F32": (1e-6, 1e-5)}


def criterion_a(actual: np.ndarray, expected: np.ndarray, dtype: str) -> str:
    """'' when `actual` (any float array) meets criterion A against the float64 `expected`,
    else what failed."""
    a = np.asarray(actual, dtype=np.float64).ravel()
    e = np.asarray(expected, dtype=np.float64).ravel()
    if a.shape != e.shape:
        return f"shape {a.shape} != {e.shape}"
    if a.size == 0:
        return ""
    if np.isnan(a).any() and not np.isnan(e).any():
        return "NaN where a number is expected"
    if dtype == "I8":
        ok = np.abs(a - e) <= 1
        rel_bad = np.zeros_like(ok)
    else:
        atol, rtol = _TOL[dtype]
        diff = np.abs(a - e)
        ok = diff <= atol + rtol * np.abs(e)
        with np.errstate(divide="ignore", invalid="ignore"):
            rel_bad = ~ok & (diff >= 10 * np.maximum(np.abs(e), 1e-30))
    fraction = ok.mean()
    if fraction < 0.995:
        return f"only {fraction:.4%} of {a.size} elements within tolerance"
    if rel_bad.any():
        return f"{int(rel_bad.sum())} elements off by a relative error of 10 or more"
    return ""


def lse_match(actual: np.ndarray, expected: np.ndarray) -> str:
    """'' when +inf is exactly where expected and finite values are within 1e-4 abs + 1e-4 rel."""
    a = np.asarray(actual, dtype=np.float64).ravel()
    e = np.asarray(expected, dtype=np.float64).ravel()
    if a.shape != e.shape:
        return f"shape {a.shape} != {e.shape}"
    inf_e, inf_a = np.isposinf(e), np.isposinf(a)
    if (inf_e != inf_a).any():
        return f"+inf at {int((inf_e != inf_a).sum())} wrong places"
    fin = ~inf_e
    bad = ~(np.abs(a[fin] - e[fin]) <= 1e-4 + 1e-4 * np.abs(e[fin]))
    return f"{int(bad.sum())} lse values off" if bad.any() else ""
