"""At the end of a run: each notebook's time and peak memory, and the run's peak (tests/test_notebooks.py)."""


def pytest_terminal_summary(terminalreporter):
    from test_notebooks import RESULTS
    if not RESULTS: return
    w, gb = terminalreporter, 2**30
    w.section("notebooks: time and peak resident memory")
    for name, secs, own, kids in sorted(RESULTS, key=lambda r: -(r[2] + r[3])):
        w.write_line(f"{name:28s} {secs:7.1f} s   {own / gb:5.2f} GB   processes it started: {kids / gb:5.2f} GB")
    top = max(RESULTS, key=lambda r: r[2] + r[3])
    w.write_line(f"peak memory of the run: {(top[2] + top[3]) / gb:.2f} GB ({top[0]}: its process plus the largest "
                 f"it started, an upper bound); {sum(r[1] for r in RESULTS):.0f} s in notebooks")
