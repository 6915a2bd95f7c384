"""The front as a terminal plot (tuner.results.textplot)."""

from tuner.results.textplot import front_plot


def test_each_point_is_a_star_at_its_place_and_the_axes_are_labelled():
    text = front_plot([(10.0, 1000.0), (40.0, 3000.0), (20.0, 2000.0)], width=31, height=5)
    lines = text.splitlines()
    rows = [line.split("|", 1)[1] for line in lines[1:6]]
    assert rows[0].index("*") == 30  # the highest throughput, at the largest ITL
    assert rows[4].index("*") == 0  # the lowest, at the smallest
    assert rows[2].index("*") == 10  # 20 ms: a third of the way across
    assert lines[1].startswith("3,000") and lines[5].startswith("1,000")
    assert "10.0" in lines[-1] and "40.0" in lines[-1] and "p99 ITL ms" in lines[-1]
    assert sum(r.count("*") for r in rows) == 3


def test_no_points_no_plot_and_one_point_is_centred():
    assert front_plot([]) == ""
    one = front_plot([(5.0, 100.0)], width=11, height=3).splitlines()
    assert one[2].split("|", 1)[1].index("*") == 5
