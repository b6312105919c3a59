"""At the end of a run: each notebook's time and peak memory, and the run's peak (tests/test_notebooks.py)."""


def pytest_terminal_summary(terminalreporter):
    from test_notebooks import RESULTS, WORKERS
    if not RESULTS: return
    w, gb = terminalreporter, 2**30
    w.section("notebooks: time and peak resident memory (the notebook's process and all it started)")
    for name, secs, peak in sorted(RESULTS, key=lambda r: -r[2]):
        w.write_line(f"{name:28s} {secs:7.1f} s   {peak / gb:5.2f} GB")
    top = max(RESULTS, key=lambda r: r[2])
    w.write_line(f"peak memory of one notebook: {top[2] / gb:.2f} GB ({top[0]}), sampled every 0.25 s; "
                 f"{sum(r[1] for r in RESULTS):.0f} s in notebooks, {WORKERS} at a time")
