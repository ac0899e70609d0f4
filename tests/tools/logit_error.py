"""The one accuracy metric of this project: logits against a float64 forward pass.

Per position p (a row of the teacher-forced logits), the normwise relative error
    e_p = ||l_p - l64_p||_2 / ||l64_p||_2,
summarized over the positions by its mean and its maximum, and the argmax
agreement: the positions whose largest logit is at the float64 pass's index.
tests/check_intdot.c computes the same in C (its comment names this file);
tests/peer/accuracy.py and docs/PERFORMANCE.md's accuracy table use this one.
"""

import numpy as np


def errors(rows, exact):
    """e_p for every position: rows and exact are [positions, vocab]."""
    rows = np.asarray(rows, dtype=np.float64)
    exact = np.asarray(exact, dtype=np.float64)
    if rows.shape != exact.shape or rows.ndim != 2:
        raise ValueError(f"logits of shape {rows.shape} against {exact.shape}")
    return np.linalg.norm(rows - exact, axis=1) / np.linalg.norm(exact, axis=1)


def summary(rows, exact):
    """{'mean', 'max', 'argmax', 'positions'}: argmax counts agreeing positions."""
    e = errors(rows, exact)
    agree = np.argmax(np.asarray(rows), axis=1) == np.argmax(np.asarray(exact), axis=1)
    return {"mean": float(e.mean()), "max": float(e.max()),
            "argmax": int(agree.sum()), "positions": int(e.size)}


def merge(parts):
    """One summary of several sequences' summaries (mean weighted by positions)."""
    n = sum(p["positions"] for p in parts)
    return {"mean": sum(p["mean"] * p["positions"] for p in parts) / n,
            "max": max(p["max"] for p in parts),
            "argmax": sum(p["argmax"] for p in parts), "positions": n}


if __name__ == "__main__":  # a known answer, so the metric itself is checked
    exact = np.array([[3.0, 4.0, 0.0], [1.0, 0.0, 0.0]])
    rows = np.array([[3.0, 4.0, -5.0], [0.0, 1.0, 0.0]])
    s = summary(rows, exact)
    # row 0: ||(0,0,-5)|| / ||(3,4,0)|| = 1; row 1: sqrt(2) / 1; argmax 1 = 1, 1 != 0
    assert abs(s["max"] - 2 ** 0.5) < 1e-15 and abs(s["mean"] - (1 + 2 ** 0.5) / 2) < 1e-15
    assert s["argmax"] == 1 and s["positions"] == 2
    print("logit_error: known answers OK")
