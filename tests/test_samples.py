import pytest

from compare.analysis import geomean
from compare.progress import Progress
from compare.results import Samples


def test_summary_of_repeats_keeps_the_raw_samples():
    s = Samples.of([4.0, 1.0, 3.0, 2.0, 100.0])
    assert s.median == 3.0 and s.min == 1.0 and s.max == 100.0 and s.n == 5
    assert s.q1 == 2.0 and s.q3 == 4.0 and s.iqr == 2.0   # numpy's linear percentiles
    assert s.values == [4.0, 1.0, 3.0, 2.0, 100.0]       # in the order taken


def test_summary_of_nothing_is_none():
    assert Samples.of([]) is None
    assert Samples.of([None, None]) is None


def test_geomean_skips_missing_values():
    assert geomean([2.0, 8.0]) == pytest.approx(4.0)
    assert geomean([2.0, None, 8.0, 0.0]) == pytest.approx(4.0)
    assert geomean([]) is None


class _Stream:
    def __init__(self, tty):
        self.tty, self.text = tty, ""

    def isatty(self):
        return self.tty

    def write(self, s):
        self.text += s

    def flush(self):
        pass


def test_progress_is_quiet_off_a_terminal_in_a_short_command():
    stream = _Stream(tty=False)
    p = Progress(stream)
    p.update("layer conv1_1, repeat 1/10")
    p.done()
    assert stream.text == ""


def test_progress_off_a_terminal_writes_a_line_a_period_in_a_long_command():
    now = [0.0]
    stream = _Stream(tty=False)
    p = Progress(stream, every_s=60, clock=lambda: now[0], beat_s=None)
    for t, text in [(10, "a"), (61, "b"), (90, "c"), (121, "d"), (125, "e")]:
        now[0] = t
        p.update(text)
    p.done()
    lines = stream.text.splitlines()
    assert [line.split(" ", 1)[1] for line in lines] == ["b", "d"]   # one a minute, each whole, no \r
    assert "\r" not in stream.text and all(len(line.split(" ", 1)[0]) == 8 for line in lines)


def test_progress_off_a_terminal_says_the_line_again_while_nothing_new_is_said():
    now = [0.0]
    stream = _Stream(tty=False)
    p = Progress(stream, every_s=20, clock=lambda: now[0], beat_s=None)
    p.update("tinygrad: compiling vgg16")   # a search that answers only when done
    now[0] = 25
    p.tick()                                # what the heartbeat does each second
    p.done()
    now[0] = 50
    p.tick()                                # nothing is said once done
    assert [line.split(" ", 1)[1] for line in stream.text.splitlines()] == ["tinygrad: compiling vgg16"]


def test_an_interrupt_inside_the_heartbeats_start_leaves_done_nothing_to_join(monkeypatch):
    """Seen under load: SIGTERM landed in Thread.start() of the heartbeat; `done` then joined a thread never
    started and the run ended in a RuntimeError's traceback instead of its one line."""
    import threading
    from nets.errors import Interrupted
    started = threading.Thread.start

    def interrupted(thread):
        if thread.daemon:   # the heartbeat
            raise Interrupted(15)
        return started(thread)
    monkeypatch.setattr(threading.Thread, "start", interrupted)
    p = Progress(_Stream(tty=False), every_s=20, beat_s=0.01)
    try:
        p.update("preparing vgg16")
    except Interrupted:
        pass
    p.done()   # nothing raised: no thread to join


def test_progress_tells_the_time_left_of_the_whole_run_from_its_steps_or_its_deadline():
    now = [0.0]
    stream = _Stream(tty=False)
    p = Progress(stream, every_s=10, clock=lambda: now[0], beat_s=None)
    p.expect(4)                      # four backends
    p.update("backend 1 of 4: preparing")
    assert p.left() is None          # nothing done yet: nothing to tell
    now[0] = 10
    p.advance(1)
    now[0] = 20
    p.update("backend 2 of 4: numpy: end to end, repeat 3/5")
    assert p.left() == 60            # 20 s for one step, three left
    assert stream.text.splitlines()[-1].endswith(" backend 2 of 4: numpy: end to end, repeat 3/5 (about 60 s left)")
    p.advance(2.5)
    assert p.left() == pytest.approx(20 / 3.5 * 0.5)
    p.until(now[0] + 300)            # a tuning budget: the time to its end
    assert p.left() == 300


def test_progress_is_drawn_by_rich_in_place_on_a_terminal_and_gone_when_done():
    stream = _Stream(tty=True)
    p = Progress(stream)
    p.expect(2)
    p.update("long status text")
    p.update("short")
    p.done()
    frames = stream.text.split("\r\x1b[2K")   # each drawing erases the line before it: redrawn in place
    assert "long status text" in frames[0] and "short" in frames[-1]
    assert stream.text.endswith("\x1b[2K")   # and, when done, its line erased
